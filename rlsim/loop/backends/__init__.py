"""What a schedule calls to reach the workers: one futures-style interface (``protocol.Backend``), implemented
once in this process (``local``) and once on Ray (``ray``, with the faults it injects in ``faults``).
"""

"""What a run writes: per-step records, ``report.md`` with its figures, and the async run's additions.

``records`` (phase times, idle and busy time per actor, overhead, from the event timeline), ``report``
(``report.md`` and its PNGs), ``asynchronous`` (the ``async`` block of ``results.json`` and its report section).
"""

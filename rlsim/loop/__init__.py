"""The RLHF loop: config, schedules (sequential, overlapped, async), the trainer, records and reports.

Entry point: ``rlsim.loop.run.run_loop(config, out)``; ``rlsim run CONFIG`` on the command line.
"""

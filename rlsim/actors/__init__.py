"""The loop's actors: process-level workers (pinned, timed, accounted) and their Ray wrappers.

``workers`` and ``pinning`` are plain Python; ``ray_actors`` and ``ray_session`` import Ray. Nothing here
imports ``rlsim.loop`` (the loop drives the actors, not the other way round; tests/test_import_rules.py).
"""

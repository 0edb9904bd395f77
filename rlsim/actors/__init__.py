"""The loop's actors: process-level workers (pinned, timed, accounted) and their Ray wrappers.

``workers`` and ``placement`` are plain Python; only ``ray_actors`` and ``ray_backend`` import Ray.
"""

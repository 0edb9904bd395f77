"""What a schedule calls to reach the actors, once in this process and once on Ray.

``local`` (workers called in this process) and ``ray`` (actor calls; scoring replicas concurrent) carry the
step backend the sequential and overlapped schedules use; ``ray_experience`` adds PPO's reference and critic
as actors; ``local_async`` and ``ray_async`` are the non-blocking calls of the async schedule.
"""

"""The discrete-event simulation of RLHF steps (plain Python + numpy).

``events``: the event loop and speed profiles; ``generation``: continuous-batching engines;
``scoring``: scorer replicas behind a batcher; ``step``: one step (generate, score, update, sync)
with contention between colocated generation and scoring; ``core_sharing``: processes pinned to one
pool of cores; ``ppo_roles``: PPO's reference and critic in that step, colocated or not; ``evaluate``:
a placement over several steps, summarised (step time, rollouts/hour, utilisation, bottleneck);
``asynchronous/``: the async schedule's pipeline, its costs and its evaluation.
"""

"""What ``rlsim plan`` is asked about: the cluster, the workload and the placements.

``workload``: prompts, group size and token-length distributions (``rlsim.workloads``' own, so the
simulation draws lengths exactly as the real loop does); ``cluster``: the ``rlsim plan`` YAML (nodes,
profiles, placement, search grid, simulation); ``placement``: a placement's knobs resolved into
engines, scorer replicas and units per node, or a ``PlacementError`` saying why it cannot exist.
"""

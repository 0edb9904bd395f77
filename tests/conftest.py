"""Session-scoped fixtures for slow shared resources: a two-node Ray cluster and an in-process vLLM engine.

Both take tens of seconds to start on this 2-core machine, so every test that needs one shares it.
They start lazily: a test run that selects neither never pays for them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    """A two-node ``ray.cluster_utils.Cluster`` (2 bookkeeping CPUs per node) this process is connected to.

    Both nodes run on this machine; actors can still be spread across them with a SPREAD placement group.
    """
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="session")
def tiny_policy():
    """Folder of the built-in ``tiny-llama`` policy (built once into the rlsim cache)."""
    from rlsim.models import resolve_policy

    return resolve_policy("tiny-llama")


@pytest.fixture(scope="session")
def vllm_generator(tiny_policy) -> Iterator[object]:
    """An in-process ``VllmGenerator`` on the tiny policy, greedy (temperature 0) so outputs are comparable."""
    pytest.importorskip("vllm")
    from rlsim.rollout.generator import GeneratorSettings
    from rlsim.rollout.vllm_generator import VllmGenerator

    cores = tuple(sorted(os.sched_getaffinity(0)))
    gen = VllmGenerator(tiny_policy, GeneratorSettings(temperature=0.0, cores=cores, seed=0))
    try:
        yield gen
    finally:
        gen.close()

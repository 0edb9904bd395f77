"""The suite's own cache folder, and fixtures for slow shared resources: a two-node Ray cluster (the session's)
and an in-process vLLM engine (a module's: an inline engine holds ``torch.set_num_threads`` while it runs).

Both take tens of seconds to start on this 2-core machine, so every test that needs one shares it.
They start lazily: a test run that selects neither never pays for them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# The suite builds and reads its models, ONNX graphs, fidelity and program-bank entries in a folder of its own,
# $RLSIM_TEST_CACHE or ~/.cache/rlsim-tests (beside XDG_CACHE_HOME's rlsim), never in the developer's
# ~/.cache/rlsim: what a developer's cache holds cannot change a result, and the suite writes nothing there.
# The first run on a machine builds it (the builders lock, so concurrent runs wait for one another); later runs
# and other checkouts reuse it. Set at import, before any test, so every subprocess, Ray worker and vLLM engine
# the tests start inherits it.
_XDG = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
os.environ["RLSIM_CACHE"] = os.environ.get("RLSIM_TEST_CACHE") or str(Path(_XDG) / "rlsim-tests")


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


@pytest.fixture(scope="module")
def vllm_generator(tiny_policy) -> Iterator[object]:
    """An in-process ``VllmGenerator`` on the tiny policy, greedy (temperature 0) so outputs are comparable.

    Inline (engine core and model runner in this process): its subject is generation, and a spawned engine costs
    about 20 s more to start and 4 s to stop here; the engine's own processes are tested where they are the subject
    (tests/rollout/test_vllm_engine_failures.py, tests/actors/test_sigterm.py)."""
    pytest.importorskip("vllm")
    from rlsim.rollout.generator import GeneratorSettings
    from rlsim.rollout.vllm_generator import VllmGenerator

    cores = tuple(sorted(os.sched_getaffinity(0)))
    gen = VllmGenerator(tiny_policy, GeneratorSettings(temperature=0.0, cores=cores, seed=0, engine_inline=True))
    try:
        yield gen
    finally:
        gen.close()


# Test files that share a session fixture too costly to start twice, so one xdist worker runs them all (with
# `--dist loadfile` each file is otherwise its own unit of work): the real-loop tests and the vLLM engine they share
# (tests/loop/conftest.py).
SHARED_WORKER = {
    f"tests/loop/test_loop_{name}.py": "vllm-loop" for name in ("async_ray", "genrm", "ppo", "ray", "rewards")
}
# The fast tests that read vLLM's own protocol classes: importing vLLM costs 5-10 s, paid once, in one worker.
SHARED_WORKER |= {
    path: "vllm-classes" for path in ("tests/scoring/test_http_protocols.py", "tests/serve/test_serve_protocols.py")
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadfile``, with the files of ``SHARED_WORKER`` sent to one worker together.

    xdist's own ``--dist loadgroup`` would do this with ``xdist_group`` marks, but it groups nothing under pytest
    9.2 (it renames node ids, which pytest no longer reads back: pytest-dev/pytest-xdist#1386), so the scheduler
    is made here: loadfile's, whose unit of work is named by ``_split_scope``.
    """
    if config.getvalue("dist") != "loadfile":
        return None  # xdist's own scheduler
    from xdist.scheduler import LoadFileScheduling

    class SharedFiles(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return SHARED_WORKER.get(path, path)

    return SharedFiles(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the files with slow tests first, keeping the order within each file.

    With several xdist workers (``make test``), work goes out in collection order: the minute-long files then
    start at once and the many short ones even out the end, instead of one slow file running alone last.
    """
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)

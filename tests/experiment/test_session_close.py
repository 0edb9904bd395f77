"""Closing an experiment session stops everything it can, even when Ray has lost its cluster.

A fake ``ray`` stands in for the real one: the real failure (``ray.kill`` raising on a lost cluster)
cannot be produced on demand, and what matters is the order and completeness of the stops.
"""

from __future__ import annotations

from typing import Any

import pytest

import rlsim.actors.ray_actors as ray_actors
import rlsim.experiment.session as session_mod
from rlsim.experiment.session import ExperimentSession


class FakeActor:
    def __init__(self, name: str) -> None:
        self.name = name
        self.close = self  # ``actor.close.remote()``

    def remote(self) -> str:
        return f"close-{self.name}"


class FakeRay:
    """``kill`` raises for the actors named in ``lost``, as Ray does once the cluster is gone."""

    def __init__(self, lost: set[str]) -> None:
        self.lost = lost
        self.calls: list[str] = []
        self._up = True

    def get(self, refs: Any, timeout: float | None = None) -> Any:
        raise RuntimeError("the cluster is gone")

    def kill(self, actor: FakeActor) -> None:
        self.calls.append(f"kill {actor.name}")
        if actor.name in self.lost:
            raise RuntimeError(f"cannot reach {actor.name}")

    def is_initialized(self) -> bool:
        return self._up

    def shutdown(self) -> None:
        self.calls.append("shutdown")
        self._up = False


class FakeCore:
    def __init__(self, calls: list[str], fail: bool) -> None:
        self.calls, self.fail = calls, fail

    def close(self) -> None:
        self.calls.append("core close")
        if self.fail:
            raise RuntimeError("core actors unreachable")


def session_with(fake: FakeRay, core_fails: bool = False) -> ExperimentSession:
    session = ExperimentSession.__new__(ExperimentSession)  # no config or Ray needed to close
    session._scorers = {"eager": [FakeActor("e0"), FakeActor("e1")], "ort": [FakeActor("o0")]}
    session._core = FakeCore(fake.calls, core_fails)  # type: ignore[assignment]
    session._started_ray = True
    return session


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    fake = FakeRay(lost={"e0"})
    monkeypatch.setattr(session_mod, "ray", fake)
    monkeypatch.setattr(ray_actors, "ray", fake)
    return fake


def test_a_failing_kill_still_stops_every_other_actor_and_ray(fake: FakeRay) -> None:
    session = session_with(fake)
    session.close()
    # e0's kill raised; e1 and o0 were still killed, then the core actors, then Ray.
    assert fake.calls == ["kill e0", "kill e1", "kill o0", "core close", "shutdown"]
    assert session._scorers == {} and session._core is None and not session._started_ray


def test_ray_is_shut_down_even_when_the_core_actors_cannot_be_closed(fake: FakeRay) -> None:
    session = session_with(fake, core_fails=True)
    with pytest.raises(RuntimeError, match="core actors unreachable"):
        session.close()
    assert fake.calls[-2:] == ["core close", "shutdown"]
    session.close()  # a second close has nothing left to stop and does not raise
    assert fake.calls.count("shutdown") == 1

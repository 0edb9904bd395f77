"""Faults the Ray backend injects on purpose, and how long it waits for a restarting actor."""

from __future__ import annotations

from dataclasses import dataclass

from rlsim.actors.server_faults import ServerFault

# How long a batch may keep meeting a restarting scorer (or reference) before the step gives up (seconds): a
# restart reloads the actor's model, about 20 s on a busy 2-core machine.
RESTART_WAIT_S = 180.0


@dataclass
class FaultPlan:
    """Kill scorer-0 after its first micro-batch of each step in ``kill_scorer_steps``; kill the rollout
    actor during generation of ``kill_rollout_step``; kill (or stall for ``http_stall_s``, None: until
    the client gives up) scorer-0's http server just before its first micro-batch of each step in
    ``kill_http_server_steps`` (``stall_http_server_steps``)."""

    kill_scorer_steps: tuple[int, ...] = ()
    kill_rollout_step: int | None = None
    kill_http_server_steps: tuple[int, ...] = ()
    stall_http_server_steps: tuple[int, ...] = ()
    http_stall_s: float | None = None

    def server_fault(self, step: int) -> ServerFault | None:
        if step in self.kill_http_server_steps:
            return ServerFault("kill")
        if step in self.stall_http_server_steps:
            return ServerFault("stall", self.http_stall_s)
        return None

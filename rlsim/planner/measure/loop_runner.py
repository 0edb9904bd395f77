"""Run real-loop configurations back to back on one Ray session, reusing actors where the loop allows.

This is the one planner module that starts real work (Ray, vLLM, torch, through ``rlsim.loop``);
every such import sits inside a method, so importing the planner stays light and Ray-free.

Actors (the vLLM engine, the scorers, the trainer) are built from every part of a config except
``SESSION_FREE``: configurations that differ only in workload, schedule, micro-batch or steps run
on the same ``LoopSession``, whose ``config`` is swapped between runs (the session reads it at
every step). Any other difference (runtime, placement, batcher, ...) closes the actors and starts
new ones on the same Ray session: about 35 s on an idle 2-core machine, 90 s under load.

Warm-up steps (the loop set's ``warmup_steps``) are run only where the actors were just started: a
run on the previous run's warm actors starts at step ``warmup_steps + 1``, so it measures the same
step numbers (the same requested lengths) and skips only the unmeasured time. Measured on the stored
profile and validation runs of 2026-12-07 (``benchmarks/warm_first_step.py``): the first step of a
run on warm actors was as fast, relative to the planner, as the steps after it, unlike the first step
after a start-up. An async run always runs its warm-up steps: they fill its pipeline.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from rlsim.errors import RlsimError
from rlsim.io import atomic_write_json
from rlsim.planner.measure import machine_load
from rlsim.run_results import RunResults
from rlsim.schedule_kinds import schedule_kind

if TYPE_CHECKING:
    from rich.console import Console

    from rlsim.loop.config import RunConfig
    from rlsim.planner.measure.loop_set import LoopCase, QuietGate
    from rlsim.run_results import RunResults

LOAD_FILE = "machine_load.json"  # beside results.json: how much other work shared the cores during the run
# Read by LoopSession.step at every step (not baked into the actors), so they may change between runs.
SESSION_FREE = {"steps", "schedule", "micro_batch", "workload", "warmup"}


def actor_key(config: RunConfig) -> str:
    """What the actors of ``config`` are built from; equal keys can share one set of actors."""
    return json.dumps(config.model_dump(mode="json", exclude=SESSION_FREE), sort_keys=True)


class LoopRunner(Protocol):
    """Runs one case and returns its ``results.json`` content (also written under ``out``)."""

    def run(self, case: LoopCase, out: Path) -> RunResults: ...

    def close(self) -> None: ...


class RealLoopRunner:
    """``rlsim run`` for each case, sharing Ray and (where ``actor_key`` allows) the actors.

    Steps are driven one at a time (``LoopSession.step`` + ``RunOutputs``, the loop's public pieces)
    so that ``quiet`` can hold each step until the cores are idle, and so each step's share of the
    cores' time taken by other programs is known (``LOAD_FILE``). ``sessions`` records, per set of
    actors, the cases it ran and its start-up seconds.
    """

    def __init__(
        self,
        console: Console | None = None,
        show_progress: bool = True,
        quiet: QuietGate | None = None,
    ) -> None:
        self._console = console
        self._show_progress = show_progress
        self._quiet = quiet
        self._session: Any = None
        self._key: str | None = None
        self._started_ray = False
        self._old_sigterm: Any = None
        self.sessions: list[dict[str, Any]] = []

    def run(self, case: LoopCase, out: Path) -> RunResults:
        from rlsim.loop.run import RunOutputs

        session, fresh = self._session_for(case)
        session.async_run = None  # schedule async: one pipeline per run, also on a reused session
        skipped = self._skipped_warmup(case, fresh)
        outputs = RunOutputs(out, case.config)
        outputs.update(startup_s=self.sessions[-1]["startup_s"], **session.describe())
        if case.warmup_steps is not None:  # how many of the steps recorded are warm-up (parse_loop_steps reads it)
            outputs.update(warmup_steps=case.warmup_steps - skipped)
        loads: list[dict[str, Any]] = []
        try:
            for step in range(1 + skipped, case.config.steps + 1):
                loads.append(self._step(session, outputs, case, step))
                atomic_write_json(out / LOAD_FILE, {"steps": loads})
            outputs.update(complete=True)
        finally:
            outputs.finish()
        return outputs.results

    def _step(self, session: Any, outputs: Any, case: LoopCase, step: int) -> dict[str, Any]:
        """Run one step after the quiet gate; returns its load record.

        An async run's pipeline keeps its actors busy between steps, so the gate holds only its first
        step (waiting later would stall the pipeline being timed), and its steps have no probed CPU
        seconds, so other programs' share cannot be told from its own (None)."""
        pipelined = schedule_kind(case.config.schedule).pipelined
        waited = wait_if_asked(self._quiet, self._say) if step == 1 or not pipelined else None
        before = machine_load.sample()
        record, rows = session.step(step)
        own = sum(record.cpu_s.values())
        share = None if pipelined else machine_load.foreign_share(before, machine_load.sample(), own)
        outputs.add_step(record, rows)
        if session.async_run is not None:  # the run-wide async records, as `rlsim run` writes them
            outputs.update(**session.async_run.summary())
        self._say(
            f"  {case.name} step {step}/{case.config.steps}: {record.time_s.total:.2f} s"
            + ("" if share is None else f" (other programs {share:.0%} of the cores)")
        )
        return {"step": step, "foreign_cpu_share": share, "own_cpu_s": own, "quiet_wait": waited}

    @staticmethod
    def _skipped_warmup(case: LoopCase, fresh: bool) -> int:
        """Warm-up steps not run: all of the case's on warm actors (module doc); none after a start-up, for
        async, for a case without a warm-up count, or where they would leave no step."""
        warmup = case.warmup_steps or 0
        if fresh or schedule_kind(case.config.schedule).pipelined or case.config.steps <= warmup:
            return 0
        return warmup

    def _say(self, message: str) -> None:
        if self._console is not None and self._show_progress:
            self._console.print(message)

    def _session_for(self, case: LoopCase) -> tuple[Any, bool]:
        """The session to run ``case`` on, and whether its actors were started for it (not warm)."""
        from rlsim.actors.ray_session import connect_ray
        from rlsim.loop.driver import LoopSession

        key = actor_key(case.config)
        if self._session is not None and key == self._key:
            self._session.config = case.config
            self.sessions[-1]["configs"].append(case.name)
            return self._session, False
        self._close_session()
        if not self._started_ray:
            self._old_sigterm = signal.getsignal(signal.SIGTERM)
            self._started_ray = connect_ray(case.config.ray.address, case.config.ray.num_cpus)  # SIGTERM unwinds
        session = LoopSession(case.config)
        t0 = time.perf_counter()
        try:
            if self._console is not None:
                with self._console.status(f"{case.name}: starting actors (vLLM's engine takes ~35 s on 2 cores)..."):
                    session.start()
            else:
                session.start()
        except BaseException:
            session.close()
            raise
        self._session, self._key = session, key
        self.sessions.append(
            {
                "configs": [case.name],
                "start_s": round(time.perf_counter() - t0, 3),
                "startup_s": {k: round(v, 3) for k, v in session.startup_s.items()},
            }
        )
        return session, True

    def _close_session(self) -> None:
        if self._session is not None:
            session, self._session, self._key = self._session, None, None
            session.close()

    def close(self) -> None:
        """Stop the actors, then the Ray session this runner started (if it started one)."""
        try:
            self._close_session()
        finally:
            if self._started_ray:
                import ray

                ray.shutdown()
                self._started_ray = False
            if self._old_sigterm is not None:
                signal.signal(signal.SIGTERM, self._old_sigterm)
                self._old_sigterm = None


def run_cases(
    cases: list[LoopCase],
    runner: LoopRunner,
    runs_dir: Path,
    reuse: bool = False,
    note: Callable[[str], None] | None = None,
) -> list[Path]:
    """Run every case into ``runs_dir/NAME`` (``reuse``: keep a complete earlier run of the same config);
    returns the results.json paths. The runner is closed at the end, also on errors."""
    tell = note or (lambda _msg: None)
    paths = []
    try:
        for i, case in enumerate(cases, start=1):
            out = runs_dir / case.name
            if reuse and reusable_results(out, case) is not None:
                tell(f"[{i}/{len(cases)}] {case.name}: reusing {out}")
            else:
                tell(f"[{i}/{len(cases)}] {case.name}: running ({case.note or case.config.schedule})")
                runner.run(case, out)
            paths.append(out / "results.json")
    finally:
        runner.close()
    return paths


def run_rounds(
    cases: list[LoopCase],
    runner: LoopRunner,
    rounds: int,
    runs_dir: Path,
    note: Callable[[str], None] | None = None,
) -> list[Path]:
    """Run every case ``rounds`` times, interleaved: round ``r`` runs all of them, in order, into
    ``runs_dir/round-r/NAME`` (A B C, A B C, ...), so each case's runs are one round apart and a drift of
    the host over the session reaches every case alike, rather than one case's repeats back to back or
    hours apart. Returns the round folders; the runner is closed at the end, also on errors."""
    if rounds < 2:
        raise RlsimError(f"rounds must be at least 2 to compare a run with itself, not {rounds}")
    tell = note or (lambda _msg: None)
    folders = [runs_dir / f"round-{r}" for r in range(1, rounds + 1)]
    try:
        for r, folder in enumerate(folders, start=1):
            for i, case in enumerate(cases, start=1):
                tell(f"[round {r}/{rounds}, {i}/{len(cases)}] {case.name}")
                runner.run(case, folder / case.name)
    finally:
        runner.close()
    return folders


def reusable_results(out: Path, case: LoopCase) -> RunResults | None:
    """A complete earlier run of this config in ``out`` (``--reuse``), else None.

    The stored config is read with today's ``RunConfig``, so settings the loop added since (with
    their defaults) do not make an identical run look different; any set value that differs does.
    """
    from rlsim.loop.config import RunConfig

    path = out / "results.json"
    if not path.is_file():
        return None
    try:
        results = RunResults.read(path)
        stored = RunConfig.model_validate(results.config)
    except (RlsimError, ValidationError):  # not a run of today's rlsim: run it again
        return None
    same = stored.model_dump(mode="json") == case.config.model_dump(mode="json")
    return results if same and results.complete else None


def wait_if_asked(quiet: QuietGate | None, note: Callable[[str], None]) -> dict[str, Any] | None:
    """Hold the next run until the cores are quiet, if the set asks for it; returns what happened."""
    if quiet is None:
        return None
    return quiet.wait(note)


def step_loads(out: Path) -> dict[int, float]:
    """Per step number, the share of the cores other programs took during it (what the runner
    recorded in ``out``; empty when nothing was recorded)."""
    try:
        data = json.loads((out / LOAD_FILE).read_text())
        return {
            int(x["step"]): float(x["foreign_cpu_share"])
            for x in data["steps"]
            if x.get("foreign_cpu_share") is not None
        }
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return {}

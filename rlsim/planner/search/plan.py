"""``rlsim plan`` without the command line: check every input, evaluate, search, choose, describe.

All checks (profile version, runtimes present, devices, every placement's feasibility) happen in
``prepare`` before anything is simulated, so bad input costs no time and gives one message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rlsim
from rlsim.errors import RlsimError
from rlsim.planner.profile.machine_check import check_cluster
from rlsim.planner.profile.schema import Profile, load_profile
from rlsim.planner.profile.sources import provenance_summary
from rlsim.planner.search.grid import Candidates, candidates, run_search
from rlsim.planner.sim.evaluate import Evaluation, evaluate
from rlsim.planner.sim.update_steps import UpdateShape, check_priceable
from rlsim.planner.spec.cluster import PlanConfig
from rlsim.planner.spec.placement import resolve


@dataclass
class Prepared:
    """A checked plan input: the config, its profile, and the search candidates (if any)."""

    config: PlanConfig
    profile: Profile
    profile_path: Path
    found: Candidates | None


@dataclass
class PlanOutcome:
    """Everything ``rlsim plan`` reports. ``chosen`` is re-simulated with ``simulation.steps`` steps."""

    prepared: Prepared
    baseline: Evaluation | None
    ranked: list[Evaluation]
    chosen: Evaluation
    meets_target: bool | None
    search_s: float
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        cfg, prof = self.prepared.config, self.prepared.profile
        search = cfg.search
        return {
            "rlsim_version": rlsim.__version__,
            "name": cfg.name,
            "cluster": cfg.nodes.model_dump(mode="json"),
            "workload": cfg.workload.model_dump(mode="json"),
            "profile": {
                "path": str(self.prepared.profile_path),
                "hardware_kind": prof.hardware_kind,
                "illustrative": prof.illustrative,
                "rlsim_version": prof.rlsim_version,
                "unmeasured": prof.unmeasured,
                "machine": prof.machine,
                "provenance": provenance_summary(prof.provenance, prof.sources),
            },
            "objective": search.objective if search else "evaluate",
            "target_step_s": cfg.target_step_s,
            "meets_target": self.meets_target,
            "chosen": self.chosen.as_dict(),
            "baseline": self.baseline.as_dict() if self.baseline else None,
            "ranked": [ev.as_dict() for ev in self.ranked],
            "rejected": [
                {"label": spec.label(), "reason": reason}
                for spec, reason in (self.prepared.found.rejected if self.prepared.found else [])
            ],
            "search": {
                "placements": len(self.ranked),
                "steps_each": search.steps if search else 0,
                "seconds": self.search_s,
            },
            "warnings": self.warnings,
        }


def update_shape(config: PlanConfig) -> UpdateShape:
    t = config.trainer
    return UpdateShape(t.micro_batch, t.mini_batch_size, t.epochs)


def prepare(config: PlanConfig, profile_path: Path) -> Prepared:
    """Load the profile and check the placement and search grid; raises RlsimError on bad input."""
    if config.workload.algorithm == "ppo":
        raise RlsimError(
            "workload.algorithm ppo: `rlsim plan` searches cluster placements of the three GRPO roles and "
            "does not place PPO's reference and critic yet; simulate a PPO loop config on one machine "
            "with `rlsim plan validate SET.yaml` (configs/validate_cpu_ppo.yaml), or set workload.algorithm: grpo "
            "to plan without them"
        )
    profile = load_profile(profile_path)
    try:
        check_priceable(profile.roles, update_shape(config), 1.0)
    except ValueError as err:
        raise RlsimError(str(err)) from err
    if config.placement is not None:
        resolve(config.nodes, profile, config.placement)
    found = candidates(config.nodes, profile, config.search) if config.search else None
    return Prepared(config, profile, profile_path, found)


def execute(prep: Prepared, on_progress: Callable[[str], None] | None = None) -> PlanOutcome:
    """Evaluate the given placement, run the search, and re-simulate the winner for the full steps."""
    cfg, profile, sim = prep.config, prep.profile, prep.config.simulation
    note = on_progress or (lambda _msg: None)
    baseline = None
    if cfg.placement is not None:
        baseline = evaluate(
            cfg.nodes, profile, cfg.workload, cfg.placement, sim.steps, sim.seed, sim.noise, update=update_shape(cfg)
        )
        note("baseline")
    t0 = time.perf_counter()
    ranked: list[Evaluation] = []
    if cfg.search is not None and prep.found is not None:
        ranked = run_search(
            cfg.nodes,
            profile,
            cfg.workload,
            cfg.search,
            prep.found,
            cfg.target_step_s,
            sim.seed,
            sim.noise,
            on_done=lambda ev: note(ev.spec.label()),
            update=update_shape(cfg),
        )
    search_s = time.perf_counter() - t0
    chosen = _choose(prep, baseline, ranked)
    target = cfg.target_step_s
    meets = None if target is None else chosen.step_time_s <= target
    warnings = []
    machine = check_cluster(profile, prep.profile_path, cfg.nodes)
    if machine:
        warnings.append(machine)
    beyond = _beyond_fitted_log(prep)
    if beyond:
        warnings.append(beyond)
    if profile.illustrative:
        from rlsim.planner.search.report import ILLUSTRATIVE_WARNING

        warnings.append(ILLUSTRATIVE_WARNING)
    if meets is False and ranked:
        warnings.append(
            f"no placement meets the {target:g} s step-time target; the fastest is shown "
            f"({chosen.step_time_s:.2f} s): add nodes or relax the target"
        )
    elif meets is False:
        warnings.append(
            f"the placement misses the {target:g} s step-time target ({chosen.step_time_s:.2f} s); "
            "add a search section to look for one that meets it"
        )
    return PlanOutcome(prep, baseline, ranked, chosen, meets, search_s, warnings)


def _choose(prep: Prepared, baseline: Evaluation | None, ranked: list[Evaluation]) -> Evaluation:
    cfg, sim = prep.config, prep.config.simulation
    if not ranked:
        assert baseline is not None
        return baseline
    best = ranked[0]
    search = cfg.search
    assert search is not None
    if cfg.target_step_s is not None and best.step_time_s > cfg.target_step_s:
        best = min(ranked, key=lambda ev: ev.step_time_s)  # nothing meets it: show the fastest
    if sim.steps == search.steps:
        return best
    return evaluate(
        cfg.nodes, prep.profile, cfg.workload, best.spec, sim.steps, sim.seed, sim.noise, update=update_shape(cfg)
    )


def _beyond_fitted_log(prep: Prepared) -> str | None:
    """A warning when a profile fitted to a framework's log is asked about longer (or shorter) responses
    or more rollouts than the log had (one drawn step of the workload, against the profile's fitted range)."""
    from rlsim.planner.profile.fitting.logs import extrapolation

    cfg = prep.config
    _, responses = cfg.workload.sample_step(cfg.simulation.seed, 0)
    if len(responses) == 0:
        return None
    return extrapolation(prep.profile, [float(responses.mean())], float(responses.max()), len(responses))

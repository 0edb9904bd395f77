"""Small hand-made profiles and workloads whose step times can be worked out by hand."""

from __future__ import annotations

from rlsim.planner.profile.schema import (
    ContentionEntry,
    ContentionModel,
    FitStats,
    GenerationModel,
    Profile,
    RolesModel,
    ScorerLatencyModel,
    TrainerModel,
    new_profile_header,
)
from rlsim.planner.spec.cluster import BatcherSpec, PlacementSpec
from rlsim.planner.spec.workload import Workload
from rlsim.workloads import FixedLengths

EXACT = FitStats(n_samples=0, r2=1.0, residual_rel_std=0.0, residual_rel_max=0.0)


def make_profile(
    step_s: float = 0.1,
    per_seq_s: float = 0.0,
    prefill_s_per_token: float = 0.0,
    max_running: int = 64,
    score_s: float = 0.5,
    gen_slowdown: float = 0.0,
    score_slowdown: float = 0.0,
    device: str = "cpu",
) -> Profile:
    """One-unit engine with iteration time ``step_s + per_seq_s x n``; scorer of constant ``score_s``."""
    return Profile(
        **new_profile_header("test-kind", illustrative=False),
        runtimes={
            "const": ScorerLatencyModel(
                device=device,
                units=1,
                intercept_s=score_s,
                per_sequence_s=0.0,
                per_padded_token_s=0.0,
                max_length=512,
                fit=EXACT,
            ),
            "linear": ScorerLatencyModel(
                device="cpu",
                units=1,
                intercept_s=0.0,
                per_sequence_s=0.0,
                per_padded_token_s=0.001,
                max_length=512,
                fit=EXACT,
            ),
        },
        generation=GenerationModel(
            device=device,
            units=1,
            base_s=step_s,
            per_seq_s=per_seq_s,
            prefill_s_per_token=prefill_s_per_token,
            max_running=max_running,
            fit=EXACT,
        ),
        trainer=TrainerModel(units=1, update_fixed_s=0.3, update_s_per_token=0.0, sync_fixed_s=0.2),
        contention=ContentionModel(default=ContentionEntry(gen_slowdown=gen_slowdown, score_slowdown=score_slowdown)),
    )


def fixed_workload(prompts: int = 1, group: int = 4, response: int = 10, prompt: int = 5) -> Workload:
    return Workload(
        prompts_per_step=prompts,
        group_size=group,
        prompt_tokens=FixedLengths(tokens=prompt),
        response_tokens=FixedLengths(tokens=response),
    )


def placement(schedule: str = "sequential", colocated: bool = False, batch: int = 2, **kw: object) -> PlacementSpec:
    """One engine on one core and one scorer replica on the other (split 50 %), unless colocated."""
    window = int(kw.pop("batcher_window", 128))  # type: ignore[call-overload]
    return PlacementSpec(
        runtime=kw.pop("runtime", "const"),
        batcher=BatcherSpec(kind="fixed", batch_size=batch, window=window),
        schedule=schedule,
        colocated=colocated,
        scoring_share=0.5,
        **kw,
    )  # type: ignore[arg-type]


def constant(seconds: float) -> ScorerLatencyModel:
    """A latency model of ``seconds`` per call, whatever the batch or the units."""
    return ScorerLatencyModel(
        device="cpu",
        units=1,
        intercept_s=seconds,
        per_sequence_s=0.0,
        per_padded_token_s=0.0,
        max_length=512,
        fit=EXACT,
    )


def roles_profile() -> Profile:
    """``make_profile(score_s=0.5)`` with PPO's roles at constant costs per call: the policy's forward
    (eager reference) 0.1 s, the ort reference 0.4 s, the critic's values 0.2 s and update 0.25 s."""
    roles = RolesModel(
        micro_batch=16,
        reference={"eager": constant(0.1), "ort": constant(0.4)},
        values=constant(0.2),
        update_critic=constant(0.25),
    )
    return make_profile(score_s=0.5).model_copy(update={"roles": roles})

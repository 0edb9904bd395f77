"""Calibration from loop runs: known models in, the same models back out of the per-step fits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlsim.errors import RlsimError
from rlsim.loop.config import RunConfig
from rlsim.planner.measure.loop_results import LoopSteps
from rlsim.planner.measure.sections import bound_note, loop_contention
from rlsim.planner.profile.fitting.loops import (
    CONTENTION_BOUND,
    CalibrationRun,
    fit_contention,
    fit_generation,
    fit_score_factors,
    fit_trainer,
    read_calibration_run,
)
from rlsim.planner.profile.schema import ContentionEntry, ContentionModel, GenerationModel, Profile, TrainerModel
from rlsim.planner.sim.generation import generation_features
from rlsim.planner.validate.predict import loop_trace, predict_trace
from tests.helpers.planner_cases import EXACT, make_profile

BASE, PER_SEQ, PREFILL, ALPHA = 0.004, 0.0002, 0.00005, 0.8


def config(
    prompts: int, schedule: str = "sequential", preset: str = "shared", response: int | None = None
) -> RunConfig:
    workload: dict = {"prompts_per_step": prompts, "group_size": 4}
    if response is not None:
        workload["spec"] = {"response": {"kind": "fixed", "tokens": response}}
    return RunConfig.model_validate({"schedule": schedule, "placement": {"preset": preset}, "workload": workload})


def gen_seconds(trace: list[tuple[list[int], list[int]]], units: float, base_exp: float = ALPHA) -> np.ndarray:
    """The engine model with the constants above, at ``units`` cores (reference 2)."""
    out = []
    for prompts, responses in trace:
        i, s, p = generation_features(np.asarray(prompts), np.asarray(responses), 1, 256)
        out.append(BASE * i * (2 / units) ** base_exp + PER_SEQ * s * (2 / units) ** ALPHA + PREFILL * p)
    return np.array(out)


def run_of(
    cfg: RunConfig,
    gen: np.ndarray | None = None,
    units: float = 2,
    update_per_token: float = 1e-4,
    total: np.ndarray | None = None,
    update_per_seq: float = 0.0,
    score: np.ndarray | None = None,
) -> CalibrationRun:
    trace = loop_trace(cfg, [2, 3, 4])
    tokens = np.array([float(sum(r)) for _, r in trace])
    seqs = 4.0 * cfg.workload.prompts_per_step
    gen = gen_seconds(trace, units) if gen is None else gen
    update = 0.3 + (update_per_token * tokens + update_per_seq * seqs) * (2 / units) ** 0.5
    times = {
        "generate": gen,
        "score": np.full(3, 0.5) if score is None else score,
        "update": update,
        "sync": np.full(3, 0.2),
        "idle": np.full(3, 0.05),
        "total": gen + 0.5 + update + 0.25 if total is None else total,
    }
    steps = LoopSteps(Path("x"), times, tokens, np.full(3, 4.0 * cfg.workload.prompts_per_step), [2, 3, 4])
    return CalibrationRun(Path(f"{cfg.schedule}-{cfg.workload.prompts_per_step}"), cfg, steps, units, units, trace)


def test_engine_features_count_iterations_sequence_iterations_and_prompt_tokens() -> None:
    # Three sequences of 2, 5 and 3 tokens admitted at once: 5 iterations; 10 sequence-iterations
    # (every token is one sequence in one iteration); prompts 4 + 4 + 6 tokens.
    assert generation_features(np.array([4, 4, 6]), np.array([2, 5, 3]), 1, 256) == pytest.approx((5.0, 10.0, 14.0))
    # One slot: the sequences run one after another, 10 iterations of one sequence each.
    assert generation_features(np.array([4, 4, 6]), np.array([2, 5, 3]), 1, 1) == pytest.approx((10.0, 10.0, 14.0))


def test_generation_fit_recovers_the_engine_model_and_its_core_exponent() -> None:
    runs = [run_of(config(2)), run_of(config(8)), run_of(config(8, preset="split"), units=1)]
    model = fit_generation(runs, "cpu", 256)
    assert model.units == 2 and model.unit_exponent_measured
    assert model.base_s == pytest.approx(BASE, rel=1e-6) and model.per_seq_s == pytest.approx(PER_SEQ, rel=1e-6)
    assert model.prefill_s_per_token == pytest.approx(PREFILL, rel=1e-6)
    assert model.unit_exponent == pytest.approx(ALPHA) and model.fit.residual_rel_max < 1e-9
    assert len(model.points) == 3


def test_the_fixed_part_of_an_iteration_gets_its_own_core_exponent() -> None:
    # Scheduling overhead that hardly speeds up with cores (0.2) beside compute that does (0.8).
    def run(prompts: int, preset: str, units: float) -> CalibrationRun:
        cfg = config(prompts, preset=preset)
        return run_of(cfg, gen=gen_seconds(loop_trace(cfg, [2, 3, 4]), units, base_exp=0.2), units=units)

    model = fit_generation(
        [run(2, "shared", 2), run(8, "shared", 2), run(4, "split", 1), run(16, "split", 1)], "cpu", 256
    )
    assert model.base_exponent == pytest.approx(0.2) and model.unit_exponent == pytest.approx(ALPHA)
    assert model.base_s == pytest.approx(BASE, rel=1e-6) and model.per_seq_s == pytest.approx(PER_SEQ, rel=1e-6)
    # 10 running on 1 core: 0.004 x 2**0.2 + 0.0002 x 10 x 2**0.8 seconds per iteration.
    assert model.step_s(10, 1) == pytest.approx(0.004 * 2**0.2 + 0.002 * 2**0.8)


def test_a_step_slowed_by_other_work_is_left_out_of_the_fit() -> None:
    disturbed = run_of(config(8))
    disturbed.steps.time_s["generate"][1] *= 2.5  # other programs took the cores during this step
    model = fit_generation([run_of(config(2)), disturbed, run_of(config(16))], "cpu", 256)
    assert model.base_s == pytest.approx(BASE, rel=1e-6) and model.per_seq_s == pytest.approx(PER_SEQ, rel=1e-6)
    assert model.fit.n_samples == 8 and model.fit.residual_rel_max < 1e-9  # 9 steps, the slow one dropped


def test_generation_fit_ignores_contended_runs_and_needs_two_concurrencies() -> None:
    noisy = run_of(config(4, schedule="overlapped"), gen=np.full(3, 99.0))
    model = fit_generation([run_of(config(2)), run_of(config(8)), noisy], "cpu", 256)
    assert model.base_s == pytest.approx(BASE, rel=1e-6)  # the 99 s steps were not fitted
    with pytest.raises(RlsimError, match="two or more concurrencies"):
        fit_generation([run_of(config(8)), noisy], "cpu", 256)


def test_trainer_fit_recovers_costs_and_the_core_exponent() -> None:
    runs = [run_of(config(2)), run_of(config(8)), run_of(config(8, preset="split"), units=1)]
    trainer = fit_trainer(runs)
    assert trainer.update_fixed_s == pytest.approx(0.3, rel=1e-6)
    assert trainer.update_s_per_token == pytest.approx(1e-4, rel=1e-6) and trainer.unit_exponent == pytest.approx(0.5)
    assert trainer.sync_fixed_s == pytest.approx(0.2) and trainer.sync_s_per_token == pytest.approx(0.0, abs=1e-12)
    assert trainer.step_overhead_s == pytest.approx(0.05)


def test_trainer_fit_separates_per_sequence_from_per_token_costs_when_lengths_vary() -> None:
    # Short (16-token) and long (128-token) responses: the same tokens cost more in more sequences.
    # Four distinct points for four unknowns (fixed, per token, per sequence, core exponent).
    runs = [
        run_of(config(8, response=16), update_per_seq=5e-3),
        run_of(config(2, response=128), update_per_seq=5e-3),
        run_of(config(4, response=64), update_per_seq=5e-3),
        run_of(config(8, preset="split", response=64), units=1, update_per_seq=5e-3),
    ]
    trainer = fit_trainer(runs)
    assert trainer.update_s_per_sequence == pytest.approx(5e-3, rel=1e-6)
    assert trainer.update_s_per_token == pytest.approx(1e-4, rel=1e-6) and trainer.update_fixed_s == pytest.approx(0.3)
    # 32 sequences of 100 tokens on 1 core: 0.3 + (0.32 + 0.16) x 2 ** 0.5.
    assert trainer.update_s(3200, 1, 32) == pytest.approx(0.3 + 0.48 * 2**0.5)


def loop_like_profile() -> Profile:
    profile = make_profile()
    return profile.model_copy(
        update={
            "runtimes": {"eager": profile.runtimes["linear"]},
            "generation": GenerationModel(
                device="cpu", units=2, base_s=0.004, per_seq_s=0.0002, max_running=256, fit=EXACT
            ),
            "trainer": TrainerModel(units=2, update_fixed_s=0.3, update_s_per_token=1e-4),
        }
    )


def test_scoring_in_the_loop_factor_and_call_overhead_come_back_from_the_scoring_phase() -> None:
    profile = loop_like_profile()
    runs = []
    for prompts in (2, 8, 16):
        run = run_of(config(prompts))
        benchmarked = [s.time_s["score"] for s in predict_trace(run.config, profile, run.trace).steps]
        run.steps.time_s["score"] = 1.3 * np.array(benchmarked) + 0.05  # one call per sequential step
        runs.append(run)
    assert fit_score_factors(runs, profile)["eager"] == pytest.approx((1.3, 0.05), rel=1e-6)


def test_contention_fit_finds_the_slowdowns_the_measurements_came_from() -> None:
    # "Measure" an overlapped shared run with the planner itself at known slowdowns, then fit them back.
    profile = loop_like_profile()
    cfg = config(8, schedule="overlapped")
    truth = profile.model_copy(
        update={"contention": ContentionModel(default=ContentionEntry(gen_slowdown=0.7, score_slowdown=1.3))}
    )
    trace = loop_trace(cfg, [2, 3, 4])
    ev = predict_trace(cfg, truth, trace)
    gen, score, total = (np.array([s.time_s[k] for s in ev.steps]) for k in ("generate", "score", "total"))
    fitted = fit_contention([run_of(config(2)), run_of(cfg, gen=gen, total=total, score=score)], profile)
    assert fitted is not None
    entry = fitted.per_runtime["eager"]
    assert entry.gen_slowdown == pytest.approx(0.7) and entry.score_slowdown == pytest.approx(1.3)
    assert fit_contention([run_of(config(2))], profile) is None  # no overlapped shared run: nothing to fit


def test_contention_fit_leaves_a_slower_update_to_the_trainer_model() -> None:
    # The loop's update ran 1.5 s longer than the trainer model says (a trainer miss, or the host): the step is
    # longer by as much, but contention cannot move the update, so the slowdowns come back as they were. A fit
    # to the step time pushed the score slowdown up until the lengthened scoring made up the difference.
    profile = loop_like_profile()
    cfg = config(8, schedule="overlapped")
    truth = profile.model_copy(
        update={"contention": ContentionModel(default=ContentionEntry(gen_slowdown=0.7, score_slowdown=1.3))}
    )
    ev = predict_trace(cfg, truth, loop_trace(cfg, [2, 3, 4]))
    gen, score, total = (np.array([s.time_s[k] for s in ev.steps]) for k in ("generate", "score", "total"))
    fitted = fit_contention([run_of(config(2)), run_of(cfg, gen=gen, total=total + 1.5, score=score)], profile)
    assert fitted is not None
    entry = fitted.per_runtime["eager"]
    assert (entry.gen_slowdown, entry.score_slowdown) == pytest.approx((0.7, 1.3))


@pytest.mark.slow  # a calibration-sized fit: two configs over the whole grid (~10 s on 2 cores)
def test_contention_fit_rests_on_every_overlapped_run_and_reaches_past_the_old_bound() -> None:
    # Two overlapped shared configs measured at slowdowns beyond the old search bound (3.25): both come back.
    profile = loop_like_profile()
    truth = profile.model_copy(
        update={"contention": ContentionModel(default=ContentionEntry(gen_slowdown=4.5, score_slowdown=5.0))}
    )
    runs = [run_of(config(2))]
    for prompts, micro_batch in ((4, 8), (6, 4)):
        cfg = config(prompts, schedule="overlapped").model_copy(update={"micro_batch": micro_batch})
        ev = predict_trace(cfg, truth, loop_trace(cfg, [2, 3, 4]))
        gen, score, total = (np.array([s.time_s[k] for s in ev.steps]) for k in ("generate", "score", "total"))
        runs.append(run_of(cfg, gen=gen, total=total, score=score))
    fitted = fit_contention(runs, profile)
    assert fitted is not None
    entry = fitted.per_runtime["eager"]
    assert (entry.gen_slowdown, entry.score_slowdown) == pytest.approx((4.5, 5.0))
    assert CONTENTION_BOUND > 5.0
    # The profile's note names the runs the fit rests on.
    measured: list[str] = []
    assert profile.generation is not None and profile.trainer is not None
    loop_contention(runs, profile.runtimes, profile.generation, profile.trainer, None, measured, [])
    assert measured == ["contention fitted to overlapped shared loop runs (overlapped-4, overlapped-6) for eager "
                        "(gen +450%, score +500%)"]  # fmt: skip


def test_a_contention_fit_on_the_search_bound_says_so() -> None:
    assert bound_note(ContentionEntry(gen_slowdown=0.5, score_slowdown=CONTENTION_BOUND)).startswith("; at the search")
    assert bound_note(ContentionEntry(gen_slowdown=0.5, score_slowdown=5.0)) == ""


def test_a_results_file_whose_config_does_not_match_its_tokens_is_refused(tmp_path: Path) -> None:
    cfg = config(2)
    trace = loop_trace(cfg, [1, 2])
    steps = [
        {
            "step": i + 1,
            "time_s": {k: 1.0 for k in ("generate", "score", "update", "sync", "idle", "total")},
            "rollouts": {"generated": 8},
            "tokens": {"generated": sum(r)},
        }
        for i, (_, r) in enumerate(trace)
    ]
    data = {
        "config": cfg.model_dump(mode="json"),
        "steps": steps,
        "placement": {"rollout": {"cores": [0, 1]}, "trainer": {"cores": [0, 1]}},
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    run = read_calibration_run(path)
    assert run.trace == trace[1:] and run.rollout_units == 2 and not run.contended
    steps[1]["tokens"]["generated"] += 1
    path.write_text(json.dumps(data))
    with pytest.raises(RlsimError, match="do not add up"):
        read_calibration_run(path)

"""A reward model or a judge LLM scoring on GPUs in the GPU step (``judge:``): the prefill worked by hand, the decode
of a score judge, the two placements, and bad sections refused before anything is simulated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlsim.errors import RlsimError
from rlsim.planner.profile.gpu_efficiency import Efficiency, load_efficiency
from rlsim.planner.sim.gpu_judge import judge_s
from rlsim.planner.sim.gpu_step import check_memory, nvlink_reach, predict_step
from rlsim.planner.spec.gpu_run import GpuRunConfig
from rlsim.planner.validate.published_runs import CALIBRATION

ROOT = Path(__file__).resolve().parents[2]
EFF = ROOT / "configs" / "profiles" / "gpu_efficiency_nemo_rl.json"


@pytest.fixture(scope="module")
def eff() -> Efficiency:
    return load_efficiency(EFF)


def _cfg(reward: str = "genrm", **judge: object) -> GpuRunConfig:
    """The NeMo-RL blog row (Llama-3.1-8B, 8 H100 colocated, 64 x 32 rollouts) scored by ``judge``."""
    base = CALIBRATION[0].config.model_dump()
    base["rollouts"] = {**base["rollouts"], "reward": reward}
    base["judge"] = {"model": "qwen2.5-7b", **judge}
    return GpuRunConfig.model_validate(base)


def test_a_verdict_is_one_prefill_per_rollout_with_the_groups_prefix_shared(eff: Efficiency) -> None:
    """Worked by hand for Qwen2.5-7B (config.json: 28 layers, hidden 3584, intermediate 18944, 28 heads of 128,
    4 KV heads, vocabulary 152064, untied): every rollout reads 100 + prompt + response tokens, and a group's
    32 samples share the first 100 + prompt tokens, computed once per prompt."""
    cfg = _cfg(template_tokens=100)
    r = cfg.rollouts
    layer = 3584 * 128 * (2 * 28 + 2 * 4) + 3 * 3584 * 18944
    matmul = 28 * layer + 152064 * 3584

    def sequence_flops(tokens: float) -> float:  # causal: token t attends over t keys, mean (S + 1) / 2
        return tokens * (2.0 * matmul + 4.0 * 28 * 28 * 128 * (tokens + 1) / 2)

    lengths = np.array([300, 500] * (r.rollouts // 2))
    shared = 100 + r.prompt_tokens
    flops = r.rollouts / 2 * (sequence_flops(shared + 300) + sequence_flops(shared + 500))
    flops -= (r.rollouts - r.prompts_per_step) * sequence_flops(shared)
    by_hand = flops / 8 / (989e12 * eff.prefill_compute)  # 8 engines of one H100 SXM (989 dense BF16 TFLOP/s)
    _, detail = judge_s(cfg, eff, lengths, nvlink_reach(cfg), generation_s=50.0)
    assert detail["judge_prefill_s"] == pytest.approx(by_hand, rel=1e-3)
    assert detail["judge_decode_s"] == 0.0 and detail["judge_engines"] == 8


def test_a_score_judge_decodes_and_costs_more_the_more_it_writes(eff: Efficiency) -> None:
    lengths = np.full(2048, 800)
    reach = 8
    verdict = judge_s(_cfg(), eff, lengths, reach, 50.0)[1]
    short = judge_s(_cfg(mode="score", max_tokens=32), eff, lengths, reach, 50.0)[1]
    long = judge_s(_cfg(mode="score", max_tokens=256), eff, lengths, reach, 50.0)[1]
    assert verdict["judge_decode_s"] == 0.0 < short["judge_decode_s"] < long["judge_decode_s"]
    assert short["judge_prefill_s"] == verdict["judge_prefill_s"]


def test_in_turn_the_step_pays_the_work_and_the_swap_on_own_gpus_only_what_generation_does_not_hide(
    eff: Efficiency,
) -> None:
    lengths = np.full(2048, 800)
    in_turn, d = judge_s(_cfg(), eff, lengths, 8, generation_s=50.0)
    assert in_turn == pytest.approx(d["judge_prefill_s"] + d["judge_swap_s"])
    hidden, d_own = judge_s(_cfg(gpus=8), eff, lengths, 8, generation_s=50.0)
    assert "judge_swap_s" not in d_own and hidden < 0.2 * in_turn  # the work fits under 50 s of generation
    exposed, _ = judge_s(_cfg(gpus=8), eff, lengths, 8, generation_s=0.5)
    latency = hidden  # the work fits under 50 s of generation: only one rollout's read shows
    assert exposed == pytest.approx(d_own["judge_prefill_s"] - 0.5 + latency)  # 0.5 s hid only that much


def test_the_judge_lands_in_the_generation_phase_instead_of_the_verifier(eff: Efficiency) -> None:
    rule = predict_step(CALIBRATION[0].config, eff, steps=1)  # one step: the detail is the last step's
    judged = predict_step(_cfg(), eff, steps=1)
    verifier = CALIBRATION[0].config.rollouts.rollouts * eff.verifier_s_per_rollout / eff.verifier_workers
    assert judged.phases["generation"] == pytest.approx(rule.phases["generation"] - verifier + judged.detail["judge_s"])
    assert judged.phases["training"] == rule.phases["training"]


@pytest.mark.parametrize(
    "reward, judge, message",
    [
        ("genrm", None, "needs a judge section"),
        ("rule-based", {"model": "qwen2.5-7b"}, "judge is set but rollouts.reward is rule-based"),
        ("reward-model", {"model": "qwen2.5-7b", "mode": "score"}, "a reward model does not"),
        ("genrm", {"model": "gpt-9"}, "judge.model 'gpt-9' is unknown"),
        ("genrm", {"model": "qwen2.5-7b", "tp": 3}, "not a multiple of judge.tp 3"),
        ("genrm", {"model": "qwen2.5-7b", "max_tokens": 0}, "max_tokens"),
        ("genrm", {"model": "qwen2.5-7b", "split": True}, "give the judge GPUs of its own"),
    ],
)
def test_a_bad_judge_section_is_refused(reward: str, judge: dict | None, message: str) -> None:
    base = CALIBRATION[0].config.model_dump()
    base["rollouts"] = {**base["rollouts"], "reward": reward}
    if judge is not None and judge.pop("split", False):
        base.update(placement="split", generation={**base["generation"], "gpus": 4})
    base["judge"] = judge
    with pytest.raises(ValueError, match=message):
        GpuRunConfig.model_validate(base)


def test_a_judge_that_does_not_fit_its_gpus_is_refused_naming_it(eff: Efficiency) -> None:
    with pytest.raises(RlsimError, match="the judge: llama-3.1-70b does not fit"):
        check_memory(_cfg(model="llama-3.1-70b"), eff)
    assert check_memory(_cfg(model="llama-3.1-70b", tp=4), eff)["judge_kv_tokens"] > 0

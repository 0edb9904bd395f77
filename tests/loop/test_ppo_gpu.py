"""The PPO step's models on a CUDA GPU: the trainer and the critic colocated in one worker (taking turns on
the device), the reference beside them, real torch updates; generation and scoring are test doubles.

Skipped without a GPU. The policy is a small random-init Llama built here (no tokenizer needed: the
doubles produce token ids), so the test needs torch and transformers, not the MiniLM package.
Seen passing on one H200 (torch 2.11, transformers 5.17, 2026-11-30) in 16 s.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.loop_doubles import FakeGenerator, FakeStage, requests

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    out = tmp_path_factory.mktemp("policy")
    LlamaForCausalLM(config).save_pretrained(str(out))
    return out


def test_a_ppo_step_on_cuda_with_critic_and_trainer_colocated(policy_dir: Path) -> None:
    from rlsim.actors.role_workers import ColocatedWorker, ReferenceWorker
    from rlsim.actors.workers import RolloutWorker, ScoringWorker
    from rlsim.algorithms.experience import AlgorithmSettings
    from rlsim.loop.backends.local import InProcessBackend
    from rlsim.loop.roles.critic import CriticModel, CriticSettings
    from rlsim.loop.roles.reference import ReferenceSettings, make_reference
    from rlsim.loop.roles.trainer import PolicyTrainer, TrainerSettings
    from rlsim.loop.schedules.ppo import run_ppo_step
    from rlsim.loop.sync import WeightSync

    algorithm = AlgorithmSettings(algorithm="ppo", kl_coef=0.05, kl_target="reward")
    trainer = PolicyTrainer(policy_dir, TrainerSettings(lr=1e-3, device="cuda", micro_batch=4, algorithm=algorithm))
    critic = CriticModel(policy_dir, CriticSettings(lr=1e-3, device="cuda", micro_batch=4))
    reference = make_reference(policy_dir, ReferenceSettings(runtime="eager", device="cuda", micro_batch=4))
    both = ColocatedWorker(
        "critic+trainer",
        None,
        {"critic": ("critic", lambda: critic), "trainer": ("trainer", lambda: trainer)},
        pin=False,
    )
    ref_worker = ReferenceWorker("reference", None, lambda: reference, pin=False)
    backend = InProcessBackend(
        RolloutWorker("rollout", None, FakeGenerator, pin=False),
        [ScoringWorker("scorer-0", None, FakeStage, pin=False)],
        both,
        WeightSync("simulated", 0.0),
        ref_worker,
        both,
    )
    reqs = requests(4, 2)
    rollouts, _ = backend.result(backend.submit_generate(reqs))
    before = reference.logprobs(rollouts)
    losses = []
    for _ in range(3):
        out = run_ppo_step(backend, "overlapped", reqs, micro_batch=3)
        assert out.counts == {"requested": 8, "generated": 8, "scored": 8, "referenced": 8, "valued": 8, "trained": 8}
        losses.append(out.train["value_loss"])
        assert np.isfinite(out.train["policy_loss"]) and out.train["grad_norm"] > 0
    after = reference.logprobs(rollouts)
    assert all(np.array_equal(before[u], after[u]) for u in before)  # the reference stayed frozen
    assert losses[-1] < losses[0]  # the critic learns the (fixed) returns of a fixed batch
    # Every model lives on the GPU, and the policy moved away from the reference (KL > 0 after updates).
    assert next(trainer._model.parameters()).is_cuda and next(critic._backbone.parameters()).is_cuda
    assert out.train["kl"] > 0

"""The GPU step model's parts against hand-worked numbers: FLOPs and bytes, the decode roofline, the KV
cache bounding concurrency, the scheduler, and one clear refusal per kind of bad input."""

from __future__ import annotations

import numpy as np
import pytest

from rlsim.errors import RlsimError
from rlsim.planner.profile.gpu_datasheets import GPUS, gpu_spec
from rlsim.planner.sim.gpu_generation import DecodeCosts, EngineSetup, engine_times, engine_times_events, schedule
from rlsim.planner.spec.model_shapes import MODELS, ModelShape, model_shape

# 2 layers, hidden 8, MLP 16, 2 query heads and 1 KV head of 4, vocabulary 10
TINY = ModelShape(name="tiny", layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10)


def test_tiny_architecture_counts_by_hand() -> None:
    # attention 8 x 4 x (2 x 2 + 2 x 1) = 192, MLP 3 x 8 x 16 = 384: 576 per layer
    assert TINY.layer_params == 576
    assert TINY.matmul_params == 2 * 576 + 10 * 8 == 1232
    assert TINY.params == 1232 + 80  # untied embedding
    # 2 x 1232 matrix FLOPs + 4 x 2 layers x 2 heads x 4 dims x context 5
    assert TINY.forward_flops(5) == 2464 + 64 * 5
    # a 3-token causal sequence: mean context 2
    assert TINY.sequence_forward_flops(3) == 3 * (2464 + 64 * 2)
    assert TINY.kv_bytes_per_token(2.0) == 2 * 2 * 1 * 4 * 2 == 32
    assert TINY.decode_weight_bytes(2.0) == 2464


# the same attention, and 4 experts of MLP 2 with 2 routed per token instead of the dense MLP
TINY_MOE = ModelShape(
    name="tiny-moe",
    layers=2,
    hidden=8,
    intermediate=16,
    heads=2,
    kv_heads=1,
    head_dim=4,
    vocab=10,
    experts=4,
    experts_per_token=2,
    expert_intermediate=2,
)


def test_tiny_mixture_of_experts_counts_by_hand() -> None:
    # attention 192; experts 4 x (3 x 8 x 2 = 48) = 192; router 8 x 4 = 32: 416 per layer held
    assert TINY_MOE.expert_params == 48 and TINY_MOE.layer_params == 192 + 192 + 32
    assert TINY_MOE.matmul_params == 2 * 416 + 80 == 912
    # a token multiplies by attention, the router and 2 experts: 192 + 32 + 96 = 320 per layer
    assert TINY_MOE.active_matmul_params == 2 * 320 + 80 == 720
    assert TINY_MOE.forward_flops(5) == 2 * 720 + 64 * 5
    # the reads besides the experts: attention and router of both layers, the LM head; one expert = 2 x 48 params
    assert TINY_MOE.decode_weight_bytes(2.0) == 2 * (912 - 2 * 4 * 48)
    assert TINY_MOE.expert_bytes(2.0) == 2 * 2 * 48
    # one token touches its 2 experts; two tokens 4 x (1 - (1/2)^2) = 3 in expectation; many tokens all 4
    assert TINY_MOE.experts_touched(1) == pytest.approx(2.0)
    assert TINY_MOE.experts_touched(2) == pytest.approx(3.0)
    assert TINY_MOE.experts_touched(1000) == pytest.approx(4.0)
    assert TINY.experts_touched(1000) == 0.0


def test_a_moe_shape_without_its_routing_is_refused() -> None:
    with pytest.raises(ValueError, match="experts_per_token in 1..experts"):
        ModelShape(**{**TINY_MOE.model_dump(), "experts_per_token": 5})
    with pytest.raises(ValueError, match="expert_intermediate >= 1"):
        ModelShape(**{**TINY_MOE.model_dump(), "expert_intermediate": 0})
    with pytest.raises(ValueError, match="experts is 0; give experts"):  # routing without experts: a lost field
        ModelShape(**{**TINY_MOE.model_dump(), "experts": 0})


def test_moe_decode_reads_the_experts_its_batch_touches() -> None:
    m = MODELS["qwen3-30b-a3b"]
    costs = _setup(model="qwen3-30b-a3b").decode_costs(eff_bw=1.0, eff_compute=1.0, fixed_s=0.0, comm_eff=1.0)
    one = float(costs.iteration_s(np.array([1.0]), np.array([0.0]))[0])
    # batch 1: the shared weights plus 8 of 128 experts in each of 48 layers
    assert one == pytest.approx((m.decode_weight_bytes() + 8 * m.expert_bytes()) / 3350e9, rel=1e-9)
    many = float(costs.weights_s(np.array([512.0]))[0])  # every expert is read
    assert many == pytest.approx(m.matmul_params * 2.0 / 3350e9, rel=1e-3)
    # FLOPs count the active parameters: 3.0e9 of 30.5e9
    assert costs.compute_s_per_seq == pytest.approx(2 * m.active_matmul_params / 989.4e12)
    assert m.params == pytest.approx(30.5e9, rel=0.01) and m.active_matmul_params == pytest.approx(3.04e9, rel=0.01)
    assert MODELS["qwen3-235b-a22b"].params == pytest.approx(235e9, rel=0.01)


def test_moe_closed_form_matches_the_iteration_sum() -> None:
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 300, (3, 30))
    prompts = np.where(lengths > 0, 20, 0)
    costs = _setup(model="qwen3-30b-a3b").decode_costs(0.9, 0.5, 1e-3, 0.8)
    starts = np.stack([schedule(row, 9) for row in lengths])
    dense, _ = engine_times(costs, lengths, prompts, starts)
    fast, _ = engine_times_events(costs, lengths, prompts, starts)
    np.testing.assert_allclose(fast, dense, rtol=1e-12)


def test_public_shapes_give_their_published_sizes() -> None:
    assert MODELS["llama-3.1-8b"].params == pytest.approx(8.03e9, rel=0.005)
    assert MODELS["llama-3.1-70b"].params == pytest.approx(70.6e9, rel=0.005)
    assert MODELS["qwen2.5-7b"].params == pytest.approx(7.6e9, rel=0.01)
    assert MODELS["qwen2.5-32b"].params == pytest.approx(32.8e9, rel=0.01)
    assert MODELS["llama-3.1-8b"].kv_bytes_per_token() == 131072  # 128 KiB in BF16


def _setup(util: float = 0.6, tp: int = 1, gpu: str = "h100-sxm", model: str = "llama-3.1-8b") -> EngineSetup:
    return EngineSetup(
        model=MODELS[model],
        gpu=GPUS[gpu],
        tp=tp,
        precision="bf16",
        gpu_memory_utilization=util,
        max_num_seqs=1024,
        max_model_len=4096,
        runtime_reserve_gb=3.0,
    )


def test_decode_sits_on_the_weight_floor_at_batch_one_and_the_compute_roof_at_large_batch() -> None:
    costs = _setup().decode_costs(eff_bw=1.0, eff_compute=1.0, fixed_s=0.0, comm_eff=1.0)
    floor = MODELS["llama-3.1-8b"].decode_weight_bytes() / 3350e9  # 15.0 GB of matrices / 3.35 TB/s
    one = float(costs.iteration_s(np.array([1.0]), np.array([100.0]))[0])
    assert floor == pytest.approx(4.48e-3, rel=0.01) and one == pytest.approx(floor, rel=0.01)
    big = 8192.0  # 8,192 sequences of 1 token of context: matrix FLOPs dominate
    roof = big * 2 * MODELS["llama-3.1-8b"].matmul_params / 989.4e12
    assert float(costs.iteration_s(np.array([big]), np.array([big]))[0]) == pytest.approx(roof, rel=0.01)


def test_kv_cache_capacity_bounds_concurrency() -> None:
    # 80 GB x 0.6 - 16.06 GB weights - 3 GB = 28.9 GB / 128 KiB = about 220,000 tokens
    assert _setup().kv_capacity_tokens() == pytest.approx(28.94e9 / 131072, rel=0.01)
    lengths = np.full(256, 2000)
    low, _ = _setup(0.6).slots(200, lengths)  # slot context 200 + 2000 / 2 = 1,200 tokens
    high, admitted = _setup(0.9).slots(200, lengths)
    assert low == int(_setup(0.6).kv_capacity_tokens() / 1200) < high and admitted == 1024


def test_list_scheduling_admits_in_order_into_free_slots() -> None:
    # slots 2: requests of 3, 1, 2, 1 iterations: starts 0, 0, 1 (when the 1 ends), 3
    assert schedule(np.array([3, 1, 2, 1]), 2).tolist() == [0, 0, 1, 3]
    assert schedule(np.array([5, 5]), 4).tolist() == [0, 0]


def test_engine_times_count_running_requests_and_context_by_hand() -> None:
    fixed = DecodeCosts(0.001, 0, 0, 0, 0, 0, 0)
    seconds, iterations = engine_times(fixed, np.array([[3, 1]]), np.array([[10, 10]]), np.array([[0, 0]]))
    assert iterations.tolist() == [3] and seconds[0] == pytest.approx(0.003)
    # memory per context token only: iteration 0 holds 11 + 11, iteration 1 holds 12, iteration 2 holds 13
    kv = DecodeCosts(0, 0, 0, 0, 1.0, 0, 0)
    seconds, _ = engine_times(kv, np.array([[3, 1]]), np.array([[10, 10]]), np.array([[0, 0]]))
    assert seconds[0] == pytest.approx(22 + 12 + 13)


def test_closed_form_between_events_equals_the_iteration_by_iteration_sum() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 400, (6, 40))
    lengths[0, 3:] = 0  # an engine with fewer requests (padding)
    prompts = np.where(lengths > 0, rng.integers(5, 50, (6, 40)), 0)
    # costs where compute overtakes memory as the batch grows, so the maximum switches inside intervals
    costs = DecodeCosts(1e-3, 2e-5, 3e-8, 4e-3, 2e-7, 1e-4, 1e-6)
    for slots in (7, 100):
        starts = np.stack([schedule(row, slots) for row in lengths])
        dense, it_dense = engine_times(costs, lengths, prompts, starts)
        fast, it_fast = engine_times_events(costs, lengths, prompts, starts)
        np.testing.assert_allclose(fast, dense, rtol=1e-12)
        assert it_fast.tolist() == it_dense.tolist()


def test_tensor_parallel_beyond_the_nvlink_domain_pays_the_network() -> None:
    inside = _setup(tp=8, model="llama-3.1-70b").decode_costs(0.9, 0.5, 0.0, 0.8)
    across = EngineSetup(**{**_setup(tp=16, model="llama-3.1-70b").__dict__, "nvlink_reach": 8})
    outside = across.decode_costs(0.9, 0.5, 0.0, 0.8)
    assert outside.comm_s_per_seq > 5 * inside.comm_s_per_seq and outside.comm_s_fixed > inside.comm_s_fixed


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(RlsimError, match="known GPUs are a100-sxm-80gb, b200, gb200, h100-sxm, h20, h200-sxm"):
        gpu_spec("h900")
    with pytest.raises(RlsimError, match="known models are .*llama-3.1-8b.*qwen3-32b"):
        model_shape("gpt-5")
    with pytest.raises(RlsimError, match="no FP8"):
        GPUS["a100-sxm-80gb"].peak_flops("fp8")


def test_a_model_that_does_not_fit_an_engine_is_refused_with_the_arithmetic() -> None:
    with pytest.raises(RlsimError, match=r"minus weights 141\.1 GB .* raise tensor parallelism"):
        _setup(model="llama-3.1-70b").kv_capacity_tokens()


def test_every_datasheet_number_names_its_source() -> None:
    for gpu in GPUS.values():
        numbers = [k for k, v in gpu.model_dump().items() if isinstance(v, (int, float)) and v is not None]
        missing = [k for k in numbers if k not in gpu.sources and k != "nvlink_domain"]
        assert missing == [], gpu.name
    for shape in MODELS.values():
        assert shape.source.startswith("https://huggingface.co/")

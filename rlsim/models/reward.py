"""Resolve a reward-model or policy name to a local Hugging Face folder, with checks that say what is wrong."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError
from rlsim.io import read_user_text
from rlsim.models.builtin import BUILTIN_POLICIES, BUILTIN_REWARD_MODELS, materialise

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "tokenizer.model")


@dataclass(frozen=True)
class RewardModelSpec:
    """A reward model on disk: an ``AutoModelForSequenceClassification`` with one label.

    ``max_length`` is the truncation limit in tokens; ``hidden_size``/``num_heads``/``num_layers``/
    ``intermediate_size`` feed ORT's fusion optimizer and FLOP estimates.
    """

    name: str
    path: Path
    arch: str
    max_length: int
    hidden_size: int
    num_heads: int
    num_layers: int
    intermediate_size: int
    vocab_size: int

    @property
    def key(self) -> str:
        """A name safe for cache folders, unique per weights file (so an edited model re-exports)."""
        weights = next(iter(sorted(self.path.glob("*.safetensors")) + sorted(self.path.glob("*.bin"))), None)
        stamp = f"{weights.stat().st_size}-{int(weights.stat().st_mtime)}" if weights else "noweights"
        safe = self.name.replace("/", "_").strip("_")[-60:]
        return f"{safe}-{stamp}"


def resolve_reward_model(name_or_path: str | Path) -> RewardModelSpec:
    """``minilm-rm``, ``tiny-llama-rm``, or a folder holding a one-label sequence-classification model."""
    name = str(name_or_path)
    if name in BUILTIN_REWARD_MODELS:
        path = materialise(name, BUILTIN_REWARD_MODELS[name])
    else:
        path = Path(name).expanduser()
        if not path.exists():
            valid = ", ".join(sorted(BUILTIN_REWARD_MODELS))
            raise RlsimError(f"unknown reward model {name!r}: not a built-in ({valid}) and no such folder")
    config = _read_config(path, role="reward model")
    _check_reward_config(path, config)
    text = config.get("text_config", config)
    return RewardModelSpec(
        name=name,
        path=path.resolve(),
        arch=str(config.get("model_type", "unknown")),
        max_length=min(int(text.get("max_position_embeddings", 512)), 512),
        hidden_size=int(text.get("hidden_size", 0)),
        num_heads=int(text.get("num_attention_heads", 0)),
        num_layers=int(text.get("num_hidden_layers", 0)),
        intermediate_size=int(text.get("intermediate_size", 0)),
        vocab_size=int(text.get("vocab_size", 0)),
    )


def resolve_policy(name_or_path: str | Path) -> Path:
    """``tiny-llama`` or a folder holding a causal LM with its tokenizer; returns the folder."""
    name = str(name_or_path)
    if name in BUILTIN_POLICIES:
        return materialise(name, BUILTIN_POLICIES[name])
    path = Path(name).expanduser()
    if not path.exists():
        valid = ", ".join(sorted(BUILTIN_POLICIES))
        raise RlsimError(f"unknown policy {name!r}: not a built-in ({valid}) and no such folder")
    config = _read_config(path, role="policy")
    archs = config.get("architectures") or []
    if archs and not any(a.endswith("ForCausalLM") for a in archs):
        raise RlsimError(
            f"{path} holds {archs[0]}, not a causal LM; a policy folder needs a *ForCausalLM model "
            "(save one with model.save_pretrained(DIR) and tokenizer.save_pretrained(DIR))"
        )
    _check_tokenizer(path)
    _check_token_ids_fit(path, config)
    return path.resolve()


def _check_token_ids_fit(path: Path, config: dict[str, Any]) -> None:
    """A tokenizer with more tokens than the model's embedding rows makes ids the model cannot look up.

    vLLM then dies inside its engine (``index 30522 is out of bounds`` in a logits processor, the cause only in
    Ray's worker logs), so the mismatch is refused here, before anything starts.
    """
    text = config.get("text_config") or config
    vocab = text.get("vocab_size")
    if not isinstance(vocab, int) or vocab <= 0:
        return  # the config does not say; nothing to compare
    from transformers import AutoTokenizer

    try:
        tokens = len(AutoTokenizer.from_pretrained(path))
    except (OSError, ValueError) as err:
        raise RlsimError(
            f"{path}: its tokenizer does not load ({err}); re-save it with tokenizer.save_pretrained(DIR)"
        ) from None
    if tokens > vocab:
        raise RlsimError(
            f"{path}: the tokenizer has {tokens:,} tokens but the model's vocab_size is {vocab:,}, so token ids "
            f">= {vocab:,} have no embedding (vLLM's engine would die on the first one); use the tokenizer the "
            "model was built with, or resize its embeddings (model.resize_token_embeddings(len(tokenizer))) and re-save"
        )


def _read_config(path: Path, role: str) -> dict[str, Any]:
    cfg = path / "config.json"
    if not path.is_dir() or not cfg.is_file():
        raise RlsimError(
            f"{path} holds no {role}: expected a Hugging Face folder with config.json, weights and a "
            "tokenizer (save one with model.save_pretrained(DIR) and tokenizer.save_pretrained(DIR))"
        )
    try:
        return json.loads(read_user_text(cfg, "model config"))
    except json.JSONDecodeError as err:
        raise RlsimError(f"{cfg} is not valid JSON ({err}); re-save the model with save_pretrained") from None


def _check_reward_config(path: Path, config: dict[str, Any]) -> None:
    archs = config.get("architectures") or []
    labels = config.get("num_labels", len(config.get("id2label") or {}) or None)
    if not any(a.endswith("ForSequenceClassification") for a in archs) or labels not in (1, None):
        what = archs[0] if archs else "a model without 'architectures'"
        raise RlsimError(
            f"{path} holds {what} with {labels} label(s), not a reward model: rlsim needs an "
            "AutoModelForSequenceClassification with num_labels=1 (load your encoder with "
            "from_pretrained(DIR, num_labels=1) and save_pretrained it)"
        )
    if not list(path.glob("*.safetensors")) and not list(path.glob("*.bin")):
        raise RlsimError(f"{path} has a config but no weights (*.safetensors or *.bin); save the model again")
    _check_tokenizer(path)


def _check_tokenizer(path: Path) -> None:
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise RlsimError(
            f"{path} has no tokenizer files; save the tokenizer next to the model with tokenizer.save_pretrained(DIR)"
        )

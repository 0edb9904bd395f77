import json

import pytest

from rlsim.errors import RlsimError
from rlsim.models import resolve_policy, resolve_reward_model
from rlsim.models.builtin import BUILTIN_REWARD_MODELS, materialise


def test_builtin_reward_models_are_one_label_classifiers():
    for name in ("minilm-rm", "minilm-rm-random", "tiny-llama-rm"):
        spec = resolve_reward_model(name)
        cfg = json.loads((spec.path / "config.json").read_text())
        assert cfg["architectures"][0].endswith("ForSequenceClassification")
        assert spec.max_length == 512 and spec.hidden_size > 0


def test_minilm_rm_random_is_built_deterministically(tmp_path, monkeypatch):
    """Two builds from the seeded recipe give identical weights (safetensors bytes). The trained head's
    reproducibility is tested on a small training run (tests/models/test_reward_head.py): a full one takes minutes."""
    first = resolve_reward_model("minilm-rm-random").path
    monkeypatch.setenv("RLSIM_CACHE", str(tmp_path))
    second = materialise("minilm-rm-random", BUILTIN_REWARD_MODELS["minilm-rm-random"])
    assert second != first
    assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()


def test_policy_resolves_and_rejects_reward_models(tmp_path):
    assert (resolve_policy("tiny-llama") / "config.json").is_file()
    shapes = {
        name: json.loads((resolve_policy(name) / "config.json").read_text()) for name in ("tiny-llama", "small-llama")
    }
    assert shapes["small-llama"]["hidden_size"] == 2 * shapes["tiny-llama"]["hidden_size"]
    assert shapes["small-llama"]["vocab_size"] == shapes["tiny-llama"]["vocab_size"]  # one tokenizer for both
    with pytest.raises(RlsimError, match="not a causal LM"):
        resolve_policy(resolve_reward_model("tiny-llama-rm").path)
    with pytest.raises(RlsimError, match="tiny-llama"):
        resolve_policy("gpt-5")


def test_a_policy_whose_tokenizer_outgrows_its_vocabulary_is_refused_before_anything_starts(tmp_path):
    # Issue 24: a random-init Qwen2 beside a BERT tokenizer (30,523 tokens with its added ones) killed vLLM's
    # engine with `index 30522 is out of bounds`, the cause only in Ray's worker logs.
    import shutil

    from rlsim.models.builtin import minilm_source_dir

    source = minilm_source_dir()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (source / name).is_file():
            shutil.copy(source / name, tmp_path / name)
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 1000}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(RlsimError, match=r"tokenizer has 30,52\d tokens but the model.s vocab_size is 1,000"):
        resolve_policy(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(dict(config, vocab_size=32000)))
    assert resolve_policy(tmp_path) == tmp_path.resolve()

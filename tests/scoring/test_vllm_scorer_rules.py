"""The ``vllm`` runtime's rules, without an engine: which architectures it takes, the refusal naming the one it
cannot serve, and that ``all`` never starts an engine by itself (the runtime is named explicitly)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rlsim.errors import RlsimError
from rlsim.scoring import SCORERS, expand_runtimes, make_scorer, runtime_names
from rlsim.scoring.base import ScorerSettings
from rlsim.scoring.vllm_scorer import model_architecture, vllm_can_serve

SUPPORTED = {"BertForSequenceClassification", "LlamaForCausalLM", "Qwen2ForRewardModel"}


@pytest.mark.parametrize(
    ("arch", "ok"),
    [
        ("BertForSequenceClassification", True),  # vLLM's own classifier
        ("LlamaForSequenceClassification", True),  # converted from the causal LM
        ("Qwen2ForRewardModel", True),
        ("MistralForSequenceClassification", False),  # no MistralForCausalLM in this registry
        ("FooModel", False),
    ],
)
def test_vllm_serves_its_own_classifiers_and_the_causal_lms_it_converts(arch: str, ok: bool) -> None:
    assert vllm_can_serve(arch, SUPPORTED) is ok


def test_all_never_names_vllm_but_it_can_be_named() -> None:
    assert SCORERS.info("vllm").explicit and "vllm" not in runtime_names()
    assert "vllm" not in expand_runtimes("all") and expand_runtimes("eager,vllm") == ["eager", "vllm"]


def _folder_with(tmp_path: Path, config: dict | None) -> Path:
    folder = tmp_path / "rm"
    folder.mkdir()
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_model_vllm_cannot_serve_is_refused_naming_its_architecture(tmp_path: Path, tiny_llama_rm) -> None:
    pytest.importorskip("vllm")
    spec = replace(tiny_llama_rm, path=_folder_with(tmp_path, {"architectures": ["FooForSequenceClassification"]}))
    with pytest.raises(RlsimError, match="no implementation of FooForSequenceClassification.*eager, ort or native"):
        make_scorer("vllm", spec, ScorerSettings(threads=1))


@pytest.mark.parametrize(("config", "match"), [(None, "cannot be read"), ({"model_type": "x"}, "names no arch")])
def test_a_folder_without_a_readable_architecture_says_so(tmp_path: Path, tiny_llama_rm, config, match) -> None:
    spec = replace(tiny_llama_rm, path=_folder_with(tmp_path, config))
    with pytest.raises(RlsimError, match=match):
        model_architecture(spec)

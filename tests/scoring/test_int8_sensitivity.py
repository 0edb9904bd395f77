"""Per-layer int8 sensitivity (``rlsim verify --sensitivity``) on the built-in tiny Llama reward model's real export.

The deliberately broken layer: one weight of one MatMul set to 100x the tensor's largest magnitude. In fp32 the
model is still a model (both the reference and the candidates carry the outlier), but int8 with one scale per
tensor rounds every other weight of that layer to -1, 0 or 1 step, so quantizing it alone must cost the most.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rlsim.cli.main import main
from rlsim.corpus.fidelity_corpus import calibration_corpus
from rlsim.errors import RlsimError
from rlsim.models import resolve_reward_model
from rlsim.scoring.base import ScorerSettings
from rlsim.scoring.export import export_reward_model
from rlsim.scoring.int8_sensitivity import (
    MixedChoice,
    UnitHarm,
    choose_mixed,
    graph_scores,
    group_of,
    harm_order,
    quantize_nodes,
    sensitivity,
    units_of,
    weight_matmuls,
)

pytest.importorskip("onnxruntime")
SETTINGS = ScorerSettings(threads=1, max_length=128)
BROKEN = "/inner/model/layers.0/mlp/up_proj/MatMul"


@pytest.fixture(scope="module")
def spec():
    return resolve_reward_model("tiny-llama-rm")


@pytest.fixture(scope="module")
def corpus():
    return calibration_corpus(48)


@pytest.fixture(scope="module")
def broken_graph(spec, tmp_path_factory) -> Path:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(export_reward_model(spec).plain)
    node = next(n for n in model.graph.node if n.name == BROKEN)
    init = next(i for i in model.graph.initializer if i.name == node.input[1])
    w = numpy_helper.to_array(init).copy()
    w.flat[0] = 100 * np.abs(w).max()
    init.CopyFrom(numpy_helper.from_array(w, init.name))
    path = tmp_path_factory.mktemp("broken") / "model.onnx"
    onnx.save(model, str(path))
    return path


def test_node_names_fall_in_their_groups() -> None:
    bert = "/inner/bert/encoder/layer.3/"
    assert group_of(bert + "attention/self/query/MatMul") == "attention"
    assert group_of(bert + "attention/output/dense/MatMul") == "attention"
    assert group_of(bert + "intermediate/dense/MatMul") == "ffn"
    assert group_of(bert + "output/dense/MatMul") == "ffn"
    assert group_of("/inner/bert/pooler/dense/Gemm") == "pooler"
    assert group_of("/inner/classifier/Gemm") == "head"
    llama = "/inner/model/layers.1/"
    assert [group_of(llama + m) for m in ("self_attn/o_proj/MatMul", "mlp/down_proj/MatMul")] == ["attention", "ffn"]
    assert group_of("/inner/score/MatMul") == "head" and group_of("/something/MatMul") == "other"
    assert group_of("/inner/bert/embeddings/word_embeddings/Gather") == "embedding"


def test_the_weight_matmuls_of_the_export_and_their_units(spec) -> None:
    found = weight_matmuls(Path(export_reward_model(spec).plain))
    names = [m.node for m in found]
    assert BROKEN in names and not any(n.endswith("self_attn/MatMul") for n in names)  # q @ k: no weight
    groups = units_of(found, "group")
    assert set(groups) == {"embedding", "attention", "ffn", "head"} and sum(map(len, groups.values())) == len(found)
    assert groups["embedding"] == ("/inner/model/embed_tokens/Gather",)
    assert list(units_of(found, "layer")) == names


def test_harm_order_is_flips_then_spearman_then_name() -> None:
    def h(unit: str, flips: float, rho: float) -> UnitHarm:
        return UnitHarm(unit, "ffn", (unit,), flips, rho, 0.0)

    ordered = harm_order([h("a", 0.01, 0.99), h("b", 0.05, 0.99), h("c", 0.01, 0.90), h("d", 0.01, 0.90)])
    assert [x.unit for x in ordered] == ["b", "c", "d", "a"]


def test_no_node_in_int8_is_the_fp32_graph_and_every_node_is_ort_int8(spec, corpus, tmp_path) -> None:
    plain = Path(export_reward_model(spec).plain)
    fp32 = graph_scores(spec, SETTINGS, plain, corpus.texts)
    none = graph_scores(spec, SETTINGS, quantize_nodes(plain, tmp_path / "none.onnx", []), corpus.texts)
    every = graph_scores(spec, SETTINGS, quantize_nodes(plain, tmp_path / "all.onnx", None), corpus.texts)
    shipped = graph_scores(spec, SETTINGS, Path(export_reward_model(spec).int8), corpus.texts)
    np.testing.assert_array_equal(none, fp32)
    np.testing.assert_array_equal(every, shipped)
    assert not np.array_equal(every, fp32)


@pytest.fixture(scope="module")
def broken_choice(spec, corpus, broken_graph, tmp_path_factory) -> tuple[dict, MixedChoice, list[str], Path]:
    """The mixed graph chosen from scratch on the broken graph: its layer report (30 graphs quantized and scored),
    the bisection after it, every progress call, and the graph written. Made once: two tests read it."""
    seen: list[str] = []
    out = tmp_path_factory.mktemp("mixed") / "mixed-0.onnx"
    report, choice = choose_mixed(spec, SETTINGS, out, plain=broken_graph, corpus=corpus,
                                  progress=lambda w, d, t: seen.append(w))  # fmt: skip
    return report, choice, seen, out


@pytest.mark.slow
def test_the_broken_layer_is_named_first(broken_choice, corpus, broken_graph) -> None:
    report, _, seen, _ = broken_choice
    units = report["units"]
    assert units[0]["unit"] == BROKEN and units[0]["group"] == "ffn"
    assert units[0]["pair_flip_rate"] > units[1]["pair_flip_rate"] and units[0]["spearman"] < units[1]["spearman"]
    assert len(units) == len(weight_matmuls(broken_graph)) and "all int8" in seen
    assert report["corpus"] == {"split": "calibration", "texts": len(corpus.texts), "groups": corpus.group_count,
                                "digest": corpus.digest}  # fmt: skip
    assert 0 <= report["all_int8"]["pair_flip_rate"] <= 1


@pytest.mark.slow  # 5 graphs quantized and scored
def test_the_cli_ranks_groups_and_writes_json(tmp_path: Path, capsys) -> None:
    out = tmp_path / "sens.json"
    assert main(["verify", "--sensitivity", "--sensitivity-by", "group", "--model", "tiny-llama-rm",
                 "--threads", "1", "--json", str(out)]) == 0  # fmt: skip
    report = json.loads(out.read_text())
    assert report["by"] == "group" and {u["unit"] for u in report["units"]} == {"embedding", "attention", "ffn", "head"}
    flips = [(-u["pair_flip_rate"], u["spearman"]) for u in report["units"]]
    assert flips == sorted(flips)
    table = capsys.readouterr().out
    assert "all int8 (ort-int8)" in table and all(g in table for g in ("embedding", "attention", "ffn", "head"))


def test_sensitivity_takes_no_runtimes(capsys) -> None:
    assert main(["verify", "--sensitivity", "--runtimes", "ort"]) == 2
    assert "--sensitivity ranks the layers" in capsys.readouterr().err


@pytest.mark.slow  # one bisection: the report is the fixture's
def test_the_mixed_choice_keeps_the_broken_layer_in_fp32_and_is_the_same_each_time(
    spec, corpus, broken_graph, broken_choice, tmp_path
) -> None:
    # Made twice: from scratch (the fixture), and again from the report the first one made.
    report, choice, _, first = broken_choice
    _, again = choose_mixed(spec, SETTINGS, tmp_path / "mixed-1.onnx", plain=broken_graph, corpus=corpus,
                            report=report)  # fmt: skip
    assert choice == again and report["units"][0]["unit"] == BROKEN
    assert BROKEN in choice.fp32_nodes and BROKEN not in choice.int8_nodes and choice.int8_nodes
    assert choice.pair_flip_rate <= 0.02 and choice.spearman >= 0.99
    kept = set(choice.fp32_nodes)
    assert [u["unit"] for u in report["units"][: len(kept)]] == list(choice.fp32_nodes)  # the most harmful ones
    assert first.read_bytes() == (tmp_path / "mixed-1.onnx").read_bytes()


@pytest.mark.slow
def test_a_model_with_no_sensitive_layer_becomes_fully_int8(spec, corpus, tmp_path) -> None:
    # Lenient rules: no single layer (nor all of them) is sensitive by them. Half the module's corpus is enough
    # here (scoring 31 graphs is most of the time) and lets the module's corpus stand for a wrong one.
    small = calibration_corpus(24)
    report, choice = choose_mixed(spec, SETTINGS, tmp_path / "m.onnx", 0.5, 0.5, corpus=small)
    with pytest.raises(RlsimError, match="not this graph's layer report"):
        choose_mixed(spec, SETTINGS, tmp_path / "n.onnx", corpus=corpus, report=report)
    assert choice.fp32_nodes == () and len(choice.int8_nodes) == len(report["units"]) and choice.tried[-1] == 0
    mixed = graph_scores(spec, SETTINGS, tmp_path / "m.onnx", corpus.texts)
    shipped = graph_scores(spec, SETTINGS, Path(export_reward_model(spec).int8), corpus.texts)
    np.testing.assert_array_equal(mixed, shipped)


def test_a_graph_with_non_finite_rewards_is_refused_naming_it(spec, corpus, tmp_path) -> None:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(export_reward_model(spec).plain)
    init = next(i for i in model.graph.initializer if i.name == next(
        n for n in model.graph.node if n.name == BROKEN).input[1])  # fmt: skip
    w = numpy_helper.to_array(init).copy()
    w[:] = np.nan
    init.CopyFrom(numpy_helper.from_array(w, init.name))
    path = tmp_path / "nan.onnx"
    onnx.save(model, str(path))
    with pytest.raises(RlsimError, match="non-finite rewards in fp32"):
        sensitivity(spec, SETTINGS, "group", plain=path, corpus=corpus)


def test_quantizing_writes_nothing_beside_the_cached_graph(spec, tmp_path) -> None:
    # ONNX Runtime writes <name>-inferred.onnx beside its input and deletes it: on the shared cached graph two
    # processes quantizing at once deleted each other's file (seen in the suite). Quantizing works on a copy, so
    # a file of that name beside the input (here a sentinel, there another process's) is left alone.
    folder = tmp_path / "cache"
    folder.mkdir()
    plain = folder / "model.onnx"
    shutil.copyfile(export_reward_model(spec).plain, plain)
    sentinel = folder / "model-inferred.onnx"
    sentinel.write_text("another process's file")
    quantize_nodes(plain, tmp_path / "all.onnx", None)
    assert sentinel.read_text() == "another process's file"
    assert sorted(p.name for p in folder.iterdir()) == ["model-inferred.onnx", "model.onnx"]

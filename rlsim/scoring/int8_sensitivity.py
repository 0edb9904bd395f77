"""Where int8's reward flips come from: each weight MatMul (or each group of them) quantized on its own.

``rlsim verify --sensitivity`` takes the plain fp32 ONNX export of a reward model, quantizes one unit at a time
the way ``ort-int8`` quantizes all of them (ONNX Runtime's ``quantize_dynamic``: int8 weights per tensor,
activations quantized per batch; here with ``nodes_to_quantize`` set to the unit), scores the fidelity corpus's
calibration split (``calibration_corpus``: modules the corpus never uses) with each graph, and ranks the units
by the within-group pair flips and the Spearman they cost.

A unit is one node that dynamic int8 quantizes (``layer``): a MatMul/Gemm whose second input is a weight, or a
Gather from an embedding table; or every such node of one kind (``group``: embedding, attention projections,
FFN, pooler, head). The reference is the plain fp32 graph itself on the same
texts and batches: it matches fp32 eager to ~1e-6 (``rlsim verify``'s fp32 rule is 1e-4), and it makes the
report a function of the graph alone, so a graph with one layer broken on purpose can be checked. Only the
calibration split is scored: a precision choice made from this report is judged afterwards on the corpus.

``choose_mixed`` makes that choice for the ``*-int8-mixed`` runtimes (``int8_mixed_scorers``): the fewest of the most
harmful layers kept in fp32 with which the rest in int8 passes the fidelity rules on the calibration split. It is
how a runtime is built, so it lives with the runtimes and judges by ``rlsim.corpus.agreement`` alone.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from rlsim.corpus.agreement import FidelityMetrics, fidelity_metrics, score_in_length_order
from rlsim.corpus.fidelity_corpus import FidelityCorpus, calibration_corpus
from rlsim.errors import RlsimError
from rlsim.scoring.export import export_reward_model, quantizer_input
from rlsim.scoring.ort_scorer import OrtScorer

if TYPE_CHECKING:
    from rlsim.models.reward import RewardModelSpec
    from rlsim.scoring.base import ScorerSettings

Unit = Literal["layer", "group"]
GROUPS = ("embedding", "attention", "ffn", "pooler", "head", "other")
# Module names in the exported node names, per architecture family: BERT-style (query/key/value,
# attention/output/dense, intermediate/dense, output/dense) and Llama-style (q/k/v/o_proj, gate/up/down_proj).
_GROUP_PATTERNS = (
    ("embedding", re.compile(r"embed")),
    ("attention", re.compile(r"attention|self_attn|/(query|key|value)/|[qkvo]_proj")),
    ("ffn", re.compile(r"intermediate|mlp|(gate|up|down)_proj|/layer\.\d+/output/")),
    ("pooler", re.compile(r"pooler")),
    ("head", re.compile(r"classifier|score|head")),
)


@dataclass(frozen=True)
class WeightMatMul:
    """A node with a weight initializer that dynamic int8 quantizes: MatMul/Gemm (weight second), Gather (table
    first)."""

    node: str
    group: str


@dataclass(frozen=True)
class UnitHarm:
    """What quantizing ``nodes`` alone costs on the calibration split."""

    unit: str
    group: str
    nodes: tuple[str, ...]
    pair_flip_rate: float
    spearman: float
    max_abs_diff: float

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "nodes": list(self.nodes)}


def group_of(node: str) -> str:
    """The kind of layer a node name belongs to (``GROUPS``); ``other`` when no pattern matches."""
    for group, pattern in _GROUP_PATTERNS:
        if pattern.search(node):
            return group
    return "other"


# Where each op type that ``quantize_dynamic`` turns into int8 takes its weight. ONNX Runtime 1.32's
# ``onnxruntime/quantization/registry.py`` IntegerOpsRegistry quantizes MatMul (as MatMulInteger; a Gemm is first
# rewritten as a MatMul, ``onnx_model.py``) and Gather (a quantized table), and also Conv, Attention, LSTM and
# EmbedLayerNormalization, which rlsim's plain exports do not contain (a graph with them would keep them fp32 in
# every unit here). Activation x activation MatMuls (attention scores) get no weight and are no unit.
_WEIGHT_INPUT = {"MatMul": 1, "Gemm": 1, "Gather": 0}


def weight_matmuls(graph: Path) -> list[WeightMatMul]:
    """Every node of ``graph`` that dynamic int8 quantizes (``_WEIGHT_INPUT``), in graph order."""
    import onnx

    model = onnx.load(str(graph), load_external_data=False)
    weights = {init.name for init in model.graph.initializer}
    found = []
    for node in model.graph.node:
        at = _WEIGHT_INPUT.get(node.op_type)
        if at is not None and len(node.input) > at and node.input[at] in weights:
            if not node.name:
                raise RlsimError(f"{graph}: a {node.op_type} node has no name, so it cannot be quantized alone")
            found.append(WeightMatMul(node.name, group_of(node.name)))
    return found


def units_of(matmuls: Sequence[WeightMatMul], by: Unit) -> dict[str, tuple[str, ...]]:
    """``{unit name: its nodes}``: one unit per node (``layer``) or per group present (``group``)."""
    if by == "layer":
        return {m.node: (m.node,) for m in matmuls}
    out = {g: tuple(m.node for m in matmuls if m.group == g) for g in GROUPS}
    return {g: nodes for g, nodes in out.items() if nodes}


def quantize_nodes(plain: Path, out: Path, nodes: Sequence[str] | None) -> Path:
    """``plain`` with ``nodes`` in dynamic int8 (None: every weight MatMul, as ``ort-int8``; empty: none)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if nodes is not None and not nodes:
        shutil.copyfile(plain, out)
        return out
    # Dynamic quantization first rewrites each Gemm as a MatMul named "<gemm>_MatMul" (onnxruntime/quantization/
    # onnx_model.py, replace_gemm_with_matmul), so a Gemm is named both ways; a name not in the graph is ignored.
    kwargs = {} if nodes is None else {"nodes_to_quantize": [x for n in nodes for x in (n, f"{n}_MatMul")]}
    # ONNX Runtime logs "Please consider to run pre-processing before quantization" on the root logger for every
    # graph: dozens of identical lines per report, and nothing a user of rlsim can act on.
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with quantizer_input(plain) as source:
            quantize_dynamic(str(source), str(out), weight_type=QuantType.QInt8, **kwargs)
    except Exception as err:  # onnxruntime raises bare Exceptions for graphs it cannot quantize
        raise RlsimError(f"int8 quantization of {plain} failed ({err}); the fp32 runtimes still work") from err
    finally:
        logging.disable(previous)
    return out


def graph_scores(spec: RewardModelSpec, settings: ScorerSettings, graph: Path, texts: Sequence[str]) -> np.ndarray:
    """Rewards of ``texts`` from ``graph`` with the ``ort`` runtime's session, tokenizer and batches."""
    scoring = _GraphScoring(spec, settings, graph, texts)
    try:
        return scoring.reference
    finally:
        scoring.close()


class _GraphScoring:
    """One ``ort`` scorer for many graphs of one model (its tokenizer loaded once, the session swapped per graph)
    and the reference rewards of ``texts`` from the fp32 graph ``plain``."""

    def __init__(self, spec: RewardModelSpec, settings: ScorerSettings, plain: Path, texts: Sequence[str]) -> None:
        class GraphScorer(OrtScorer):
            name = "ort-graph"

            def graph_file(self, model: RewardModelSpec) -> Path:
                return plain

        self.texts = texts
        self._scorer = GraphScorer(spec, settings)
        self.reference = self.scores(plain)
        if not np.all(np.isfinite(self.reference)):
            raise RlsimError(f"{plain} gives non-finite rewards in fp32; there is no order for int8 to keep")

    def scores(self, graph: Path) -> np.ndarray:
        self._scorer.use_graph(graph)
        return score_in_length_order(self._scorer, self.texts)

    def metrics(self, graph: Path, groups: np.ndarray, what: str) -> FidelityMetrics:
        try:
            return fidelity_metrics(self.reference, self.scores(graph), groups)
        except ValueError as err:  # non-finite rewards from the int8 graph
            raise RlsimError(f"{what}: {err}; that graph cannot be judged") from err

    def close(self) -> None:
        self._scorer.close()


def harm_order(harms: Sequence[UnitHarm]) -> list[UnitHarm]:
    """Most harmful first: more pair flips, then lower Spearman, then larger |diff|; ties by name."""
    return sorted(harms, key=lambda h: (-h.pair_flip_rate, h.spearman, -h.max_abs_diff, h.unit))


def sensitivity(
    spec: RewardModelSpec,
    settings: ScorerSettings,
    by: Unit = "layer",
    plain: Path | None = None,
    corpus: FidelityCorpus | None = None,
    progress: Callable[[str, int, int], None] = lambda what, done, total: None,
) -> dict[str, Any]:
    """The report: every unit's harm (most harmful first), the all-int8 graph's, and what was scored.

    ``plain``: the fp32 graph (default: the model's cached plain export); ``corpus``: default the calibration
    split. ``progress(what, done, total)`` is called before each unit."""
    plain = plain or Path(export_reward_model(spec).plain)
    corpus = corpus or calibration_corpus()
    units = _units(plain, by)
    scoring = _GraphScoring(spec, settings, plain, corpus.texts)
    try:
        return _report(spec, scoring, plain, corpus, units, by, progress)
    finally:
        scoring.close()


def _units(plain: Path, by: Unit) -> dict[str, tuple[str, ...]]:
    units = units_of(weight_matmuls(plain), by)
    if not units:
        raise RlsimError(f"{plain} has no MatMul, Gemm or Gather with a weight: nothing int8 would quantize")
    return units


def _report(
    spec: RewardModelSpec,
    scoring: _GraphScoring,
    plain: Path,
    corpus: FidelityCorpus,
    units: dict[str, tuple[str, ...]],
    by: Unit,
    progress: Callable[[str, int, int], None],
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rlsim-sensitivity-") as tmp:

        def harm(name: str, nodes: tuple[str, ...] | None, done: int) -> UnitHarm:
            progress(name, done, len(units) + 1)
            graph = quantize_nodes(plain, Path(tmp) / f"unit-{done}.onnx", nodes)
            m = scoring.metrics(graph, corpus.groups, f"{name} in int8")
            group = group_of(nodes[0]) if nodes and by == "layer" else name
            return UnitHarm(name, group, nodes or (), m.pair_flip_rate, m.spearman, m.max_abs_diff)

        harms = harm_order([harm(name, nodes, k) for k, (name, nodes) in enumerate(units.items())])
        everything = harm("all int8", None, len(units))
    return {
        "model": spec.name,
        "by": by,
        "graph": str(plain),
        "quantization": "dynamic int8 weights per tensor, activations per batch (ONNX Runtime quantize_dynamic)",
        "reference": "the fp32 graph on the same texts and batches",
        "corpus": {
            "split": "calibration",
            "texts": len(corpus.texts),
            "groups": corpus.group_count,
            "digest": corpus.digest,
        },  # fmt: skip
        "units": [h.as_dict() for h in harms],
        "all_int8": {k: v for k, v in everything.as_dict().items() if k not in ("unit", "group", "nodes")},
    }


@dataclass(frozen=True)
class MixedChoice:
    """Which weight MatMuls stay fp32 so that the rest in int8 keeps the reward order on the calibration split."""

    fp32_nodes: tuple[str, ...]
    int8_nodes: tuple[str, ...]
    pair_flip_rate: float
    spearman: float
    tried: tuple[int, ...]  # how many of the most harmful were kept in fp32 at each graph scored

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def choose_mixed(
    spec: RewardModelSpec,
    settings: ScorerSettings,
    out: Path,
    max_pair_flip_rate: float = 0.02,
    min_spearman: float = 0.99,
    plain: Path | None = None,
    corpus: FidelityCorpus | None = None,
    progress: Callable[[str, int, int], None] = lambda what, done, total: None,
    report: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], MixedChoice]:
    """Keep the ``k`` most harmful layers of the sensitivity report in fp32, the fewest that pass the rules with
    every other layer in int8, and write that graph to ``out``; returns the report and the choice.

    ``k`` is found by bisection over 0..n (n: every layer fp32, which is the fp32 graph and always passes), so a
    model with no sensitive layer gets k = 0, the whole ``ort-int8`` graph. Everything is scored on the
    calibration split only; the same graph, split and settings give the same choice. ``report``: this graph's
    layer report on this split, if one was made already (it is not made again)."""
    plain = plain or Path(export_reward_model(spec).plain)
    corpus = corpus or calibration_corpus()
    if report is not None and (
        report["by"] != "layer" or report["corpus"]["digest"] != corpus.digest or report["graph"] != str(plain)
    ):
        raise RlsimError("choose_mixed: the report given is not this graph's layer report on this corpus")
    scoring = _GraphScoring(spec, settings, plain, corpus.texts)
    try:
        report = report or _report(spec, scoring, plain, corpus, _units(plain, "layer"), "layer", progress)
        return report, _bisect(scoring, plain, out, corpus, [u["unit"] for u in report["units"]],
                               max_pair_flip_rate, min_spearman, progress)  # fmt: skip
    finally:
        scoring.close()


def _bisect(
    scoring: _GraphScoring,
    plain: Path,
    out: Path,
    corpus: FidelityCorpus,
    order: list[str],
    max_pair_flip_rate: float,
    min_spearman: float,
    progress: Callable[[str, int, int], None],
) -> MixedChoice:
    """The smallest k for which ``order[k:]`` in int8 passes; ``out`` is left holding that graph."""
    scored: dict[int, tuple[float, float]] = {}

    def passes(k: int) -> bool:
        progress(f"mixed graph: {k} of {len(order)} layers in fp32", len(scored), len(scored) + 1)
        quantize_nodes(plain, out, order[k:])
        m = scoring.metrics(out, corpus.groups, f"the graph with {k} layers in fp32")
        scored[k] = (m.pair_flip_rate, m.spearman)
        return m.pair_flip_rate <= max_pair_flip_rate and m.spearman >= min_spearman

    low, high = 0, len(order)  # passes(high) holds: no layer in int8
    while low < high:
        mid = (low + high) // 2
        if passes(mid):
            high = mid
        else:
            low = mid + 1
    if list(scored)[-1:] != [low]:  # ``out`` holds the last graph scored: write (and score) the chosen one
        passes(low)
    flips, rho = scored[low]
    return MixedChoice(tuple(order[:low]), tuple(order[low:]), flips, rho, tuple(scored))

"""Export the reference policy's forward to ONNX, returning log-probs of given tokens, not logits.

Inputs: ``input_ids`` and ``attention_mask`` int64 ``(batch, seq)``; ``positions`` int64
``(batch, resp)``: the index in ``input_ids`` of each response token (>= 1; padded rows may repeat
any valid index and are ignored). Output ``logprobs`` float32 ``(batch, resp)``: ``log p(ids[t] |
ids[:t])`` for each ``t`` in ``positions``. The hidden states at ``t - 1`` are gathered *inside* the
graph before the vocabulary projection, so only ``resp`` rows of the 30k-wide projection run and no
full logits ever leave the graph (they would be ``batch x seq x vocab`` floats).

Cached under ``cache_dir()/onnx/reference-<policy>-<weights stamp>-v1/`` and reused; a lock makes
concurrent exports (several Ray actors) safe, as in ``rlsim.scoring.export``.

The native engine is not offered here: it accepts only ``input_ids``/``attention_mask``/
``token_type_ids`` and one float32 output per row (native_engine/src/engine.h), so it cannot
return per-token log-probs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rlsim.errors import RlsimError
from rlsim.models.builtin import _locked
from rlsim.paths import cache_dir
from rlsim.scoring.export import quiet_torchscript_export

EXPORT_VERSION = "v1"
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "positions")
OUTPUT = "logprobs"


def reference_key(policy_dir: Path) -> str:
    """A cache folder name unique per weights file, so a changed policy is exported again."""
    weights = next(iter(sorted(policy_dir.glob("*.safetensors")) + sorted(policy_dir.glob("*.bin"))), None)
    stamp = f"{weights.stat().st_size}-{int(weights.stat().st_mtime)}" if weights else "noweights"
    return f"reference-{policy_dir.name[-60:]}-{stamp}-{EXPORT_VERSION}"


def export_reference(policy_dir: Path, out_dir: Path | None = None) -> Path:
    """The ONNX graph for ``policy_dir`` (exported once, then cached); returns the ``.onnx`` path."""
    out = out_dir or cache_dir() / "onnx" / reference_key(policy_dir)
    graph = out / "model.onnx"
    if (out / "export.json").is_file():
        return graph
    out.parent.mkdir(parents=True, exist_ok=True)
    with _locked(out.parent / f".{out.name}.lock"):
        if (out / "export.json").is_file():
            return graph
        if out.exists():
            raise RlsimError(f"{out} exists and is not an rlsim reference export; remove it and run again")
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            t0 = time.perf_counter()
            _export(policy_dir, tmp / "model.onnx")
            info = {"policy": str(policy_dir), "export_s": time.perf_counter() - t0, "opset": OPSET}
            (tmp / "export.json").write_text(json.dumps(info, indent=2))
            tmp.rename(out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return graph


def _export(policy_dir: Path, path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(str(policy_dir), attn_implementation="eager").eval()
        module = _GatheredLogprobs(model)
        # A padded dummy batch, so tracing keeps the general (masked) attention path.
        ids = torch.full((2, 12), 5, dtype=torch.int64)
        mask = torch.ones((2, 12), dtype=torch.int64)
        mask[1, 8:] = 0
        positions = torch.tensor([[6, 7, 8, 9], [5, 6, 7, 7]], dtype=torch.int64)
        dynamic = {
            "input_ids": {0: "batch", 1: "seq"},
            "attention_mask": {0: "batch", 1: "seq"},
            "positions": {0: "batch", 1: "resp"},
            OUTPUT: {0: "batch", 1: "resp"},
        }
        with torch.inference_mode(), quiet_torchscript_export():
            torch.onnx.export(
                module,
                (ids, mask, positions),
                str(path),
                input_names=list(INPUTS),
                output_names=[OUTPUT],
                dynamic_axes=dynamic,
                opset_version=OPSET,
                dynamo=False,
            )
    except RlsimError:
        raise
    except Exception as err:  # any model ONNX tracing cannot handle: name it and the way out
        raise RlsimError(
            f"the reference model {policy_dir} could not be exported to ONNX ({type(err).__name__}: "
            f"{err}); use reference.runtime: eager for this model"
        ) from err


def _GatheredLogprobs(model):  # noqa: N802 - builds an nn.Module; torch is imported lazily
    import torch

    class GatheredLogprobs(torch.nn.Module):
        def __init__(self, lm: Any) -> None:  # a transformers causal LM: base_model, get_output_embeddings
            super().__init__()
            self.backbone = lm.base_model
            self.head = lm.get_output_embeddings()

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor):
            out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            hidden = out.last_hidden_state
            # Position t - 1 predicts the token at t.
            index = (positions - 1).clamp(min=0).unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
            logits = self.head(torch.gather(hidden, 1, index)).float()
            targets = torch.gather(input_ids, 1, positions).unsqueeze(-1)
            return torch.log_softmax(logits, dim=-1).gather(-1, targets).squeeze(-1)

    return GatheredLogprobs(model)


def check_reference_graph(path: Path) -> None:
    """Raise a clear error when ``path`` is not a reference graph of this shape."""
    import onnx

    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception as err:
        raise RlsimError(f"{path} is not a readable ONNX model ({err}); delete it to export again") from None
    inputs = [i.name for i in graph.input]
    outputs = [o.name for o in graph.output]
    if sorted(inputs) != sorted(INPUTS) or outputs != [OUTPUT]:
        raise RlsimError(
            f"{path} takes {inputs} and gives {outputs}, not a reference graph (inputs {list(INPUTS)}, "
            f"output {OUTPUT}); delete it to export again"
        )

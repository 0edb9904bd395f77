"""Fixtures for the native engine tests: the compiled module, the ONNX Runtime library, small graphs
(built by native_graphs.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.native_graphs import export_tiny_bert, reward_graph


@pytest.fixture(scope="session")
def native() -> Any:
    try:
        from rlsim import _native
    except ImportError as err:
        # `make test` sets RLSIM_REQUIRE_NATIVE=1: there a broken build must fail, not skip quietly.
        if os.environ.get("RLSIM_REQUIRE_NATIVE") == "1":
            pytest.fail(f"rlsim._native is not importable ({err}); `make native` should have built it")
        pytest.skip(f"rlsim._native is not built ({err}); run `make native`")
    return _native


@pytest.fixture(scope="session")
def ort_library() -> Path:
    from rlsim.scoring.ort_library import find_ort_library

    return find_ort_library()


@pytest.fixture(scope="session")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder to build graphs in, shared by the session."""
    return tmp_path_factory.mktemp("graphs")


@pytest.fixture(scope="session")
def sum_graph(graphs: Path) -> Path:
    return reward_graph(graphs / "sum.onnx")


@pytest.fixture(scope="session")
def tiny_bert(graphs: Path) -> Path:
    """A seeded 2-layer BERT reward model (hidden 32, vocab 120) taking input_ids and attention_mask."""
    return export_tiny_bert(graphs / "tiny_bert.onnx", token_type_ids=False)


@pytest.fixture(scope="session")
def tiny_bert_token_types(graphs: Path) -> Path:
    """The same model exported with a third input, token_type_ids, which the engine feeds as zeros."""
    return export_tiny_bert(graphs / "tiny_bert_tt.onnx", token_type_ids=True)


@pytest.fixture(scope="session")
def tiny_bert_engine(native: Any, tiny_bert: Path, ort_library: Path) -> Any:
    return native.Engine(tiny_bert, ort_library, intra_op_threads=1)

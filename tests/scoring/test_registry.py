"""The runtime and batcher registries carry their metadata, and every list of names comes from them."""

from __future__ import annotations

import dataclasses

import pytest

from rlsim.batching import BATCHERS, batcher_names
from rlsim.errors import RlsimError
from rlsim.scoring import SCORERS, RuntimeInfo, expand_runtimes, make_scorer, runtime_names, unavailable_reason


def test_all_is_every_builtin_runtime_in_registration_order() -> None:
    assert runtime_names() == ["eager", "compile", "ort", "ort-int8", "native", "native-int8", "http"]
    assert expand_runtimes("all") == runtime_names()


def test_variants_are_named_apart_from_all_and_expand_once() -> None:
    variants = ["eager-bf16", "eager-fp16", "compile-bf16", "ort-int8-static", "native-int8-static",
                "ort-int8-mixed", "native-int8-mixed"]  # fmt: skip
    assert runtime_names(variants=True) == variants
    assert expand_runtimes("all,variants,ort") == runtime_names() + variants
    # fp16 is CUDA only, so it is never among the variants a CPU can run.
    assert "eager-fp16" not in expand_runtimes("variants", device="cpu")
    assert "eager-fp16" in expand_runtimes("variants", device="cuda")


def test_reduced_precision_comes_from_the_registry() -> None:
    reduced = [n for n in runtime_names() + runtime_names(variants=True) if SCORERS.info(n).reduced_precision]
    assert reduced == ["ort-int8", "native-int8", "eager-bf16", "eager-fp16", "compile-bf16", "ort-int8-static",
                       "native-int8-static", "ort-int8-mixed", "native-int8-mixed"]  # fmt: skip
    assert [n for n in reduced if SCORERS.info(n).calibrated] == ["ort-int8-static", "native-int8-static"]
    assert not SCORERS.info("http").reduced_precision  # that of the runtime it wraps, judged there


def test_bf16_is_refused_on_a_cpu_without_bf16_instructions_naming_the_flag() -> None:
    info = SCORERS.info("eager-bf16")
    reason = info.hardware_reason("eager-bf16", "cpu", flags=frozenset({"avx2", "fma"}))
    assert reason is not None and "avx512_bf16 or amx_bf16" in reason and "lacks" in reason
    assert info.hardware_reason("eager-bf16", "cpu", flags=frozenset({"avx2", "amx_bf16"})) is None
    assert info.hardware_reason("eager-bf16", "cuda", flags=frozenset()) is None
    assert "cuda only" in SCORERS.info("eager-fp16").hardware_reason("eager-fp16", "cpu")


def test_vllm_bf16_is_the_vllm_engine_in_bf16_named_only_explicitly() -> None:
    info, cls = SCORERS.info("vllm-bf16"), SCORERS.get("vllm-bf16")
    assert (info.precision, info.pads, info.explicit, info.variant) == ("bf16", False, True, True)
    assert info.reduced_precision and info.needs == SCORERS.info("vllm").needs
    assert issubclass(cls, SCORERS.get("vllm")) and (cls.dtype, SCORERS.get("vllm").dtype) == ("bfloat16", "float32")
    assert "vllm-bf16" not in expand_runtimes("all,variants")  # an engine start: named only explicitly, like vllm
    assert expand_runtimes("eager,vllm-bf16") == ["eager", "vllm-bf16"]


def test_vllm_bf16_is_refused_before_an_engine_on_a_cpu_without_bf16(monkeypatch) -> None:
    from rlsim.scoring import base
    from rlsim.scoring.base import UnsupportedRuntime

    monkeypatch.setattr(base, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "avx512_vnni", "fma"}))
    with pytest.raises(UnsupportedRuntime, match=r"'vllm-bf16' needs a CPU with bf16 .*avx512_bf16 or amx_bf16"):
        make_scorer("vllm-bf16", None)  # type: ignore[arg-type]  (refused before the model is touched)
    info = SCORERS.info("vllm-bf16")
    assert info.hardware_reason("vllm-bf16", "cpu", flags=frozenset({"avx2", "amx_bf16"})) is None
    assert info.hardware_reason("vllm-bf16", "cuda", flags=frozenset()) is None  # a GPU has bf16
    assert SCORERS.info("vllm").hardware_reason("vllm", "cpu", flags=frozenset({"avx2"})) is None  # fp32 runs anywhere


def test_make_scorer_refuses_what_the_hardware_lacks_before_loading(monkeypatch) -> None:
    from rlsim.scoring.base import UnsupportedRuntime

    with pytest.raises(UnsupportedRuntime, match="runs on cuda only"):
        make_scorer("eager-fp16", None)  # type: ignore[arg-type]  (refused before the model is touched)


def test_metadata_says_precision_quantization_and_server() -> None:
    quantized = [n for n in runtime_names() if SCORERS.info(n).quantized]
    assert quantized == ["ort-int8", "native-int8"]
    assert {SCORERS.info(n).precision for n in quantized} == {"int8"}
    assert [n for n in runtime_names() if SCORERS.info(n).server] == ["http"]
    assert SCORERS.info("http").precision is None  # that of the runtime its server wraps
    assert "rlsim._native" in [m for m, _ in SCORERS.info("native").needs]


def test_batchers_say_how_they_are_sized() -> None:
    assert batcher_names() == ["fixed", "sorted", "token-budget"]
    assert batcher_names("size") == ["fixed", "sorted"] and batcher_names("budget") == ["token-budget"]
    assert BATCHERS.info("token-budget").sizing == "budget"


def test_a_runtime_with_a_missing_package_is_listed_but_refused_naming_the_package(monkeypatch) -> None:
    entry = SCORERS.entry("eager")
    needs = (("no_such_module_for_rlsim_tests", "pip install no-such-package"),)
    monkeypatch.setitem(SCORERS._items, "eager", dataclasses.replace(entry, info=RuntimeInfo(needs=needs)))
    assert "eager" in runtime_names()  # still listed ...
    reason = unavailable_reason("eager")
    assert reason is not None and "no_such_module_for_rlsim_tests" in reason and "pip install no-such-package" in reason
    with pytest.raises(RlsimError, match="needs no_such_module_for_rlsim_tests.*pip install no-such-package"):
        make_scorer("eager", None)  # type: ignore[arg-type]  (refused before the model is touched)


def test_everything_installed_here_is_available() -> None:
    assert {n: unavailable_reason(n) for n in runtime_names()} == {n: None for n in runtime_names()}
    assert unavailable_reason("eager-fp16") is not None  # no GPU: a hardware reason, not a package


def test_registration_is_idempotent_but_a_name_cannot_change_hands() -> None:
    cls = SCORERS.get("ort")
    SCORERS.register("ort", SCORERS.info("ort"))(cls)  # a Ray worker re-importing the module
    assert SCORERS.get("ort") is cls
    with pytest.raises(ValueError, match="already registered"):
        SCORERS.register("ort")(type("Other", (), {}))


def test_a_missing_rlsim_module_raises_instead_of_being_skipped(monkeypatch) -> None:
    """The subcommand registry imports every module it lists; one that is gone is a broken install."""
    from rlsim.cli import main

    monkeypatch.setattr(main, "SUBCOMMANDS", {**main.SUBCOMMANDS, "no_such_subcommand": "a module that is gone"})
    with pytest.raises(ModuleNotFoundError, match="rlsim.cli.no_such_subcommand_cmd"):
        main.build_parser()

"""Where the experiment's fidelity comes from: a `rlsim verify --fidelity --json` file (checked before anything
starts, re-judged with the experiment's rules) or a measurement; `http` is judged by the runtime its server wraps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsim.errors import ConfigError
from rlsim.experiment.config import ContentionConfig, ContentionSettings, contention_problems, load_contention_config
from rlsim.experiment.fidelity_source import FidelitySettings, experiment_fidelity
from tests.helpers.fidelity_doubles import METRICS


def verify_json(tmp_path: Path, runtimes: dict[str, dict | None], model: str = "minilm-rm", rules: bool = True) -> str:
    """A file shaped like `rlsim verify --fidelity --json` writes (only the keys the experiment reads)."""
    data = {
        "model": model,
        "fidelity_rules": {"max_pair_flip_rate": 0.02, "min_spearman": 0.99} if rules else None,
        "fidelity_corpus": {"texts": 328, "groups": 44, "digest": "8cfc4f62f32d"},
        "runtimes": {
            name: {"fidelity": f, "error": None if f else "needs avx512_bf16"} for name, f in runtimes.items()
        },
    }
    path = tmp_path / "verify.json"
    path.write_text(json.dumps(data))
    return str(path)


def config(runtimes: list[str], file: str | None = None, **fidelity: float) -> ContentionConfig:
    settings = ContentionSettings(runtimes=runtimes, fidelity=FidelitySettings(file=file, **fidelity))
    return ContentionConfig(contention=settings)


def test_file_metrics_are_rejudged_with_the_experiments_rules(tmp_path: Path) -> None:
    exact = {**METRICS, "max_abs_diff": 0.0, "spearman": 1.0, "pair_flip_rate": 0.0}
    path = verify_json(tmp_path, {"eager": {**exact, "ok": True}, "ort-int8": {**METRICS, "ok": True}})
    block = experiment_fidelity(config(["eager", "ort-int8"], path))
    assert block["source"] == "file" and block["corpus"]["digest"] == "8cfc4f62f32d"
    assert block["runtimes"]["ort-int8"]["ok"] is True  # 1.5% flips, Spearman 0.995: within 2% / 0.99
    stricter = experiment_fidelity(config(["eager", "ort-int8"], path, max_pair_flip_rate=0.01))
    assert stricter["runtimes"]["ort-int8"]["ok"] is False  # the file said ok; these rules say no
    assert stricter["runtimes"]["ort-int8"]["failures"] == ["pair flips 1.5% > 1.0%"]
    # An fp32 runtime is judged by its max |diff|, not by rank: 0.05 is far outside 1e-4.
    fp32 = experiment_fidelity(config(["eager", "ort"], verify_json(tmp_path, {"eager": exact, "ort": METRICS})))
    assert fp32["runtimes"]["ort"]["ok"] is False and fp32["runtimes"]["ort"]["failures"][0].startswith("max |diff|")


def test_http_is_judged_by_its_server_runtime_and_a_skipped_one_is_unknown(tmp_path: Path) -> None:
    path = verify_json(tmp_path, {"eager": METRICS, "ort": METRICS, "eager-bf16": None})
    cfg = config(["eager", "http", "eager-bf16"], path)
    block = experiment_fidelity(cfg)
    assert block["runtimes"]["http"]["judged_by"] == "ort"
    assert block["runtimes"]["eager-bf16"]["ok"] is None
    assert "needs avx512_bf16" in block["runtimes"]["eager-bf16"]["unknown_reason"]
    external = cfg.model_copy(deep=True)
    external.loop.reward.url = "http://127.0.0.1:9"
    assert experiment_fidelity(external)["runtimes"]["http"]["unknown_reason"].startswith("an external reward server")


def test_bad_fidelity_files_are_config_errors_listed_together(tmp_path: Path) -> None:
    wrong = verify_json(tmp_path, {"eager": METRICS}, model="tiny-llama-rm")
    problems = contention_problems(config(["eager", "ort-int8"], wrong))
    assert any("measured model 'tiny-llama-rm', but loop.reward.model is 'minilm-rm'" in p for p in problems)
    assert any("has no result for ort-int8" in p and "--runtimes eager,ort-int8" in p for p in problems)
    plain = verify_json(tmp_path, {"eager": METRICS}, rules=False)
    problems = contention_problems(config(["eager"], plain))
    assert any("not the output of `rlsim verify --fidelity --json`" in p for p in problems)
    missing = contention_problems(config(["eager"], str(tmp_path / "nope.json")))
    assert len(missing) == 1 and "nope.json" in missing[0]
    (tmp_path / "bad.json").write_text("{not json")
    assert "not JSON" in contention_problems(config(["eager"], str(tmp_path / "bad.json")))[0]


def test_the_cli_flag_reaches_the_config_and_is_checked_before_anything_starts(tmp_path: Path) -> None:
    yaml = tmp_path / "c.yaml"
    yaml.write_text("contention: {runtimes: [eager, ort], baseline: eager, repeats: 2}\n")
    good = verify_json(tmp_path, {"eager": METRICS, "ort": METRICS})
    assert load_contention_config(yaml, fidelity_file=good).contention.fidelity.file == good
    with pytest.raises(ConfigError, match="has no result for ort"):
        load_contention_config(yaml, fidelity_file=verify_json(tmp_path, {"eager": METRICS}))


def test_measuring_asks_for_each_judged_runtime_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import rlsim.experiment.fidelity_source as source

    asked: list[list[str]] = []

    def fake(spec, runtimes, settings, rules, corpus, use_cache=True):
        asked.append(list(runtimes))
        return {rt: {**METRICS, "ok": True, "source": "cache"} for rt in runtimes}

    monkeypatch.setattr(source, "cached_runtime_fidelity", fake)  # patched where it is called
    monkeypatch.setattr(source, "resolve_reward_model", lambda name: name)
    block = experiment_fidelity(config(["eager", "ort", "http"]))
    assert asked == [["eager", "ort"]]  # http's rewards are ort's: not scored twice
    assert block["source"] == "measured" and block["corpus"]["texts"] >= 256
    assert block["runtimes"]["http"]["judged_by"] == "ort" and block["runtimes"]["http"]["source"] == "cache"


def test_not_checking_is_said() -> None:
    cfg = ContentionConfig(contention=ContentionSettings(runtimes=["eager"], fidelity=FidelitySettings(check=False)))
    assert experiment_fidelity(cfg) == {"checked": False, "words": "not checked (contention.fidelity.check: false)"}


def test_cli_refuses_a_bad_fidelity_file_with_one_line_naming_it(tmp_path: Path, capsys) -> None:
    from rlsim.cli.main import main

    yaml = tmp_path / "c.yaml"
    yaml.write_text("contention: {runtimes: [eager, ort-int8], baseline: eager, repeats: 2}\n")
    only_eager = verify_json(tmp_path, {"eager": METRICS})
    rc = main(["experiment", "contention", str(yaml), "--fidelity", only_eager, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert only_eager in err[0] and "has no result for ort-int8" in err[0]
    assert not (tmp_path / "out").exists()  # nothing started, nothing written


def test_rewards_that_are_no_model_are_not_judged_and_a_variant_is_judged_by_its_runtime(tmp_path: Path) -> None:
    path = verify_json(tmp_path, {"eager": METRICS, "ort-int8": METRICS})
    variants = {"int8-big-batches": {"runtime": "ort-int8", "batch_size": 64}, "judge": {"runtime": "genrm"}}
    settings = ContentionSettings(
        runtimes=["eager", "int8-big-batches", "judge", "sandbox"],
        fidelity=FidelitySettings(file=path),
        variants=variants,
    )
    block = experiment_fidelity(ContentionConfig(contention=settings))
    assert block["runtimes"]["int8-big-batches"]["judged_by"] == "ort-int8"
    for name, kind in (("judge", "judge"), ("sandbox", "sandbox")):
        entry = block["runtimes"][name]
        assert entry["ok"] is None and f"no model (kind {kind})" in entry["unknown_reason"]


def test_nothing_is_scored_when_no_compared_reward_is_a_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import rlsim.experiment.fidelity_source as source

    monkeypatch.setattr(source, "build_corpus", lambda: pytest.fail("the corpus was built for no runtime"))
    said: list[str] = []
    settings = ContentionSettings(runtimes=["sandbox", "function"], baseline="sandbox")
    block = experiment_fidelity(ContentionConfig(contention=settings), said.append)
    assert said == [] and all(entry["ok"] is None for entry in block["runtimes"].values())

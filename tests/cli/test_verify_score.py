"""The user-facing commands end to end, in-process through rlsim.cli.main.main."""

import json

import pytest

from rlsim.cli.main import main


def test_verify_writes_json_and_passes(tmp_path):
    out = tmp_path / "verify.json"
    # Texts cut to 128 tokens: the report and its verdict are the subject (tests/scoring compares at full length).
    argv = ["verify", "--model", "minilm-rm", "--runtimes", "ort,ort-int8", "--max-length", "128", "--json", str(out)]
    rc = main(argv)
    report = json.loads(out.read_text())
    assert rc == 0 and report["ok"] is True
    assert report["reference"] == "eager"
    assert report["runtimes"]["ort"]["max_abs_diff"] <= 1e-4
    assert report["runtimes"]["ort-int8"]["int8"] is True
    assert report["runtimes"]["ort-int8"]["spearman"] is not None


def test_verify_unknown_runtime_exits_2(capsys):
    assert main(["verify", "--runtimes", "nope"]) == 2
    assert "valid names" in capsys.readouterr().err


def test_score_keeps_input_order(tmp_path):
    src = tmp_path / "in.jsonl"
    texts = ["a long answer " * 30, "short", "", "middle sized answer here", "ünïcödé ✓"]
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "out.jsonl"
    assert main(["score", "--runtime", "ort", "--input", str(src), "--output", str(out), "--batch-size", "2"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["text"] for r in rows] == texts
    # Each reward equals the text scored alone, so no reward went to the wrong row.
    alone = tmp_path / "alone.txt"
    alone.write_text(texts[1] + "\n")
    main(["score", "--runtime", "ort", "--input", str(alone), "--output", str(tmp_path / "a.jsonl")])
    single = json.loads((tmp_path / "a.jsonl").read_text())
    assert abs(single["reward"] - rows[1]["reward"]) < 1e-5


def test_score_rejects_bad_jsonl(tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"txt": "typo"}\n')
    assert main(["score", "--input", str(src), "--output", str(tmp_path / "o.jsonl")]) == 2
    assert '"text" field' in capsys.readouterr().err


@pytest.mark.slow  # scores the whole fidelity corpus (328 texts) with three runtimes and the eager reference
def test_verify_fidelity_reports_rlhf_metrics_and_skips_what_the_hardware_lacks(tmp_path):
    out = tmp_path / "verify.json"
    # fp16 runs on CUDA only: on this CPU it is reported as skipped (with the reason), not failed. Texts cut to
    # 64 tokens: the report's fields are the subject, and three runtimes score the whole corpus (most of the time).
    rc = main(["verify", "--fidelity", "--runtimes", "ort,ort-int8,eager-fp16", "--max-pair-flip-rate", "1",
               "--min-spearman", "-1", "--max-length", "64", "--json", str(out)])  # fmt: skip
    report = json.loads(out.read_text())
    assert report["fidelity_corpus"]["texts"] >= 256 and report["fidelity_rules"]["max_pair_flip_rate"] == 1
    assert report["reward_head"]["heldout_accuracy"] >= 0.95
    keys = {"spearman", "kendall_tau", "pair_flip_rate", "advantage_sign_flip_rate", "advantage_mae",
            "reward_mae_over_std", "ok"}  # fmt: skip
    ort, int8 = report["runtimes"]["ort"]["fidelity"], report["runtimes"]["ort-int8"]["fidelity"]
    assert keys <= ort.keys() and keys <= int8.keys()
    assert ort["pair_flip_rate"] == 0.0 and ort["spearman"] == pytest.approx(1.0) and ort["ok"] is True
    assert ort["max_abs_diff"] <= 1e-4
    assert int8["ok"] is True  # the rules were relaxed to accept anything; int8 still deviates
    assert int8["reward_mae_over_std"] > 0
    fp16 = report["runtimes"]["eager-fp16"]
    assert fp16["skipped"] is True and "cuda" in fp16["error"]
    assert rc == 0 and report["ok"] is True


def test_verify_fidelity_rules_are_checked_before_scoring(capsys):
    assert main(["verify", "--fidelity", "--max-pair-flip-rate", "2", "--runtimes", "ort"]) == 2
    err = capsys.readouterr().err
    assert "--max-pair-flip-rate: 2 is out of range; give a number from 0 to 1" in err

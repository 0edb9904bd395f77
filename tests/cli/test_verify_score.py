"""The user-facing commands end to end, in-process through rlsim.cli.main.main."""

import json

from rlsim.cli.main import main


def test_verify_writes_json_and_passes(tmp_path):
    out = tmp_path / "verify.json"
    rc = main(["verify", "--model", "minilm-rm", "--runtimes", "ort,ort-int8", "--json", str(out)])
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

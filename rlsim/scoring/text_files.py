"""Read texts to score from a file: ``.txt`` (one text a line) or ``.jsonl`` (a ``text`` field a line)."""

from __future__ import annotations

import json
from pathlib import Path

from rlsim.errors import RlsimError


def read_texts(path: str | Path) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise RlsimError(f"input file {p} does not exist")
    if p.suffix == ".jsonl":
        return _read_jsonl(p)
    return p.read_text(encoding="utf-8").splitlines()


def _read_jsonl(p: Path) -> list[str]:
    texts: list[str] = []
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise RlsimError(f"{p}:{lineno} is not valid JSON ({err.msg}); each line must be one object") from None
            if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                raise RlsimError(f'{p}:{lineno} has no string "text" field; each line must look like {{"text": "..."}}')
            texts.append(row["text"])
    return texts

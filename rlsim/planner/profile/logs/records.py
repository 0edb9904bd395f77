"""The records of a training log as users have it: one ``(line, {key: value})`` per logged step.

The containers, each spelled as the framework's own code writes it:

- ``jsonl``: verl's ``file`` logger (``verl/utils/tracking.py``, ``FileLogger.log`` writes
  ``{"step": N, "data": {...}}`` per line with orjson), flat JSON objects (W&B's ``wandb-history.jsonl``,
  hand conversions). Python's JSON reader accepts ``NaN`` and ``Infinity``; they are kept here and
  refused with the key's name by the step checks.
- ``verl-console``: verl's ``console`` logger (``verl/utils/logger/aggregate_logger.py``,
  ``concat_dict_to_str``): ``step:N - key:value - ...`` with ``f"{v:.3f}"`` up to 0.4 and
  ``pprint.pformat(v)`` from 0.5 (numpy scalars then print as ``np.float64(1.5)``). As captured from
  a Ray job it carries ANSI colours, Ray's ``(TaskRunner pid=123)`` prefix and ``[repeated 2x across
  cluster]`` suffix, lines printed twice, and in some captures one ``key:value`` per line after the
  ``step:N`` line; all of these are read.
- ``openrlhf-console``: OpenRLHF's ``openrlhf/trainer/ppo_trainer.py`` (``logger.info(f"✨ Global step
  {global_step}: {log_status}")``, a Python dict's repr after the logging prefix of
  ``openrlhf/utils/logging_utils.py``).
- ``tensorboard``: event files, read by ``tensorboard.py``.
- ``wandb-csv``: a W&B run's history exported as CSV (one column per key, ``_step`` first, empty cells
  where a step did not log the key), or ``wandb-json``: the same as one JSON array of rows (numbered as
  rows in messages); OpenRLHF's W&B keys carry ``train/``
  (``openrlhf/utils/logging_utils.py``, ``WandbLogger.log_train``).

Values are floats, or ``None`` where the log wrote ``null``/``None``; other values (texts, lists) are
dropped. A last line cut off mid-write (a run killed while logging) is dropped with a warning.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from rlsim.errors import RlsimError

Value = float | None


@dataclass
class LogRecords:
    """What a log holds: its container, one record per logged step (or line), and warnings to print."""

    container: str
    records: list[tuple[int, dict[str, Value]]]
    warnings: list[str] = field(default_factory=list)
    where: str = "line"  # what a record's number counts: "line" of a text file, "step" of event files


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RAY_PREFIX = re.compile(r"^\s*\([\w.:-]+ pid=\d+(?:, ip=[0-9a-fA-F.:]+)?\)\s?")
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_VERL_STEP = re.compile(r"(?:^|\s)step:(-?\d+)(?=\s+-\s|\s*$)")
_FRAGMENT = re.compile(r"^([\w./@+\-\[\]]*[\w\]@]):(.+)$")
_NUMPY = re.compile(r"^(?:np|numpy)\.\w+\((.*)\)$|^tensor\((.*?)(?:, device=.*)?\)$")
_OPENRLHF = re.compile(r"Global step (-?\d+): (\{.*)$")
_OPENRLHF_PAIR = re.compile(
    r"'([^']+)':\s*(np\.\w+\([^)]*\)|[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf)|None)"
    r"\s*(?=[,}])"
)


def clean_line(raw: str) -> str:
    """A console line without ANSI colours, Ray's ``(Actor pid=N)`` prefix and repeat suffix."""
    line = _ANSI.sub("", raw).rstrip("\r\n")
    line = _RAY_PREFIX.sub("", line)
    return _RAY_REPEATED.sub("", line).strip()


def parse_value(text: str) -> Value | str:
    """A printed metric value: a float, None for ``None``/``null``, or the text when it is not a number."""
    text = text.strip()
    m = _NUMPY.match(text)
    if m:
        text = (m.group(1) if m.group(1) is not None else m.group(2)).strip()
    if text in ("None", "null"):
        return None
    try:
        return float(text)  # also "nan", "inf", "-inf", "Infinity": refused later, with their key
    except ValueError:
        return text


def read_log_records(path: Path, text: str) -> LogRecords:
    """The records of ``text`` (the log at ``path``) in whichever container it is."""
    lines = text.splitlines()
    first = next((clean_line(x) for x in lines if x.strip()), "")
    if first.startswith("{") and _json_object(first):
        return _jsonl(path, lines)
    if first.startswith("_step,") or ",_step," in first or first.endswith(",_step"):
        return _wandb_csv(text)
    if first.startswith("[") and _json_object(text, array=True):
        return _json_rows(path, text)
    # Console output: verl prints its config (a Python dict) first, so a leading "{" is no proof of JSONL.
    if any(_OPENRLHF.search(x) for x in lines):
        return _openrlhf(lines)
    if any(_VERL_STEP.search(clean_line(x)) for x in lines):
        return _verl_console(lines, cut_off=not text.endswith(("\n", "\r")))
    if first.startswith("{"):
        return _jsonl(path, lines)  # names the first line that is not JSON
    if first.startswith("["):
        return _json_rows(path, text)
    raise RlsimError(
        f"{path}: not a log rlsim reads (line 1: {first[:60]!r}); give verl's console output (`step:N - key:value`), "
        "verl's file logger JSONL (trainer.logger=['console','file'] writes it), OpenRLHF's console output "
        "(`Global step N: {...}`) or a W&B history export (CSV or JSONL)"
    )


def _json_object(text: str, array: bool = False) -> bool:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(obj, list) if array else isinstance(obj, dict)


def _jsonl(path: Path, lines: list[str]) -> LogRecords:
    out: list[tuple[int, dict[str, Value]]] = []
    warnings: list[str] = []
    numbered = [(i, x) for i, x in enumerate(lines, start=1) if x.strip()]
    for k, (number, raw) in enumerate(numbered):
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as err:
            if k == len(numbered) - 1 and k > 0:
                warnings.append(f"line {number} is cut off (not complete JSON: {err.msg}); dropped it")
                continue
            raise RlsimError(
                f"{path} line {number}: not JSON ({err.msg}); a JSONL log holds one JSON object per line "
                "(verl's file logger writes it): fix or delete that line"
            ) from None
        if isinstance(obj, dict) and isinstance(obj.get("data"), dict):
            obj = obj["data"]  # verl FileLogger: {"step": N, "data": {...}}
        if not isinstance(obj, dict):
            raise RlsimError(
                f"{path} line {number}: a JSON {type(obj).__name__}, not an object of metrics: fix or delete that line"
            )
        values: dict[str, Value] = {}
        for key, raw_value in obj.items():
            v = _json_value(raw_value)
            if not isinstance(v, str):
                values[str(key)] = v
        out.append((number, values))
    return LogRecords("jsonl", out, warnings)


def _json_rows(path: Path, text: str) -> LogRecords:
    """A W&B history exported as one JSON array of rows (``run.history().to_json(orient="records")``)."""
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as err:
        raise RlsimError(
            f"{path} line {err.lineno}: not JSON ({err.msg}); a W&B JSON export is one array of row objects: "
            "export it again"
        ) from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise RlsimError(f"{path}: a JSON array whose items are not all row objects; export the W&B history again")
    out = []
    for number, row in enumerate(rows, start=1):
        values: dict[str, Value] = {}
        for key, raw_value in row.items():
            v = _json_value(raw_value)
            if not isinstance(v, str):
                values[str(key)] = v
        out.append((number, values))
    return LogRecords("wandb-json", out, [], where="row")


def _json_value(v: object) -> Value | str:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return ""  # texts, lists, dicts (sample tables): not metrics
    try:
        return float(v)
    except OverflowError:  # an integer beyond a float: as out of range as infinity
        return math.inf


def _verl_console(lines: list[str], cut_off: bool = False) -> LogRecords:
    """``step:N - k:v - ...`` records; a ``step:N`` fragment opens a record, later fragments join it.
    ``cut_off``: the file does not end with a newline, so its last line (and its step) may be incomplete."""
    by_step: dict[int, tuple[int, dict[str, Value]]] = {}
    order: list[int] = []
    warnings: list[str] = []
    current: int | None = None
    duplicates = resumed = 0
    for number, raw in enumerate(lines, start=1):
        line = clean_line(raw)
        if not line:
            continue
        m = _VERL_STEP.search(line)
        if m:
            line = line[m.end() :]
            current = int(m.group(1))
            if current not in by_step:
                by_step[current] = (number, {})
                order.append(current)
        if current is None:
            continue
        values = by_step[current][1]
        for frag in line.split(" - "):
            fm = _FRAGMENT.match(frag.strip().lstrip("- ").strip())
            if not fm or "/" not in fm.group(1):
                continue
            key, value = fm.group(1), parse_value(fm.group(2))
            if isinstance(value, str):
                continue
            if key in values and not _same(values[key], value):
                if m:  # the same step logged again with other numbers: a resumed run; the later one counts
                    by_step[current] = (number, {})
                    values = by_step[current][1]
                    resumed += 1
            elif key in values:
                duplicates += 1
            values[key] = value
    last = max((n for n, x in enumerate(lines, start=1) if x.strip()), default=0)
    if cut_off and current is not None and current in by_step and _touched(lines[last - 1]):
        del by_step[current]
        order.remove(current)
        warnings.append(f"line {last} is cut off (no newline at the end of the file): dropped step {current}")
    if duplicates:
        warnings.append(f"{duplicates} repeated key:value fragments (lines printed twice) read once")
    if resumed:
        warnings.append(f"{resumed} step(s) logged again with other values (a resumed run?): kept the later")
    return LogRecords("verl-console", [by_step[s] for s in order], warnings)


def _touched(raw: str) -> bool:
    """Whether a console line holds a step marker or a metric fragment."""
    line = clean_line(raw)
    return bool(_VERL_STEP.search(line)) or any(_FRAGMENT.match(f.strip()) for f in line.split(" - "))


def _same(a: Value, b: Value) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))


def _openrlhf(lines: list[str]) -> LogRecords:
    out: list[tuple[int, dict[str, Value]]] = []
    warnings: list[str] = []
    hits = [(n, m) for n, x in enumerate(lines, start=1) if (m := _OPENRLHF.search(clean_line(x)))]
    seen: dict[int, int] = {}
    for k, (number, m) in enumerate(hits):
        body = m.group(2).rstrip()
        if not body.endswith("}"):
            if k == len(hits) - 1:
                warnings.append(f"line {number} is cut off (its dict has no closing brace); dropped it")
                continue
            raise RlsimError(
                f"line {number}: the `Global step` dict has no closing brace (a line cut off or wrapped): "
                "fix or delete that line"
            )
        values: dict[str, Value] = {}
        for key, text in _OPENRLHF_PAIR.findall(body):
            v = parse_value(text)
            if not isinstance(v, str):
                values[key] = v
        step = int(m.group(1))
        if step in seen:
            if out[seen[step]][1] == values:
                continue
            warnings.append(f"step {step} logged again at line {number} (a resumed run?): kept the later")
            out[seen[step]] = (number, values)
            continue
        seen[step] = len(out)
        out.append((number, values))
    return LogRecords("openrlhf-console", out, warnings)


def _wandb_csv(text: str) -> LogRecords:
    reader = csv.reader(io.StringIO(text))
    header = next(reader)
    out: list[tuple[int, dict[str, Value]]] = []
    for number, row in enumerate(reader, start=2):
        if not row:
            continue
        values: dict[str, Value] = {}
        for key, cell in zip(header, row, strict=False):
            if cell.strip() == "":
                continue
            v = parse_value(cell)
            if not isinstance(v, str):
                values[key] = v
        out.append((number, values))
    warnings = []
    if out and not text.endswith(("\n", "\r")):  # an export cut short: its last row may end mid-number
        warnings.append(f"line {out[-1][0]} is cut off (no newline at the end of the file): dropped it")
        out.pop()
    return LogRecords("wandb-csv", out, warnings)

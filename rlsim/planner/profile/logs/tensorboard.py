"""Scalars of TensorBoard event files (``events.out.tfevents.*``), read without TensorBoard installed.

verl's ``tensorboard`` logger (``verl/utils/tracking.py``, ``_TensorboardAdapter``: ``add_scalar(key, value,
step)`` for every metric) and OpenRLHF's (``openrlhf/utils/logging_utils.py``: ``add_scalar(f"train/{k}", v,
global_step)``) both write through ``torch.utils.tensorboard.SummaryWriter``, whose ``add_scalar`` stores a
``Summary.Value`` with ``simple_value`` (``torch/utils/tensorboard/summary.py``, ``scalar``); the
``tensor`` spelling of new-style writers is read too. The file is a TFRecord stream
(``tensorflow/core/lib/io/record_writer.cc``: 8-byte length, 4-byte CRC, the record, 4-byte CRC) of
``Event`` protos (``tensorboard/compat/proto/event.proto``: ``step`` = 2, ``summary`` = 5;
``summary.proto``: ``value`` = 1, ``tag`` = 1, ``simple_value`` = 2, ``tensor`` = 8; ``tensor.proto``:
``float_val`` = 5, ``double_val`` = 6). CRCs are not checked; a record cut off at the end of the file
(a run killed mid-write) is dropped with a warning.
"""

from __future__ import annotations

import struct
from pathlib import Path

from rlsim.errors import RlsimError
from rlsim.planner.profile.logs.records import LogRecords, Value

MAX_RECORD_BYTES = 64 << 20


def is_event_file(path: Path) -> bool:
    """Whether ``path`` is an event file, or a folder holding some."""
    return "tfevents" in path.name or (path.is_dir() and any(path.glob("*tfevents*")))


def read_event_records(path: Path) -> LogRecords:
    """One record per logged step (``line`` is the step), keys as the writer tagged them."""
    files = sorted(path.glob("*tfevents*")) if path.is_dir() else [path]
    by_step: dict[int, dict[str, Value]] = {}
    warnings: list[str] = []
    for f in files:
        try:
            data = f.read_bytes()
        except OSError as err:
            raise RlsimError(f"cannot read TensorBoard event file {f}: {err.strerror}; check the path") from None
        for step, tag, value in _scalars(data, f, warnings):
            by_step.setdefault(step, {})[tag] = value
    return LogRecords("tensorboard", sorted(by_step.items()), warnings, where="step")


def _scalars(data: bytes, path: Path, warnings: list[str]) -> list[tuple[int, str, float]]:
    out = []
    pos = 0
    while pos < len(data):
        if pos + 12 > len(data):
            warnings.append(f"{path}: the last record is cut off (a run stopped mid-write?): dropped it")
            break
        (length,) = struct.unpack_from("<Q", data, pos)
        if length > MAX_RECORD_BYTES:
            raise RlsimError(
                f"{path}: byte {pos} is not a TensorBoard record (length {length}); give an events.out.tfevents file"
            )
        if pos + 12 + length + 4 > len(data):
            warnings.append(f"{path}: the last record is cut off (a run stopped mid-write?): dropped it")
            break
        record = data[pos + 12 : pos + 12 + length]
        pos += 12 + length + 4
        try:
            out += _event_scalars(record)
        except (IndexError, struct.error, UnicodeDecodeError):
            raise RlsimError(
                f"{path}: a record before byte {pos} is not a TensorBoard event; give an events.out.tfevents file"
            ) from None
    return out


def _fields(buf: bytes) -> list[tuple[int, int, bytes | int]]:
    """``(field, wire type, value)`` of a protobuf message: varints as ints, the rest as bytes."""
    out: list[tuple[int, int, bytes | int]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            out.append((field, wire, value))
        elif wire == 1:
            out.append((field, wire, buf[pos : pos + 8]))
            pos += 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            out.append((field, wire, buf[pos : pos + n]))
            pos += n
        elif wire == 5:
            out.append((field, wire, buf[pos : pos + 4]))
            pos += 4
        else:
            raise IndexError(f"wire type {wire}")
        if pos > len(buf):
            raise IndexError("message cut off")
    return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")


def _event_scalars(record: bytes) -> list[tuple[int, str, float]]:
    step, summaries = 0, []
    for field, _, value in _fields(record):
        if field == 2 and isinstance(value, int):
            step = value - (1 << 64) if value >= 1 << 63 else value
        elif field == 5 and isinstance(value, bytes):
            summaries.append(value)
    out = []
    for summary in summaries:
        for field, _, value in _fields(summary):
            if field == 1 and isinstance(value, bytes):
                scalar = _value(value)
                if scalar is not None:
                    out.append((step, scalar[0], scalar[1]))
    return out


def _value(buf: bytes) -> tuple[str, float] | None:
    tag, number = None, None
    for field, wire, value in _fields(buf):
        if field == 1 and isinstance(value, bytes):
            tag = value.decode("utf-8")
        elif field == 2 and wire == 5 and isinstance(value, bytes):
            (number,) = struct.unpack("<f", value)
        elif field == 8 and isinstance(value, bytes):
            number = _tensor_scalar(value)
    return (tag, float(number)) if tag is not None and number is not None else None


def _tensor_scalar(buf: bytes) -> float | None:
    for field, wire, value in _fields(buf):
        if field in (5, 6) and isinstance(value, bytes):
            fmt, size = ("<f", 4) if field == 5 else ("<d", 8)
            if wire == 2 and len(value) >= size:  # packed repeated
                return float(struct.unpack_from(fmt, value)[0])
            if wire in (1, 5):
                return float(struct.unpack(fmt, value)[0])
    return None

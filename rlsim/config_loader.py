"""YAML configs -> typed pydantic models, with ``--set a.b=c`` overrides.

Validation collects *every* error (pydantic reports them all) and raises one ``ConfigError``
listing them with dotted paths, so a user fixes a config in one go and nothing starts meanwhile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from rlsim.errors import ConfigError, RlsimError

M = TypeVar("M", bound=BaseModel)


def load_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise RlsimError(f"config file {p} does not exist; pass a YAML file such as configs/default.yaml")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as err:
        raise RlsimError(f"{p} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise RlsimError(f"{p} must hold a mapping at the top level, not {type(data).__name__}")
    return data


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` strings (value parsed as YAML: ``3``, ``true``, ``[1, 2]``) in place."""
    errors = []
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            errors.append(f"override {item!r} is not of the form key.path=value")
            continue
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        node = data
        parts = key.strip().split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                errors.append(f"override {item!r}: {part!r} is a value, not a section")
                break
            node = child
        else:
            node[parts[-1]] = value
    if errors:
        raise ConfigError(errors, source="--set")
    return data


def validate(model: type[M], data: dict[str, Any], source: str = "config") -> M:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError([_describe(e) for e in err.errors()], source=source) from None


def load_config(model: type[M], path: str | Path, overrides: Sequence[str] = ()) -> M:
    data = apply_overrides(load_yaml(path), overrides)
    return validate(model, data, source=str(path))


def _describe(e: dict[str, Any]) -> str:
    where = ".".join(str(p) for p in e.get("loc", ())) or "(top level)"
    msg = e.get("msg", "invalid")
    if e.get("type") == "extra_forbidden":
        msg = "unknown setting (check the spelling against the documented configs)"
    got = e.get("input")
    shown = "" if isinstance(got, (dict, list)) or e.get("type") == "missing" else f" (got {got!r})"
    return f"{where}: {msg}{shown}"

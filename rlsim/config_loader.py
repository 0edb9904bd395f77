"""YAML configs -> typed pydantic models, with ``--set a.b=c`` overrides.

Validation collects *every* error (pydantic reports them all) and raises one ``ConfigError``
listing them with dotted paths, so a user fixes a config in one go and nothing starts meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from rlsim.errors import ConfigError, RlsimError
from rlsim.io import read_user_text

M = TypeVar("M", bound=BaseModel)


# A config this project writes has a few hundred values; aliases may repeat a block, but a "billion laughs"
# (aliases of aliases) would expand to far more and hang whatever walks it (validation, --set, JSON dumps).
MAX_EXPANDED_NODES = 100_000


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (YAML keeps the last silently) and alias bombs."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # complex keys are refused by SafeLoader itself; `<<` merges are meant to repeat keys
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first at line {seen[key].line + 1}); keep one",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None:
            _expanded_size(node, {}, set())
        return node


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_: set[int]) -> int:
    """Nodes ``node`` stands for once every alias is written out; memoised, so linear in the document."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise yaml.composer.ComposerError(None, None, "an alias refers to its own anchor (a cycle)", node.start_mark)
    open_.add(key)
    children: list[yaml.Node] = []
    if isinstance(node, yaml.SequenceNode):
        children = node.value
    elif isinstance(node, yaml.MappingNode):
        children = [n for pair in node.value for n in pair]
    total = 1
    for child in children:
        total += _expanded_size(child, sizes, open_)
        if total > MAX_EXPANDED_NODES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"aliases expand to more than {MAX_EXPANDED_NODES} values (an alias bomb?); "
                "write the values out or use fewer aliases",
                node.start_mark,
            )
    open_.discard(key)
    sizes[key] = total
    return total


def parse_yaml(text: str, source: str) -> Any:
    """``text`` parsed with the strict loader; a YAML problem becomes one line naming ``source`` and the place."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: plain data only, no objects
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = " ".join(x for x in (err.context, err.problem) if x)
        raise RlsimError(f"{source}: {where}{what}; fix the YAML there") from None
    except yaml.YAMLError as err:
        raise RlsimError(f"{source} is not valid YAML ({' '.join(str(err).split())}); fix the YAML") from None
    except RecursionError:
        raise RlsimError(f"{source} nests too deeply to read; flatten it") from None


def load_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path).expanduser()
    text = read_user_text(p, "config file", missing_fix="pass a YAML file such as configs/default.yaml")
    data = parse_yaml(text, f"config file {p}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RlsimError(f"config file {p} must hold a mapping at the top level, not {type(data).__name__}")
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
            value = yaml.load(raw, Loader=_StrictLoader)
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
        raise ConfigError([describe_error(e) for e in err.errors()], source=source) from None


def load_config(model: type[M], path: str | Path, overrides: Sequence[str] = ()) -> M:
    data = apply_overrides(load_yaml(path), overrides)
    return validate(model, data, source=str(path))


def describe_error(e: Mapping[str, Any]) -> str:
    """One pydantic error as ``where: what (got X)``."""
    where = ".".join(str(p) for p in e.get("loc", ())) or "(top level)"
    msg = e.get("msg", "invalid")
    if e.get("type") == "value_error":  # pydantic prefixes our own ValueError's text with "Value error, "
        msg = msg.removeprefix("Value error, ")
    if e.get("type") == "extra_forbidden":
        msg = "unknown setting (check the spelling against the documented configs)"
    got = e.get("input")
    shown = "" if isinstance(got, (dict, list)) or e.get("type") == "missing" else f" (got {got!r})"
    return f"{where}: {msg}{shown}"

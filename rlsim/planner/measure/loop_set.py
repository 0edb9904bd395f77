"""A set of real-loop configurations, as YAML: what ``rlsim plan validate`` and ``rlsim profile`` run.

Every entry is an ``rlsim run`` config: the ``base`` YAML (for example ``configs/default.yaml``),
then the set's common ``run`` settings, then the entry's own ``run`` settings, merged key by key
(a nested mapping changes only the keys it names). Each entry measures steps ``warmup_steps + 1`` to
``steps``; the warm-up steps before them run only where the entry's actors were just started (vLLM and
the scorers are still warming up), not on the previous entry's warm actors (``loop_runner``).

Example (``configs/validate_cpu.yaml``)::

    profile: profiles/cpu_2core_measured.json
    base: default.yaml
    steps: 3
    run: {policy: {backend: vllm}}
    configs:
      - name: seq-uniform
        run: {schedule: sequential, workload: {prompts_per_step: 4, group_size: 8}}

Paths are relative to the YAML file. Every config is validated (``load_run_config`` rules included)
before anything runs, and every problem of every entry is reported at once.

A set may ``extends: other.yaml``: it is that set (its base, steps, quiet gate, common ``run`` and every entry,
unchanged) plus entries of its own, whose ``run`` goes on top of the other set's common one after the set's own
``run``. Such a set holds only ``extends``, ``run``, ``configs``, ``profile`` and ``anchor``: the rest is the other
set's, so the entries they share are the same runs (``rlsim profile --reuse`` keeps them). Example
(``configs/profiles/calibrate_cpu_vllm.yaml``: the calibration set plus runs scored on vLLM)::

    extends: calibrate_cpu.yaml
    run: {reward: {runtime: vllm}}
    configs:
      - name: cal-vllm-seq-24
        run: {schedule: sequential, workload: {prompts_per_step: 6, group_size: 4}}
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rlsim.config_loader import apply_overrides, load_yaml, validate
from rlsim.errors import ConfigError, RlsimError
from rlsim.planner.measure import machine_load

if TYPE_CHECKING:
    from rlsim.loop.config import RunConfig


class LoopEntry(BaseModel):
    """One configuration: a short ``name`` (a folder name) and the ``run`` settings it changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    note: str = ""
    run: dict[str, Any] = Field(default_factory=dict)
    profile_runtime: str | None = Field(
        default=None,
        description="the profile entry that predicts this configuration's reward (default: its reward.runtime), "
        "e.g. judge-tiny for a genrm run when the profile names its judges",
    )

    @field_validator("name")
    @classmethod
    def _folder_name(cls, v: str) -> str:
        if not all(c.isalnum() or c in "-_." for c in v) or v.startswith("."):
            raise ValueError("use letters, digits, '-', '_' or '.' only (it names the run's folder)")
        return v


class QuietGate(BaseModel):
    """Before each step (or timed cell), wait until all cores are busy less than ``busy_below`` of one
    ``window_s`` window (other programs' work would slow the run in ways no profile models), for at
    most ``max_wait_s``.

    The window is paid before every step and cell: a profile passes the gate about 90 times, so a
    2-second window (the default until 2026-12-08) cost three of its minutes. Half a second of
    ``/proc/stat`` is 50 clock ticks a core, enough to see another program at work; one the window
    misses still shows in the step's own ``foreign_cpu_share``, and a disturbed step is not used."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    busy_below: float = Field(default=0.3, gt=0, le=1)
    max_wait_s: float = Field(default=240.0, ge=0)
    window_s: float = Field(default=0.5, ge=0.1, le=10)

    def wait(self, note: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Hold until the cores are quiet (``machine_load.wait_until_quiet``); returns what happened."""
        return machine_load.wait_until_quiet(self.busy_below, self.max_wait_s, self.window_s, note=note)


class AnchorSpec(BaseModel):
    """``rlsim plan validate``'s anchor (``validate/anchor.py``): configuration ``config`` of the profile's
    calibration loop set ``set`` (a path relative to this YAML), run before, between and after the others."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    set: str = Field(min_length=1)
    config: str = Field(min_length=1)


class LoopSet(BaseModel):
    """Loop configurations to run on this machine. ``profile``: the profile predictions come from
    (``rlsim plan validate`` only). ``steps`` per configuration, the first ``warmup_steps`` not
    measured (and not run at all on actors already warm from the previous configuration).
    ``quiet``: wait for idle cores before each step (see ``QuietGate``). ``disturbed_above``: a
    measured step during which other programs took more than this share of all cores' time is not
    used (unless no step would be left); None uses every step. ``anchor``: see ``AnchorSpec``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: str
    profile: str | None = None
    steps: int = Field(default=3, ge=1)
    warmup_steps: int = Field(default=1, ge=0)
    run: dict[str, Any] = Field(default_factory=dict)
    quiet: QuietGate | None = None
    disturbed_above: float | None = Field(default=0.15, ge=0, le=1)
    anchor: AnchorSpec | None = None
    configs: list[LoopEntry] = Field(min_length=1)

    @field_validator("configs")
    @classmethod
    def _unique(cls, v: list[LoopEntry]) -> list[LoopEntry]:
        names = [e.name for e in v]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ValueError(f"config names must be unique; repeated: {', '.join(doubled)}")
        return v


@dataclass(frozen=True)
class LoopCase:
    """One entry resolved into the loop's own typed config. ``warmup_steps``: its set's warm-up steps, which
    ``RealLoopRunner`` runs only on just-started actors and records in results.json (an anchor keeps its
    calibration set's); None runs every step and records nothing."""

    name: str
    note: str
    config: RunConfig
    profile_runtime: str | None = None
    warmup_steps: int | None = None


def deep_merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``changes`` applied: mappings merge key by key, anything else replaces.

    A mapping that switches a tagged variant (a different ``kind``, e.g. lognormal -> fixed lengths)
    replaces the old one: the old variant's fields would be unknown settings of the new one.
    """
    out = copy.deepcopy(base)
    for key, value in changes.items():
        old = out.get(key)
        if isinstance(old, dict) and isinstance(value, dict) and value.get("kind", old.get("kind")) == old.get("kind"):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# What a set that ``extends`` another may hold; the rest comes from the other set.
EXTENDING_KEYS = ("extends", "run", "configs", "profile", "anchor")


def load_loop_set(path: str | Path, overrides: Sequence[str] = ()) -> tuple[LoopSet, Path]:
    """Validate the set's YAML (with ``--set`` overrides, applied after ``extends``); returns it and the folder
    paths are relative to."""
    p = Path(path)
    data = apply_overrides(_extended(p, load_yaml(p), (p.resolve(),)), overrides)
    return validate(LoopSet, data, source=str(p)), p.resolve().parent


def _extended(path: Path, data: dict[str, Any], chain: tuple[Path, ...]) -> dict[str, Any]:
    """``data`` with the set it ``extends`` (if any) folded in: the other set's keys, its entries, then these
    entries with this set's ``run`` under their own; the other set's paths made absolute."""
    if "extends" not in data:
        return data
    name, source = data["extends"], str(path)
    if not isinstance(name, str) or not name:
        raise ConfigError([f"extends: name a loop-set YAML (a path relative to this file), not {name!r}"], source)
    extra = sorted(set(data) - set(EXTENDING_KEYS))
    if extra:
        raise ConfigError(
            [f"{k}: a set that extends {name} takes it from there; set it in {name} or drop extends" for k in extra],
            source,
        )
    try:
        parent_path = resolve_path(path.resolve().parent, name).resolve()
        found = parent_path.is_file()
    except OSError as err:  # a name too long for the file system, a folder it may not read
        problem = f"extends: cannot look for that file ({err.strerror}); name a loop-set YAML"
        raise ConfigError([problem], source) from err
    if parent_path in chain:
        raise ConfigError([f"extends: {name} leads back to a set already extended (a loop)"], source)
    if not found:
        raise ConfigError([f"extends: {parent_path} is not a file; name a loop-set YAML relative to {path}"], source)
    parent = _extended(parent_path, load_yaml(parent_path), (*chain, parent_path))
    own, common = data.get("configs", []), data.get("run", {})
    if not isinstance(own, list) or not isinstance(common, dict):
        raise ConfigError(["configs must be a list of entries and run a mapping"], source)
    merged = {k: v for k, v in parent.items() if k != "configs"}
    for key in ("base", "profile"):
        if isinstance(parent.get(key), str):
            merged[key] = str(resolve_path(parent_path.parent, parent[key]))
    if isinstance(parent.get("anchor"), dict) and isinstance(parent["anchor"].get("set"), str):
        merged["anchor"] = {**parent["anchor"], "set": str(resolve_path(parent_path.parent, parent["anchor"]["set"]))}
    merged.update({k: data[k] for k in ("profile", "anchor") if k in data})
    mine = [{**e, "run": deep_merge(common, e.get("run") or {})} if isinstance(e, dict) else e for e in own]
    merged["configs"] = [*(parent.get("configs") or []), *mine]
    return merged


def resolve_cases(loop_set: LoopSet, base_dir: Path, source: str = "validation set") -> list[LoopCase]:
    """Every entry as a ``RunConfig`` with ``steps`` set; one ConfigError listing every bad entry."""
    from rlsim.loop.config import RunConfig, cross_field_problems

    base_path = resolve_path(base_dir, loop_set.base)
    base = load_yaml(base_path)
    common = deep_merge(base, loop_set.run)
    cases, errors = [], []
    for entry in loop_set.configs:
        data = deep_merge(common, entry.run)
        data["steps"] = loop_set.steps
        try:
            config = validate(RunConfig, data, source=f"config {entry.name}")
            problems = cross_field_problems(config)
            if problems:
                raise ConfigError(problems, source=f"config {entry.name}")
        except ConfigError as err:
            errors += [f"{entry.name}: {e}" for e in err.errors]
            continue
        cases.append(LoopCase(entry.name, entry.note, config, entry.profile_runtime, loop_set.warmup_steps))
    if errors:
        raise ConfigError(errors, source=f"{source} (base {base_path})")
    if loop_set.steps <= loop_set.warmup_steps:
        raise RlsimError(
            f"{source}: steps ({loop_set.steps}) must exceed warmup_steps ({loop_set.warmup_steps}) "
            "so at least one step is measured; raise steps"
        )
    return cases


def resolve_path(base_dir: Path, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else base_dir / p

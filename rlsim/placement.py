"""Where the loop's actors run: the placement config, its presets and the split rule (plain Python).

Neither ``rlsim.loop`` nor ``rlsim.actors`` owns this: the loop's config embeds ``PlacementConfig``,
the actors are started from ``ResolvedPlacement``, and the planner and the contention experiment
resolve the same presets. ``split_pool`` is the one split rule every one of them uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

ROLES = ("rollout", "scorer", "trainer")


class ActorPlacement(BaseModel):
    """Where one actor runs. ``cores``: CPU ids it is pinned to (None: from the preset); ``threads``:
    compute threads (None: one per core); ``gpu``: GPU fraction; ``num_cpus``: Ray's bookkeeping only
    (real sharing/splitting comes from pinning)."""

    model_config = ConfigDict(extra="forbid")

    cores: list[int] | None = None
    threads: int | None = Field(None, ge=1)
    gpu: float = Field(0.0, ge=0, le=1)
    num_cpus: float = Field(0.5, gt=0)

    @field_validator("cores")
    @classmethod
    def _cores(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and (not v or min(v) < 0 or len(set(v)) != len(v)):
            raise ValueError("cores must be a non-empty list of distinct CPU ids >= 0")
        return v


class PlacementConfig(BaseModel):
    """``shared``: every actor on every core of ``pool``; ``split``: rollout on the first half of the pool,
    scorers and trainer on the rest. ``pool`` None: the cores this process may run on. ``strategy``:
    Ray placement-group strategy (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD)."""

    model_config = ConfigDict(extra="forbid")

    preset: Literal["shared", "split"] = "shared"
    pool: list[int] | None = None
    strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    ready_timeout_s: float = Field(60.0, gt=0)
    rollout: ActorPlacement = Field(default_factory=ActorPlacement)
    scorer: ActorPlacement = Field(default_factory=ActorPlacement)
    trainer: ActorPlacement = Field(default_factory=ActorPlacement)


@dataclass(frozen=True)
class ResolvedPlacement:
    """Concrete placement of one actor: ``cores`` it is pinned to, ``threads`` compute threads,
    ``gpu`` fraction of one GPU, ``num_cpus`` Ray bookkeeping share."""

    cores: tuple[int, ...]
    threads: int
    gpu: float = 0.0
    num_cpus: float = 0.5


def split_pool(pool: Sequence[int]) -> tuple[list[int], list[int]]:
    """The ``split`` preset: (rollout cores, scoring cores). Generation gets the first half, rounded up,
    because it is the longest phase of a step; scorers and the trainer share the rest."""
    cores = sorted(pool)
    if len(cores) < 2:
        raise ValueError(f"preset split needs at least 2 cores in the pool, got {cores}; use preset shared")
    half = (len(cores) + 1) // 2
    return cores[:half], cores[half:]


def resolve_placement(config: PlacementConfig, pool: Sequence[int]) -> dict[str, ResolvedPlacement]:
    """Per role, the cores from the preset (unless the role names its own) and one thread per core.

    ``shared``: every role gets the whole ``pool``. ``split``: see ``split_pool``. Raises
    ``ValueError`` if the pool cannot be split or a role asks for more threads than cores.
    """
    cores_of = sorted(pool)
    if not cores_of:
        raise ValueError("the core pool is empty; give placement.pool or run where cores are available")
    if config.preset == "split":
        rollout, scoring = split_pool(cores_of)
        defaults = {"rollout": rollout, "scorer": scoring, "trainer": scoring}
    else:
        defaults = {role: cores_of for role in ROLES}
    out = {}
    for role in ROLES:
        p: ActorPlacement = getattr(config, role)
        cores = tuple(p.cores) if p.cores else tuple(defaults[role])
        threads = p.threads or len(cores)
        if threads > len(cores):
            raise ValueError(f"{role}: {threads} threads on {len(cores)} cores")
        out[role] = ResolvedPlacement(cores, threads, p.gpu, p.num_cpus)
    return out

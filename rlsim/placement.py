"""Where the loop's actors run: the placement config, its presets and the split rule (plain Python).

Neither ``rlsim.loop`` nor ``rlsim.actors`` owns this: the loop's config embeds ``PlacementConfig``,
the actors are started from ``ResolvedPlacement``, and the planner and the contention experiment
resolve the same presets. ``split_pool`` is the one split rule every one of them uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ROLES = ("rollout", "scorer", "trainer")
# Started only when the algorithm needs them: the critic for ppo, the reference when kl.coef > 0.
EXPERIENCE_ROLES = ("reference", "critic")
ALL_ROLES = ROLES + EXPERIENCE_ROLES
# Roles that may share one process (``placement.colocate``); the rollout's engine runs its own processes.
COLOCATABLE = ("scorer", "trainer", "reference", "critic")


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
    scorers, trainer, reference and critic on the rest. ``pool`` None: the cores this process may run on.
    ``strategy``: Ray placement-group strategy (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD).
    ``colocate``: groups of roles that share one process and take turns (OpenRLHF's ``colocate_*``),
    e.g. ``[[reference, scorer], [critic, trainer]]``; a group holding the scorer joins ``scorer-0``."""

    model_config = ConfigDict(extra="forbid")

    preset: Literal["shared", "split"] = "shared"
    pool: list[int] | None = None
    strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    ready_timeout_s: float = Field(60.0, gt=0)
    rollout: ActorPlacement = Field(default_factory=ActorPlacement)
    scorer: ActorPlacement = Field(default_factory=ActorPlacement)
    trainer: ActorPlacement = Field(default_factory=ActorPlacement)
    reference: ActorPlacement = Field(default_factory=ActorPlacement)
    critic: ActorPlacement = Field(default_factory=ActorPlacement)
    colocate: list[list[str]] = Field(default_factory=list)


def colocation_problems(groups: Sequence[Sequence[str]], active: Sequence[str]) -> list[str]:
    """Every problem of ``placement.colocate`` at once: unknown roles, a role named twice (in one group or
    across groups), the rollout, a role this run does not start (``active``), a group of one."""
    problems, seen = [], set()
    for i, group in enumerate(groups):
        where = f"placement.colocate[{i}]"
        for role in group:
            if role not in ALL_ROLES:
                problems.append(f"{where}: unknown role {role!r}; valid: {', '.join(COLOCATABLE)}")
            elif role not in COLOCATABLE:
                problems.append(
                    f"{where}: {role} cannot share a process (its engine runs in processes of its own); "
                    f"valid: {', '.join(COLOCATABLE)}"
                )
            elif role in seen:
                problems.append(f"{where}: {role} is named twice; a role lives in one process")
            elif role not in active:
                problems.append(
                    f"{where}: {role} does not run in this config (the critic needs trainer.algorithm "
                    "ppo, the reference kl.coef > 0)"
                )
            seen.add(role)
        if len(group) < 2:
            problems.append(f"{where}: a group needs at least two roles to colocate, got {list(group)}")
    return problems


def active_roles(algorithm: str, kl_coef: float) -> tuple[str, ...]:
    """The roles a run starts: the three of every run, plus the critic (ppo) and the reference (KL on)."""
    extra = (("reference",) if kl_coef > 0 else ()) + (("critic",) if algorithm == "ppo" else ())
    return ROLES + extra


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


def resolve_placement(
    config: PlacementConfig, pool: Sequence[int], roles: Sequence[str] = ROLES
) -> dict[str, ResolvedPlacement]:
    """Per role in ``roles``, the cores from the preset (unless the role names its own) and one thread per core.

    ``shared``: every role gets the whole ``pool``. ``split``: see ``split_pool`` (the reference and the
    critic are inference and training like the scorer and the trainer, so they get the scoring half).
    Raises ``ValueError`` if the pool cannot be split or a role asks for more threads than cores.
    """
    cores_of = sorted(pool)
    if not cores_of:
        raise ValueError("the core pool is empty; give placement.pool or run where cores are available")
    if config.preset == "split":
        rollout, scoring = split_pool(cores_of)
        defaults = {"rollout": rollout, "scorer": scoring, "trainer": scoring, "reference": scoring, "critic": scoring}
    else:
        defaults = {role: cores_of for role in ALL_ROLES}
    out = {}
    for role in roles:
        p: ActorPlacement = getattr(config, role)
        cores = tuple(p.cores) if p.cores else tuple(defaults[role])
        threads = p.threads or len(cores)
        if threads > len(cores):
            raise ValueError(f"{role}: {threads} threads on {len(cores)} cores")
        out[role] = ResolvedPlacement(cores, threads, p.gpu, p.num_cpus)
    return out


def group_placement(members: Sequence[ResolvedPlacement]) -> ResolvedPlacement:
    """One process for colocated roles: the union of their cores, the most threads any asks for, their GPU
    shares added (capped at one GPU), the largest Ray CPU share (they take turns, not run at once)."""
    cores = tuple(sorted({c for p in members for c in p.cores}))
    return ResolvedPlacement(
        cores, max(p.threads for p in members), min(1.0, sum(p.gpu for p in members)), max(p.num_cpus for p in members)
    )


@dataclass(frozen=True)
class ActorUnit:
    """One actor process: ``name`` in records (``cpu_s``), the ``members`` it holds as (role, event name)
    pairs, and where it runs. A colocated unit is named after its members: ``reference+scorer-0``."""

    name: str
    members: tuple[tuple[str, str], ...]
    placement: ResolvedPlacement

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(role for role, _ in self.members)


def actor_units(
    placements: dict[str, ResolvedPlacement], replicas: int, colocate: Sequence[Sequence[str]] = ()
) -> list[ActorUnit]:
    """The actors to start, in order: rollout, ``replicas`` scorers, trainer, then the reference and the
    critic where ``placements`` has them; the roles of each ``colocate`` group (validated already, see
    ``colocation_problems``) merged into one unit where the group's first member would stand. A group
    holding the scorer takes ``scorer-0``; inactive roles in a group are left out."""
    singles = [("rollout", "rollout")] + [("scorer", f"scorer-{i}") for i in range(replicas)] + [("trainer", "trainer")]
    singles += [(role, role) for role in EXPERIENCE_ROLES if role in placements]
    name_of = {"scorer": "scorer-0"}
    groups: list[tuple[tuple[str, str], ...]] = []
    for group in colocate:
        members = tuple((role, name_of.get(role, role)) for role in group if role in placements)
        if len(members) >= 2:
            groups.append(members)
    units: list[ActorUnit] = []
    emitted: set[tuple[tuple[str, str], ...]] = set()
    for member in singles:
        shared = next((g for g in groups if member in g), None)
        if shared is None:
            units.append(ActorUnit(member[1], (member,), placements[member[0]]))
        elif shared not in emitted:
            emitted.add(shared)
            name = "+".join(n for _, n in shared)
            units.append(ActorUnit(name, shared, group_placement([placements[r] for r, _ in shared])))
    return units

"""The settings of the rewards that are not reward models, as typed config sections.

``reward.function`` (runtime ``function``) and ``reward.sandbox`` (runtime ``sandbox``) in a run config; the
same dicts reach the scorer as ``ScorerSettings.options``, so ``rlsim bench scoring`` and ``rlsim score`` take
them too. Every limit must be positive and a function must import, so a bad section is a config error before
anything starts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

OnTimeout = Literal["default", "fail"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionOptions(_Strict):
    """``target``: ``module:function`` called as ``function(prompt, response) -> float`` (default: rlsim's math
    answer checker); ``workers``: processes calling it (they share the scoring actor's cores); ``timeout_s``: the
    longest one call may take (its worker is then killed and replaced); ``on_timeout``: ``default`` gives the
    rollout ``default_reward`` and counts it, ``fail`` fails the step naming the rollout; ``on_error`` (the
    function raised): the same choice."""

    target: str = "rlsim.rewards.math_check:score"
    workers: int = Field(2, ge=1)
    timeout_s: float = Field(10.0, gt=0)
    on_timeout: OnTimeout = "default"
    on_error: OnTimeout = "fail"
    default_reward: float = 0.0

    @field_validator("target")
    @classmethod
    def _imports(cls, v: str) -> str:
        from rlsim.rewards.call_worker import load_target

        try:
            load_target(v)
        except ValueError as err:
            raise ValueError(f"{err}; reward.function.target must name an importable function") from None
        return v


class SandboxOptions(_Strict):
    """``program``: ``bank`` runs, in place of each response, the installed program nearest its length
    (rlsim.rewards.program_bank: a random-weight policy writes no code); ``response`` runs the response's first
    fenced Python block (a response without one gets 0 and is not run). ``workers``: sandboxes at once.
    Limits per program: ``wall_s`` (killed), ``cpu_s``, ``memory_mb`` (address space), ``max_processes``,
    ``max_file_mb``; ``isolate: false`` runs with no namespace and no limit (to measure their cost).
    ``on_timeout``: a program killed at ``wall_s`` gets ``default_reward`` (counted) or fails the step."""

    program: Literal["bank", "response"] = "bank"
    workers: int = Field(2, ge=1)
    wall_s: float = Field(10.0, gt=0)
    cpu_s: float = Field(8.0, gt=0)
    memory_mb: int = Field(1024, ge=64)
    max_processes: int = Field(32, ge=1)
    max_file_mb: int = Field(16, ge=1)
    isolate: bool = True
    on_timeout: OnTimeout = "default"
    default_reward: float = 0.0


OPTIONS: dict[str, type[_Strict]] = {"function": FunctionOptions, "sandbox": SandboxOptions}


def parse_options(runtime: str, values: dict[str, Any]) -> Any:
    """The typed options of ``runtime`` from a plain dict (a scorer's ``ScorerSettings.options``)."""
    from rlsim.config_loader import validate

    return validate(OPTIONS[runtime], values, source=f"reward.{runtime}")

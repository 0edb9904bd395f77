"""The settings of rewards that are no reward model or can time out, as typed config sections.

``reward.function`` (runtime ``function``), ``reward.sandbox`` (runtime ``sandbox``), ``reward.genrm`` (runtime
``genrm``: a judge LLM) and ``reward.http`` (runtime ``http``: how a remote reward server is called) in a run
config; the same dicts reach the scorer as ``ScorerSettings.options`` (``rlsim bench scoring`` and ``rlsim score``
read them from ``--reward-config``: ``reward_sections``). Every limit must be positive and finite
(no NaN or infinity), a function must import and a judge template must hold ``{response}``, so a bad section is a
config error before anything starts.

``on_timeout`` is the same choice in each: ``default`` gives the rollout ``default_reward`` and counts it,
``drop`` leaves the rollout's group out of the update (counted: ``rollouts.dropped`` in the step's record;
``rlsim.loop.schedules.step.drop_unrewarded``), ``fail`` fails the step naming the setting to raise.
"""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, field_validator

from rlsim.config_loader import load_yaml, validate
from rlsim.errors import ConfigError, RlsimError
from rlsim.models.builtin import BUILTIN_POLICIES
from rlsim.rewards.call_worker import load_target

OnTimeout = Literal["default", "drop", "fail"]
DAY_S = 86400.0  # the longest wait any limit may set: past it sleeps and socket timeouts overflow
MAX_WORKERS = 256  # processes one scoring actor may start: a typo of 1e6 must not fork a million
DROPPED = float("nan")  # the reward of a rollout that on_timeout: drop leaves out (the loop drops its group)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FunctionOptions(_Strict):
    """``target``: ``module:function`` called as ``function(prompt, response) -> float`` (default: rlsim's math
    answer checker); ``workers``: processes calling it (they share the scoring actor's cores); ``timeout_s``: the
    longest one call may take (its worker is then killed and replaced); ``on_timeout``: ``default`` gives the
    rollout ``default_reward`` and counts it, ``drop`` leaves its group out of the update, ``fail`` fails the
    step naming the rollout; ``on_error`` (the function raised): the same choice."""

    target: str = "rlsim.rewards.math_check:score"
    workers: int = Field(2, ge=1, le=MAX_WORKERS)
    timeout_s: FiniteFloat = Field(10.0, gt=0, le=DAY_S)
    on_timeout: OnTimeout = "default"
    on_error: OnTimeout = "fail"
    default_reward: FiniteFloat = 0.0

    @field_validator("target")
    @classmethod
    def _imports(cls, v: str) -> str:
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
    ``on_timeout``: a program killed at ``wall_s`` gets ``default_reward`` (counted), has its group dropped, or
    fails the step."""

    program: Literal["bank", "response"] = "bank"
    workers: int = Field(2, ge=1, le=MAX_WORKERS)
    wall_s: FiniteFloat = Field(10.0, gt=0, le=DAY_S)
    cpu_s: FiniteFloat = Field(8.0, gt=0, le=DAY_S)
    memory_mb: int = Field(1024, ge=64)
    max_processes: int = Field(32, ge=1)
    max_file_mb: int = Field(16, ge=1)
    isolate: bool = True
    on_timeout: OnTimeout = "default"
    default_reward: FiniteFloat = 0.0


GENRM_TEMPLATE = "Question: {prompt}\nAnswer: {response}\nIs the answer correct (Yes or No)?"


class GenrmOptions(_Strict):
    """A judge LLM as the reward (runtime ``genrm``). ``judge``: a built-in policy (``tiny-llama``) or a local folder
    of a causal LM, run on vLLM inside the scoring actor, on its cores (``reward.engine_process`` as for the ``vllm``
    runtime). ``template``: the judge's prompt; ``{response}`` (required) and ``{prompt}`` are filled in.
    ``mode``: ``verdict`` rewards the log-probability the judge gives ``verdict`` right after the template (one
    forward pass, no decoding); ``score`` decodes up to ``max_tokens`` at ``temperature`` and reads the first
    match of ``score_pattern`` in the text (its one group if it has one; default: the first number), divided by
    ``score_max`` (ROLL's ``LLMJudgeRewardWorker`` parses ``Score: ([0-9.]+)`` / 10 from the judge's decoded text,
    ``roll/pipeline/rlvr/rewards/llm_judge_reward_worker.py``); a text with no match gets ``default_reward``
    (counted as ``unparsed``), is dropped with its group, or fails the step (``on_unparsed``).
    ``max_model_len``: the judge's context in tokens; a response that does not fit is cut from its end."""

    judge: str = "tiny-llama"
    template: str = GENRM_TEMPLATE
    mode: Literal["verdict", "score"] = "verdict"
    verdict: str = Field(" Yes", min_length=1)
    max_tokens: int = Field(8, ge=1, le=4096)
    temperature: FiniteFloat = Field(0.0, ge=0)
    score_pattern: str = r"-?\d+(?:\.\d+)?"
    score_max: FiniteFloat = Field(10.0, gt=0)
    max_model_len: int = Field(512, ge=32)
    on_unparsed: OnTimeout = "default"
    default_reward: FiniteFloat = 0.0

    @field_validator("template")
    @classmethod
    def _placeholders(cls, v: str) -> str:
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(v) if name is not None}
        except ValueError as err:
            raise ValueError(f"the template does not parse ({err}); write a literal brace as {{{{ or }}}}") from None
        fields = [name for _, name, _, _ in string.Formatter().parse(v) if name is not None]
        if fields.count("response") != 1:
            raise ValueError(
                "the template must hold {response} exactly once (it has it "
                f"{fields.count('response')} times): the judge reads the response there"
            )
        if names - {"prompt", "response"}:
            raise ValueError(
                f"the template names {sorted(names - {'prompt', 'response'})}; only {{prompt}} and {{response}} "
                "are filled in (write a literal brace as {{ or }})"
            )
        return v

    @field_validator("score_pattern")
    @classmethod
    def _one_group(cls, v: str) -> str:
        try:
            groups = re.compile(v).groups
        except re.error as err:
            raise ValueError(f"not a regular expression ({err})") from None
        if groups > 1:
            raise ValueError(f"has {groups} groups; give it one around the number (or none: the whole match)")
        return v

    @field_validator("judge")
    @classmethod
    def _judge_exists(cls, v: str) -> str:
        if v not in BUILTIN_POLICIES and not (Path(v).expanduser() / "config.json").is_file():
            raise ValueError(
                f"{v!r} is neither a built-in policy ({', '.join(sorted(BUILTIN_POLICIES))}) nor a folder holding a "
                "causal LM's config.json"
            )
        return v


class RemoteOptions(_Strict):
    """How the ``http`` runtime calls a reward server (rlsim.scoring.remote_calls), per scoring actor.

    ``concurrency``: requests in flight at once; each batch the batcher plans is sent as requests of
    ``request_size`` rows (None: split evenly into ``concurrency`` requests, as OpenRLHF's
    ``openrlhf/utils/remote_rm_utils.py`` ``request_api_wrapper`` splits a batch over ``num_threads``).
    ``requests_per_minute``: requests started, spaced evenly (None: no limit). ``timeout_s``: the longest one
    attempt may take (None: what is left of ``reward.http_deadline_s``, the batch's deadline). ``retries``:
    attempts after the first on a connection error, a timed-out attempt, HTTP 429, 503 or 504 (None: until the
    deadline; OpenRLHF tries 5 times, 1 s apart), waiting ``backoff_s`` = (first, longest) seconds, doubling,
    or the server's Retry-After. A request still unanswered then gets ``on_timeout`` (counted as
    ``timeouts``, rows). ``limits``: ``per_replica`` (each of ``reward.replicas`` actors has its own
    ``concurrency`` and ``requests_per_minute``: they add up) or ``shared`` (they are the whole run's, split
    evenly over the replicas: each gets ``concurrency // replicas`` and ``requests_per_minute / replicas``, which
    the router's even spread of calls keeps close to the shared limit; a replica does not borrow another's idle
    share)."""

    concurrency: int = Field(1, ge=1, le=1024)
    limits: Literal["per_replica", "shared"] = "per_replica"
    request_size: int | None = Field(None, ge=1)
    requests_per_minute: FiniteFloat | None = Field(None, gt=0)
    timeout_s: FiniteFloat | None = Field(None, gt=0, le=DAY_S)
    retries: int | None = Field(None, ge=0)
    backoff_s: tuple[FiniteFloat, FiniteFloat] = (0.05, 2.0)
    on_timeout: OnTimeout = "fail"
    default_reward: FiniteFloat = 0.0

    @field_validator("backoff_s")
    @classmethod
    def _ordered(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 < v[0] <= v[1] <= DAY_S:
            raise ValueError(
                f"backoff_s is (first, longest) wait in seconds with 0 < first <= longest <= {DAY_S:g}, not {list(v)}"
            )
        return v


OPTIONS: dict[str, type[_Strict]] = {
    "function": FunctionOptions,
    "sandbox": SandboxOptions,
    "genrm": GenrmOptions,
    "http": RemoteOptions,
}


def unanswered_reward(on_timeout: OnTimeout, default_reward: float, what: str, setting: str) -> float:
    """The reward of a call that got no answer: ``default_reward``, ``DROPPED`` (NaN), or the step's error."""
    if on_timeout == "fail":
        raise RlsimError(f"{what} (on_timeout: fail); raise {setting}, or set on_timeout to default or drop")
    return DROPPED if on_timeout == "drop" else float(default_reward)


def parse_options(runtime: str, values: dict[str, Any]) -> Any:
    """The typed options of ``runtime`` from a plain dict (a scorer's ``ScorerSettings.options``)."""
    return validate(OPTIONS[runtime], values, source=f"reward.{runtime}")


def reward_sections(data: dict[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """The reward sections by runtime (``{"genrm": {...}, "sandbox": {...}}``) of ``data``: such a mapping, or a
    run config whose ``reward:`` holds them (its other keys ignored); every section checked, every problem named
    at once. What ``rlsim score`` and ``rlsim bench scoring`` read from ``--reward-config``."""
    problems = []
    if isinstance(data.get("reward"), dict):  # a run config: its reward section holds them
        beside = sorted(k for k in data if k in OPTIONS)
        if beside:
            problems.append(f"{', '.join(beside)}: given beside a reward: section, which holds the sections in a run "
                            "config; put them in one place")  # fmt: skip
        data = {k: v for k, v in data["reward"].items() if k in OPTIONS}
    for name, section in data.items():
        if name not in OPTIONS:
            problems.append(f"{name}: not a reward section (the sections are {', '.join(OPTIONS)})")
        elif not isinstance(section, dict):
            problems.append(f"{name}: must be a mapping of settings, not {type(section).__name__}")
        else:
            try:
                parse_options(name, section)
            except RlsimError as err:
                problems.extend(f"{name}.{e}" for e in getattr(err, "errors", [str(err)]))
    if problems:
        raise ConfigError([f"reward.{p}" for p in problems], source=source)
    return {name: dict(section) for name, section in data.items()}


def read_reward_sections(path: str | Path) -> dict[str, dict[str, Any]]:
    """``reward_sections`` of a YAML file (``--reward-config``)."""
    return reward_sections(load_yaml(path), source=f"--reward-config {path}")

"""Continuous-batching generation engines, computed in closed form per engine (vectorised over engines).

How this stays exact without simulating each decode iteration: within one engine, every running
sequence advances one token per iteration, so *which* iteration a sequence is admitted and finishes
in does not depend on how long iterations take. The simulation therefore

1. list-schedules each engine's requests onto ``max_running`` slots in iteration units (FIFO
   admission into the first free slot, as vLLM's scheduler does);
2. turns iterations into seconds: between two admissions/completions the number running ``n`` is
   constant, so that stretch takes ``iterations x step_s(n)``, plus the prefill of each admission.

Both steps are numpy operations on ``(engines, requests)`` arrays, so 1,000 engines cost about
as much as one. Contention is applied afterwards by mapping these uncontended ("work") times
through each node's ``SpeedProfile`` (see ``events.py``); an engine is busy from the step's start
to its last completion, so the mapping is exact for a speed that depends only on time.
Not modelled: attention cost growing with context length inside one sequence (it is folded into
the fitted per-sequence cost) and preemption when the KV cache overflows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlsim.planner.profile.schema import GenerationModel


@dataclass(frozen=True)
class EngineBatch:
    """Rollouts dealt to engines: ``(engines, per_engine)`` arrays; ``valid`` is False for padding."""

    responses: np.ndarray
    prompts: np.ndarray
    valid: np.ndarray
    index: np.ndarray  # position of each slot's rollout in the step's rollout list (-1: padding)


def deal(prompts: np.ndarray, responses: np.ndarray, engines: int) -> EngineBatch:
    """Give engine ``e`` the contiguous chunk ``e`` of the rollouts (a group stays together)."""
    n = len(responses)
    per = -(-n // engines)
    index: np.ndarray = np.full(engines * per, -1, dtype=np.int64)
    # Spread the remainder: the first (n % engines) engines take one more, like an even split.
    sizes = np.full(engines, n // engines)
    sizes[: n % engines] += 1
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    slot = np.arange(per)
    take = slot[None, :] < sizes[:, None]
    index.reshape(engines, per)[take] = (starts[:, None] + slot[None, :])[take]
    index = index.reshape(engines, per)
    valid = index >= 0
    safe = np.where(valid, index, 0)
    return EngineBatch(
        responses=np.where(valid, responses[safe], 0),
        prompts=np.where(valid, prompts[safe], 0),
        valid=valid,
        index=index,
    )


def _start_iterations(responses: np.ndarray, max_running: int) -> np.ndarray:
    """Iteration at which each request is admitted; ``(engines, per)`` float array."""
    engines, per = responses.shape
    if per <= max_running:
        return np.zeros(responses.shape)
    starts = np.zeros(responses.shape)
    free = np.zeros((engines, max_running))
    rows = np.arange(engines)
    for j in range(per):  # FIFO: request j takes the slot that frees first
        slot = free.argmin(axis=1)
        starts[:, j] = free[rows, slot]
        free[rows, slot] += responses[:, j]
    return starts


def completion_work_s(
    batch: EngineBatch, model: GenerationModel, engine_units: float, max_running: int, tp: int = 1, pp: int = 1
) -> np.ndarray:
    """Uncontended seconds from the step's start until each request's last token; ``(engines, per)``.

    Padding slots get 0. Iteration time follows ``model.iteration_s(n, engine_units, tp, pp)``.
    """
    engines, per = batch.responses.shape
    start = _start_iterations(batch.responses, max_running)
    end = start + batch.responses
    valid = batch.valid.astype(float)
    iters = np.concatenate([start, end], axis=1)
    is_start = np.concatenate([np.ones((engines, per)), np.zeros((engines, per))], axis=1)
    deltas = np.concatenate([valid, -valid], axis=1)
    prefill = np.concatenate([batch.prompts * valid * model.prefill_s_per_token, np.zeros((engines, per))], axis=1)
    # Ends sort before starts in the same iteration: a slot frees, then the next request enters it.
    order = np.argsort(iters * 2.0 + is_start, axis=1, kind="stable")
    it_sorted = np.take_along_axis(iters, order, axis=1)
    running = np.cumsum(np.take_along_axis(deltas, order, axis=1), axis=1)
    seg_iters = np.diff(it_sorted, axis=1, append=it_sorted[:, -1:])
    step_s = model.iteration_s(running, engine_units, tp, pp)
    increments = np.take_along_axis(prefill, order, axis=1) + seg_iters * step_s
    at_event = np.cumsum(increments, axis=1) - increments  # time when each event happens
    times = np.empty_like(at_event)
    np.put_along_axis(times, order, at_event, axis=1)
    return np.where(batch.valid, times[:, per:], 0.0)


def generation_features(
    prompts: np.ndarray, responses: np.ndarray, engines: int, max_running: int
) -> tuple[float, float, float]:
    """``(I, S, P)`` of a step's slowest engine: its decode iterations, sequence-iterations and prompt tokens, the
    work of unit-cost generation models, so a step's generation time is ``base_s*I + per_seq_s*S +
    prefill_s_per_token*P``. The one feature function behind the loop fits and the log fits.
    """
    batch = deal(np.asarray(prompts), np.asarray(responses), engines)
    out = []
    for base, per_seq, prefill in ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)):
        unit = GenerationModel(
            device="cpu",  # the work does not depend on it
            units=1.0,
            base_s=base,
            per_seq_s=per_seq,
            prefill_s_per_token=prefill,
            max_running=max_running,
            fit={"n_samples": 0, "r2": 0, "residual_rel_std": 0, "residual_rel_max": 0},
        )
        out.append(float(completion_work_s(batch, unit, 1.0, max_running).max()))
    return out[0], out[1], out[2]

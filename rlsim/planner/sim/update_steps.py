"""What ``trainer.mini_batch_size`` and ``trainer.epochs`` add to the update phase.

The loop's trainer (and PPO's critic, which follows its mini-batches and epochs) cuts the batch, in
the order the rollouts reached it, into mini-batches; per epoch, each mini-batch's rollouts are
sorted by length and cut into micro-batches (each padded to its longest, forward and backward each),
then one gradient clip + AdamW step is made (``rlsim.loop.roles.trainer.PolicyTrainer.update``,
``rlsim.loop.roles.packing``). So more optimizer steps cost their own time, and cutting the batch
changes the padding: two mini-batches of 16 are each padded to about the batch's longest, where one
sorted batch of 32 pads short rollouts with short ones.

The profile's fitted update (``TrainerModel.update_s``) was measured with one step on the whole batch;
the planner adds the difference of this structural cost between the run's split and that one:

    calls(split) = epochs x sum over mini-batches [ sum over micro-batches F(mb) + o ]

where ``o`` is the measured optimizer step (``roles.optimizer_step_s``) and ``F`` a micro-batch's
forward and backward: for the actor ``roles.update_actor`` itself (fitted with the step taken off,
its cost following the response tokens as well as the padding); for the critic
``roles.update_critic`` less ``o`` (each of its timed calls was one micro-batch and one step; at
least 0), with ``o`` 0 where the profile did not time the critic's step, which makes ``calls`` the
sum of the micro-batches' latencies, as the planner priced the critic before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlsim.planner.profile.schema import RolesModel, ScorerLatencyModel, UpdateCostModel


@dataclass(frozen=True)
class UpdateShape:
    """How a role's update is cut: ``micro_batch`` sequences per forward/backward, ``mini_batch_size``
    rollouts per optimizer step (None: the whole batch), ``epochs`` passes over the batch."""

    micro_batch: int = 16
    mini_batch_size: int | None = None
    epochs: int = 1

    @property
    def one_step(self) -> bool:
        """True when the update is what the profile's fit measured: one epoch, one optimizer step."""
        return self.mini_batch_size is None and self.epochs == 1

    def whole_batch(self) -> UpdateShape:
        return UpdateShape(self.micro_batch)


def update_calls_s(
    model: ScorerLatencyModel | UpdateCostModel,
    optimizer_s: float,
    tokens: np.ndarray,
    responses: np.ndarray,
    shape: UpdateShape,
    units: float,
) -> float:
    """Seconds of an update's forward/backward calls and optimizer steps on rollouts of ``tokens``
    (prompt + response each) and ``responses`` (response tokens), in the order the trainer gets them,
    alone on ``units``."""
    if len(tokens) == 0:
        return 0.0
    size = shape.mini_batch_size or len(tokens)
    epoch = 0.0
    for start in range(0, len(tokens), size):
        part = slice(start, start + size)
        order = np.argsort(tokens[part], kind="stable")
        rows, resp = tokens[part][order], responses[part][order]
        micro = [slice(j, j + shape.micro_batch) for j in range(0, len(rows), shape.micro_batch)]
        epoch += sum(_forward_backward_s(model, rows[m], resp[m], units, optimizer_s) for m in micro) + optimizer_s
    overhead = model.call_overhead_s if isinstance(model, ScorerLatencyModel) else 0.0
    factor = model.in_loop_factor if isinstance(model, ScorerLatencyModel) else 1.0
    return shape.epochs * epoch * factor + overhead


def _forward_backward_s(
    model: ScorerLatencyModel | UpdateCostModel, rows: np.ndarray, responses: np.ndarray, units: float, step_s: float
) -> float:
    """One micro-batch, ``rows`` padded to the longest: an ``UpdateCostModel`` prices the forward and
    backward alone; a ``ScorerLatencyModel``'s call held one optimizer step, taken off (at least 0)."""
    padded = int(rows.max()) * len(rows)
    if isinstance(model, UpdateCostModel):
        return model.latency_s(int(responses.sum()), padded, units)
    return max(model.latency_s(len(rows), padded, units) - step_s, 0.0)


def check_priceable(roles: RolesModel | None, shape: UpdateShape, units: float) -> None:
    """``ValueError`` naming the fix when ``shape`` needs a timed actor update the profile lacks."""
    if shape.one_step:
        return
    if roles is None or roles.update_actor is None or roles.optimizer_s("actor", units) is None:
        raise ValueError(
            "the profile has no timed actor update (roles.update_actor, roles.optimizer_step_s), so the "
            "planner cannot price trainer.mini_batch_size or trainer.epochs > 1; measure it with rlsim profile "
            "(a config with a roles section), or plan one optimizer step per RL step"
        )


def extra_actor_s(
    roles: RolesModel | None, tokens: np.ndarray, responses: np.ndarray, shape: UpdateShape, units: float
) -> float:
    """Seconds ``shape`` adds to (or takes from) the actor's one-step update; 0 for one step. Raises
    ``ValueError`` naming the fix when the profile cannot price it (no timed actor update)."""
    if shape.one_step:
        return 0.0
    check_priceable(roles, shape, units)
    assert roles is not None and roles.update_actor is not None  # checked just above
    opt = roles.optimizer_s("actor", units) or 0.0
    now = update_calls_s(roles.update_actor, opt, tokens, responses, shape, units)
    return now - update_calls_s(roles.update_actor, opt, tokens, responses, shape.whole_batch(), units)


def critic_update_s(
    roles: RolesModel, tokens: np.ndarray, responses: np.ndarray, shape: UpdateShape, units: float
) -> float:
    """Seconds of the critic's update (``roles.update_critic``) cut as ``shape``."""
    optimizer = roles.optimizer_s("critic", units) or 0.0
    return update_calls_s(roles.update_critic, optimizer, tokens, responses, shape, units)

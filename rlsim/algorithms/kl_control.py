"""The KL coefficient over a run: fixed, or adapted towards a target KL (Ziegler et al. 2019).

After each step with a mean KL ``kl`` over ``n`` sequences, the adaptive controller multiplies the
coefficient by ``1 + clip(kl / target - 1, -0.2, 0.2) * n / horizon``: above the target it grows, below
it shrinks, by at most 0.2 x n / horizon per step. As verl's ``AdaptiveKLController``
(``verl/trainer/ppo/core_algos.py``; ``kl_ctrl.type: adaptive``, ``target_kl``, ``horizon`` in
``verl/trainer/config/ppo_trainer.yaml``, stepped with the batch size in ``apply_kl_penalty``) and
OpenRLHF's (``openrlhf/trainer/ppo_utils/kl_controller.py``; ``--algo.kl.target``, ``--algo.kl.horizon``).
The KL fed to it is verl's: the mean over sequences of each sequence's token-mean KL.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class KlController:
    """``value`` is the coefficient for the next step; ``target`` None keeps it fixed."""

    def __init__(self, coef: float, target: float | None = None, horizon: int = 10000) -> None:
        if target is not None and not target > 0:
            raise ValueError(f"the KL target must be positive, not {target}")
        if horizon < 1:
            raise ValueError(f"the KL horizon must be at least 1 step, not {horizon}")
        self.value, self.target, self.horizon = float(coef), target, horizon

    def update(self, current_kl: float, n_steps: int) -> float:
        """Adapt to this step's KL (``n_steps``: sequences in the step); returns the new coefficient."""
        if self.target is not None:
            error = float(np.clip(current_kl / self.target - 1, -0.2, 0.2))
            self.value *= 1 + error * n_steps / self.horizon
        return self.value


def sequence_mean_kl(per_sequence: Iterable[np.ndarray]) -> float:
    """Mean over sequences of each one's token-mean KL (verl's ``current_kl`` in ``apply_kl_penalty``)."""
    means = [float(np.mean(k)) for k in per_sequence if len(k)]
    return float(np.mean(means)) if means else 0.0

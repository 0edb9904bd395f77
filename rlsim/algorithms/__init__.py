"""The RL algorithms as pure functions on arrays: advantages (GRPO, RLOO, GAE), KL estimators, losses.

No models and no Ray here: the trainer, the critic and (later) their actors call these, and the
tests check them against hand-worked values. Modules that need torch import it at their top, so
import them directly (``from rlsim.algorithms.gae import ...``); this package file stays light.
"""

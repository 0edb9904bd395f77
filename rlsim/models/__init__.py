"""Reward models and policies, built or loaded locally: nothing is downloaded from a model hub.

``resolve_reward_model("minilm-rm" | "tiny-llama-rm" | FOLDER)`` and
``resolve_policy("tiny-llama" | FOLDER)`` return local Hugging Face folders, materialising the
built-in ones under ``rlsim.paths.cache_dir()/models`` on first use.
"""

from rlsim.models.builtin import BUILTIN_POLICIES, BUILTIN_REWARD_MODELS
from rlsim.models.reward import RewardModelSpec, resolve_policy, resolve_reward_model

__all__ = [
    "BUILTIN_POLICIES",
    "BUILTIN_REWARD_MODELS",
    "RewardModelSpec",
    "resolve_policy",
    "resolve_reward_model",
]

"""Kept so existing imports work: the advantages now live in ``rlsim.algorithms``."""

from rlsim.algorithms.advantages import group_advantages

__all__ = ["group_advantages"]

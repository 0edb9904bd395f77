"""Rollout generation: prompts from a workload, a vLLM (default) or Hugging Face engine, weight reload.

Plain Python, no Ray: ``rlsim.actors`` wraps these classes in actors.
"""

from rlsim.rollout.generator import GENERATORS, Generator, GeneratorSettings, SyncResult, make_generator
from rlsim.rollout.prompts import make_step_requests
from rlsim.rollout.types import Event, Rollout, RolloutRequest

__all__ = [
    "GENERATORS",
    "Event",
    "Generator",
    "GeneratorSettings",
    "Rollout",
    "RolloutRequest",
    "SyncResult",
    "make_generator",
    "make_step_requests",
]

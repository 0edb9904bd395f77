"""Reward functions for the call-pool tests (imported by name in the pool's worker processes)."""

import os
import time


def length(prompt: str, response: str) -> float:
    return float(len(response))


def sleepy(prompt: str, response: str) -> float:
    time.sleep(float(response))
    return 1.0


def raises(prompt: str, response: str) -> float:
    raise ValueError(f"bad answer {response!r}")


def dies(prompt: str, response: str) -> float:
    os._exit(3)


def not_a_number(prompt: str, response: str) -> str:
    return "high"


def chatty(prompt: str, response: str) -> float:
    print("a line on stdout that must not corrupt the protocol")
    return 2.0

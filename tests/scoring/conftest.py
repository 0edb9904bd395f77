import pytest

from rlsim.fidelity.verify import verification_texts
from rlsim.models import resolve_reward_model


@pytest.fixture(scope="session")
def minilm():
    return resolve_reward_model("minilm-rm")


@pytest.fixture(scope="session")
def tiny_llama_rm():
    return resolve_reward_model("tiny-llama-rm")


@pytest.fixture(scope="session")
def texts():
    return verification_texts()

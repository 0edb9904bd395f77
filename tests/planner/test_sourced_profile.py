"""The published H100 profile: every number is traced to a public source or listed as unmeasured."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rlsim.planner.profile.schema import load_profile
from rlsim.planner.profile.sources import number_paths, unsourced_numbers

H100 = Path(__file__).resolve().parents[2] / "configs" / "profiles" / "h100_published.json"


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads(H100.read_text())


def test_every_number_has_a_source(data: dict) -> None:
    assert unsourced_numbers(data) == []
    assert len(number_paths(data)) > 40  # the check walked the whole profile, not an empty one


def test_a_number_without_source_fails(data: dict) -> None:
    broken = copy.deepcopy(data)
    broken["generation"]["base_s"] = 0.01
    del broken["provenance"]["generation.base_s"]
    broken["trainer"]["update_fixed_s"] = 1.0  # a new number nobody sourced
    broken["provenance"]["generation.per_seq_s"]["source"] = "a-blog-nobody-named"
    assert unsourced_numbers(broken) == [
        "generation.base_s: no provenance entry",
        "generation.per_seq_s: source 'a-blog-nobody-named' is not one of `sources`",
        "trainer.update_fixed_s: no provenance entry",
    ]


def test_unmeasured_numbers_are_listed_with_their_derivation(data: dict) -> None:
    broken = copy.deepcopy(data)
    broken["unmeasured"] = [u for u in broken["unmeasured"] if not u.startswith("trainer.sync_fixed_s ")]
    assert unsourced_numbers(broken) == ["trainer.sync_fixed_s: marked unmeasured but not listed in `unmeasured`"]


def test_sources_name_document_version_and_table(data: dict) -> None:
    for key, source in data["sources"].items():
        assert source["url"].startswith("https://") and source["version"] and source["where"], key


def test_it_loads_and_describes_h100s() -> None:
    profile = load_profile(H100)
    assert not profile.illustrative and profile.generation is not None and profile.generation.device == "cuda"
    assert profile.machine is not None and "H100" in profile.machine["gpus"][0]["name"]
    assert profile.generation.parallel is not None and 8 in profile.generation.parallel.tp_speedup


def test_the_vllm_reward_model_is_the_padded_one_charged_per_real_token() -> None:
    # vLLM's pooling runner (rm-7b@vllm) computes a flat batch of real tokens; the same model through a padded
    # runtime (rm-7b@cuda) has the same cost per computed token, so only the padding differs between them.
    runtimes = load_profile(H100).runtimes
    vllm, padded = runtimes["rm-7b@vllm"], runtimes["rm-7b@cuda"]
    assert not vllm.pads and padded.pads
    assert vllm.model_dump(exclude={"pads"}) == padded.model_dump(exclude={"pads"})

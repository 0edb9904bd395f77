"""The reference and critic placement entries, presets that cover them, and colocation groups."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlsim.errors import ConfigError
from rlsim.placement import (
    ActorUnit,
    PlacementConfig,
    ResolvedPlacement,
    active_roles,
    actor_units,
    colocation_problems,
    resolve_placement,
)

PPO = ("rollout", "scorer", "trainer", "reference", "critic")


def test_only_ppo_starts_a_critic_and_only_a_kl_starts_a_reference() -> None:
    assert active_roles("grpo", 0.0) == ("rollout", "scorer", "trainer")
    assert active_roles("rloo", 0.1) == ("rollout", "scorer", "trainer", "reference")
    assert active_roles("ppo", 0.0) == ("rollout", "scorer", "trainer", "critic")
    assert active_roles("ppo", 0.05) == PPO


def test_presets_place_the_reference_and_critic_with_the_scorer_and_trainer() -> None:
    shared = resolve_placement(PlacementConfig(preset="shared"), [0, 1, 2, 3], PPO)
    assert {r: p.cores for r, p in shared.items()} == dict.fromkeys(PPO, (0, 1, 2, 3))
    split = resolve_placement(PlacementConfig(preset="split"), [0, 1, 2, 3], PPO)
    assert split["rollout"].cores == (0, 1)
    assert split["reference"].cores == split["critic"].cores == split["scorer"].cores == (2, 3)
    # GRPO asks for its three roles only, as before.
    assert set(resolve_placement(PlacementConfig(), [0, 1])) == {"rollout", "scorer", "trainer"}


def test_a_role_entry_sets_its_own_cores_threads_and_gpu() -> None:
    cfg = PlacementConfig.model_validate({"critic": {"cores": [1], "threads": 1, "gpu": 0.25, "num_cpus": 0.2}})
    assert resolve_placement(cfg, [0, 1], PPO)["critic"] == ResolvedPlacement((1,), 1, 0.25, 0.2)


def test_every_colocation_problem_is_listed_at_once() -> None:
    groups = [["reference", "scorer", "reward"], ["critic", "critic"], ["rollout", "trainer"], ["scorer"]]
    problems = colocation_problems(groups, active_roles("grpo", 0.1))
    text = "\n".join(problems)
    assert "placement.colocate[0]: unknown role 'reward'" in text
    assert "placement.colocate[1]: critic does not run in this config" in text  # grpo: no critic
    assert "placement.colocate[1]: critic is named twice" in text
    assert "placement.colocate[2]: rollout cannot share a process" in text
    assert "placement.colocate[3]: scorer is named twice" in text  # already in group 0
    assert "placement.colocate[3]: a group needs at least two roles" in text
    assert len(problems) == 6
    assert colocation_problems([["reference", "scorer"], ["critic", "trainer"]], PPO) == []


def test_units_merge_each_group_into_one_process_where_its_first_member_stands() -> None:
    placements = {r: ResolvedPlacement((i,), 1, 0.1 * i, 0.25) for i, r in enumerate(PPO)}
    units = actor_units(placements, 2, [["reference", "scorer"], ["critic", "trainer"]])
    assert [u.name for u in units] == ["rollout", "reference+scorer-0", "scorer-1", "critic+trainer"]
    merged = units[1]
    assert merged.members == (("reference", "reference"), ("scorer", "scorer-0"))
    # One process pinned to both roles' cores, their GPU shares added.
    assert merged.placement.cores == (1, 3) and merged.placement.gpu == pytest.approx(0.4)
    plain = actor_units(placements, 1)
    assert [u.name for u in plain] == ["rollout", "scorer-0", "trainer", "reference", "critic"]
    assert plain[0] == ActorUnit("rollout", (("rollout", "rollout"),), placements["rollout"])


def test_grpo_units_are_todays_three_roles() -> None:
    placements = resolve_placement(PlacementConfig(), [0, 1])
    assert [u.name for u in actor_units(placements, 2)] == ["rollout", "scorer-0", "scorer-1", "trainer"]


def test_a_bad_ppo_config_is_one_error_listing_every_problem(tmp_path: Path) -> None:
    from rlsim.loop.config import load_run_config

    path = tmp_path / "bad.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "trainer": {"algorithm": "ppo"},
                "kl": {"coef": 0.1},
                "placement": {
                    "colocate": [["reference", "scorer", "scorer"], ["critic", "judge"]],
                    "critic": {"gpu": 0.5},
                },
            }
        )
    )
    with pytest.raises(ConfigError) as err:
        load_run_config(path)
    text = str(err.value)
    assert "scorer is named twice" in text and "unknown role 'judge'" in text
    assert "placement.critic.gpu: a GPU share needs critic.device: cuda" in text


def test_a_scorer_kill_is_refused_when_scorer_0_shares_the_critics_process() -> None:
    from rlsim.loop.config import RunConfig, cross_field_problems

    config = RunConfig.model_validate(
        {
            "trainer": {"algorithm": "ppo"},
            "faults": {"kill_scorer_steps": [2]},
            "placement": {"colocate": [["scorer", "critic"]]},
        }
    )
    assert any("shares a process with the critic" in p for p in cross_field_problems(config))

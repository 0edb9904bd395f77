"""Time the actor's update and its optimizer step (``roles.update_actor``, ``roles.optimizer_step_s``) into
a measured profile, replacing any it has, without re-running the rest of ``rlsim profile``.

    python scripts/time_update_steps.py configs/profiles/cpu_2core_measured.json OUT.json

Times them on this machine with the roles grid of ``configs/profiles/measure_cpu_2core.yaml`` (the
``roles_section`` path a re-fit from a stored profile takes; every other number is kept as stored)
and appends a dated note naming the machine. About 1.5 minutes
on a 2-core VM. A full ``rlsim profile`` measures them too.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from rlsim.config_loader import load_config
    from rlsim.fingerprint import machine_fingerprint
    from rlsim.planner.measure.build_profile import ProfileConfig
    from rlsim.planner.measure.sections import roles_section
    from rlsim.planner.profile.schema import load_profile, save_profile

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("profile", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "profiles" / "measure_cpu_2core.yaml")
    args = p.parse_args()
    stored = load_profile(args.profile)
    if stored.roles is None:
        raise SystemExit(f"{args.profile}: no roles section to add the actor's update to")
    # Without them, the re-fit times the actor's update and its optimizer step now (every other number is kept).
    bare = stored.roles.model_copy(update={"update_actor": None, "optimizer_step_s": {}})
    stored = stored.model_copy(update={"roles": bare})
    config = load_config(ProfileConfig, args.config)
    measured: list[str] = []
    start = datetime.datetime.now(datetime.UTC)
    roles = roles_section(config.roles, True, stored, config.disturbed_above, measured, [], print, config.quiet)
    end = datetime.datetime.now(datetime.UTC)
    assert roles is not None and roles.update_actor is not None
    fp = machine_fingerprint()
    note = (
        f"{start:%Y-%m-%d %H:%M}-{end:%H:%M} UTC: roles.update_actor and roles.optimizer_step_s (actor) timed "
        f"(python scripts/time_update_steps.py; {'; '.join(measured)}) on {fp['cpu_model']}, {fp['cores']} cores, "
        f"flags {' '.join(fp['cpu_flags'])}; every other number as measured before"
    )
    added = bare.model_copy(update={"update_actor": roles.update_actor, "optimizer_step_s": roles.optimizer_step_s})
    save_profile(stored.model_copy(update={"roles": added, "notes": [*stored.notes, note]}), args.out)
    print(note)


if __name__ == "__main__":
    main()

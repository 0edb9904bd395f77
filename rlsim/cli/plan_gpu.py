"""``rlsim plan RUN.yaml`` for a ``kind: gpu-step`` YAML: one RL run on GPUs, phase by phase.

Example: ``rlsim plan configs/gpu_step_llama8b_h100.yaml --out out/gpu-plan``. The table and
``plan.json`` give each phase in rlsim's words and under NeMo-RL's and verl's metric names.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rlsim.errors import RlsimError
from rlsim.io import atomic_write_json, check_output_dir, check_output_file
from rlsim.planner.profile.gpu_efficiency import load_efficiency
from rlsim.planner.sim.gpu_step import check_memory, predict_step
from rlsim.planner.spec.gpu_run import load_gpu_run


def run_gpu_plan(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rlsim.progress import make_console

    if args.target_step_s is not None:
        raise RlsimError(
            "--target-step-s searches placements of profile-based plans only; for a gpu-step "
            "run, vary gpus with --set gpus=N"
        )
    config, eff_path = load_gpu_run(Path(args.config), args.overrides)
    eff = load_efficiency(eff_path)
    memory = check_memory(config, eff)  # refuses, with the arithmetic, before any simulation
    if args.json:
        check_output_file(args.json, "--json")
    if args.out:
        check_output_dir(args.out, "--out")
    pred = predict_step(config, eff)
    out = make_console()
    names = pred.framework_names()
    table = Table(
        title=f"{config.name}: {config.shape.name} on {config.gpus} x {config.gpu}, "
        f"{config.placement}/{config.schedule}, mean of {config.steps} steps"
    )
    for col in ("phase", "seconds"):
        table.add_column(col)
    for phase, seconds in pred.phases.items():
        if seconds > 0:
            table.add_row(phase, f"{seconds:.2f}")
    table.add_row("step", f"{pred.step_s:.2f}")
    out.print(table)
    out.print("NeMo-RL names: " + ", ".join(f"{k} {v:.1f}" for k, v in names["nemo_rl"].items()))
    out.print("verl names: " + ", ".join(f"{k} {v:.1f}" for k, v in names["verl"].items()))
    if config.judge is not None:
        j, d = config.judge, pred.detail
        how = "one forward pass" if config.rollouts.reward == "reward-model" else j.mode
        where = f"{j.gpus} GPUs of its own (beside the {config.gpus})" if j.gpus else "the generation GPUs, in turn"
        parts = f"prefill {d['judge_prefill_s']:.1f} s, decode {d['judge_decode_s']:.1f} s"
        parts += f", weights in and out {d['judge_swap_s']:.1f} s" if "judge_swap_s" in d else ", while generation runs"
        out.print(
            f"reward: {config.rollouts.reward} {j.shape.name} ({how}) on {where}: {d['judge_s']:.1f} s of the "
            f"generation phase ({parts}; last step's draw)"
        )
    out.print(f"efficiency {eff_path.name}: fitted on {', '.join(eff.fitted_on) or 'nothing (all assumed)'}")
    payload = {
        "config": config.model_dump(mode="json"),
        "phases_s": pred.phases,
        "step_s": pred.step_s,
        "framework_names": names,
        "generation_detail": pred.detail,
        "memory_gb_per_gpu": memory,
        "efficiency": eff.model_dump(),
    }
    json_path = args.json or (args.out / "plan.json" if args.out else None)
    if json_path:
        atomic_write_json(json_path, payload)
        out.print(f"wrote {json_path}")
    return 0

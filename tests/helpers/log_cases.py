"""Training logs spelled as verl and OpenRLHF print them, from a seeded cost model (for the log tests).

The printing follows the frameworks' code: verl's console logger ``concat_dict_to_str``
(``verl/utils/logger/aggregate_logger.py``: ``f"{v:.3f}"`` up to 0.4, ``pprint.pformat(v)`` from 0.5,
where a numpy scalar prints as ``np.float64(x)``), its file logger (``verl/utils/tracking.py``
``FileLogger``: ``{"step": N, "data": {...}}``), Ray's ``(TaskRunner pid=N)`` prefix and ANSI colours,
OpenRLHF's ``logger.info(f"✨ Global step {global_step}: {log_status}")`` (``openrlhf/trainer/ppo_trainer.py``)
behind the prefix of ``openrlhf/utils/logging_utils.py``, and a W&B history CSV with OpenRLHF's
``train/`` keys. Which timers each verl release has, and whether validation and checkpoint run inside
``timing_s/step``, follows ``verl/trainer/ppo/ray_trainer.py`` of each release (see
``rlsim/planner/profile/logs/frameworks.py``). The numbers are synthetic, not measurements.
"""

from __future__ import annotations

import csv
import io
import json
import pprint
from pathlib import Path

import numpy as np

GPUS = 8


def verl_steps(
    n: int = 12, release: str = "0.7.1", test_freq: int = 0, save_freq: int = 0, seed: int = 3
) -> list[dict[str, float]]:
    """Metrics dicts of ``n`` verl steps as ``ray_trainer.fit`` of ``release`` logs them."""
    rng = np.random.default_rng(seed)
    rel = tuple(int(x) for x in release.split("."))
    out = []
    for step in range(1, n + 1):
        rollouts = 512
        prompt = float(rng.uniform(150, 220))
        mean = float(rng.uniform(300, 900))
        mx = float(min(2048, round(mean * rng.uniform(1.6, 2.8))))
        per_engine = rollouts // GPUS
        gen = (2.0 + 0.021 * mx + 4e-5 * per_engine * mean + 2e-6 * per_engine * prompt) * rng.normal(1, 0.02)
        reward = (1.5 + 1.1e-5 * rollouts * (prompt + mx)) * rng.normal(1, 0.02)
        tokens = rollouts * mean
        old_lp = 3e-5 * tokens * rng.normal(1, 0.02)
        upd = (25 + 1.4e-4 * tokens) * rng.normal(1, 0.02)
        sync = 3.5 * rng.normal(1, 0.03)
        timing = {"gen": gen, "old_log_prob": old_lp, "adv": 0.4, "update_actor": upd}
        if rel >= (0, 4):
            timing["reward"] = reward
        if rel >= (0, 7, 1):
            timing["update_weights"] = sync
        else:
            timing["gen"] += sync  # before 0.7.1 the weight sync runs inside generation
        step_s = sum(timing.values()) + 1.2 * rng.normal(1, 0.1)
        periodic = {}
        if test_freq and step % test_freq == 0:
            periodic["testing"] = 26.0 * rng.normal(1, 0.03)
        if save_freq and step % save_freq == 0:
            periodic["save_checkpoint"] = 25.0 * rng.normal(1, 0.03)
        if rel < (0, 6):  # up to 0.5 validation and checkpoint run inside the step timer
            step_s += sum(periodic.values())
        timing.update(periodic)
        timing["step"] = step_s
        if rel >= (0, 5):
            timing["start_profile"], timing["stop_profile"] = 1e-4, 1e-4
        d = {
            "training/global_step": step,
            "training/epoch": 0,
            "critic/score/mean": float(rng.uniform(0, 1)),
            "response_length/mean": mean,
            "response_length/max": mx,
            "response_length/min": 12.0,
            "prompt_length/mean": prompt,
            "prompt_length/max": 512.0,
            "global_seqlen/mean": rollouts * (prompt + mean) / GPUS,
            **{f"timing_s/{k}": v for k, v in timing.items()},
            "perf/total_num_tokens": round(rollouts * (prompt + mean)),
            "perf/time_per_step": step_s,
            "perf/throughput": rollouts * (prompt + mean) / (step_s * GPUS),
        }
        if "testing" in periodic:
            d["val-core/openai/gsm8k/reward/mean@1"] = 0.41
        out.append(d)
    return out


def verl_console(steps: list[dict[str, float]], release: str = "0.7.1") -> list[str]:
    """``concat_dict_to_str`` of each step as ``release`` prints it (numpy scalars, as the trainer has them)."""
    rel = tuple(int(x) for x in release.split("."))
    lines = []
    for i, d in enumerate(steps, start=1):
        parts = [f"step:{i}"]
        for k, v in d.items():
            if rel >= (0, 5):
                parts.append(f"{k}:{pprint.pformat(np.float64(v) if isinstance(v, float) else v)}")
            else:
                parts.append(f"{k}:{v:.3f}")
        lines.append(" - ".join(parts))
    return lines


def as_ray_captured(lines: list[str], twice: bool = True, per_line: bool = False) -> list[str]:
    """Console lines as a Ray job's driver shows them: coloured ``(TaskRunner pid=N)`` prefix, each line
    printed twice, and (``per_line``) one ``key:value`` per line after ``step:N``."""
    prefix = "\x1b[36m(TaskRunner pid=48213)\x1b[0m "
    out = []
    for line in lines:
        pieces = line.split(" - ") if per_line else [line]
        for piece in pieces:
            out += [prefix + piece] * (2 if twice else 1)
    return out


def verl_file_logger(steps: list[dict[str, float]]) -> list[str]:
    """verl's ``FileLogger`` lines: ``{"step": N, "data": {...}}``."""
    return [json.dumps({"step": i, "data": d}) for i, d in enumerate(steps, start=1)]


def openrlhf_steps(n: int = 10, seed: int = 5) -> list[dict[str, float]]:
    """``status`` dicts of ``n`` OpenRLHF 0.9.8+ steps (``train_step`` plus the loop's timing keys)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        rollouts, mean = 256, float(rng.uniform(200, 1200))
        status = {
            "policy_loss": 0.01,
            "kl": 0.002,
            "timing/make_experience": (4 + 1.0e-5 * rollouts * mean) * rng.normal(1, 0.02),
            "timing/ppo_train": (18 + 1.6e-4 * rollouts * mean) * rng.normal(1, 0.02),
            "timing/broadcast": 2.8 * rng.normal(1, 0.03),
            "rollout/reward_mean": float(rng.uniform(0, 1)),
            "rollout/response_length_mean": mean,
            "rollout/truncated_rate": 0.0,
            "rollout/num_samples": float(rollouts),
            "timing/generation": (1.0 + 0.02 * mean + 5e-5 * (rollouts // 4) * mean) * rng.normal(1, 0.02),
        }
        status["timing/step_total"] = sum(v for k, v in status.items() if k.startswith("timing/"))
        out.append(status)
    return out


def openrlhf_console(steps: list[dict[str, float]]) -> list[str]:
    """The ``Global step`` lines behind OpenRLHF's logging prefix, with tqdm's noise between them."""
    lines = []
    for i, status in enumerate(steps, start=1):
        lines.append(f"Episode [1/1]:  {i * 10}%|█         | {i}/10 [00:{i:02d}<01:00]")
        lines.append(f"INFO 12-02 10:{i:02d}:00 ppo_trainer.py:547] ✨ Global step {i}: {status}")
    return lines


def wandb_csv(steps: list[dict[str, float]]) -> str:
    """A W&B history export of OpenRLHF's ``train/`` keys (``WandbLogger.log_train``)."""
    rows = [
        {"_step": i, **{f"train/{k}": v for k, v in s.items()}, "train/global_step": i} for i, s in enumerate(steps)
    ]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def tensorboard_events(folder: Path, steps: list[dict[str, float]], prefix: str = "") -> Path:
    """An event file as ``SummaryWriter.add_scalar`` writes it (verl: every key as is; OpenRLHF: ``train/``),
    through TensorBoard's own writer and protos (torch's ``scalar`` stores ``simple_value``)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    for i, d in enumerate(steps, start=1):
        for k, v in d.items():
            value = summary_pb2.Summary.Value(tag=prefix + k, simple_value=float(v))
            writer.add_event(event_pb2.Event(step=i, wall_time=float(i), summary=summary_pb2.Summary(value=[value])))
    writer.close()
    return next(folder.glob("*tfevents*"))

"""Does a profile belong to the hardware it is used for? One warning line when it does not.

``rlsim plan CLUSTER.yaml`` compares the profile's machine with the cluster description (GPU family
for a GPU profile; the CPU model when the YAML names one, else this machine, for a CPU profile);
``rlsim plan validate`` compares it with this machine, which runs the real loops.
"""

from __future__ import annotations

from pathlib import Path

from rlsim.fingerprint import (
    cluster_fingerprint,
    fingerprint_differences,
    gpu_differences,
    machine_fingerprint,
    mismatch_warning,
)
from rlsim.planner.profile.schema import Profile
from rlsim.planner.spec.cluster import NodeSpec

NO_FINGERPRINT = (
    "the profile {path} records no machine (written before rlsim kept fingerprints), so nothing "
    "checks that it belongs to this hardware; re-measure it to record one"
)


def uses_gpus(profile: Profile) -> bool:
    return profile.generation is not None and profile.generation.device == "cuda"


# An illustrative profile describes no machine at all; its own warning already says so.
def check_here(profile: Profile, path: Path | str, here: dict | None = None) -> str | None:
    """A warning when ``profile`` was measured on other hardware than this machine (None: same)."""
    if profile.machine is None:
        return None if profile.illustrative else NO_FINGERPRINT.format(path=path)
    diffs = fingerprint_differences(profile.machine, here or machine_fingerprint())
    return mismatch_warning(str(path), diffs, uses_gpus(profile))


def check_cluster(profile: Profile, path: Path | str, node: NodeSpec, here: dict | None = None) -> str | None:
    """A warning when ``profile`` does not describe the cluster's nodes (None: it does, or cannot tell).

    A GPU profile is compared by GPU family with ``nodes.gpu_model`` (when given). A CPU profile is
    compared with ``nodes.cpu_model`` when given, else with this machine (a CPU plan is for machines
    of this kind unless it says otherwise).
    """
    if profile.machine is None:
        return None if profile.illustrative else NO_FINGERPRINT.format(path=path)
    if uses_gpus(profile):
        if node.gpu_model is None:
            return None
        diffs = gpu_differences(profile.machine, cluster_fingerprint(node.gpu_model, node.gpus, node.cores))
        return mismatch_warning(str(path), diffs, gpu=True)
    if node.cpu_model is not None:
        recorded = profile.machine.get("cpu_model")
        diffs = [] if recorded == node.cpu_model else [f"CPU {recorded!r} vs the cluster's {node.cpu_model!r}"]
        return mismatch_warning(str(path), diffs, gpu=False)
    return check_here(profile, path, here)

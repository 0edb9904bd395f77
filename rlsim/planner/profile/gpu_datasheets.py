"""GPUs from their datasheets: dense peak FLOP/s, HBM, NVLink, network and host link, each number sourced.

Units: TFLOP/s (dense, no structured sparsity: the datasheets' "with sparsity" figures halved), GB and
GB/s (10^9 bytes; links per direction, per GPU). ``nvlink_domain`` is how many GPUs one NVLink fabric
joins (8 on an HGX board, 72 in a GB200 NVL72 rack); traffic beyond it goes over ``network_gbs``.
The achieved fractions of these peaks are the planner's efficiency factors
(``rlsim.planner.sim.gpu_step.Efficiency``), not part of a datasheet.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from rlsim.errors import RlsimError


class GpuSpec(BaseModel):
    """One GPU's datasheet peaks. ``sources`` maps each field to the document and table it is read from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    bf16_tflops: float = Field(gt=0)
    fp8_tflops: float | None = Field(default=None, gt=0, description="None: no FP8 tensor cores (A100)")
    hbm_gb: float = Field(gt=0)
    hbm_gbs: float = Field(gt=0)
    nvlink_gbs: float = Field(gt=0, description="NVLink bandwidth per GPU and direction")
    nvlink_domain: int = Field(ge=1)
    network_gbs: float = Field(gt=0, description="scale-out NIC bandwidth per GPU and direction")
    host_link_gbs: float = Field(gt=0, description="GPU-CPU link per direction (PCIe or NVLink-C2C)")
    sources: dict[str, str] = Field(default_factory=dict)

    def peak_flops(self, precision: str) -> float:
        """Dense tensor-core FLOP/s for ``bf16`` or ``fp8``; FP8 on a GPU without it is refused."""
        if precision == "fp8":
            if self.fp8_tflops is None:
                raise RlsimError(f"{self.name} has no FP8 tensor cores: use precision bf16 for it")
            return self.fp8_tflops * 1e12
        return self.bf16_tflops * 1e12


_H100 = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet (H100 SXM column)"
_H200 = "https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446 (H200 SXM column)"
_H20 = "NVIDIA HGX H20 product brief (2024): FP8 296 TFLOPS, BF16 148 TFLOPS, 96 GB HBM3 at 4.0 TB/s, NVLink 900 GB/s"
_A100 = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (A100 80GB SXM)"
)
_B200 = "https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet and the HGX B200 spec table (per GPU)"
_GB200 = "https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (GB200 NVL72 spec table, divided by 72 GPUs)"
_DGX_H100 = (
    "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html (8x ConnectX-7 400 Gb/s, PCIe Gen5)"
)
_DGX_A100 = (
    "https://docs.nvidia.com/dgx/dgxa100-user-guide/introduction-to-dgxa100.html (8x ConnectX-6 200 Gb/s, PCIe Gen4)"
)

GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec(
            name="h100-sxm",
            bf16_tflops=989.4,
            fp8_tflops=1978.9,
            hbm_gb=80,
            hbm_gbs=3350,
            nvlink_gbs=450,
            nvlink_domain=8,
            network_gbs=50,
            host_link_gbs=64,
            sources={
                "bf16_tflops": f"{_H100}: BF16 1,979 TFLOPS with sparsity",
                "fp8_tflops": f"{_H100}: FP8 3,958 with sparsity",
                "hbm_gb": _H100,
                "hbm_gbs": f"{_H100}: 3.35 TB/s",
                "nvlink_gbs": f"{_H100}: NVLink 900 GB/s (both directions)",
                "network_gbs": f"{_DGX_H100}: 400 Gb/s = 50 GB/s",
                "host_link_gbs": f"{_H100}: PCIe Gen5 128 GB/s (both directions)",
            },
        ),
        GpuSpec(
            name="h200-sxm",
            bf16_tflops=989.4,
            fp8_tflops=1978.9,
            hbm_gb=141,
            hbm_gbs=4800,
            nvlink_gbs=450,
            nvlink_domain=8,
            network_gbs=50,
            host_link_gbs=64,
            sources={
                "bf16_tflops": f"{_H200}: BF16 1,979 TFLOPS with sparsity",
                "fp8_tflops": f"{_H200}: FP8 3,958 with sparsity",
                "hbm_gb": _H200,
                "hbm_gbs": f"{_H200}: 4.8 TB/s",
                "nvlink_gbs": f"{_H200}: NVLink 900 GB/s",
                "network_gbs": "HGX H200 with ConnectX-7 400 Gb/s per GPU (as DGX H100)",
                "host_link_gbs": f"{_H200}: PCIe Gen5 128 GB/s",
            },
        ),
        GpuSpec(
            name="h20",
            bf16_tflops=148,
            fp8_tflops=296,
            hbm_gb=96,
            hbm_gbs=4000,
            nvlink_gbs=450,
            nvlink_domain=8,
            network_gbs=50,
            host_link_gbs=64,
            sources={k: _H20 for k in ("bf16_tflops", "fp8_tflops", "hbm_gb", "hbm_gbs", "nvlink_gbs")}
            | {"network_gbs": "assumed as HGX H100 (400 Gb/s per GPU)", "host_link_gbs": "PCIe Gen5 x16, as H100"},
        ),
        GpuSpec(
            name="a100-sxm-80gb",
            bf16_tflops=312,
            fp8_tflops=None,
            hbm_gb=80,
            hbm_gbs=2039,
            nvlink_gbs=300,
            nvlink_domain=8,
            network_gbs=25,
            host_link_gbs=32,
            sources={
                "bf16_tflops": f"{_A100}: BF16 312 TFLOPS (624 with sparsity)",
                "hbm_gb": _A100,
                "hbm_gbs": f"{_A100}: 2,039 GB/s",
                "nvlink_gbs": f"{_A100}: NVLink 600 GB/s",
                "network_gbs": f"{_DGX_A100}: 200 Gb/s = 25 GB/s",
                "host_link_gbs": f"{_A100}: PCIe Gen4 64 GB/s",
            },
        ),
        GpuSpec(
            name="b200",
            bf16_tflops=2250,
            fp8_tflops=4500,
            hbm_gb=180,
            hbm_gbs=8000,
            nvlink_gbs=900,
            nvlink_domain=8,
            network_gbs=50,
            host_link_gbs=64,
            sources={
                "bf16_tflops": f"{_B200}: BF16 4.5 PFLOPS with sparsity",
                "fp8_tflops": f"{_B200}: FP8 9 PFLOPS with sparsity",
                "hbm_gb": f"{_B200}: 1,440 GB per 8 GPUs",
                "hbm_gbs": f"{_B200}: 64 TB/s per 8 GPUs",
                "nvlink_gbs": f"{_B200}: NVLink 5 1.8 TB/s per GPU",
                "network_gbs": f"{_B200}: 8x ConnectX-7 400 Gb/s",
                "host_link_gbs": "PCIe Gen5 x16 (128 GB/s both directions)",
            },
        ),
        GpuSpec(
            name="gb200",
            bf16_tflops=2500,
            fp8_tflops=5000,
            hbm_gb=186,
            hbm_gbs=8000,
            nvlink_gbs=900,
            nvlink_domain=72,
            network_gbs=50,
            host_link_gbs=450,
            sources={
                "bf16_tflops": f"{_GB200}: BF16 360 PFLOPS with sparsity / 72",
                "fp8_tflops": f"{_GB200}: FP8 720 PFLOPS with sparsity / 72",
                "hbm_gb": f"{_GB200}: 13.4 TB HBM3e / 72",
                "hbm_gbs": f"{_GB200}: 576 TB/s / 72",
                "nvlink_gbs": f"{_GB200}: 130 TB/s NVLink / 72 = 1.8 TB/s per GPU",
                "nvlink_domain": f"{_GB200}: 72 GPUs in one NVLink domain",
                "network_gbs": "ConnectX-7 400 Gb/s per GPU (GB200 NVL72 reference architecture)",
                "host_link_gbs": f"{_GB200}: NVLink-C2C 900 GB/s per Grace-Blackwell pair (both directions)",
            },
        ),
    )
}


def gpu_spec(name: str) -> GpuSpec:
    """The datasheet of GPU ``name``; an unknown name lists the known ones."""
    try:
        return GPUS[name]
    except KeyError:
        raise RlsimError(f"unknown GPU {name!r}: known GPUs are {', '.join(sorted(GPUS))}") from None

"""How the calibrated int8 graphs are built: the activation range method and SmoothQuant-style smoothing.

Two ``ScorerSettings`` fields choose them, and every entry point that makes settings (a run config's ``reward:``,
``rlsim verify`` / ``score`` / ``serve`` / ``bench scoring`` flags, ``--set settings.x=y``) passes them through:

``int8_calibration``: how ``*-int8-static`` fixes each activation's range from the calibration split: ``minmax``
(the observed min/max, the default), ``percentile`` (the 99.999th percentile of |x| on a 2048-bin histogram, so
a few outliers do not stretch the range) or ``entropy`` (the clipping threshold that minimises the KL divergence
between the fp32 and the quantized histograms). The ``*-int8-mixed`` graphs quantize activations per batch
(dynamic int8), so no range is fixed there and this setting does not apply to them.

``int8_smooth_alpha``: None (no smoothing, the default) or the SmoothQuant migration strength in (0, 1]: the
plain fp32 graph is smoothed first (``rlsim.scoring.int8_smoothing``), then quantized; applies to both
``*-int8-static`` and ``*-int8-mixed``.

This module imports nothing heavy: ``ScorerSettings`` checks the values with it when the settings are made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlsim.errors import RlsimError

CALIBRATION_METHODS = ("minmax", "percentile", "entropy")
DEFAULT_CALIBRATION = "minmax"


def int8_option_problems(calibration: object, smooth_alpha: object) -> list[str]:
    """What is wrong with the two settings, one line each naming the fix; empty when both are valid."""
    problems = []
    if calibration not in CALIBRATION_METHODS:
        problems.append(
            f"int8_calibration: unknown range method {calibration!r}; valid: {', '.join(CALIBRATION_METHODS)}"
        )
    if smooth_alpha is not None:
        number = isinstance(smooth_alpha, (int, float)) and not isinstance(smooth_alpha, bool)
        if not number or not 0.0 < float(smooth_alpha) <= 1.0:  # type: ignore[arg-type]
            problems.append(
                f"int8_smooth_alpha: {smooth_alpha!r} is not a number in (0, 1]; give the SmoothQuant migration "
                "strength (0.5 is the paper's default), or leave it unset for no smoothing"
            )
    return problems


def check_int8_options(calibration: object, smooth_alpha: object) -> None:
    """RlsimError listing every problem of ``int8_option_problems``."""
    problems = int8_option_problems(calibration, smooth_alpha)
    if problems:
        raise RlsimError("; ".join(problems))


@dataclass(frozen=True)
class Int8Options:
    """The two settings a calibrated int8 graph is built with (checked); ``Int8Options()`` is the plain build."""

    calibration: str = DEFAULT_CALIBRATION
    smooth_alpha: float | None = None

    def __post_init__(self) -> None:
        check_int8_options(self.calibration, self.smooth_alpha)

    @property
    def smoothing_suffix(self) -> str:
        """``-sq0.5`` with smoothing, else empty (so the unsmoothed cache folders keep their names); every digit of
        alpha, so two alphas never share a folder."""
        return "" if self.smooth_alpha is None else f"-sq{float(self.smooth_alpha)!r}"

    @property
    def static_suffix(self) -> str:
        """The static graph's cache folder suffix: range method (unless MinMax), then smoothing."""
        method = "" if self.calibration == DEFAULT_CALIBRATION else f"-{self.calibration}"
        return method + self.smoothing_suffix

    def as_dict(self) -> dict[str, Any]:
        return {"calibration": self.calibration, "smooth_alpha": self.smooth_alpha}

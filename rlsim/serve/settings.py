"""Settings of the scoring server: what it runs, where it listens, and the limits that protect it."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from rlsim.errors import ConfigError
from rlsim.scoring.base import SCORERS, ScorerSettings

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServeSettings:
    """One server. Sizes are in sequences (texts or token-id rows) unless named otherwise.

    ``max_batch_size``: sequences per batch the dynamic batcher aims for (a bigger request
    runs alone). ``max_wait_s``: how long the oldest queued request may wait for company, seconds.
    ``max_queue``: sequences waiting before new requests get 503. ``request_timeout_s``: a request
    not answered by then gets 504. ``max_texts`` / ``max_text_chars`` / ``max_row_tokens`` /
    ``max_body_bytes``: per-request limits (413 past them). ``shutdown_grace_s``: how long a
    SIGTERM waits for accepted requests.

    ``sub_batch_size``: the texts of one dynamic batch are sorted by token length and scored in
    sub-batches of at most this many (0: one forward pass). A pass pads every row to the longest, so
    32 texts of mixed lengths in one pass wasted ~40% of the work on padding (ort, MiniLM, 1 thread:
    15.6 seq/s in one pass, 30.1 in sorted sub-batches of 8, 25.4 for 4-text requests alone).
    """

    runtime: str = "ort"
    model: str = "minilm-rm"
    host: str = LOOPBACK
    port: int = 8000
    scorer: ScorerSettings = field(default_factory=ScorerSettings)
    max_batch_size: int = 32
    sub_batch_size: int = 8
    max_wait_s: float = 0.002
    max_queue: int = 512
    request_timeout_s: float = 30.0
    max_texts: int = 256
    max_text_chars: int = 100_000
    max_row_tokens: int = 8192
    max_body_bytes: int = 32 * 1024 * 1024
    warmup: bool = True
    shutdown_grace_s: float = 30.0

    def check(self) -> ServeSettings:
        """Raise one ``ConfigError`` listing every invalid setting; returns self when all are fine."""
        errors = []
        positive = ("max_batch_size", "max_queue", "max_texts", "max_text_chars", "max_row_tokens", "max_body_bytes")
        for name in positive:
            if getattr(self, name) < 1:
                errors.append(f"{name} must be >= 1 (got {getattr(self, name)})")
        for name in ("request_timeout_s", "shutdown_grace_s"):
            if not getattr(self, name) > 0:
                errors.append(f"{name} must be > 0 seconds (got {getattr(self, name)})")
        if self.sub_batch_size < 0:
            errors.append(f"sub_batch_size must be >= 0 (got {self.sub_batch_size}; 0 scores a batch in one pass)")
        if not self.max_wait_s >= 0:
            errors.append(f"max_wait_s must be >= 0 seconds (got {self.max_wait_s})")
        if self.max_queue < max(self.max_batch_size, self.max_texts):
            errors.append(
                f"max_queue ({self.max_queue}) must be >= max_batch_size ({self.max_batch_size}) and "
                f">= max_texts ({self.max_texts}), or a full-size request could never be queued"
            )
        if not 0 <= self.port <= 65535:
            errors.append(f"port must be 0..65535 (got {self.port}; 0 picks a free port)")
        if self.runtime in SCORERS and SCORERS.info(self.runtime).server:
            errors.append(
                f"runtime {self.runtime!r} is server-backed and would make the server call itself; "
                "serve an in-process runtime such as eager, ort or native"
            )
        if errors:
            raise ConfigError(errors, source="rlsim serve settings")
        return self


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``: addresses no other machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

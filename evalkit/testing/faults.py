"""Reproducible fault draws.

A request's fault depends only on (seed, hash of its body, how many times that
same body was seen before), never on arrival order or on other requests. So two
runs that send the same requests meet the same faults, however their
concurrency interleaves them, and a retry of a body gets a fresh draw.
"""

from __future__ import annotations

import hashlib

from evalkit.testing.script import FaultSpec

_SCALE = float(1 << 64)


def uniform(seed: int, salt: str, body_sha256: str, n: int) -> float:
    """A deterministic draw in [0, 1) from (seed, salt, body hash, repeat count)."""
    digest = hashlib.sha256(f"{seed}:{salt}:{body_sha256}:{n}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


class FaultTable:
    """Maps a draw to a fault kind by the rates, in the order the script lists them."""

    __slots__ = ("seed", "retry_after", "hang_seconds", "_cumulative")

    def __init__(self, spec: FaultSpec) -> None:
        self.seed = spec.seed
        self.retry_after = spec.retry_after
        self.hang_seconds = spec.hang_seconds
        self._cumulative: list[tuple[float, str]] = []
        total = 0.0
        for kind, rate in spec.rates.items():
            if rate > 0:
                total += rate
                self._cumulative.append((total, kind))

    @property
    def active(self) -> bool:
        return bool(self._cumulative)

    def draw(self, body_sha256: str, n: int) -> str | None:
        """The fault kind ("500", "hang", ...) or None for the n-th repeat (from 0) of a body."""
        if not self._cumulative:
            return None
        u = uniform(self.seed, "fault", body_sha256, n)
        for bound, kind in self._cumulative:
            if u < bound:
                return kind
        return None

"""A robustness variant's audio corruption for one engine: each sample's seeded corruption, and babble's clips.

Babble is made from other clips of the same dataset. They are drawn from the first
:data:`~evalkit.data.audio.corrupt.BABBLE_POOL` rows that hold audio, read from the dataset itself (before
the config's filters and the shard), so every shard, every resume and the viewer draw from the same clips;
each sample's draw is seeded by its own seed and never holds the sample itself. The pool is read once per
engine, in a thread, and only for babble.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from evalkit.catalog import DatasetSpec
from evalkit.data.audio.corrupt import AUDIO_CORRUPTIONS, BABBLE_POOL, AudioCorruption, Talker, choose_talkers
from evalkit.data.image.corrupt import sample_seed
from evalkit.data.loading import iter_samples
from evalkit.data.sample import Sample

#: where a sample's own clip came from, as a sent entry names a clip (its file, else its dataset cell)
ClipRef = Callable[[Sample], dict[str, Any]]

#: how many rows are read at most to find the pool's clips (a dataset whose first rows lack audio)
_SCAN_ROWS = 4 * BABBLE_POOL


class AudioVariant:
    """The corruption of one audio robustness variant (``DatasetSpec.corruption`` names an audio corruption)."""

    def __init__(self, spec: DatasetSpec, clip_ref: ClipRef) -> None:
        assert spec.corruption is not None
        self.spec = spec
        self.clip_ref = clip_ref
        self.name = str(spec.corruption["name"])
        self.severity = int(spec.corruption["severity"])
        self.seed = int(spec.corruption["seed"])
        self._pool: asyncio.Future[list[Talker]] | None = None

    @classmethod
    def of(cls, spec: DatasetSpec, clip_ref: Callable[[], ClipRef]) -> AudioVariant | None:
        """The variant's audio corruption, None when the dataset is clean or corrupted otherwise."""
        if spec.corruption and str(spec.corruption.get("name")) in AUDIO_CORRUPTIONS:
            return cls(spec, clip_ref())
        return None

    async def _talkers(self) -> list[Talker]:
        if self._pool is None:
            self._pool = asyncio.ensure_future(asyncio.to_thread(babble_pool, self.spec, self.clip_ref))
        return await asyncio.shield(self._pool)

    async def corruption(self, sample: Sample) -> AudioCorruption:
        """The sample's corruption (its talkers chosen for babble); ``sample.meta["corruption"]`` says it."""
        seed = sample_seed(self.seed, self.name, sample.id)
        talkers: tuple[Talker, ...] = ()
        if self.name == "babble":
            talkers = choose_talkers(await self._talkers(), sample.id, seed, sample.audio)
        found = AudioCorruption(self.name, self.severity, seed, talkers)
        sample.meta["corruption"] = found.describe()
        return found


def babble_pool(spec: DatasetSpec, clip_ref: ClipRef) -> list[Talker]:
    """The clips babble draws from: the first rows of the dataset that hold readable audio (blocking)."""
    pool: list[Talker] = []
    for sample in itertools.islice(iter_samples(spec), _SCAN_ROWS):
        if sample.audio is None or "audio_error" in sample.meta:
            continue
        pool.append(Talker(sample.id, sample.audio, clip_ref(sample)))
        if len(pool) >= BABBLE_POOL:
            break
    return pool

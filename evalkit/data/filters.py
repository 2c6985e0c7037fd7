"""Sample filters from the config's ``filters:`` section, applied while streaming.

``num_samples`` with ``sampling: first`` stops reading after N kept samples;
``sampling: random`` draws a seeded uniform sample of N by reservoir sampling
(one pass, N samples held) and yields them in dataset order. Filters run in
the thread that reads the dataset, never on the event loop.
"""

from __future__ import annotations

import random
import logging
from collections.abc import Iterator

from evalkit.config import Filters
from evalkit.data import audio as audio_codec
from evalkit.data.sample import Sample
from evalkit.languages import normalize_language, split_pair

#: accent labels that count as non-accented (standard US/UK) when a dataset has no `accented` column
STANDARD_ACCENTS = frozenset({"us", "american", "general american", "gb", "uk", "british", "england", "rp", "received pronunciation", "standard", "none", ""})


def sample_duration(sample: Sample) -> float | None:
    duration = sample.meta.get("duration")
    if duration is not None:
        return float(duration)
    if sample.audio is None:
        return None
    seconds = audio_codec.duration_seconds(sample.audio)
    sample.meta["duration"] = seconds
    return seconds


def is_accented(sample: Sample) -> bool | None:
    flag = sample.meta.get("accented")
    if isinstance(flag, bool):
        return flag
    accent = sample.meta.get("accent")
    if accent is None:
        return None
    return str(accent).strip().lower() not in STANDARD_ACCENTS


def _keep(sample: Sample, filters: Filters, language: str | None) -> bool:
    if language is not None:
        value = sample.meta.get("language")
        if value:
            try:
                source, target = split_pair(str(value))
            except ValueError:
                return False
            if language not in (source, target):
                return False
    if filters.accented is not None:
        accented = is_accented(sample)
        if accented is not None and accented != filters.accented:
            return False
    if filters.length_filter is not None:
        duration = sample_duration(sample)
        low, high = filters.length_filter
        if duration is not None and not (low <= duration <= high):
            return False
    return True


def apply_filters(samples: Iterator[Sample], filters: Filters, dataset: str) -> Iterator[Sample]:
    """Yield the samples the filters keep; a filter that keeps nothing warns (never raises)."""
    language = normalize_language(filters.language) if filters.language else None
    kept = (s for s in samples if _keep(s, filters, language))
    limit = filters.num_samples
    count = 0
    if limit is None:
        for sample in kept:
            count += 1
            yield sample
    elif filters.sampling == "first":
        for sample in kept:
            if count >= limit:
                break
            count += 1
            yield sample
    else:
        rng = random.Random(f"{filters.seed}:{dataset}")
        reservoir: list[tuple[int, Sample]] = []
        for seen, sample in enumerate(kept):
            if len(reservoir) < limit:
                reservoir.append((seen, sample))
            else:
                slot = rng.randint(0, seen)
                if slot < limit:
                    reservoir[slot] = (seen, sample)
        reservoir.sort(key=lambda pair: pair[0])
        count = len(reservoir)
        for _, sample in reservoir:
            yield sample
    if count == 0:
        logging.getLogger("evalkit").warning("%s: the filters left no samples; its engine runs with 0 samples", dataset)

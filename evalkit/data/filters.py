"""Sample filters from the config's ``filters:`` section, applied while streaming.

``num_samples`` with ``sampling: first`` (the default) stops reading after N
kept samples; ``sampling: random`` draws a seeded uniform sample of N by
reservoir sampling (one pass, N samples held, seeded by ``filters.seed`` and
the dataset name so every engine of a dataset sees the same samples) and
yields them in dataset order. ``num_samples`` counts samples that pass the
other filters. Filters run in the thread that reads the dataset, never on the
event loop.

A filter only drops what it can judge: ``length_filter`` keeps samples
without audio (text sets), ``accented`` keeps samples whose dataset says
nothing about accents, ``language`` keeps samples without a language. Each
such "cannot judge" case is logged once per dataset, so a run that seems to
ignore a filter explains itself. A filter that leaves nothing warns and the
engine runs with 0 samples; it never raises.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from evalkit.config import Filters
from evalkit.data.sample import Sample
from evalkit.languages import normalize_language, split_pair

log = logging.getLogger("evalkit")

#: accent labels that count as non-accented (standard US/UK) when a dataset has no `accented` column
STANDARD_ACCENTS = frozenset(
    {
        "us",
        "usa",
        "american",
        "general american",
        "american english",
        "us english",
        "mainstream us english",
        "gb",
        "uk",
        "british",
        "british english",
        "england",
        "english",
        "southern england",
        "rp",
        "received pronunciation",
        "standard",
        "none",
        "",
    }
)


def _accent_key(label: object) -> str:
    """ "Received_Pronunciation" and "received-pronunciation" are the same label."""
    return " ".join(str(label).replace("_", " ").replace("-", " ").lower().split())


def sample_duration(sample: Sample) -> float | None:
    """Seconds of the sample's audio, from its metadata or the file header; None when unknown.

    Audio whose header cannot be read counts as unknown: the sample is kept
    here and fails, with the decoder's reason, when the engine decodes it.
    """
    duration = sample.meta.get("duration")
    if duration is not None:
        try:
            return float(duration)
        except (TypeError, ValueError):
            return None
    if sample.audio is None:
        return None
    from evalkit.data.audio import decode as audio_codec  # numpy and soundfile: only for audio samples

    try:
        seconds = audio_codec.duration_seconds(sample.audio)
    except (ValueError, OSError, RuntimeError):
        return None
    sample.meta["duration"] = seconds
    return seconds


def is_accented(sample: Sample) -> bool | None:
    """True/False from an ``accented`` flag, else from the accent label; None when the sample has neither."""
    flag = sample.meta.get("accented")
    if isinstance(flag, bool):
        return flag
    if isinstance(flag, str) and flag.strip().lower() in ("true", "false", "yes", "no", "1", "0"):
        return flag.strip().lower() in ("true", "yes", "1")
    accent = sample.meta.get("accent")
    if accent is None:
        return None
    return _accent_key(accent) not in STANDARD_ACCENTS


def sample_languages(sample: Sample) -> tuple[str, str | None] | None:
    """(source, target) language codes of a sample; None when it has no language."""
    value = sample.meta.get("language")
    if not value:
        return None
    return split_pair(str(value))


@dataclass
class _Counts:
    """What the filters saw, for the one warning per dataset that explains an empty or odd result."""

    read: int = 0
    unknown_language: int = 0
    no_accent_info: int = 0
    no_duration: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str) -> bool:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        return False


def _keep(sample: Sample, filters: Filters, language: str | None, counts: _Counts) -> bool:
    counts.read += 1
    if language is not None:
        try:
            languages = sample_languages(sample)
        except ValueError:
            counts.unknown_language += 1
            return counts.drop("language")
        if (
            languages is not None
            and language not in languages
            and language != "-".join(code for code in languages if code)
        ):
            return counts.drop("language")
    if filters.accented is not None:
        accented = is_accented(sample)
        if accented is None:
            counts.no_accent_info += 1
        elif accented != filters.accented:
            return counts.drop("accented")
    if filters.length_filter is not None:
        duration = sample_duration(sample)
        low, high = filters.length_filter
        if duration is None:
            counts.no_duration += 1
        elif not low <= duration <= high:
            return counts.drop("length_filter")
    return True


def _describe(filters: Filters) -> str:
    active = {
        k: v
        for k, v in filters.model_dump().items()
        if k in ("num_samples", "length_filter", "accented", "language") and v is not None
    }
    if filters.num_samples is not None:
        active["sampling"] = filters.sampling
    return ", ".join(f"{k}={v}" for k, v in active.items()) or "none"


def apply_filters(samples: Iterator[Sample], filters: Filters, dataset: str) -> Iterator[Sample]:
    """Yield the samples the filters keep; a filter that keeps nothing warns (never raises)."""
    language = normalize_language(filters.language) if filters.language else None
    counts = _Counts()
    kept = (s for s in samples if _keep(s, filters, language, counts))
    limit = filters.num_samples
    count = 0
    if limit is None:
        for sample in kept:
            count += 1
            yield sample
    elif filters.sampling == "first":
        if limit > 0:
            for sample in kept:
                count += 1
                yield sample
                if count >= limit:
                    break
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
    _report(dataset, filters, counts, count)


def _report(dataset: str, filters: Filters, counts: _Counts, count: int) -> None:
    if counts.no_accent_info:
        log.warning(
            "%s: accented=%s cannot apply to %d sample(s) without accent information; they were kept",
            dataset,
            filters.accented,
            counts.no_accent_info,
        )
    if counts.no_duration and filters.length_filter is not None:
        log.info("%s: length_filter kept %d sample(s) without (readable) audio", dataset, counts.no_duration)
    if counts.unknown_language:
        log.warning(
            "%s: %d sample(s) have a language evalkit does not know; the language filter dropped them",
            dataset,
            counts.unknown_language,
        )
    if count == 0:
        dropped = ", ".join(f"{k}: {v}" for k, v in sorted(counts.dropped.items())) or "nothing dropped"
        log.warning(
            "%s: the filters (%s) left no samples of %d read (%s); its engine runs with 0 samples",
            dataset,
            _describe(filters),
            counts.read,
            dropped,
        )

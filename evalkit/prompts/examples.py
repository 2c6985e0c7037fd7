"""In-context examples (ChEF-style retrievers): k examples drawn from another split.

A runspec's ``in_context`` block names where examples come from and how they
are chosen::

    "in_context": {"split": "train", "k": 3, "choice": "random", "pool_size": 100}

``split`` (hub datasets) or ``path`` (a local file relative to the runspec)
gives the source; the first ``pool_size`` rows form the pool. ``choice:
first`` shows the same first k examples with every sample; ``random`` draws k
per sample, seeded by the run seed and the sample id, so a rerun shows the
same examples. A sample is never its own example (same id).
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from evalkit.catalog import DatasetSpec, resolve_runspec_path
from evalkit.data.loading import iter_samples
from evalkit.data.sample import Sample
from evalkit.errors import RunspecError

_KEYS = {"split", "path", "k", "choice", "pool_size"}


def _settings(spec: DatasetSpec) -> dict[str, Any]:
    settings = dict(spec.in_context or {})
    unknown = set(settings) - _KEYS
    if unknown:
        raise RunspecError(
            f"{spec.file}: {spec.name}.in_context: unknown key(s) {', '.join(sorted(unknown))}; known: "
            f"{', '.join(sorted(_KEYS))}"
        )
    if settings.get("choice", "first") not in ("first", "random"):
        raise RunspecError(f"{spec.file}: {spec.name}.in_context.choice: expected 'first' or 'random'")
    if not isinstance(settings.get("k", 1), int) or settings.get("k", 1) < 1:
        raise RunspecError(f"{spec.file}: {spec.name}.in_context.k: expected a positive integer")
    if spec.path is not None and "path" not in settings:
        raise RunspecError(
            f"{spec.file}: {spec.name}.in_context: a local dataset takes its examples from `path` (a file relative "
            "to the runspec)"
        )
    if "split" not in settings and "path" not in settings:
        raise RunspecError(f"{spec.file}: {spec.name}.in_context: needs `split` (hub) or `path` (local file)")
    return settings


def load_pool(spec: DatasetSpec) -> list[Sample]:
    """The example pool (blocking: call it in a worker thread)."""
    settings = _settings(spec)
    size = int(settings.get("pool_size", 100))
    if "path" in settings:
        source = str(resolve_runspec_path(spec.file, str(settings["path"])))
        samples = iter_samples(spec, source_override=source)
    else:
        samples = iter_samples(spec.model_copy(update={"split": settings["split"]}))
    return list(itertools.islice(samples, size))


def choose(spec: DatasetSpec, pool: list[Sample], sample_id: str, seed: int) -> list[Sample]:
    settings = _settings(spec)
    k = int(settings.get("k", 1))
    candidates = [s for s in pool if s.id != sample_id]
    if settings.get("choice", "first") == "first":
        return candidates[:k]
    rng = random.Random(f"{seed}:{spec.name}:{sample_id}")
    return rng.sample(candidates, min(k, len(candidates)))

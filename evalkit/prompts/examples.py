"""In-context examples (ChEF-style retrievers): k examples drawn from another split.

A runspec's ``in_context`` block names where examples come from and how they
are chosen::

    "in_context": {"split": "train", "k": 3, "choice": "random", "pool_size": 100}

``split`` (hub datasets) or ``path`` (a local file relative to the runspec)
gives the source; the first ``pool_size`` rows form the pool. ``choice:
first`` shows the same first k examples with every sample; ``random`` draws k
per sample, seeded by the run seed and the sample id, so a rerun shows the
same examples; ``similar`` (ChEF's ``topk_text``) shows the k examples whose
text is closest to the sample's by BM25 (bm25s, English stop words dropped),
ties broken by pool order, so it needs no seed and a rerun shows the same
examples. A sample is never its own example (same id).
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
#: choice -> the name records carry; topk_text is ChEF's name for the similarity retriever
CHOICES = {"first": "first", "random": "random", "similar": "similar", "topk_text": "similar"}


class ExamplePool(list[Sample]):
    """The pool of in-context examples, with its text index built on first use by ``similar``."""

    index: Any = None


def _settings(spec: DatasetSpec) -> dict[str, Any]:
    settings = dict(spec.in_context or {})
    unknown = set(settings) - _KEYS
    if unknown:
        raise RunspecError(
            f"{spec.file}: {spec.name}.in_context: unknown key(s) {', '.join(sorted(unknown))}; known: "
            f"{', '.join(sorted(_KEYS))}"
        )
    if settings.get("choice", "first") not in CHOICES:
        raise RunspecError(
            f"{spec.file}: {spec.name}.in_context.choice: {settings.get('choice')!r} is not one of {', '.join(CHOICES)}"
        )
    if CHOICES[settings.get("choice", "first")] == "similar" and not (
        spec.textual_input_column or spec.instruction_column or spec.turns_column
    ):
        raise RunspecError(
            f"{spec.file}: {spec.name}.in_context.choice: 'similar' compares texts, and this dataset has no text "
            "column (textual_input_column, additional_instruction_column or turns_column)"
        )
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


def load_pool(spec: DatasetSpec) -> ExamplePool:
    """The example pool (blocking: call it in a worker thread)."""
    settings = _settings(spec)
    size = int(settings.get("pool_size", 100))
    if "path" in settings:
        source = str(resolve_runspec_path(spec.file, str(settings["path"])))
        samples = iter_samples(spec, source_override=source)
    else:
        samples = iter_samples(spec.model_copy(update={"split": settings["split"]}))
    pool = ExamplePool(itertools.islice(samples, size))
    if CHOICES[settings.get("choice", "first")] == "similar":
        pool.index = _index([_text(example) for example in pool])
    return pool


def choice_name(spec: DatasetSpec) -> str:
    """How the dataset's examples are chosen, as records carry it: first, random or similar."""
    return CHOICES[_settings(spec).get("choice", "first")]


def _text(sample: Sample) -> str:
    """What ``similar`` compares: the sample's text input and instruction, and its turns' texts."""
    parts = [sample.text, sample.instruction, *(turn.text for turn in sample.turns or [])]
    return " ".join(part for part in parts if part)


def _tokens(texts: list[str]) -> list[list[str]]:
    import bm25s

    tokens: list[list[str]] = bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
    return tokens


def _index(texts: list[str]) -> Any:
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(_tokens(texts), show_progress=False)
    return retriever


def _similar(pool: ExamplePool, sample: Sample, k: int) -> list[Sample]:
    if pool.index is None:
        pool.index = _index([_text(example) for example in pool])
    query = _tokens([_text(sample)])[0]
    scores = pool.index.get_scores(query) if query else [0.0] * len(pool)
    ranked = sorted(range(len(pool)), key=lambda i: (-float(scores[i]), i))
    return [pool[i] for i in ranked if pool[i].id != sample.id][:k]


def choose(spec: DatasetSpec, pool: list[Sample], sample: Sample, seed: int) -> list[Sample]:
    """The k examples shown before ``sample``, by the runspec's ``choice``."""
    settings = _settings(spec)
    k = int(settings.get("k", 1))
    choice = CHOICES[settings.get("choice", "first")]
    if choice == "similar":
        return _similar(pool if isinstance(pool, ExamplePool) else ExamplePool(pool), sample, k)
    candidates = [s for s in pool if s.id != sample.id]
    if choice == "first":
        return candidates[:k]
    rng = random.Random(f"{seed}:{spec.name}:{sample.id}")
    return rng.sample(candidates, min(k, len(candidates)))

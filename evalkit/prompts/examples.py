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
examples. ``topk_img`` (ChEF's image retriever) shows the k examples whose
images are closest to the sample's by cosine similarity of an image embedding
(:mod:`evalkit.prompts.image_similarity`: a 16x16 thumbnail by default, or a
CLIP-class model named by ``embedding_model``), also ties by pool order; the
pool is embedded once when it is loaded and each sample in a worker thread
(:func:`query_vector`). A sample is never its own example (same id).
"""

from __future__ import annotations

import importlib.util
import itertools
import random
from typing import TYPE_CHECKING, Any

from evalkit.catalog import DatasetSpec, resolve_runspec_path
from evalkit.data.loading import iter_samples
from evalkit.data.sample import Sample
from evalkit.errors import RunspecError

if TYPE_CHECKING:  # numpy and the image embedder are imported where used, so a run needing neither starts without them
    import numpy as np

    from evalkit.prompts import image_similarity

_KEYS = {"split", "path", "k", "choice", "pool_size", "embedding_model"}
#: choice -> the name records carry; topk_text is ChEF's name for the similarity retriever
CHOICES = {"first": "first", "random": "random", "similar": "similar", "topk_text": "similar", "topk_img": "topk_img"}


class ExamplePool(list[Sample]):
    """The pool of in-context examples, with the index its ``choice`` ranks by.

    ``index``: the BM25 text index (``similar``, built on first use);
    ``embedder`` and ``vectors``: the image embedder and one vector per
    example (``topk_img``, made when the pool is loaded).
    """

    index: Any = None
    embedder: image_similarity.Embedder | None = None
    vectors: list[np.ndarray | None] | None = None


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
    if CHOICES[settings.get("choice", "first")] == "topk_img" and spec.image_column is None:
        raise RunspecError(
            f"{spec.file}: {spec.name}.in_context.choice: 'topk_img' compares images, and this dataset has no "
            "image_column"
        )
    if "embedding_model" in settings:
        _check_embedding_model(spec, settings)
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


def _check_embedding_model(spec: DatasetSpec, settings: dict[str, Any]) -> None:
    where = f"{spec.file}: {spec.name}.in_context.embedding_model"
    model = settings["embedding_model"]
    if CHOICES[settings.get("choice", "first")] != "topk_img":
        raise RunspecError(f"{where}: only `choice: topk_img` uses an embedding model")
    if not isinstance(model, str) or not model.strip():
        raise RunspecError(f"{where}: expected a local model path or a hub id, got {model!r}")
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        raise RunspecError(
            f"{where}: {model!r} needs {' and '.join(missing)} (pip install 'evalkit[local]'); without "
            "embedding_model, topk_img compares 16x16 thumbnails and needs no model"
        )


def check_in_context(spec: DatasetSpec) -> None:
    """Raise RunspecError (naming the file and key) when the runspec's ``in_context`` block is invalid."""
    if spec.in_context:
        _settings(spec)


def load_pool(spec: DatasetSpec) -> ExamplePool:
    """The example pool (blocking: call it in a worker thread)."""
    from evalkit.prompts import image_similarity  # the image embedder: for topk_img only

    settings = _settings(spec)
    size = int(settings.get("pool_size", 100))
    if "path" in settings:
        source = str(resolve_runspec_path(spec.file, str(settings["path"])))
        samples = iter_samples(spec, source_override=source)
    else:
        samples = iter_samples(spec.model_copy(update={"split": settings["split"]}))
    pool = ExamplePool(itertools.islice(samples, size))
    choice = CHOICES[settings.get("choice", "first")]
    if choice == "similar":
        pool.index = _index([_text(example) for example in pool])
    elif choice == "topk_img":
        pool.embedder = image_similarity.make_embedder(settings.get("embedding_model"))
        pool.vectors = [image_similarity.embed_sample(pool.embedder, example) for example in pool]
    return pool


def choice_name(spec: DatasetSpec) -> str:
    """How the dataset's examples are chosen, as records carry it: first, random, similar or topk_img."""
    return CHOICES[_settings(spec).get("choice", "first")]


def needs_query_vector(spec: DatasetSpec) -> bool:
    """True when choosing a sample's examples needs its image vector (:func:`query_vector`) first."""
    return bool(spec.in_context) and choice_name(spec) == "topk_img"


def query_vector(pool: ExamplePool, sample: Sample) -> np.ndarray | None:
    """The sample's image vector for ``topk_img`` (blocking: the engine calls it in a worker thread)."""
    from evalkit.prompts import image_similarity  # the image embedder: for topk_img only

    if pool.embedder is None:
        pool.embedder = image_similarity.make_embedder(None)
    return image_similarity.embed_sample(pool.embedder, sample)


def embedding_name(pool: ExamplePool) -> str | None:
    """The embedding ``topk_img`` ranked by (thumbnail16 or the model), for the records."""
    return pool.embedder.name if pool.embedder is not None else None


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


def _nearest_images(pool: ExamplePool, sample: Sample, k: int, query: np.ndarray | None) -> list[Sample]:
    from evalkit.prompts import image_similarity  # the image embedder: for topk_img only

    if pool.vectors is None:
        pool.embedder = pool.embedder or image_similarity.make_embedder(None)
        pool.vectors = [image_similarity.embed_sample(pool.embedder, example) for example in pool]
    ranked = image_similarity.rank(pool.vectors, query)
    return [pool[i] for i in ranked if pool[i].id != sample.id][:k]


#: ``choose``'s query when the caller made none
UNSET: Any = object()


def choose(
    spec: DatasetSpec, pool: list[Sample], sample: Sample, seed: int, query: np.ndarray | None = UNSET
) -> list[Sample]:
    """The k examples shown before ``sample``, by the runspec's ``choice``.

    ``query`` is the sample's image vector for ``topk_img``, made beforehand
    in a worker thread (:func:`query_vector`); when it is not given it is made
    here, blocking the caller.
    """
    settings = _settings(spec)
    k = int(settings.get("k", 1))
    choice = CHOICES[settings.get("choice", "first")]
    if choice == "similar":
        return _similar(pool if isinstance(pool, ExamplePool) else ExamplePool(pool), sample, k)
    if choice == "topk_img":
        images = pool if isinstance(pool, ExamplePool) else ExamplePool(pool)
        if query is UNSET:
            query = query_vector(images, sample)
        return _nearest_images(images, sample, k, query)
    candidates = [s for s in pool if s.id != sample.id]
    if choice == "first":
        return candidates[:k]
    clean = (spec.corruption or {}).get("clean", spec.name)  # a robustness variant shows the clean pair's examples
    rng = random.Random(f"{seed}:{clean}:{sample.id}")
    return rng.sample(candidates, min(k, len(candidates)))

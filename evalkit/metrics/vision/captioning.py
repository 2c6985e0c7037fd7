"""CIDEr (``cider``, ChEF's ``CIDEr``) as pycocoevalcap computes it, which ChEF's LAMM captioning metric calls.

Reference: pycocoevalcap 1.2 (``cider/cider.py``, ``cider/cider_scorer.py``, after ``tokenizer/ptbtokenizer.py``),
as OpenGVLab/LAMM's ``src/ChEF/metric/caption.py`` (``LAMM_Caption``) calls it at commit
ea571363883ceba58a0f724ef197ed7205e07465; checked against tables from running it
(tests/fixtures/references/chef_cider.json).

pycocoevalcap's ``Cider`` is CIDEr-D: n-grams of 1 to 4 words weighted by tf-idf, where the document frequency
of an n-gram is the number of *images of the evaluated corpus* whose references contain it and the idf is
log(number of images) - log(max(1, df)); the answer's vector is compared with each reference's by a cosine whose
products are clipped (min of the two weights times the reference's), damped by exp(-delta^2 / 72) where delta
is the difference of the two lengths (pycocoevalcap counts a caption's *bigrams* as its length, and so does
this module), averaged over n and over the references, times 10. The corpus score is the mean of the images'
scores, so each sample's score is final once the document frequencies are known, and the corpus figure's
interval is the normal interval of a mean.

The document frequencies come from every reference of the dataset, which a metric that scores one sample at a
time does not see: the run gives them before scoring (:meth:`Cider.fit_references`, called with the planned
samples' references). A sample scored before that is refused with a message saying so, never scored against
made-up frequencies. Text goes through :func:`evalkit.metrics.vision.ptb_tokenize.coco_tokenize` (the Java tokenizer's
rules in Python, no Java needed).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings
from evalkit.metrics.vision.ptb_tokenize import coco_tokenize

#: CIDEr-D's settings in pycocoevalcap: n-grams up to 4 words, the length penalty's sigma
MAX_N = 4
SIGMA = 6.0

NGrams = Counter[tuple[str, ...]]


def ngram_counts(tokens: str, n: int = MAX_N) -> NGrams:
    """Counts of every 1..n-gram of a tokenized caption (space-separated tokens)."""
    words = tokens.split()
    counts: NGrams = Counter()
    for k in range(1, n + 1):
        for i in range(len(words) - k + 1):
            counts[tuple(words[i : i + k])] += 1
    return counts


class DocumentFrequencies:
    """How many images' reference sets contain each n-gram, and the log of the number of images."""

    def __init__(self, reference_sets: Iterable[Sequence[str]]) -> None:
        self.df: Counter[tuple[str, ...]] = Counter()
        images = 0
        for references in reference_sets:
            images += 1
            seen: set[tuple[str, ...]] = set()
            for reference in references:
                seen.update(ngram_counts(reference))
            self.df.update(seen)
        if images == 0:
            raise ValueError("CIDEr's document frequencies need at least one image's references")
        self.images = images
        self.log_images = math.log(float(images))

    def vector(self, counts: NGrams) -> tuple[list[dict[tuple[str, ...], float]], list[float], int]:
        """tf-idf weights per n-gram order, their norms, and the caption's length as pycocoevalcap counts it."""
        vec: list[dict[tuple[str, ...], float]] = [{} for _ in range(MAX_N)]
        norm = [0.0] * MAX_N
        length = 0
        for ngram, tf in counts.items():
            order = len(ngram) - 1
            weight = float(tf) * (self.log_images - math.log(max(1.0, float(self.df.get(ngram, 0)))))
            vec[order][ngram] = weight
            norm[order] += weight**2
            if order == 1:  # pycocoevalcap's "length" counts bigrams, not words; kept for equal values
                length += tf
        return vec, [math.sqrt(x) for x in norm], length

    def score(self, candidate: str, references: Sequence[str]) -> float:
        """One image's CIDEr-D (pycocoevalcap's per-image value) for tokenized texts."""
        vec, norm, length = self.vector(ngram_counts(candidate))
        total = [0.0] * MAX_N
        for reference in references:
            ref_vec, ref_norm, ref_length = self.vector(ngram_counts(reference))
            penalty = math.exp(-(float(length - ref_length) ** 2) / (2 * SIGMA**2))
            for n in range(MAX_N):
                value = sum(min(w, ref_vec[n].get(g, 0.0)) * ref_vec[n].get(g, 0.0) for g, w in vec[n].items())
                if norm[n] != 0 and ref_norm[n] != 0:
                    value /= norm[n] * ref_norm[n]
                total[n] += value * penalty
        return sum(total) / MAX_N / len(references) * 10.0


def cider_d(candidates: Sequence[str], references: Sequence[Sequence[str]]) -> tuple[float, list[float]]:
    """pycocoevalcap's ``Cider().compute_score`` on raw texts: the corpus mean and each image's score."""
    tokenized_refs = [[coco_tokenize(r) for r in refs] for refs in references]
    frequencies = DocumentFrequencies(tokenized_refs)
    scores = [frequencies.score(coco_tokenize(c), refs) for c, refs in zip(candidates, tokenized_refs, strict=True)]
    return (sum(scores) / len(scores) if scores else math.nan), scores


class Cider(Metric):
    """CIDEr-D as pycocoevalcap computes it (ChEF's LAMM captioning): tf-idf n-gram consensus, corpus mean."""

    name = "cider"
    bounds = (0.0, None)
    tasks = ("captioning",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)
        self.frequencies: DocumentFrequencies | None = None

    def fit_references(self, references: Iterable[Any]) -> None:
        """The dataset's references, one item per sample (a caption or a list of captions), before scoring.

        They fix the document frequencies as pycocoevalcap computes them over the evaluated corpus.
        """
        sets = ([coco_tokenize(r) for r in reference_strings(item)] for item in references)  # streamed, never held
        self.frequencies = DocumentFrequencies(s for s in sets if s)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        if self.frequencies is None:
            raise RuntimeError(
                "cider needs the dataset's references before it scores (fit_references): CIDEr's document "
                "frequencies are counted over the whole corpus, and this run did not provide them"
            )
        candidate = coco_tokenize(prediction or "")
        value = self.frequencies.score(candidate, [coco_tokenize(r) for r in references])
        return SampleScore(value, (value, 1.0), details={"tokenized": candidate})

    def describe(self) -> dict[str, Any]:
        images = self.frequencies.images if self.frequencies is not None else None
        return {
            "reference": "pycocoevalcap 1.2 Cider (CIDEr-D, n=4, sigma=6), PTBTokenizer rules in Python",
            "document_frequency_images": images,
        }

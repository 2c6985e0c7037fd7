"""Word and character error rate, with Whisper normalization and jiwer alignment.

Per sample the stats are ``(edits, reference_length, sample_rate, 1)`` where
``edits = S + D + I`` from jiwer's alignment of the normalized texts. The
headline is the corpus rate ``Σ edits / Σ reference_length``, which is what
``jiwer.wer(refs, hyps)`` returns over the whole list; the mean of per-sample
rates (which weighs a 3-word utterance like a 30-word one) is reported next to
it as ``mean_sample_rate``.

Choices worth knowing:

- Several references: only the first is used (ASR sets have one transcript;
  picking the closest would bias the rate downwards).
- Empty (normalized) reference: ``reference_length = 0`` and every predicted
  word is an insertion, so it adds to the corpus numerator only. Its
  per-sample rate is ``edits / max(reference_length, 1)`` (0 when the
  prediction is empty too), as jiwer computes it for a single pair; the corpus
  rate also divides by ``max(Σ reference_length, 1)``.
- Spaceless languages (zh, ja, th, ...) are scored at character level by
  ``word_error_rate`` too, recorded as ``level="character"``.
"""

from __future__ import annotations

from typing import Any, Literal

import jiwer
import numpy as np

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.languages import is_spaceless, normalize_language, target_language
from evalkit.metrics.base import (
    Metric,
    SampleScore,
    check_options,
    reference_strings,
)
from evalkit.processing.normalizers import asr_normalizer

Level = Literal["word", "character"]


class WordErrorRate(Metric):
    """Corpus WER (CER for spaceless languages) on Whisper-normalized text.

    Options: ``normalizer`` ("auto", "english", "basic", "none") and ``level``
    ("auto", "word", "character").
    """

    name = "word_error_rate"
    higher_is_better = False
    ci_method = "bootstrap"
    forced_level: Level | None = None
    #: options a subclass adds to ``normalizer`` and ``level`` (checked here, read by the subclass)
    extra_options: tuple[str, ...] = ()

    def __init__(self, language: str | None = None, **options: Any) -> None:
        allowed = ("normalizer", "level") if self.forced_level is None else ("normalizer",)
        check_options(self.name, options, allowed + self.extra_options)
        language = normalize_language(language) if language else None
        super().__init__(language, **options)
        self.output_language = target_language(language)
        self.normalizer_name, self.normalize = asr_normalizer(
            self.output_language, str(options.get("normalizer", "auto"))
        )
        level = self.forced_level or str(options.get("level", "auto"))
        if level == "auto":
            level = "character" if is_spaceless(self.output_language) else "word"
        if level not in ("word", "character"):
            raise ValueError(f"{self.name}: level must be 'auto', 'word' or 'character', not {level!r}")
        self.level: Level = level  # type: ignore[assignment]

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        reference = self.normalize(references[0])
        hypothesis = self.normalize(prediction or "")
        if self.level == "character":
            out = jiwer.process_characters(reference, hypothesis)
        else:
            out = jiwer.process_words(reference, hypothesis)
        edits = out.substitutions + out.deletions + out.insertions
        length = out.substitutions + out.deletions + out.hits
        rate = edits / max(length, 1)
        return SampleScore(
            rate,
            (float(edits), float(length), rate, 1.0),
            details={
                "normalized_reference": reference,
                "normalized_prediction": hypothesis,
                "substitutions": out.substitutions,
                "deletions": out.deletions,
                "insertions": out.insertions,
            },
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        return totals[..., 0] / np.maximum(totals[..., 1], 1.0)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        totals = np.asarray(totals, dtype=float)
        unit = "words" if self.level == "word" else "characters"
        mean = float(totals[2] / totals[3]) if totals[3] > 0 else float("nan")
        return {"edits": int(totals[0]), f"reference_{unit}": int(totals[1]), "mean_sample_rate": mean}

    def describe(self) -> dict[str, Any]:
        return {"normalizer": self.normalizer_name, "level": self.level, "language": self.language}


class CharacterErrorRate(WordErrorRate):
    """Corpus CER: always character level (spaces count as characters, as in jiwer.cer)."""

    name = "cer"
    forced_level = "character"

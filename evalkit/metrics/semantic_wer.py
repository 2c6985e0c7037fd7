"""KARMA's ASR semantic metrics: semantic WER/CER and entity WER.

``semantic_wer`` / ``semantic_cer`` are :class:`~evalkit.metrics.wer.WordErrorRate`
and ``cer`` with one step before Whisper's normaliser: indic-nlp-library's
orthographic normalisation for the dataset's language (nukta, chandrabindu
and chandra vowels, nasal clusters) and digits of every script as ASCII (see
:mod:`evalkit.processing.indic`). Spelling variants a listener cannot tell
apart stop counting as errors; everything else (alignment with jiwer, the
pooled corpus value Σ edits / Σ reference words, the bootstrap CI) is WER's.
For a language indic-nlp has no normaliser for (English) only the digit step
applies, so the value equals plain WER on text without non-ASCII digits.
``asr_semantic_metric``, KARMA's name for the family, is an alias of
``semantic_wer``, whose details also carry the pooled semantic CER (KARMA's
metric reports WER and CER together).

``entity_wer`` is WER restricted to the words of the entities the dataset tags
(drug names, doses, symptoms): KARMA's eka-medical-asr set carries them per
sample as ``medical_entities``. The runspec copies that column into the
sample's meta under ``entities`` (``"extra_columns": {"entities":
"medical_entities"}``; option ``entities_key`` names another key). Accepted
shapes: a list of strings, a list of objects with ``text``, an object of
lists by entity type, or any of these as a JSON string. Each entity is
normalised like the transcripts and found as a run of words in the
normalised reference (every occurrence, longest entity first, no overlaps);
the reference and the answer are aligned once with jiwer, and an entity word
aligned to an equal word is a hit, to another word a substitution, to
nothing a deletion; a word inserted between two words of one entity is an
insertion (insertions at its edges belong to the context). Per sample the
stats are ``(entity edits, entity words, rate, 1 if the sample has entity
words, entities not found in the reference)``; the corpus value is Σ entity
edits / Σ entity words (NaN when no sample has one: nothing was measured).
A sample with no tagged entity is scored with 0 entity words: it counts in n
but weighs nothing in the corpus value (as an empty reference does in WER),
and ``samples_with_entities`` says how many carried weight.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import jiwer
import numpy as np

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import SampleScore, reference_strings
from evalkit.metrics.wer import WordErrorRate
from evalkit.processing.indic import OPTION_NAMES, IndicSettings, orthographic_normalizer


class SemanticWordErrorRate(WordErrorRate):
    """WER after Indic orthographic normalisation (indic-nlp: nukta, chandrabindu, nasals) and ASCII digits."""

    name = "semantic_wer"
    extra_options: tuple[str, ...] = OPTION_NAMES
    #: fits every speech recognition dataset of the catalogue (and tasks whose runspecs list it)
    tasks: ClassVar[tuple[str, ...]] = ("speech_recognition",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        super().__init__(language, **options)
        self.settings = IndicSettings.from_options(f"metric {self.name!r}", options)
        name, orthography = orthographic_normalizer(self.output_language, self.settings)
        whisper = self.normalize
        # the orthographic step first: indic-nlp reads the raw text (it maps "|" to the danda, drops ZWJ/ZWNJ),
        # then Whisper's normaliser removes punctuation and collapses spaces as for plain WER
        self.normalize = lambda text: whisper(orthography(text))
        self.normalizer_name = f"{name}+{self.normalizer_name}"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        scored = super().score(prediction, sample)
        if scored.failure is not None or scored.details is None:
            return scored
        chars = jiwer.process_characters(
            scored.details["normalized_reference"], scored.details["normalized_prediction"]
        )
        char_edits = chars.substitutions + chars.deletions + chars.insertions
        char_length = chars.substitutions + chars.deletions + chars.hits
        scored.stats = (*scored.stats, float(char_edits), float(char_length))
        return scored

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        totals = np.asarray(totals, dtype=float)
        details = super().corpus_details(totals[:4])
        if len(totals) >= 6:
            details["semantic_cer"] = float(totals[4] / max(totals[5], 1.0))
            details["reference_characters"] = int(totals[5])
        return details

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), **vars(self.settings)}


class SemanticCharacterErrorRate(SemanticWordErrorRate):
    """CER after Indic orthographic normalisation (indic-nlp) and ASCII digits."""

    name = "semantic_cer"
    forced_level = "character"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        return WordErrorRate.score(self, prediction, sample)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        return WordErrorRate.corpus_details(self, totals)


def entity_strings(value: Any) -> list[str]:
    """The entity texts of a sample's meta value, in any of the accepted shapes (see the module docstring)."""
    if value is None:
        return []
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("[", "{"):
            try:
                return entity_strings(json.loads(stripped))
            except json.JSONDecodeError:
                pass
        return [stripped] if stripped else []
    if isinstance(value, dict):
        if "text" in value:
            return entity_strings(value["text"])
        return [text for group in value.values() for text in entity_strings(group)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in entity_strings(item)]
    raise ValueError(f"entities must be strings, lists or objects, not {type(value).__name__}")


def entity_spans(words: list[str], entities: list[list[str]]) -> list[tuple[int, int]]:
    """Non-overlapping ``[start, end)`` word spans of the entities in ``words``: left to right, longest first."""
    ordered = sorted({tuple(e) for e in entities if e}, key=len, reverse=True)
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        for entity in ordered:
            if tuple(words[i : i + len(entity)]) == entity:
                spans.append((i, i + len(entity)))
                i += len(entity)
                break
        else:
            i += 1
    return spans


class EntityWordErrorRate(SemanticWordErrorRate):
    """WER over the words of the entities the dataset tags, after the semantic normalisation."""

    name = "entity_wer"
    extra_options = (*OPTION_NAMES, "entities_key")
    #: only datasets that tag entities (their runspecs list it): elsewhere there is nothing to score
    tasks = ()

    def __init__(self, language: str | None = None, **options: Any) -> None:
        super().__init__(language, **options)
        if self.level != "word":
            raise ConfigError(f"metric {self.name!r}: entity WER is counted in words; level must be 'word'")
        key = options.get("entities_key", "entities")
        if not isinstance(key, str) or not key:
            raise ConfigError(f"metric {self.name!r}: option 'entities_key' must be a meta key, not {key!r}")
        self.entities_key = key

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        try:
            entities = entity_strings(sample.meta.get(self.entities_key))
        except ValueError as error:
            return SampleScore(
                None, failure=FailureReason.METRIC_ERROR, details={"error": f"meta {self.entities_key!r}: {error}"}
            )
        reference = self.normalize(references[0])
        hypothesis = self.normalize(prediction or "")
        ref_words = reference.split()
        normalized = [self.normalize(e).split() for e in entities]
        spans = entity_spans(ref_words, normalized)
        found = {tuple(ref_words[a:b]) for a, b in spans}
        unmatched = [e for e, n in zip(entities, normalized) if n and tuple(n) not in found]
        span_of = {i: s for s, (a, b) in enumerate(spans) for i in range(a, b)}
        hits = substitutions = deletions = insertions = 0
        if spans:
            for chunk in jiwer.process_words(reference, hypothesis).alignments[0]:
                if chunk.type == "insert":
                    left, right = span_of.get(chunk.ref_start_idx - 1), span_of.get(chunk.ref_start_idx)
                    if left is not None and left == right:
                        insertions += chunk.hyp_end_idx - chunk.hyp_start_idx
                    continue
                inside = sum(1 for i in range(chunk.ref_start_idx, chunk.ref_end_idx) if i in span_of)
                if chunk.type == "equal":
                    hits += inside
                elif chunk.type == "substitute":
                    substitutions += inside
                elif chunk.type == "delete":
                    deletions += inside
        words = sum(b - a for a, b in spans)
        edits = substitutions + deletions + insertions
        rate = edits / max(words, 1)
        return SampleScore(
            rate,
            (float(edits), float(words), rate, 1.0 if words else 0.0, float(len(unmatched))),
            details={
                "normalized_reference": reference,
                "normalized_prediction": hypothesis,
                "entities": [" ".join(ref_words[a:b]) for a, b in spans],
                "unmatched_entities": unmatched,
                "substitutions": substitutions,
                "deletions": deletions,
                "insertions": insertions,
            },
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        """Σ entity edits / Σ entity words; NaN (not 0) when no sample has an entity word, so none is claimed."""
        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(totals[..., 1] > 0, totals[..., 0] / totals[..., 1], np.nan)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        totals = np.asarray(totals, dtype=float)
        mean = float(totals[2] / totals[3]) if totals[3] > 0 else float("nan")
        return {
            "edits": int(totals[0]),
            "entity_words": int(totals[1]),
            "samples_with_entities": int(totals[3]),
            "unmatched_entities": int(totals[4]),
            "mean_sample_rate": mean,
        }

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "entities_key": self.entities_key}

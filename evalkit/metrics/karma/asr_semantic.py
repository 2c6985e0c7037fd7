"""KARMA's ASR semantic metrics: semantic WER, semantic CER and entity (keyword) WER.

Reference: Eka Care's KARMA (github.com/eka-care/KARMA-OpenMedEvalKit, commit
fe151014e7c6fefcafb5fa9fcf0abcbf276f1359), the metric registered as
``asr_semantic_metric`` (``karma/metrics/asr/asr_semantic_metrics.py``,
``ASRSemanticMetrics.evaluate``), which aligns with ``BaseCERAligner.align_words_dp``
(``karma/metrics/asr/base_aligner.py``) and the language rules of
``EnglishCERAligner`` / ``HindiCERAligner`` (``karma/metrics/asr/lang/``; here
:mod:`evalkit.metrics.karma.spoken_forms`). This
module is written from that definition; the tests compare it with values
produced by running KARMA's code (tests/fixtures/references/).

Why a different alignment from WER: a transcript that writes ``सिरदर्द`` for
``सिर दर्द``, ``1000 milligrams`` for ``1000mg`` or a near spelling should not
lose whole words. KARMA therefore aligns word *groups*: one to three
reference words against one to eight answer words, scored by a character error
rate (the lowest of three: plain edit distance without spaces, edit distance
of a spelling-folded form with numbers and symbols written as words, and a
substring/prefix-aware rate), plus an exact match of a reference token's
spoken expansion (``7.5mg`` -> ``seven point five milligram``). The best path
under KARMA's bonuses is kept; a group is a match when its similarity
(1 - CER) is at least 0.95, else one substitution, however many words it
spans. Deletions and insertions occur only once one side is used up (KARMA's
dynamic programme has no other gap move).

Per sample: WER = (substituted groups + deleted words + inserted words) /
max(reference words, 1); CER = Σ group CER × group reference characters /
Σ group reference characters over groups with words on both sides (deleted
words add nothing: KARMA leaves them out), 0 when there are none. The corpus
values pool the same counts over the samples (KARMA's ``DatasetMetrics``).
KARMA itself reports one rounded figure for a dataset (``round(x, 3)``);
evalkit reports it unrounded, with a bootstrap CI for the same pooled ratio.

Entity WER (KARMA's keyword WER, ``compute_kw_wer_from_sem_alignment``):
keyword words are the words of the reference at each annotated entity's
character offsets (KARMA's annotation ``[text, category, [[start, end], ...]]``,
given as a Python-literal string), lowercased; every alignment group of one
reference word that is a keyword counts: match, substitution or deletion
(insertions never count). KARMA takes the keyword set of the whole dataset
and counts those words in every sentence. A streaming engine scores each
sample before it has seen the others, so by default a sample counts the
keywords of its own annotations; the corpus value equals KARMA's whenever no
sample contains (as a one-word group) a keyword that only another sample
tags. The option ``entity_words`` gives the dataset-wide list up front (words
or entity texts, split on spaces): with the union of the dataset's keywords
there the corpus equals KARMA's exactly.

Known differences from KARMA (also in evalkit/metrics/references/):

- values are not rounded (KARMA prints ``round(x, 3)``);
- KARMA has aligners for English and Hindi only and raises for any other
  language; evalkit refuses it with a config error (no language: English,
  KARMA's benchmark default). Spelling folding (nukta, chandrabindu) is not
  part of KARMA's metric: KARMA's dataset processors do it, here the
  ``processors`` option (``multilingual_text_processor``);
- an utterance KARMA's aligner raises on (English digits ``int()`` cannot
  read, e.g. ``²``) is skipped by KARMA and is a failed sample here (also left
  out of the corpus value);
- where two different spoken expansions of one token both match the answer
  word for word, KARMA takes the first in Python set order (which varies with
  ``PYTHONHASHSEED``); evalkit the first in the order they are generated;
- several references: the first is scored (KARMA takes one string);
- entity WER: the dataset-wide keyword list (above); KARMA reads only its
  annotation string and skips anything else, evalkit also reads the same
  structure unparsed and, beyond it, lists of entity texts, objects with
  ``text`` and objects of lists by type (the words of the texts); no keyword
  anywhere gives NaN (KARMA: none).

The alignment costs about 24 character-error-rate comparisons per pair of
word positions, as KARMA's does: a 100-word utterance takes a few seconds.
"""

from __future__ import annotations

import ast
import asyncio
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
from rapidfuzz.distance import Levenshtein

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.languages import normalize_language, target_language
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings
from evalkit.metrics.karma.spoken_forms import RULES, rules_for

# -- alignment (KARMA's BaseCERAligner.align_words_dp) ---------------------------------------------------------

MATCH, SUBSTITUTION, DELETION, INSERTION = "match", "substitution", "deletion", "insertion"


@dataclass(frozen=True, slots=True)
class Group:
    """One step of the alignment: reference words against answer words, with the group's CER."""

    reference: tuple[str, ...]
    answer: tuple[str, ...]
    kind: str
    cer: float


def _rate(reference: str, answer: str) -> float:
    """Edit distance over the reference's length (1 for an empty reference and a non-empty answer)."""
    if not reference:
        return 1.0 if answer else 0.0
    return Levenshtein.distance(reference, answer) / len(reference)


def _substring_rate(reference: str, answer: str) -> float:
    """Rate when one side contains the other (the missing or extra share), else by a 3+ letter prefix."""
    reference = reference.replace(" ", "").replace(".", "").replace("-", "")
    answer = answer.replace(" ", "").replace(".", "").replace("-", "")
    if reference in answer:
        return (len(answer) - len(reference)) / max(len(reference), 1)
    if answer in reference:
        return (len(reference) - len(answer)) / max(len(reference), 1)
    upper_ref, upper_ans = reference.upper(), answer.upper()
    if upper_ans in upper_ref:
        return min((len(upper_ref) - len(upper_ans)) / max(len(upper_ref), 1), 0.8)
    if upper_ref in upper_ans:
        return min((len(upper_ans) - len(upper_ref)) / max(len(upper_ref), 1), 0.8)
    prefix = 0
    for a, b in zip(upper_ref, upper_ans):
        if a != b:
            break
        prefix += 1
    if prefix >= 3:
        return 1.0 - prefix / max(len(upper_ref), len(upper_ans))
    return _rate(reference, answer)


class Aligner:
    """KARMA's CER-based word-group alignment for one language."""

    def __init__(self, language: str, cer_threshold: float = 0.4) -> None:
        self.rules = rules_for(language)
        self.cer_threshold = cer_threshold
        self.group_rate = lru_cache(maxsize=1 << 16)(self._group_rate)

    def _group_rate(self, reference: str, answer: str) -> float:
        """The lowest of the plain, the spoken-form and the substring-aware character error rates."""
        plain = _rate(reference.lower().replace(" ", ""), answer.lower().replace(" ", ""))
        spoken = _rate(self.rules.normalize(reference), self.rules.normalize(answer))
        return min(plain, spoken, _substring_rate(reference.lower(), answer.lower()))

    def _expansion_span(self, token: str, answer: list[str], start: int) -> int | None:
        """How many answer words from ``start`` say ``token``'s expansion exactly (None: none does)."""
        for spoken in (self.rules.expand(token), *self.rules.expansions(token)):
            if spoken == token:
                continue
            words = spoken.lower().split()
            if start + len(words) <= len(answer) and words == [w.lower() for w in answer[start : start + len(words)]]:
                return len(words)
        return None

    def _bonus(self, ref: list[str], ans: list[str]) -> tuple[float, float, float]:
        """(score bonus, similarity, CER) of aligning the words ``ref`` with ``ans``."""
        threshold = self.cer_threshold
        if len(ref) == 1:
            token = ref[0]
            cer = self.group_rate(token, " ".join(ans))
            similarity = 1.0 - cer
            if self.rules.expand(token) != token:
                return (similarity + 0.5 if similarity >= 1.0 - threshold else similarity - 0.5), similarity, cer
            if similarity >= 0.99:
                return similarity + 5.0, similarity, cer
            if similarity >= 0.95:
                return similarity + 3.0, similarity, cer
            if len(ans) == 1:
                return similarity + 1.0, similarity, cer
            if similarity < 0.3:
                return similarity - 2.0 - (len(ans) - 1) * 2.0, similarity, cer
            return similarity - 0.3 - (len(ans) - 1) * 0.5, similarity, cer
        cer = self.group_rate(" ".join(ref), " ".join(ans))
        similarity = 1.0 - cer
        if similarity >= 0.95:
            return similarity + 1.0, similarity, cer
        return similarity - 0.8 - ((len(ref) - 1) * 0.3 + (len(ans) - 1) * 0.3), similarity, cer

    def align(self, reference: str, answer: str) -> list[Group]:
        """The best-scoring path, filled in from the end of both texts (KARMA recurses from the start)."""
        ref, ans = reference.split(), answer.split()
        m, n = len(ref), len(ans)
        score = [[0.0] * (n + 1) for _ in range(m + 1)]
        step: list[list[Group | None]] = [[None] * (n + 1) for _ in range(m + 1)]
        for i in range(m, -1, -1):
            for j in range(n, -1, -1):
                if i == m and j == n:
                    continue
                if i == m:
                    score[i][j] = score[i][j + 1] - 1.0
                    step[i][j] = Group((), (ans[j],), INSERTION, 1.0)
                    continue
                if j == n:
                    score[i][j] = score[i + 1][j] - 1.0
                    step[i][j] = Group((ref[i],), (), DELETION, 1.0)
                    continue
                span = self._expansion_span(ref[i], ans, j)
                if span is not None:  # the token's spoken form, word for word: taken without comparing
                    score[i][j] = score[i + 1][j + span] + 20.0
                    step[i][j] = Group((ref[i],), tuple(ans[j : j + span]), MATCH, 0.0)
                    continue
                best: tuple[float, Group] | None = None
                for r in range(1, min(3, m - i) + 1):
                    for h in range(1, min(8, n - j) + 1):
                        bonus, similarity, cer = self._bonus(ref[i : i + r], ans[j : j + h])
                        total = score[i + r][j + h] + bonus
                        if best is None or total > best[0]:  # ties: the first (fewest words) wins
                            kind = MATCH if similarity >= 0.95 else SUBSTITUTION
                            best = (total, Group(tuple(ref[i : i + r]), tuple(ans[j : j + h]), kind, cer))
                assert best is not None
                score[i][j], step[i][j] = best
        groups: list[Group] = []
        i = j = 0
        while i < m or j < n:
            group = step[i][j]
            assert group is not None
            groups.append(group)
            i, j = i + len(group.reference), j + len(group.answer)
        return groups


@dataclass(frozen=True, slots=True)
class AlignmentCounts:
    """KARMA's per-utterance counts: words, groups by kind, and the character-weighted group CER."""

    reference_words: int
    matches: int
    substitutions: int
    deletions: int
    insertions: int
    characters: int
    character_errors: float

    @property
    def edits(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @classmethod
    def of(cls, groups: list[Group]) -> AlignmentCounts:
        kinds = [g.kind for g in groups]
        characters = 0
        errors = 0.0
        for group in groups:
            if group.reference and group.answer:
                chars = sum(len(w) for w in group.reference)
                characters += chars
                errors += group.cer * chars
        return cls(
            sum(len(g.reference) for g in groups),
            kinds.count(MATCH),
            kinds.count(SUBSTITUTION),
            kinds.count(DELETION),
            kinds.count(INSERTION),
            characters,
            errors,
        )


# -- the metrics --------------------------------------------------------------------------------------------


def karma_language(metric: str, language: str | None) -> str:
    """KARMA has aligners for English and Hindi only; no language is English (KARMA's benchmark default)."""
    code = target_language(normalize_language(language)) if language else "en"
    if code not in RULES:
        raise ConfigError(
            f"metric {metric!r}: KARMA's semantic alignment exists for English and Hindi only, not {language!r}"
        )
    return code


class _AlignedMetric(Metric):
    """Aligns the first reference with the answer as KARMA does and reports the counts."""

    higher_is_better = False
    ci_method = "bootstrap"
    #: fits every speech recognition dataset of the catalogue (English and Hindi; others are refused)
    tasks: ClassVar[tuple[str, ...]] = ("speech_recognition",)
    option_names: ClassVar[tuple[str, ...]] = ("cer_threshold",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, self.option_names)
        super().__init__(language, **options)
        self.karma_language = karma_language(self.name, language)
        threshold = options.get("cer_threshold", 0.4)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise ConfigError(f"metric {self.name!r}: option 'cer_threshold' must be a number in [0, 1]")
        self.aligner = Aligner(self.karma_language, float(threshold))

    def align(self, prediction: str, sample: Sample) -> tuple[str, list[Group]] | SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        try:
            return references[0], self.aligner.align(references[0], prediction or "")
        except ValueError as error:  # KARMA skips an utterance its aligner raises on (e.g. a digit like '²')
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": str(error)})

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        """In a worker thread: the alignment is quadratic (about 0.05 s for 25 words, 0.5 s for 100 on this
        machine), and scoring on the event loop would stall every other engine's requests meanwhile."""
        return await asyncio.to_thread(self.score, prediction, sample)

    @staticmethod
    def group_details(groups: list[Group]) -> list[list[Any]]:
        return [[" ".join(g.reference), " ".join(g.answer), g.kind, round(g.cer, 6)] for g in groups]

    def describe(self) -> dict[str, Any]:
        return {"language": self.language, "aligner": self.karma_language, "cer_threshold": self.aligner.cer_threshold}


class SemanticWordErrorRate(_AlignedMetric):
    """KARMA's semantic WER: word groups aligned by character error rate, numbers and units as spoken."""

    name = "semantic_wer"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        aligned = self.align(prediction, sample)
        if isinstance(aligned, SampleScore):
            return aligned
        _, groups = aligned
        c = AlignmentCounts.of(groups)
        rate = c.edits / max(c.reference_words, 1)
        stats = (c.edits, c.reference_words, c.character_errors, c.characters, c.substitutions, c.deletions)
        return SampleScore(
            rate,
            (*(float(x) for x in stats), float(c.insertions), float(c.matches)),
            details={"alignment": self.group_details(groups)},
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        return totals[..., 0] / np.maximum(totals[..., 1], 1.0)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        return {
            "edits": int(t[0]),
            "reference_words": int(t[1]),
            "semantic_cer": float(t[2] / t[3]) if t[3] > 0 else 0.0,
            "substitutions": int(t[4]),
            "deletions": int(t[5]),
            "insertions": int(t[6]),
            "matches": int(t[7]),
        }


class SemanticCharacterErrorRate(SemanticWordErrorRate):
    """KARMA's semantic CER: the aligned groups' CERs weighted by their reference characters (no spaces)."""

    name = "semantic_cer"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        scored = super().score(prediction, sample)
        if scored.failure is not None:
            return scored
        s = scored.stats
        scored.score = s[2] / s[3] if s[3] > 0 else 0.0
        scored.stats = (s[2], s[3], s[0], s[1], *s[4:])
        return scored

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(totals[..., 1] > 0, totals[..., 0] / totals[..., 1], 0.0)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        details = super().corpus_details(np.array([t[2], t[3], t[0], t[1], *t[4:]]))
        details["semantic_wer"] = float(t[2] / max(t[3], 1.0))
        details["character_errors"] = float(t[0])
        details["reference_characters"] = int(t[1])
        del details["semantic_cer"]
        return details


def _annotation_words(reference: str, annotations: Any) -> list[str]:
    """Keyword words of one sample: KARMA's ``[text, category, [[start, end], ...]]`` read from the reference.

    Other shapes (extensions: KARMA reads only its own) give the words of the entity texts: a list of
    strings, of objects with ``text``, an object of lists by entity type, or any of these as JSON.
    """
    if annotations is None:
        return []
    if isinstance(annotations, str):
        stripped = annotations.strip()
        if not stripped:
            return []
        try:
            parsed = ast.literal_eval(stripped)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            try:
                parsed = json.loads(stripped)
            except json.JSONDecodeError:
                return []  # KARMA skips an annotation it cannot read
        if isinstance(parsed, str):
            return parsed.split()
        return _annotation_words(reference, parsed)
    if isinstance(annotations, dict):
        if "text" in annotations:
            return _annotation_words(reference, [annotations["text"]])
        return [w for group in annotations.values() for w in _annotation_words(reference, group)]
    if not isinstance(annotations, (list, tuple)):
        raise ValueError(f"entities must be strings, lists or objects, not {type(annotations).__name__}")
    words: list[str] = []
    for item in annotations:
        if isinstance(item, str):
            words += item.split()
        elif isinstance(item, dict):
            words += _annotation_words(reference, item)
        elif isinstance(item, (list, tuple)) and len(item) >= 3 and isinstance(item[2], (list, tuple)):
            for start, end in item[2]:
                words += reference[start:end].split()
        else:
            raise ValueError(f"an entity must be [text, category, [[start, end], ...]], text or an object: {item!r}")
    return words


class EntityWordErrorRate(_AlignedMetric):
    """KARMA's keyword WER: substituted or deleted keyword words over keyword words (semantic alignment)."""

    name = "entity_wer"
    option_names = ("cer_threshold", "entities_key", "entity_words")
    #: only datasets that tag entities (their runspecs list it): elsewhere there is nothing to score
    tasks = ()

    def __init__(self, language: str | None = None, **options: Any) -> None:
        super().__init__(language, **options)
        key = options.get("entities_key", "entities")
        if not isinstance(key, str) or not key:
            raise ConfigError(f"metric {self.name!r}: option 'entities_key' must be a meta key, not {key!r}")
        self.entities_key = key
        vocabulary = options.get("entity_words", [])
        if isinstance(vocabulary, str):
            vocabulary = [vocabulary]
        if not isinstance(vocabulary, (list, tuple)) or not all(isinstance(w, str) for w in vocabulary):
            raise ConfigError(f"metric {self.name!r}: option 'entity_words' must be a list of words or entity texts")
        #: the dataset-wide keyword list (KARMA builds it from every sample's annotations)
        self.entity_words = frozenset(w.lower() for text in vocabulary for w in text.split())

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        aligned = self.align(prediction, sample)
        if isinstance(aligned, SampleScore):
            return aligned
        reference, groups = aligned
        try:
            own = _annotation_words(reference, sample.meta.get(self.entities_key))
        except (ValueError, TypeError, IndexError) as error:
            return SampleScore(
                None, failure=FailureReason.METRIC_ERROR, details={"error": f"meta {self.entities_key!r}: {error}"}
            )
        keywords = self.entity_words | {w.lower() for w in own if w.strip()}
        counted = [g for g in groups if g.reference and " ".join(g.reference).lower() in keywords]
        kinds = [g.kind for g in counted]
        errors = kinds.count(SUBSTITUTION) + kinds.count(DELETION)
        rate = (errors / len(counted) if counted else 0.0) if keywords else None
        stats = (errors, len(counted), 1 if keywords else 0, kinds.count(SUBSTITUTION), kinds.count(DELETION))
        return SampleScore(
            rate,
            tuple(float(x) for x in stats),
            details={"keywords": sorted(keywords - self.entity_words), "keyword_groups": self.group_details(counted)},
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        """Σ errors / Σ keyword groups; 0 when keywords exist but none was aligned alone; NaN without keywords."""
        t = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(t[..., 1] > 0, t[..., 0] / t[..., 1], 0.0)
        return np.where(t[..., 2] > 0, rate, np.nan)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        return {
            "errors": int(t[0]),
            "keyword_words": int(t[1]),
            "samples_with_keywords": int(t[2]),
            "substitutions": int(t[3]),
            "deletions": int(t[4]),
        }

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "entities_key": self.entities_key, "entity_words": len(self.entity_words)}

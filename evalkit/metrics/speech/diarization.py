"""Speaker-attributed transcripts: cpWER (meeteval) and word diarization error rate (DiarizationLM).

A transcript is one line per turn, ``<speaker>: <words>`` (``A: hello``,
``Speaker 1: hello``, ``[SPEAKER_00]: hello``); a reference may also be a list
of ``{"speaker": ..., "text": ...}`` turns. Speaker labels are names only: the
model's ``A`` may be the reference's ``Speaker 2``, so both metrics first find
the assignment of model speakers to reference speakers that suits them best.
An answer without any speaker label counts as one speaker, so it is scored
(every other speaker's words are missing from it), not failed.

Each metric equals one reference implementation by default, per sample and for
the corpus, because a cpWER or WDER is only comparable with published figures
when it is computed the way they were:

- ``cpwer`` equals meeteval's ``meeteval.wer.cp_word_error_rate`` (the CHiME-6
  and NOTSOFAR reference implementation; checked against meeteval 0.4.3) on the
  words as written: like meeteval, no text normalisation by default, words are
  whitespace-separated tokens and each speaker's words are joined in
  transcript order. The corpus value is meeteval's combined error rate
  (``sum`` or ``combine_error_rates`` of the per-sample ``ErrorRate`` objects):
  summed errors over summed reference words.
- ``wder`` equals DiarizationLM's WDER (google/speaker-id,
  ``DiarizationLM/diarizationlm/metrics.py``, ``compute_utterance_metrics`` and
  ``compute_metrics_on_json_dict``; checked against the PyPI package
  ``diarizationlm`` 0.1.5): its text normalisation (lower-case, then each of
  ``, . _ ? ! - " '`` removed from a word unless that would leave it empty),
  its word alignment (Levenshtein whose backtrace prefers an insertion, then a
  deletion, then the diagonal, as its ``levenshtein_with_edits``), the aligned
  (correct or substituted) words counted, and its speaker mapping (the
  Hungarian assignment maximising the words on which mapped speakers agree).
  The corpus value pools as DiarizationLM does: summed wrong-speaker words over
  summed aligned words.

Differences, all deliberate and documented in ``evalkit/metrics/references/``:
DiarizationLM raises when no word aligns (an empty answer); evalkit scores it
0 wrong of 0 aligned words, so it adds nothing to the corpus. A sample whose
reference has no words fails ("no reference") in both metrics, where meeteval
would count the answer's words as insertions over 0 reference words.
DiarizationLM also computes a cpWER, a different quantity from meeteval's: its
speaker assignment maximises correct words instead of minimising errors, the
words of speakers left without a partner (more reference than answer speakers,
or the reverse) count neither as errors nor as reference words, and it
normalises the text; evalkit's ``cpwer`` is meeteval's.

The ``normalizer`` option picks another text treatment, for both metrics:
``none`` (whitespace tokens as written; cpwer's default), ``diarizationlm``
(wder's default), ``lower,rm(.?!,)`` (meeteval's normaliser of that name:
lower-case, then ``. ? ! ,`` deleted) or evalkit's ASR normalisers ``auto``,
``english``, ``basic`` (Whisper's; the English one rewrites numbers and joins
spoken digits, ``one two`` -> ``12``, so it can change the number of words and
the value is no longer the reference's).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options
from evalkit.processing.normalizers import NORMALIZER_KINDS, asr_normalizer

#: ``A: words``, ``Speaker 1: words``, ``[SPEAKER_00]: words``, ``S1 - words`` is not a label (too ambiguous)
_LINE = re.compile(r"^\s*\[?\s*((?:speaker|spk)?\s*[A-Za-z0-9_]{1,24})\s*\]?\s*:\s*(.*)$", re.IGNORECASE)

Turns = list[tuple[str, str]]
Words = list[tuple[str, str]]

#: the characters DiarizationLM's ``normalize_text`` removes from each word, in its order
_DIARIZATIONLM_PUNCTUATION = (",", ".", "_", "?", "!", "-", '"', "'")
#: the normalisers of the speaker metrics beyond evalkit's ASR ones
SPEAKER_NORMALIZERS = ("none", "diarizationlm", "lower,rm(.?!,)")


def parse_turns(value: Any) -> Turns:
    """(speaker, text) turns from a list of {speaker, text} or from ``speaker: text`` lines.

    Lines without a label continue the previous turn (or, at the start, belong to speaker ``?``).
    """
    if isinstance(value, list):
        turns = []
        for item in value:
            if isinstance(item, dict) and "text" in item:
                turns.append((str(item.get("speaker", "?")), str(item["text"])))
        return turns
    turns = []
    for line in str(value or "").splitlines():
        match = _LINE.match(line)
        if match:
            turns.append((re.sub(r"\s+", " ", match.group(1).strip().lower()), match.group(2)))
        elif line.strip():
            if turns:
                turns[-1] = (turns[-1][0], f"{turns[-1][1]} {line}")
            else:
                turns.append(("?", line))
    return turns


def diarizationlm_words(text: str) -> list[str]:
    """Words as DiarizationLM's ``normalize_text`` leaves them: never merged, never dropped.

    A word that would become empty keeps the character (``...`` stays), so the
    number of words is the number of whitespace tokens, as DiarizationLM needs
    to keep its per-word speaker list aligned with the words.
    """
    words = []
    for word in text.lower().split():
        for mark in _DIARIZATIONLM_PUNCTUATION:
            stripped = word.replace(mark, "")
            if stripped:
                word = stripped
        words.append(word)
    return words


def _meeteval_lower_rm(text: str) -> list[str]:
    """meeteval's ``lower,rm(.?!,)`` normaliser: a word of only those marks disappears."""
    text = text.lower()
    for mark in ".?!,":
        text = text.replace(mark, "")
    return text.split()


def speaker_normalizer(language: str | None, kind: str) -> tuple[str, Callable[[str], list[str]]]:
    """(name, text -> words) for a speaker metric's ``normalizer`` option."""
    if kind == "none":
        return "none", str.split
    if kind == "diarizationlm":
        return "diarizationlm", diarizationlm_words
    if kind == "lower,rm(.?!,)":
        return kind, _meeteval_lower_rm
    if kind in NORMALIZER_KINDS:
        name, normalize = asr_normalizer(language, kind)
        return name, lambda text: normalize(text).split()
    known = ", ".join((*SPEAKER_NORMALIZERS, *(k for k in NORMALIZER_KINDS if k != "none")))
    raise ValueError(f"unknown normalizer {kind!r}; expected one of {known}")


def diarizationlm_alignment(reference: list[str], hypothesis: list[str]) -> list[tuple[int, int]]:
    """(reference index, answer index) of the words a minimum-edit alignment pairs (correct or substituted).

    Among alignments of equal cost, the one DiarizationLM's ``levenshtein_with_edits``
    returns: tracing back from the end, an insertion is taken whenever it is optimal,
    else a deletion, else the diagonal. Which words pair decides WDER's denominator,
    so the tie-breaking has to be the reference's.
    """
    n, m = len(reference), len(hypothesis)
    if not n or not m:
        return []
    hyp = np.array(hypothesis, dtype=object)
    steps = np.arange(m + 1)
    costs = np.empty((n + 1, m + 1), dtype=np.int64)
    costs[0] = steps
    for i in range(1, n + 1):
        previous = costs[i - 1]
        row = np.empty(m + 1, dtype=np.int64)
        row[0] = i
        row[1:] = np.minimum(previous[1:] + 1, previous[:-1] + (hyp != reference[i - 1]))
        # an insertion moves along the row: cost[j] = min over k <= j of row[k] + (j - k)
        costs[i] = np.minimum.accumulate(row - steps) + steps
    pairs = []
    i, j = n, m
    while i > 0 and j > 0:
        cost = costs[i, j]
        if cost == costs[i, j - 1] + 1:
            j -= 1
        elif cost == costs[i - 1, j] + 1:
            i -= 1
        else:
            i, j = i - 1, j - 1
            pairs.append((i, j))
    pairs.reverse()
    return pairs


class _SpeakerMetric(Metric):
    higher_is_better = False
    ci_method = "bootstrap"
    #: the reference's own text treatment
    default_normalizer = "none"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("normalizer",))
        super().__init__(language, **options)
        kind = str(options.get("normalizer", self.default_normalizer))
        self.normalizer_name, self.words_of = speaker_normalizer(language, kind)

    def _words(self, turns: Turns) -> Words:
        """(speaker, word) in transcript order, on normalized text."""
        return [(speaker, word) for speaker, text in turns for word in self.words_of(text)]

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        reference = self._words(parse_turns(sample.reference))
        if not reference:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        errors, words, details = self.errors(reference, self._words(parse_turns(prediction)))
        rate = errors / words if words else 0.0
        return SampleScore(rate, (float(errors), float(words)), details=details)

    def errors(self, reference: Words, hypothesis: Words) -> tuple[int, int, dict[str, Any]]:
        """(errors, the words they are counted over, details) for one sample."""
        raise NotImplementedError

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return totals[..., 0] / np.maximum(totals[..., 1], 1.0)

    def describe(self) -> dict[str, Any]:
        return {"normalizer": self.normalizer_name}


def _by_speaker(words: Words) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    for speaker, word in words:
        out.setdefault(speaker, []).append(word)
    return {speaker: " ".join(ws) for speaker, ws in out.items()}


class ConcatenatedPermutationWER(_SpeakerMetric):
    """cpWER as meeteval computes it: speakers' words joined, best assignment, errors over reference words."""

    name = "cpwer"

    def errors(self, reference: Words, hypothesis: Words) -> tuple[int, int, dict[str, Any]]:
        from meeteval.wer import cp_word_error_rate

        ref, hyp = _by_speaker(reference), _by_speaker(hypothesis)
        # no timestamps: the words are in transcript order already (sort=False says so, and keeps meeteval quiet)
        result = cp_word_error_rate(ref, hyp, reference_sort=False, hypothesis_sort=False)
        return (
            int(result.errors),
            int(result.length),
            {
                "substitutions": int(result.substitutions),
                "deletions": int(result.deletions),
                "insertions": int(result.insertions),
                "reference_speakers": len(ref),
                "answer_speakers": len(hyp),
                "assignment": [list(pair) for pair in result.assignment],
            },
        )


class WordDiarizationErrorRate(_SpeakerMetric):
    """WDER as DiarizationLM computes it: aligned words with the wrong speaker under the best mapping."""

    name = "wder"
    default_normalizer = "diarizationlm"

    def errors(self, reference: Words, hypothesis: Words) -> tuple[int, int, dict[str, Any]]:
        from scipy.optimize import linear_sum_assignment

        pairs = [
            (reference[i][0], hypothesis[j][0])
            for i, j in diarizationlm_alignment([w for _, w in reference], [w for _, w in hypothesis])
        ]
        ref_speakers = sorted({s for s, _ in reference})
        hyp_speakers = sorted({s for s, _ in hypothesis})
        mapping: dict[str, str] = {}
        agreeing = 0
        if pairs:
            counts = np.zeros((len(hyp_speakers), len(ref_speakers)), dtype=np.int64)
            for ref_speaker, hyp_speaker in pairs:
                counts[hyp_speakers.index(hyp_speaker), ref_speakers.index(ref_speaker)] += 1
            rows, cols = linear_sum_assignment(counts, maximize=True)
            mapping = {hyp_speakers[r]: ref_speakers[c] for r, c in zip(rows, cols) if counts[r, c]}
            agreeing = int(counts[rows, cols].sum())
        wrong = len(pairs) - agreeing
        return wrong, len(pairs), {"aligned_words": len(pairs), "wrong_speaker": wrong, "mapping": mapping}

"""Speaker-attributed transcripts: cpWER and word diarization error rate (LALMEval's ``speaker_diarization``).

A transcript is one line per turn, ``<speaker>: <words>`` (``A: hello``,
``Speaker 1: hello``, ``[SPEAKER_00]: hello``); a reference may also be a list
of ``{"speaker": ..., "text": ...}`` turns. Speaker labels are names only: the
model's ``A`` may be the reference's ``Speaker 2``, so both metrics first find
the assignment of model speakers to reference speakers that suits them best.

- ``cpwer``: concatenated minimum-permutation WER (CHiME-6): each speaker's
  words joined in order, the speaker assignment with the fewest errors, errors
  over reference words. Computed with meeteval (the reference implementation
  of the CHiME and NOTSOFAR challenges), on Whisper-normalized words as WER is.
- ``wder``: word diarization error rate (Shafey et al., 2019, as DiarizationLM
  computes it): the words of both transcripts aligned ignoring speakers
  (jiwer), then, of the aligned pairs (correct or substituted words), the share
  whose answer word carries the wrong speaker under the best one-to-one speaker
  mapping (Hungarian assignment). LALMEval's ``speaker_diarization`` is this
  metric (its harness reports WDER with cpWER from DiarizationLM).

An answer without any speaker label counts as one speaker, so it is scored
(every other speaker's words are missing from it), not failed. Per sample the
stats are ``(errors, words)`` (reference words for cpWER, aligned words for
WDER); the corpus value is their ratio, with a bootstrap CI, like WER.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options
from evalkit.processing.normalizers import asr_normalizer

#: ``A: words``, ``Speaker 1: words``, ``[SPEAKER_00]: words``, ``S1 - words`` is not a label (too ambiguous)
_LINE = re.compile(r"^\s*\[?\s*((?:speaker|spk)?\s*[A-Za-z0-9_]{1,24})\s*\]?\s*:\s*(.*)$", re.IGNORECASE)

Turns = list[tuple[str, str]]


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


class _SpeakerMetric(Metric):
    higher_is_better = False
    ci_method = "bootstrap"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("normalizer",))
        super().__init__(language, **options)
        self.normalizer_name, self.normalize = asr_normalizer(language, str(options.get("normalizer", "auto")))

    def _words(self, turns: Turns) -> list[tuple[str, str]]:
        """(speaker, word) in transcript order, on normalized text."""
        return [(speaker, word) for speaker, text in turns for word in self.normalize(text).split()]

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        reference = self._words(parse_turns(sample.reference))
        if not reference:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        errors, words, details = self.errors(reference, self._words(parse_turns(prediction)))
        rate = errors / words if words else 0.0
        return SampleScore(rate, (float(errors), float(words)), details=details)

    def errors(
        self, reference: list[tuple[str, str]], hypothesis: list[tuple[str, str]]
    ) -> tuple[int, int, dict[str, Any]]:
        """(errors, the words they are counted over, details) for one sample."""
        raise NotImplementedError

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return totals[..., 0] / np.maximum(totals[..., 1], 1.0)

    def describe(self) -> dict[str, Any]:
        return {"normalizer": self.normalizer_name}


def _by_speaker(words: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    for speaker, word in words:
        out.setdefault(speaker, []).append(word)
    return {speaker: " ".join(ws) for speaker, ws in out.items()}


class ConcatenatedPermutationWER(_SpeakerMetric):
    """cpWER: each speaker's words joined, the best speaker assignment, errors over reference words."""

    name = "cpwer"

    def errors(
        self, reference: list[tuple[str, str]], hypothesis: list[tuple[str, str]]
    ) -> tuple[int, int, dict[str, Any]]:
        from meeteval.wer import cp_word_error_rate

        ref, hyp = _by_speaker(reference), _by_speaker(hypothesis)
        # no timestamps: the words are in transcript order already (sort=False says so, and keeps meeteval quiet)
        result = cp_word_error_rate(dict(ref), dict(hyp) or {"?": ""}, reference_sort=False, hypothesis_sort=False)
        return (
            int(result.errors),
            len(reference),
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
    """WDER: share of aligned words whose answer word has the wrong speaker (best speaker mapping)."""

    name = "wder"

    def errors(
        self, reference: list[tuple[str, str]], hypothesis: list[tuple[str, str]]
    ) -> tuple[int, int, dict[str, Any]]:
        import jiwer
        from scipy.optimize import linear_sum_assignment

        pairs: list[tuple[str, str]] = []  # (reference speaker, answer speaker) of aligned words
        if hypothesis:
            out = jiwer.process_words(" ".join(w for _, w in reference), " ".join(w for _, w in hypothesis))
            for chunk in out.alignments[0]:
                if chunk.type in ("equal", "substitute"):
                    for k in range(chunk.ref_end_idx - chunk.ref_start_idx):
                        pairs.append((reference[chunk.ref_start_idx + k][0], hypothesis[chunk.hyp_start_idx + k][0]))
        ref_speakers = sorted({s for s, _ in reference})
        hyp_speakers = sorted({s for s, _ in hypothesis})
        mapping: dict[str, str] = {}
        if pairs:
            counts = np.zeros((len(hyp_speakers), len(ref_speakers)))
            for ref_speaker, hyp_speaker in pairs:
                counts[hyp_speakers.index(hyp_speaker), ref_speakers.index(ref_speaker)] += 1
            rows, cols = linear_sum_assignment(-counts)
            mapping = {hyp_speakers[r]: ref_speakers[c] for r, c in zip(rows, cols)}
        wrong = sum(1 for ref_speaker, hyp_speaker in pairs if mapping.get(hyp_speaker) != ref_speaker)
        return wrong, len(pairs), {"aligned_words": len(pairs), "wrong_speaker": wrong, "mapping": mapping}

"""AU-Harness's ``diarization_metrics``: DiarizationLM's WDER and cpWER and a speaker-count error, computed on
AU-Harness's reading of speaker-labelled transcripts (its metrics/diarization_metrics.py).

This is not evalkit's ``wder`` or ``cpwer``, which follow DiarizationLM and
meeteval as published. AU-Harness adapts DiarizationLM's
``compute_utterance_metrics`` and reads the transcripts its own way:

* each line is a turn ``<speaker>: <words>``: the speaker is the text before
  the first ``:``, the words are everything after it, normalised with
  AU-Harness's ``normalize_text`` (evalkit/metrics/auharness/text.py) and split
  on single spaces. A line without ``:`` is a speaker with one empty word;
* the answer's words are aligned with the reference's by word Levenshtein
  (DiarizationLM's tie-breaking) after normalising the joined words once
  more; a sample whose second normalisation yields more words than the first
  is skipped, as AU-Harness skips it (here: a failed sample, left out of
  every figure);
* WDER: the aligned words whose speakers disagree under the Hungarian speaker
  mapping that maximises agreement, over the aligned words; a sample with no
  aligned word is skipped;
* cpWER: for each pair of speakers numbered up to the highest speaker seen on
  an aligned word, the WER of their words; the pairing that maximises correct
  words; (substitutions + insertions) over the paired reference words;
* speaker-count error: |answer speakers - reference speakers|.

The headline is AU-Harness's ``overall_wder`` (summed wrong-speaker words over
summed aligned words, what its leaderboard reports as WDER). The result's
details give its other four figures: ``average_sample_wder``,
``overall_cpwer``, ``average_sample_cpwer`` and ``speaker_count_absolute_error``
(the three averages capped at 1, as AU-Harness caps them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.auharness.text import MissingPackage, normalize_like_auharness, require_normaliser
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings
from evalkit.metrics.speech.diarization import diarizationlm_alignment


class Skipped(ValueError):
    """A sample AU-Harness leaves out of every figure (the message says why)."""


@dataclass
class Counts:
    """One alignment's word counts, as DiarizationLM's UtteranceMetrics keeps them."""

    insert: int = 0
    delete: int = 0
    sub: int = 0
    correct: int = 0

    @property
    def total(self) -> int:
        return self.correct + self.sub + self.delete


def _words(text: str) -> list[str]:
    return normalize_like_auharness(text).split(" ")


def read_turns(transcript: str) -> tuple[list[str], list[str]]:
    """(speaker of each word, each word): every line a turn, as AU-Harness's prepare_speaker_info reads it."""
    speakers: list[str] = []
    words: list[str] = []
    for line in transcript.split("\n"):
        head, *rest = line.split(":")
        turn = _words(" ".join(rest).strip()) if rest else [""]
        speakers += [head.strip()] * len(turn)
        words += turn
    return speakers, words


def aligned_counts(hyp_list: list[str], ref_list: list[str]) -> tuple[Counts, list[tuple[int, int]]]:
    """Counts and word pairs of the joined, normalised-again words; Skipped when they outgrow the lists."""
    ref_words = _words(" ".join(ref_list))
    hyp_words = _words(" ".join(hyp_list))
    ref_real = [w for w in ref_words if w]
    hyp_real = [w for w in hyp_words if w]
    pairs = diarizationlm_alignment(ref_real, hyp_real)
    counts = Counts()
    for i, j in pairs:
        if ref_real[i] == hyp_real[j]:
            counts.correct += 1
        else:
            counts.sub += 1
    counts.delete = len(ref_real) - len(pairs)
    counts.insert = len(hyp_real) - len(pairs)
    if len(ref_real) > len(ref_list) or len(hyp_real) > len(hyp_list):
        raise Skipped("normalising the joined words again gives more words than the turns held")
    return counts, pairs


def _best_pairs(matrix: np.ndarray) -> list[tuple[int, int]]:
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(matrix, maximize=True)
    return list(zip(rows.tolist(), cols.tolist()))


@dataclass
class RowFigures:
    wder_sub: int
    wder_total: int
    cpwer_errors: int
    cpwer_total: int
    speaker_count_error: int


def row_figures(reference: str, answer: str) -> RowFigures:
    """One sample's figures (rules in the module docstring); Skipped where AU-Harness skips it."""
    ref_labels, ref_words = read_turns(reference)
    hyp_labels, hyp_words = read_turns(answer)
    numbers = {label: k + 1 for k, label in enumerate(sorted(set(ref_labels) | set(hyp_labels)))}
    ref_spk = [numbers[s] for s in ref_labels]
    hyp_spk = [numbers[s] for s in hyp_labels]
    _, pairs = aligned_counts(hyp_words, ref_words)
    if not pairs:
        raise Skipped("no answer word aligns with a reference word")
    ref_aligned = [ref_spk[i] for i, _ in pairs]
    hyp_aligned = [hyp_spk[j] for _, j in pairs]
    top = max(*ref_aligned, *hyp_aligned)
    agreement = np.zeros((top, top), dtype=int)
    for r, h in zip(ref_aligned, hyp_aligned):
        agreement[r - 1, h - 1] += 1
    wder_correct = int(sum(agreement[r, c] for r, c in _best_pairs(agreement)))
    wder_total = len(ref_aligned)
    by_pair: dict[tuple[int, int], Counts] = {}
    correct = np.zeros((top, top), dtype=int)
    for r in range(1, top + 1):
        ref_of_r = [w for w, s in zip(ref_words, ref_spk) if s == r]
        if not ref_of_r:
            continue
        for h in range(1, top + 1):
            hyp_of_h = [w for w, s in zip(hyp_words, hyp_spk) if s == h]
            if not hyp_of_h:
                continue
            try:
                counts, _ = aligned_counts(hyp_of_h, ref_of_r)
            except Skipped:
                continue
            by_pair[(r, h)] = counts
            correct[r - 1, h - 1] = counts.correct
    chosen = [by_pair[(r + 1, c + 1)] for r, c in _best_pairs(correct) if (r + 1, c + 1) in by_pair]
    cpwer_total = sum(c.total for c in chosen)
    if cpwer_total == 0:
        raise Skipped("no speaker pair has reference words (AU-Harness divides by zero here)")
    return RowFigures(
        wder_sub=wder_total - wder_correct,
        wder_total=wder_total,
        cpwer_errors=sum(c.sub + c.insert for c in chosen),
        cpwer_total=cpwer_total,
        speaker_count_error=abs(len(set(hyp_spk)) - len(set(ref_spk))),
    )


class DiarizationMetrics(Metric):
    """AU-Harness's diarization_metrics: corpus WDER (cpWER, per-sample means, speaker count in details)."""

    name = "diarization_metrics"
    higher_is_better = False
    ci_method = "bootstrap"
    tasks = ("speaker_diarization", "callhome")

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)
        try:
            require_normaliser()
        except MissingPackage as error:
            raise ConfigError(f"metric {self.name!r}: {error}") from None

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references or not references[0].strip():
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        try:
            row = row_figures(references[0], prediction or "")
        except Skipped as error:
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": f"skipped: {error}"})
        wder = row.wder_sub / (row.wder_total + 1e-12)
        cpwer = row.cpwer_errors / row.cpwer_total
        stats = (
            float(row.wder_sub),
            float(row.wder_total),
            float(row.cpwer_errors),
            float(row.cpwer_total),
            wder,
            cpwer,
            float(row.speaker_count_error),
            1.0,
        )
        details = {"wder": wder, "cpwer": cpwer, "speaker_count_error": row.speaker_count_error}
        return SampleScore(wder, stats, details=details)

    def corpus(self, totals: Any) -> Any:
        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(totals[..., 1] > 0, totals[..., 0] / np.where(totals[..., 1] > 0, totals[..., 1], 1), 0.0)

    def corpus_details(self, totals: Any) -> dict[str, Any]:
        t = [float(v) for v in np.asarray(totals, dtype=float)]
        rows = t[7]
        return {
            "overall_wder": t[0] / t[1] if t[1] > 0 else 0.0,
            "average_sample_wder": min(t[4] / rows, 1.0) if rows else 0.0,
            "overall_cpwer": t[2] / t[3] if t[3] > 0 else 0.0,
            "average_sample_cpwer": min(t[5] / rows, 1.0) if rows else 0.0,
            "speaker_count_absolute_error": min(t[6] / rows, 1.0) if rows else 0.0,
        }

    def describe(self) -> dict[str, Any]:
        return {"reading": "AU-Harness diarization_metrics (normalize_text, line turns)", "speaker_numbering": "sorted"}

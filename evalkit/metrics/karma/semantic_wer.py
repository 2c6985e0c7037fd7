"""KARMA-OpenMedEvalKit's ``semantic_wer_metric`` (karma/metrics/wer_metrics.py SemanticWERMetric), English.

Not KARMA's ``asr_semantic_metric`` (evalkit's ``semantic_wer``): this one
keeps jiwer's word alignment and rewrites only the words that differ, each
pair of differing stretches in the form that brings their character error
rate down, then counts word errors on the rewritten texts:

1. the answer is cut to twice the reference's word count;
2. both texts: a space on each side of ``/`` (``।`` becomes a space), a
   space inside digit ranges (``3-4`` -> ``3 - 4``), lower case;
3. difflib aligns the words; each replaced, deleted or inserted stretch is
   normalised: contractions expanded, punctuation but ``/ - %`` removed,
   then, where it lowers the stretch pair's CER, digits spelled out
   (indic-numtowords, Indian grouping: "ten lakh") and hyphens and
   punctuation removed or swapped (KARMA's list, in its order);
4. the rewritten texts replace the originals only when their WER is not
   higher than the lower-cased originals'.

The corpus value is jiwer's WER over all rewritten pairs (word errors over
reference words), KARMA's figure. KARMA's English unit and symbol tables and
its GLM word pairs (lang_resources/) are not in its repository, so they are
empty here as in KARMA. Other languages are refused: KARMA sends their
English words to Google's online transliteration service.
"""

from __future__ import annotations

import difflib
import importlib
import re
import string
from collections.abc import Callable
from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings

_CONTRACTIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), replacement)
    for pattern, replacement in (
        (r"\bwon't\b", "will not"),
        (r"\bcan't\b", "cannot"),
        (r"\bshan't\b", "shall not"),
        (r"\blet's\b", "let us"),
        (r"\b(\w+)n't\b", r"\1 not"),
        (r"\b(\w+)'ll\b", r"\1 will"),
        (r"\b(\w+)'ve\b", r"\1 have"),
        (r"\b(\w+)'re\b", r"\1 are"),
        (r"\b(\w+)'d\b", r"\1 would"),
        (r"\b(\w+)'m\b", r"\1 am"),
        (r"\b(\w+)'s\b", r"\1 is"),
    )
)
_PUNCTUATION = string.punctuation.replace("/", "").replace("-", "").replace("%", "")
_TO_SPACES = str.maketrans(_PUNCTUATION, " " * len(_PUNCTUATION))
_RANGE = re.compile(r"(\d)-(\d)")
_DIGITS = re.compile(r"\d+")
#: KARMA's punctuation rewrites tried after the two whole-text ones, in its order
_SWAPS = ((".", ""), (",", ""), (".", ","), (",", "."), ("-", " "))
_QUOTES_AND_STOPS = (".", ",", "!", "?", ";", ":", '"', "'")


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def _cer(reference: str, hypothesis: str) -> float:
    import jiwer

    return float(jiwer.cer(reference, hypothesis))


def _wer(reference: str, hypothesis: str) -> float:
    import jiwer

    return float(jiwer.wer(reference, hypothesis))


def expand_contractions(text: str) -> str:
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    return _squeeze(text)


def strip_punctuation(text: str) -> str:
    """Punctuation except ``/``, ``-`` and ``%`` to spaces, spaces squeezed."""
    return _squeeze(text.translate(_TO_SPACES))


class _Speller:
    """Whole-number words spelled out as indic-numtowords writes English (its first variation)."""

    def __init__(self) -> None:
        try:
            module = importlib.import_module("indic_numtowords")
        except ImportError:
            raise ConfigError(
                "metric 'semantic_wer_metric' needs the indic-numtowords package (KARMA's number words): "
                "pip install 'evalkit[karma]'"
            ) from None
        self.spell: Callable[..., Any] = module.num2words

    def __call__(self, text: str) -> str:
        out = []
        for word in text.split():
            if re.fullmatch(r"\d+", word):
                try:
                    spelled = self.spell(int(word), lang="en", variations=True)
                    out.append(spelled[0] if isinstance(spelled, list) else spelled)
                except Exception:  # KARMA keeps the digits of a number the package cannot spell
                    out.append(word)
            else:
                out.append(word)
        return " ".join(out)


def _better_punctuation(ref: str, hyp: str, best: float) -> tuple[str, str, float]:
    """KARMA's punctuation rewrites of a stretch pair, each kept when it lowers the CER."""
    best_ref, best_hyp = ref, hyp
    candidates = [(_squeeze(ref.replace("-", "")), _squeeze(hyp.replace("-", "")))]
    r, h = ref, hyp
    for mark in _QUOTES_AND_STOPS:
        r, h = r.replace(mark, ""), h.replace(mark, "")
    candidates.append((_squeeze(r), _squeeze(h)))
    candidates += [(_squeeze(ref.replace(a, b)), _squeeze(hyp.replace(a, b))) for a, b in _SWAPS]
    for r, h in candidates:
        if r and h:
            cer = _cer(r, h)
            if cer < best:
                best, best_ref, best_hyp = cer, r, h
    return best_ref, best_hyp, best


def normalize_pair(ref: str, hyp: str, spell: Callable[[str], str]) -> tuple[str, str]:
    """The rewriting of one pair of differing stretches that gives the lowest CER (KARMA's order of tries)."""
    if "'" in ref or "'" in hyp:
        ref, hyp = expand_contractions(ref), expand_contractions(hyp)
    ref, hyp = strip_punctuation(ref), strip_punctuation(hyp)
    best_ref, best_hyp = ref, hyp
    best = _cer(ref, hyp) if ref and hyp else float("inf")
    if _DIGITS.search(ref) or _DIGITS.search(hyp):
        ref_words = spell(ref) if ref else ""
        hyp_words = spell(hyp) if hyp else ""
        if ref_words and hyp_words:
            cer = _cer(ref_words, hyp_words)
            if cer < best:
                best, best_ref, best_hyp = cer, ref_words, hyp_words
    best_ref, best_hyp, _ = _better_punctuation(best_ref, best_hyp, best)
    return best_ref, best_hyp


def _prepared(text: str) -> str:
    spaced = _squeeze(_RANGE.sub(r"\1 - \2", text).replace("।", " ").replace("/", " / ")).strip()
    return spaced.lower()


def rewrite(reference: str, hypothesis: str, spell: Callable[[str], str]) -> tuple[str, str]:
    """The (reference, hypothesis) KARMA scores: differing stretches rewritten when that does not raise the WER."""
    if not reference:
        return "", ""
    original = _wer(reference.lower(), hypothesis.lower())
    ref, hyp = _prepared(reference), _prepared(hypothesis)
    ref_words, hyp_words = ref.split(), hyp.split()
    opcodes = difflib.SequenceMatcher(None, ref_words, hyp_words).get_opcodes()
    if all(tag == "equal" for tag, *_ in opcodes):
        return ref, hyp
    # KARMA keys each rewritten stretch by its span on its own side, as written here
    ref_parts: dict[tuple[int, int], list[str]] = {}
    hyp_parts: dict[tuple[int, int], list[str]] = {}
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            continue
        r_part = " ".join(ref_words[i1:i2]) if tag != "insert" else ""
        h_part = " ".join(hyp_words[j1:j2]) if tag != "delete" else ""
        new_ref, new_hyp = normalize_pair(r_part, h_part, spell)
        ref_parts[(i1, i2)] = new_ref.split() if new_ref else []
        hyp_parts[(j1, j2)] = new_hyp.split() if new_hyp else []
    out_ref: list[str] = []
    out_hyp: list[str] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            out_ref += ref_words[i1:i2]
            out_hyp += hyp_words[j1:j2]
        if tag in ("replace", "delete"):
            out_ref += ref_parts[(i1, i2)]
        if tag in ("replace", "insert"):
            out_hyp += hyp_parts[(j1, j2)]
    new_ref, new_hyp = " ".join(out_ref).strip(), " ".join(out_hyp).strip()
    if _wer(new_ref, new_hyp) <= original:
        return new_ref, new_hyp
    return ref, hyp


class SemanticWerMetric(Metric):
    """KARMA's semantic_wer_metric (English): WER after rewriting the differing words to their best-matching form."""

    name = "semantic_wer_metric"
    higher_is_better = False
    ci_method = "bootstrap"
    tasks = ("asr",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)
        given = str(language or "en").lower()
        if given.split("-")[0].split("_")[0] not in ("en", "eng", "english"):
            raise ConfigError(
                f"metric 'semantic_wer_metric' is available for English only, not {given!r}: for other languages "
                "KARMA sends English words to Google's online transliteration service, which evalkit does not call. "
                "Use semantic_wer (KARMA's asr_semantic_metric) for Hindi"
            )
        self.spell = _Speller()

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        import jiwer

        references = reference_strings(sample.reference)
        if not references or not references[0].strip():
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        reference, hypothesis = references[0], prediction or ""
        limit = 2 * len(reference.split())
        if len(hypothesis.split()) > limit:
            hypothesis = " ".join(hypothesis.split()[:limit])
        try:
            ref, hyp = rewrite(reference, hypothesis, self.spell)
            if not ref.strip():
                raise ValueError("nothing left of the reference")
        except ValueError as error:
            # jiwer refuses a reference with no words left: KARMA's whole evaluation stops on such an utterance
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": str(error)})
        out = jiwer.process_words(ref, hyp)
        edits = out.substitutions + out.deletions + out.insertions
        words = out.substitutions + out.deletions + out.hits
        rate = edits / words
        return SampleScore(
            rate,
            (float(edits), float(words)),
            details={"normalized_reference": ref, "normalized_prediction": hyp},
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return totals[..., 0] / totals[..., 1]

    def describe(self) -> dict[str, Any]:
        return {"language": "en", "number_words": "indic-numtowords (first variation)"}

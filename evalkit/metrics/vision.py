"""Visual question answering metrics: VQAv2 soft accuracy, ANLS (DocVQA), relaxed accuracy (ChartQA), POPE.

Each reduces a sample to sufficient statistics like every other metric, so the
corpus value is a function of summed rows and the CI comes from the same code.

* ``vqa_accuracy``: the VQAv2 answer normalisation (punctuation, articles,
  number words, contractions) and ``min(matches / 3, 1)`` averaged over the
  leave-one-out subsets of the human answers (10 in VQAv2). The prediction
  gets every step and the human answers the punctuation step, as in the
  official script; unlike it, this happens even when all annotators agree
  (the official script then compares the raw prediction), so "Two." scores
  like "2" whatever the annotators wrote, as lmms-eval does.
* ``anls``: 1 - normalised Levenshtein distance to the closest reference,
  0 when that distance is 0.5 or more (DocVQA's threshold), on lower-cased,
  whitespace-collapsed text.
* ``relaxed_accuracy``: ChartQA's rule: numbers (a trailing % divides by 100)
  within 5 % relative error of the reference, anything else exact after
  lower-casing.
* ``pope_*``: POPE's yes/no hallucination probe. An answer counts as "yes"
  when its first word is yes (POPE's own reading); per-sample stats are
  (tp, fp, tn, fn), and accuracy, precision, recall, F1 and yes-ratio are
  corpus functions of their sums, with a bootstrap CI.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from rapidfuzz.distance import Levenshtein

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings

# --- VQAv2 answer normalisation, written from the published evaluation's description ------------------------

#: contractions written without their apostrophe, as annotators and models do, mapped to the standard form
_CONTRACTIONS = {
    "aint": "ain't",
    "arent": "aren't",
    "cant": "can't",
    "couldve": "could've",
    "couldnt": "couldn't",
    "couldn'tve": "couldn't've",
    "couldnt've": "couldn't've",
    "didnt": "didn't",
    "doesnt": "doesn't",
    "dont": "don't",
    "hadnt": "hadn't",
    "hadnt've": "hadn't've",
    "hadn'tve": "hadn't've",
    "hasnt": "hasn't",
    "havent": "haven't",
    "hed": "he'd",
    "hed've": "he'd've",
    "he'dve": "he'd've",
    "hes": "he's",
    "howd": "how'd",
    "howll": "how'll",
    "hows": "how's",
    "Id've": "I'd've",
    "I'dve": "I'd've",
    "Im": "I'm",
    "Ive": "I've",
    "isnt": "isn't",
    "itd": "it'd",
    "itd've": "it'd've",
    "it'dve": "it'd've",
    "itll": "it'll",
    "let's": "let's",
    "maam": "ma'am",
    "mightnt": "mightn't",
    "mightnt've": "mightn't've",
    "mightn'tve": "mightn't've",
    "mightve": "might've",
    "mustnt": "mustn't",
    "mustve": "must've",
    "neednt": "needn't",
    "notve": "not've",
    "oclock": "o'clock",
    "oughtnt": "oughtn't",
    "ow's'at": "'ow's'at",
    "'ows'at": "'ow's'at",
    "'ow'sat": "'ow's'at",
    "shant": "shan't",
    "shed've": "she'd've",
    "she'dve": "she'd've",
    "she's": "she's",
    "shouldve": "should've",
    "shouldnt": "shouldn't",
    "shouldnt've": "shouldn't've",
    "shouldn'tve": "shouldn't've",
    "somebody'd": "somebodyd",
    "somebodyd've": "somebody'd've",
    "somebody'dve": "somebody'd've",
    "somebodyll": "somebody'll",
    "somebodys": "somebody's",
    "someoned": "someone'd",
    "someoned've": "someone'd've",
    "someone'dve": "someone'd've",
    "someonell": "someone'll",
    "someones": "someone's",
    "somethingd": "something'd",
    "somethingd've": "something'd've",
    "something'dve": "something'd've",
    "somethingll": "something'll",
    "thats": "that's",
    "thered": "there'd",
    "thered've": "there'd've",
    "there'dve": "there'd've",
    "therere": "there're",
    "theres": "there's",
    "theyd": "they'd",
    "theyd've": "they'd've",
    "they'dve": "they'd've",
    "theyll": "they'll",
    "theyre": "they're",
    "theyve": "they've",
    "twas": "'twas",
    "wasnt": "wasn't",
    "wed've": "we'd've",
    "we'dve": "we'd've",
    "weve": "we've",
    "werent": "weren't",
    "whatll": "what'll",
    "whatre": "what're",
    "whats": "what's",
    "whatve": "what've",
    "whens": "when's",
    "whered": "where'd",
    "wheres": "where's",
    "whereve": "where've",
    "whod": "who'd",
    "whod've": "who'd've",
    "who'dve": "who'd've",
    "wholl": "who'll",
    "whos": "who's",
    "whove": "who've",
    "whyll": "why'll",
    "whyre": "why're",
    "whys": "why's",
    "wont": "won't",
    "wouldve": "would've",
    "wouldnt": "wouldn't",
    "wouldnt've": "wouldn't've",
    "wouldn'tve": "wouldn't've",
    "yall": "y'all",
    "yall'll": "y'all'll",
    "y'allll": "y'all'll",
    "yall'd've": "y'all'd've",
    "y'alld've": "y'all'd've",
    "y'all'dve": "y'all'd've",
    "youd": "you'd",
    "youd've": "you'd've",
    "you'dve": "you'd've",
    "youll": "you'll",
    "youre": "you're",
    "youve": "you've",
}
_NUMBER_WORDS = {
    "none": "0",
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
}
_ARTICLES = {"a", "an", "the"}
_PUNCTUATION = [
    ";",
    "/",
    "[",
    "]",
    '"',
    "{",
    "}",
    "(",
    ")",
    "=",
    "+",
    "\\",
    "_",
    "-",
    ">",
    "<",
    "@",
    "`",
    ",",
    "?",
    "!",
]
#: a period not followed by a digit ("3." loses it, "3.5" keeps it), as the published evaluation strips it
_PERIOD = re.compile(r"\.(?!\d)")
_THOUSANDS_COMMA = re.compile(r"(\d)(,)(\d)")


def _vqa_punctuation(text: str) -> str:
    """Drop punctuation stuck to a word or inside a number (1,000), turn other punctuation into a space."""
    out = text
    has_number_comma = _THOUSANDS_COMMA.search(text) is not None
    for p in _PUNCTUATION:
        if (p + " " in text or " " + p in text) or has_number_comma:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return _PERIOD.sub("", out)


def _vqa_digits_articles(text: str) -> str:
    """Number words to digits, articles dropped, apostrophe-less contractions restored."""
    words = [_NUMBER_WORDS.get(w, w) for w in text.lower().split()]
    words = [w for w in words if w not in _ARTICLES]
    return " ".join(_CONTRACTIONS.get(w, w) for w in words)


def vqa_normalize(answer: str) -> str:
    """The VQAv2 normal form of an answer (whitespace, punctuation, then digits, articles and contractions)."""
    answer = answer.replace("\n", " ").replace("\t", " ").strip()
    return _vqa_digits_articles(_vqa_punctuation(answer))


def vqa_soft_accuracy(prediction: str, answers: list[str]) -> float:
    """min(matches among the other answers / 3, 1), averaged over leaving each human answer out in turn."""
    got = vqa_normalize(prediction)
    # human answers get the punctuation step only, as in the published evaluation: VQA's annotations were
    # normalised when the dataset was made, and an annotator's "none" stays a different answer from "0"
    normal = [_vqa_punctuation(a.replace("\n", " ").replace("\t", " ").strip()) for a in answers]
    total = 0.0
    for left_out in range(len(normal)):
        matches = sum(1 for j, a in enumerate(normal) if j != left_out and a == got)
        total += min(1.0, matches / 3)
    return total / len(normal)


class VqaAccuracy(Metric):
    """VQAv2 soft accuracy: min(matching human answers / 3, 1) over leave-one-out subsets, normalised."""

    name = "vqa_accuracy"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        answers = reference_strings(sample.reference)
        if not answers:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        value = vqa_soft_accuracy(prediction or "", answers)
        return SampleScore(value, (value, 1.0), details={"normalized_prediction": vqa_normalize(prediction or "")})

    def describe(self) -> dict[str, Any]:
        return {"normalization": "vqav2 (always applied)", "leave_one_out": True}


# --- ANLS ----------------------------------------------------------------------------------------------------


def _anls_form(text: str) -> str:
    return " ".join(text.lower().split())


def anls_score(prediction: str, references: list[str], threshold: float = 0.5) -> float:
    """Best 1 - normalised Levenshtein distance over the references, 0 at or beyond ``threshold``."""
    got = _anls_form(prediction)
    best = 0.0
    for reference in references:
        ref = _anls_form(reference)
        longest = max(len(got), len(ref))
        distance = Levenshtein.distance(got, ref) / longest if longest else 0.0
        best = max(best, 0.0 if distance >= threshold else 1.0 - distance)
    return best


class Anls(Metric):
    """Average Normalised Levenshtein Similarity (DocVQA): 1 - edit distance / length, 0 from 0.5 on."""

    name = "anls"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("threshold",))
        super().__init__(language, **options)
        self.threshold = float(options.get("threshold", 0.5))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        value = anls_score(prediction or "", references, self.threshold)
        return SampleScore(value, (value, 1.0))

    def describe(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "normalization": "lowercase+collapse_whitespace"}


# --- ChartQA relaxed accuracy --------------------------------------------------------------------------------


def _chart_number(text: str) -> float | None:
    text = text.strip()
    try:
        if text.endswith("%"):
            return float(text[:-1].strip()) / 100.0
        return float(text)
    except ValueError:
        return None


def relaxed_match(prediction: str, reference: str, tolerance: float = 0.05) -> bool:
    """ChartQA: numbers within ``tolerance`` relative error of the reference; other answers exact, lower-cased."""
    got, want = _chart_number(prediction), _chart_number(reference)
    if got is not None and want is not None:
        if want == 0:
            return got == 0
        return abs(got - want) / abs(want) <= tolerance
    return prediction.strip().lower() == reference.strip().lower()


class RelaxedAccuracy(Metric):
    """ChartQA relaxed accuracy: 1 when a number is within 5% of the reference (text: exact match), else 0."""

    name = "relaxed_accuracy"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("tolerance",))
        super().__init__(language, **options)
        self.tolerance = float(options.get("tolerance", 0.05))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        hit = any(relaxed_match(prediction or "", ref, self.tolerance) for ref in references)
        value = 1.0 if hit else 0.0
        return SampleScore(value, (value, 1.0))

    def describe(self) -> dict[str, Any]:
        return {"tolerance": self.tolerance}


# --- POPE ----------------------------------------------------------------------------------------------------


def pope_says_yes(text: str) -> bool:
    """POPE's reading of an answer: yes when its first word (punctuation dropped) is "yes"."""
    words = re.sub(r"[^\w\s]", " ", text.lower()).split()
    return bool(words) and words[0] == "yes"


class _Pope(Metric):
    """POPE base: per-sample (tp, fp, tn, fn); subclasses pick the corpus function."""

    ci_method = "bootstrap"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        truth = pope_says_yes(references[0])
        said = pope_says_yes(prediction or "")
        stats = (
            float(said and truth),
            float(said and not truth),
            float(not said and not truth),
            float(not said and truth),
        )
        single = self.corpus(np.asarray(stats))
        return SampleScore(
            None if np.isnan(single) else float(single), stats, details={"answer": "yes" if said else "no"}
        )

    @staticmethod
    def _parts(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        t = np.asarray(totals, dtype=float)
        return t[..., 0], t[..., 1], t[..., 2], t[..., 3]

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        tp, fp, tn, fn = (float(x) for x in self._parts(totals))
        n = tp + fp + tn + fn
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        return {
            "accuracy": (tp + tn) / n if n else 0.0,
            "precision": precision,
            "recall": recall,
            "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
            "yes_ratio": (tp + fp) / n if n else 0.0,
            "tp": tp,
            "fp": fp,
            "tn": tn,
            "fn": fn,
        }


def _ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), 0.0)


class PopeAccuracy(_Pope):
    """POPE accuracy: share of yes/no answers equal to the truth about the object's presence."""

    name = "pope_accuracy"

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        tp, fp, tn, fn = self._parts(totals)
        return _ratio(tp + tn, tp + fp + tn + fn)


class PopePrecision(_Pope):
    """POPE precision: of the "yes" answers, the share where the object is there."""

    name = "pope_precision"

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        tp, fp, _, _ = self._parts(totals)
        return _ratio(tp, tp + fp)


class PopeRecall(_Pope):
    """POPE recall: of the objects that are there, the share answered "yes"."""

    name = "pope_recall"

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        tp, _, _, fn = self._parts(totals)
        return _ratio(tp, tp + fn)


class PopeF1(_Pope):
    """POPE F1: harmonic mean of precision and recall of "yes" (POPE's headline figure)."""

    name = "pope_f1"

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        tp, fp, _, fn = self._parts(totals)
        return _ratio(2 * tp, 2 * tp + fp + fn)


class PopeYesRatio(_Pope):
    """POPE yes-ratio: share of answers that are "yes" (0.5 on POPE's balanced sets means no yes-bias)."""

    name = "pope_yes_ratio"
    bounds = (0.0, 1.0)

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        tp, fp, tn, fn = self._parts(totals)
        return _ratio(tp + fp, tp + fp + tn + fn)

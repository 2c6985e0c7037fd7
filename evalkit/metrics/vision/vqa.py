"""VQA soft accuracy (``vqa_accuracy``), equal to the official VQA evaluation.

Reference: GT-Vision-Lab/VQA, ``PythonEvaluationTools/vqaEvaluation/vqaEval.py``, ``VQAEval.evaluate`` with
``processPunctuation`` and ``processDigitArticle``, checked at commit a013f0043c1e2cdc995922dfe257f7149aa9af06
by running that file (tests/fixtures/references/vqa_accuracy.json). The official script decides per question
whether to normalise: only when the human answers (newline/tab to space, stripped) are not all the same does it
normalise them AND the prediction (punctuation, then lower-casing, number words to digits, articles dropped,
contractions restored); when they all agree it compares the stripped strings as they are, so "Two." scores 0
against ten "2". Each human answer is left out in turn and the prediction scores min(matches among the others
/ 3, 1); the question's accuracy is the mean of those. A single reference string is one human answer, which
leaves no other answer to match: 0, as in the official script.

Known differences: the corpus figure is the mean of the per-question accuracies in [0, 1], where the official
prints 100 times it rounded to 2 places (scale only). The official file is Python 2; evalkit follows it run
under Python 3 (as every port does: lmms-eval, LAVIS, mmpretrain), where its ``\\d`` also matches non-ASCII
digits and lower-casing follows the current Unicode tables. Unmodified under Python 2.7, ``\\d`` is ASCII only,
"İ" lower-cases to "i" and letters cased after Unicode 5.2 stay as they are (2 of the 66 fixture cases differ).
The option ``normalize_agreeing: true`` (off by default, not the official reading) normalises agreeing answers
and the prediction too, for datasets whose single-valued answers the model phrases differently.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings

# --- the VQA answer normalisation, written from the official evaluation's definition ------------------------

#: contractions written without their apostrophe, as annotators and models do, mapped to the standard form
CONTRACTIONS = {
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
VQA_NUMBER_WORDS = {
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
PUNCTUATION = [
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
#: a period not followed by a digit ("3." loses it, "3.5" keeps it). The official pattern also has an empty
#: look-ahead, "(?!<=\d)", that never excludes anything, so the period rule is just this.
PERIOD = re.compile(r"\.(?!\d)")
#: the official passes re.UNICODE (32) where ``Pattern.sub`` takes its count: at most 32 periods go
PERIOD_LIMIT = int(re.UNICODE)
_THOUSANDS_COMMA = re.compile(r"(\d)(,)(\d)")


def _vqa_strip(text: str) -> str:
    """The cleaning every answer gets: newlines and tabs to spaces, surrounding whitespace off."""
    return text.replace("\n", " ").replace("\t", " ").strip()


def _vqa_punctuation(text: str) -> str:
    """Drop punctuation that touches a space (or anything, when a digit,digit comma is present), space out the rest.

    The test looks at the text as given, not as it is being edited, so one "a, b" drops every comma.
    """
    out = text
    has_number_comma = _THOUSANDS_COMMA.search(text) is not None
    for p in PUNCTUATION:
        if (p + " " in text or " " + p in text) or has_number_comma:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return PERIOD.sub("", out, count=PERIOD_LIMIT)


def _vqa_digits_articles(text: str) -> str:
    """Number words to digits, articles dropped, apostrophe-less contractions restored (after lower-casing, so the
    table's capitalised keys such as "Im" never apply, as in the official)."""
    words = [VQA_NUMBER_WORDS.get(w, w) for w in text.lower().split()]
    words = [w for w in words if w not in _ARTICLES]
    return " ".join(CONTRACTIONS.get(w, w) for w in words)


def vqa_normalize(answer: str) -> str:
    """The full VQA normal form of an answer: cleaning, punctuation, then digits, articles and contractions."""
    return _vqa_digits_articles(_vqa_punctuation(_vqa_strip(answer)))


def _compared_forms(prediction: str, answers: list[str], normalize_agreeing: bool) -> tuple[str, list[str]]:
    """The prediction and human answers as compared: normalised only where the cleaned answers disagree."""
    got = _vqa_strip(prediction)
    humans = [_vqa_strip(a) for a in answers]
    if normalize_agreeing or len(set(humans)) > 1:
        return vqa_normalize(got), [vqa_normalize(a) for a in humans]
    return got, humans


def vqa_soft_accuracy(prediction: str, answers: list[str], *, normalize_agreeing: bool = False) -> float:
    """min(matches among the other answers / 3, 1), averaged over leaving each human answer out in turn."""
    if not answers:
        raise ValueError("VQA accuracy needs at least one human answer")
    got, humans = _compared_forms(prediction, answers, normalize_agreeing)
    matching = [a == got for a in humans]
    hits = sum(matching)
    # leaving out answer i leaves hits - 1 matches when i matched, hits otherwise
    total = sum(min(1.0, float(hits - m) / 3) for m in matching)
    return total / len(humans)


class VqaAccuracy(Metric):
    """VQA soft accuracy (official vqaEval.py): min(matching human answers / 3, 1), leave-one-out averaged."""

    name = "vqa_accuracy"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("normalize_agreeing",))
        super().__init__(language, **options)
        value = options.get("normalize_agreeing", False)
        if not isinstance(value, bool):
            raise ConfigError(f"metric {self.name!r}: option 'normalize_agreeing' must be true or false, got {value!r}")
        self.normalize_agreeing: bool = value

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        answers = reference_strings(sample.reference)
        if not answers:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        value = vqa_soft_accuracy(prediction or "", answers, normalize_agreeing=self.normalize_agreeing)
        compared, _ = _compared_forms(prediction or "", answers, self.normalize_agreeing)
        return SampleScore(value, (value, 1.0), details={"normalized_prediction": compared})

    def describe(self) -> dict[str, Any]:
        return {
            "reference": "GT-Vision-Lab/VQA vqaEval.py VQAEval.evaluate",
            "normalization": "always" if self.normalize_agreeing else "only where the human answers disagree",
            "leave_one_out": True,
        }

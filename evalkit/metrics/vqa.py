"""VQAv2 soft accuracy (``vqa_accuracy``): the VQA answer normalisation and min(matches / 3, 1) over
leave-one-out subsets of the human answers."""

from __future__ import annotations

import re
from typing import Any

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

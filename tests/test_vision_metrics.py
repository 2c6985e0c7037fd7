"""Vision metrics against hand-computed values; vqa_accuracy against a re-implementation of the official VQA eval."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator


def _score(metric: str, prediction: str, reference: object, **options: object) -> float | None:
    return METRICS.get(metric)(language="en", **options).score(prediction, Sample(id="s", reference=reference)).score


# --- the official VQA evaluation, re-written here from its published algorithm (vqaEval.py, VQA API) ----------
# It is deliberately a separate transcription: answers as {answer_id, answer} dicts, normalisation only when the
# human answers disagree, human answers only punctuation-processed (VQA's annotations are already normalised).

_REF_PUNCT = [";", r"/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!"]
_REF_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")  # the published pattern, its odd lookahead included
_REF_COMMA = re.compile(r"(\d)(,)(\d)")
_REF_MANUAL = {
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
_REF_ARTICLES = ["a", "an", "the"]
# the subset of the published contraction table these answer sets use
_REF_CONTRACTIONS = {"dont": "don't", "cant": "can't", "isnt": "isn't", "oclock": "o'clock", "whats": "what's"}


def _ref_punctuation(in_text: str) -> str:
    out_text = in_text
    for p in _REF_PUNCT:
        if (p + " " in in_text or " " + p in in_text) or (re.search(_REF_COMMA, in_text) is not None):
            out_text = out_text.replace(p, "")
        else:
            out_text = out_text.replace(p, " ")
    return _REF_PERIOD.sub("", out_text)


def _ref_digit_article(in_text: str) -> str:
    out = []
    for word in in_text.lower().split():
        word = _REF_MANUAL.setdefault(word, word)
        if word not in _REF_ARTICLES:
            out.append(word)
    for i, word in enumerate(out):
        if word in _REF_CONTRACTIONS:
            out[i] = _REF_CONTRACTIONS[word]
    return " ".join(out)


def official_vqa_accuracy(prediction: str, answers: list[str]) -> float:
    gts: list[dict[str, Any]] = [
        {"answer_id": i + 1, "answer": a.replace("\n", " ").replace("\t", " ").strip()} for i, a in enumerate(answers)
    ]
    res = prediction.replace("\n", " ").replace("\t", " ").strip()
    if len({g["answer"] for g in gts}) > 1:
        for g in gts:
            g["answer"] = _ref_punctuation(g["answer"])
        res = _ref_digit_article(_ref_punctuation(res))
    accs = []
    for datum in gts:
        others = [item for item in gts if item != datum]
        matching = [item for item in others if item["answer"] == res]
        accs.append(min(1, float(len(matching)) / 3))
    return float(sum(accs)) / len(accs)


def _ten(*groups: tuple[str, int]) -> list[str]:
    out = [a for a, k in groups for _ in range(k)]
    assert len(out) == 10
    return out


# (prediction, the ten human answers): disagreeing sets exercise every normalisation step; unanimous sets use
# predictions already in normal form (the official script compares those raw, see the test below)
ANSWER_SETS = [
    ("2", _ten(("2", 10))),
    ("two", _ten(("2", 3), ("3", 7))),
    ("Two.", _ten(("2", 2), ("3", 8))),
    ("2 ", _ten(("2", 1), ("3", 9))),
    ("three", _ten(("2", 4), ("3", 6))),
    ("none", _ten(("0", 5), ("1", 5))),
    ("zero", _ten(("0", 3), ("none", 7))),
    ("yes", _ten(("yes", 9), ("no", 1))),
    ("Yes!", _ten(("yes", 6), ("no", 4))),
    ("no.", _ten(("yes", 8), ("no", 2))),
    ("NO", _ten(("yes", 10))),
    ("a dog", _ten(("dog", 5), ("cat", 5))),
    ("The dog", _ten(("dog", 2), ("puppy", 8))),
    ("an apple", _ten(("apple", 3), ("fruit", 7))),
    ("red and white", _ten(("red and white", 4), ("red", 6))),
    ("red, white", _ten(("red white", 3), ("red", 7))),
    ("red/white", _ten(("red white", 3), ("red", 7))),
    ("1,000", _ten(("1000", 3), ("100", 7))),
    ("3.5", _ten(("3.5", 4), ("3", 6))),
    ("3.", _ten(("3", 4), ("4", 6))),
    ("dont know", _ten(("don't know", 3), ("unknown", 7))),
    ("cant tell", _ten(("can't tell", 2), ("unknown", 8))),
    ("it isnt", _ten(("it isn't", 5), ("no", 5))),
    ("10 oclock", _ten(("10 o'clock", 3), ("10:00", 7))),
    ("whats up", _ten(("what's up", 1), ("sky", 9))),
    ("tennis-racket", _ten(("tennis racket", 4), ("racket", 6))),
    ("(left)", _ten(("left", 3), ("right", 7))),
    ("left ?", _ten(("left", 2), ("right", 8))),
    ("black & white", _ten(("black & white", 3), ("black and white", 7))),
    ("black and white", _ten(("black & white", 3), ("black and white", 7))),
    ("frisbee", _ten(("frisbee", 2), ("disc", 2), ("frisbe", 6))),
    ("skateboarding", _ten(("skateboarding", 1), ("skating", 1), ("skateboard", 8))),
    ("dog", _ten(("dog", 10))),
    ("cat", _ten(("dog", 10))),
    ("Multiple\tWords\n", _ten(("multiple words", 5), ("words", 5))),
    ("one", _ten(("1", 2), ("one", 2), ("2", 6))),
    ("", _ten(("yes", 5), ("no", 5))),
]


def test_at_least_thirty_answer_sets() -> None:
    assert len(ANSWER_SETS) >= 30


@pytest.mark.parametrize(("prediction", "answers"), ANSWER_SETS)
def test_vqa_accuracy_equals_the_official_evaluation(prediction: str, answers: list[str]) -> None:
    assert _score("vqa_accuracy", prediction, answers) == pytest.approx(official_vqa_accuracy(prediction, answers))


@pytest.mark.parametrize(
    ("matches", "expected"),
    [(0, 0.0), (1, 0.3), (2, 0.6), (3, 0.9), (4, 1.0), (10, 1.0)],
)
def test_vqa_accuracy_hand_computed(matches: int, expected: float) -> None:
    """3 matches of 10: leaving a match out leaves 2 (2/3, three times), else 3 (1, seven times): 0.9."""
    answers = ["2"] * matches + ["7"] * (10 - matches)
    assert _score("vqa_accuracy", "2", answers) == pytest.approx(expected)


def test_vqa_accuracy_normalises_even_when_annotators_agree() -> None:
    """The official script compares raw text when all ten agree ("Two." scores 0); evalkit normalises always."""
    answers = ["2"] * 10
    assert official_vqa_accuracy("Two.", answers) == 0.0
    assert _score("vqa_accuracy", "Two.", answers) == 1.0


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        ("hello", "hello", 1.0),
        ("helo", "hello", 0.8),  # 1 edit over 5 characters
        ("Hello  World", "hello world", 1.0),  # case and whitespace
        ("ab", "ac", 0.0),  # distance exactly 0.5: at the threshold, 0
        ("abcd", "abce", 0.75),
        ("xyz", "abc", 0.0),
        ("1996", ["1995", "1996"], 1.0),  # best reference
        ("", "abc", 0.0),
    ],
)
def test_anls_hand_computed(prediction: str, reference: object, expected: float) -> None:
    assert _score("anls", prediction, reference) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        ("10.4", "10", 1.0),  # 4% off
        ("10.5", "10", 1.0),  # exactly 5%
        ("10.6", "10", 0.0),  # 6% off
        ("9.5", "10", 1.0),
        ("45%", "0.45", 1.0),
        ("0", "0", 1.0),
        ("Yes", "yes", 1.0),
        ("Canada", "USA", 0.0),
        ("12", ["abc", "12.3"], 1.0),
    ],
)
def test_relaxed_accuracy_hand_computed(prediction: str, reference: object, expected: float) -> None:
    assert _score("relaxed_accuracy", prediction, reference) == expected


def test_pope_corpus_values_with_n_and_ci() -> None:
    """tp=2 (1, 5), fp=1 (2), tn=1 (3), fn=1 (4): accuracy 3/5, precision 2/3, recall 2/3, F1 2/3, yes-ratio 3/5."""
    predictions = ["Yes, there is.", "yes", "No.", "no", "YES"]
    truths = ["yes", "no", "no", "yes", "yes"]
    expected = {
        "pope_accuracy": 0.6,
        "pope_precision": 2 / 3,
        "pope_recall": 2 / 3,
        "pope_f1": 2 / 3,
        "pope_yes_ratio": 0.6,
    }
    for name, value in expected.items():
        metric = METRICS.get(name)(language="en")
        acc = ScoreAccumulator(metric)
        for i, (p, t) in enumerate(zip(predictions, truths, strict=True)):
            acc.add(metric.score(p, Sample(id=str(i), reference=t)))
        result = acc.result()
        assert result.n == 5
        assert result.score == pytest.approx(value), name
        assert result.ci_low <= result.score <= result.ci_high


@pytest.mark.parametrize("name", ["vqa_accuracy", "anls", "relaxed_accuracy"])
def test_mean_metrics_have_n_and_a_normal_ci(name: str) -> None:
    metric = METRICS.get(name)(language="en")
    acc = ScoreAccumulator(metric)
    for i, (p, r) in enumerate([("2", ["2"] * 10), ("x", ["y"] * 10), ("2", ["2"] * 10), ("3", ["3"] * 10)]):
        acc.add(metric.score(p, Sample(id=str(i), reference=r)))
    result = acc.result()
    assert (result.n, result.score, result.ci_method) == (4, 0.75, "normal")
    assert 0.0 <= result.ci_low < 0.75 < result.ci_high <= 1.0


def test_missing_reference_is_a_failure_not_a_zero() -> None:
    for name in ("vqa_accuracy", "anls", "relaxed_accuracy", "pope_f1"):
        got = METRICS.get(name)(language="en").score("yes", Sample(id="s", reference=None))
        assert got.score is None and got.failure == "no reference"


def test_tokenised_f1_is_karmas_name_for_token_f1() -> None:
    assert METRICS.canonical("tokenised_f1") == "f1"
    # "the cat sat" vs "cat sat down": articles dropped, 2 common of 2 and 3 tokens: P 1, R 2/3, F1 0.8
    assert _score("tokenised_f1", "the cat sat", "cat sat down") == pytest.approx(0.8)


def _json(prediction: str, reference: object, **meta: object) -> tuple[float | None, dict]:
    got = METRICS.get("json_rubric_evaluation")(language="en").score(
        prediction, Sample(id="s", reference=reference, meta=dict(meta))
    )
    return got.score, got.details or {}


def test_json_rubric_field_by_field() -> None:
    reference = {
        "diagnosis": "Type 2 diabetes",
        "age": 54,
        "meds": ["metformin", "insulin"],
        "vitals": {"bp": "140/90"},
    }
    # 4 fields; age given as a string, case and spaces differ, list order differs: all match
    answer = (
        '```json\n{"diagnosis": "type 2  DIABETES", "age": "54", "meds": ["insulin", "metformin"], '
        '"vitals": {"bp": "140/90"}}\n```'
    )
    assert _json(answer, reference)[0] == 1.0
    # wrong age, missing vitals.bp: 2 of 4
    score, details = _json('{"diagnosis": "type 2 diabetes", "age": 50, "meds": ["metformin", "insulin"]}', reference)
    assert score == 0.5 and details["wrong"] == ["age"] and details["missing"] == ["vitals.bp"]
    # weights from the rubric, reference given as a JSON string: diagnosis 3 points of 6, the only match
    weighted = _json(
        '{"diagnosis": "type 2 diabetes", "meds": []}', json.dumps(reference), field_weights={"diagnosis": 3}
    )
    assert weighted[0] == pytest.approx(3 / 6)


def test_json_rubric_weighted() -> None:
    reference = {"a": 1, "b": 2, "c": 3}
    assert _json('{"a": 1, "b": 0, "c": 0}', reference, field_weights={"a": 3})[0] == pytest.approx(3 / 5)


@pytest.mark.parametrize("answer", ['{"diagnosis": "flu", ', "I think it is the flu.", "[1, 2]", '{"diagnosis": flu}'])
def test_json_rubric_malformed_json_is_a_scored_zero_with_its_reason(answer: str) -> None:
    score, details = _json(answer, {"diagnosis": "flu"})
    assert score == 0.0
    assert details["reason"]

"""Vision metrics against hand-computed values (the tables from the references' own code: test_reference_*.py)."""

from __future__ import annotations

import json

import pytest

from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator


def _score(metric: str, prediction: str, reference: object, **options: object) -> float | None:
    return METRICS.get(metric)(language="en", **options).score(prediction, Sample(id="s", reference=reference)).score


# --- vqa_accuracy: the table of cases from running the official vqaEval.py is tests/test_reference_vqa_pope.py ---


@pytest.mark.parametrize(
    ("matches", "expected"),
    [(0, 0.0), (1, 0.3), (2, 0.6), (3, 0.9), (4, 1.0), (10, 1.0)],
)
def test_vqa_accuracy_hand_computed(matches: int, expected: float) -> None:
    """3 matches of 10: leaving a match out leaves 2 (2/3, three times), else 3 (1, seven times): 0.9."""
    answers = ["2"] * matches + ["7"] * (10 - matches)
    assert _score("vqa_accuracy", "2", answers) == pytest.approx(expected)


def test_vqa_accuracy_compares_raw_strings_when_annotators_agree() -> None:
    """As the official script: ten agreeing "2" are compared with the stripped prediction, so "Two." scores 0;
    where they disagree every answer is normalised too ("the dog" x3 counts for "dog")."""
    assert _score("vqa_accuracy", "Two.", ["2"] * 10) == 0.0
    assert _score("vqa_accuracy", " 2\n", ["2"] * 10) == 1.0
    assert _score("vqa_accuracy", "Two.", ["2"] * 10, normalize_agreeing=True) == 1.0
    assert _score("vqa_accuracy", "dog", ["the dog"] * 3 + ["cat"] * 7) == pytest.approx(0.9)
    assert _score("vqa_accuracy", "2", ["two"] * 2 + ["2"] + ["three"] * 7) == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        ("hello", "hello", 1.0),
        ("helo", "hello", 0.8),  # 1 edit over 5 characters
        ("Hello  World", "hello world", 1.0),  # case and whitespace
        ("ab", "ac", 0.5),  # similarity exactly 0.5: the DocVQA script zeroes only values below the threshold
        ("  hello  ", "hello", 1.0),  # stripped, but the length is the raw one's
        ("hello", "  hello world  ", 0.6),  # distance 6 over the raw reference's 15 characters
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
        ("0.0", "0", 0.0),  # a zero target has no relative error: the strings are compared
        ("50%%", "0.5", 1.0),  # every trailing % goes
        (" Yes", "yes", 0.0),  # nothing is stripped from text answers
        (" 12 ", "12", 1.0),  # but float() reads a number with spaces around it
        ("Yes", "yes", 1.0),
        ("Canada", "USA", 0.0),
        ("12", ["abc", "12.3"], 1.0),
    ],
)
def test_relaxed_accuracy_hand_computed(prediction: str, reference: object, expected: float) -> None:
    assert _score("relaxed_accuracy", prediction, reference) == expected


def test_pope_corpus_values_with_n_and_ci() -> None:
    """tp=2 (1, 5), fp=1 (2), tn=1 (3), fn=1 (4): accuracy 3/5, precision 2/3, recall 2/3, F1 2/3, yes-ratio 3/5.

    POPE reads "YES" as yes: only the words No, no and not make a no (the figures evaluate.py prints for other
    answer sets are checked in test_reference_vqa_pope.py)."""
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


@pytest.mark.parametrize(
    ("answer", "says_yes"),
    [
        ("There is a dog in the image.", True),  # no "no" word: yes
        ("Yes there is no doubt", False),  # a "no" word: no
        ("NO", True),  # case-sensitive
        ("", True),
        ("I cannot tell.", True),
        ("Yes. No, there isn't.", True),  # only the first sentence counts
        ("no\tthere is none", True),  # split at spaces only
        ("not really", False),
    ],
)
def test_pope_reads_answers_as_pope_does(answer: str, says_yes: bool) -> None:
    got = METRICS.get("pope_accuracy")(language="en").score(answer, Sample(id="s", reference="yes"))
    assert got.details is not None and got.details["answer"] == ("yes" if says_yes else "no")


def test_pope_figure_is_none_where_pope_divides_by_zero() -> None:
    """evaluate.py raises ZeroDivisionError for precision when nothing is answered yes: no score, not 0."""
    metric = METRICS.get("pope_precision")(language="en")
    acc = ScoreAccumulator(metric)
    for i, (answer, label) in enumerate([("no", "yes"), ("No.", "no"), ("not there", "no")]):
        acc.add(metric.score(answer, Sample(id=str(i), reference=label)))
    result = acc.result()
    assert result.score != result.score  # NaN
    assert result.details["accuracy"] == pytest.approx(2 / 3)


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

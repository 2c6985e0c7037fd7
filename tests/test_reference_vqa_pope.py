"""vqa_accuracy and pope_* against tables of cases produced by running their references' own code.

tests/fixtures/references/vqa_accuracy.json: GT-Vision-Lab/VQA vqaEval.py (VQAEval.evaluate) run on in-memory
VQA objects; tests/fixtures/references/pope.json: RUCAIBox/POPE evaluate.py run on answer files. Each fixture's
"reference" block says which commit, which interpreter and which command produced it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.vision.pope import pope_label_is_yes, pope_says_yes

FIXTURES = Path(__file__).parent / "fixtures" / "references"
VQA = json.loads((FIXTURES / "vqa_accuracy.json").read_text(encoding="utf-8"))
POPE = json.loads((FIXTURES / "pope.json").read_text(encoding="utf-8"))
POPE_NAMES = ("pope_accuracy", "pope_precision", "pope_recall", "pope_f1", "pope_yes_ratio")
#: the statement of evaluate.py that raised, to the figure it computes
POPE_STATEMENTS = {
    "acc": "pope_accuracy",
    "precision": "pope_precision",
    "recall": "pope_recall",
    "f1": "pope_f1",
    "yes_ratio": "pope_yes_ratio",
}
POPE_CASES = {case["id"]: case for case in POPE["cases"]}


def _vqa_reference(answers: list[str]) -> object:
    """One human answer is given as a plain string (a dataset's single reference), several as a list."""
    return answers[0] if len(answers) == 1 else answers


def _corpus(name: str, pairs: list[tuple[str, object]]) -> tuple[float, Any]:
    metric = METRICS.get(name)(language="en")
    acc = ScoreAccumulator(metric)
    for i, (prediction, reference) in enumerate(pairs):
        acc.add(metric.score(prediction, Sample(id=str(i), reference=reference)))
    result = acc.result()
    return result.score, result


# --- vqa_accuracy ---------------------------------------------------------------------------------------------


def test_vqa_fixture_says_where_it_came_from() -> None:
    ref = VQA["reference"]
    assert ref["repository"] == "GT-Vision-Lab/VQA"
    assert len(ref["commit"]) == 40 and ref["file"].endswith("vqaEval.py") and ref["command"]
    assert 30 <= len(VQA["cases"]) <= 80


@pytest.mark.parametrize("case", VQA["cases"], ids=[c["id"] for c in VQA["cases"]])
def test_vqa_accuracy_equals_the_official_evaluation(case: dict[str, Any]) -> None:
    metric = METRICS.get("vqa_accuracy")(language="en")
    got = metric.score(case["prediction"], Sample(id=case["id"], reference=_vqa_reference(case["answers"])))
    assert got.score is not None
    assert got.score == pytest.approx(case["expected"], rel=1e-12, abs=1e-12), case["note"]
    assert round(100 * got.score, 2) == case["printed"]


def test_vqa_corpus_is_the_official_mean_over_questions() -> None:
    pairs = [(c["prediction"], _vqa_reference(c["answers"])) for c in VQA["cases"]]
    score, result = _corpus("vqa_accuracy", pairs)
    assert result.n == len(pairs)
    assert score == pytest.approx(VQA["corpus"]["expected"], rel=1e-12)
    # the official prints the same mean as a percentage rounded to 2 places
    assert round(100 * score, 2) == VQA["corpus"]["overall_printed"]


def test_vqa_python2_differences_are_the_documented_ones() -> None:
    """Only non-ASCII digits and Unicode case mapping separate the Python 2.7 run from the Python 3 one."""
    differing = [c["note"] for c in VQA["cases"] if "expected_python2" in c]
    assert differing == ["unicode dotted capital I", "full-width digits with period"]


def test_vqa_normalize_agreeing_is_an_option_off_by_default() -> None:
    answers = ["2"] * 10
    assert METRICS.get("vqa_accuracy")(language="en").score("Two.", Sample(id="s", reference=answers)).score == 0.0
    lenient = METRICS.get("vqa_accuracy")(language="en", normalize_agreeing=True)
    assert lenient.score("Two.", Sample(id="s", reference=answers)).score == 1.0
    # where the human answers disagree the option changes nothing
    mixed = ["the dog"] * 3 + ["cat"] * 7
    assert lenient.score("dog", Sample(id="s", reference=mixed)).score == pytest.approx(0.9)
    with pytest.raises(ConfigError):
        METRICS.get("vqa_accuracy")(language="en", normalize_agreeing="yes")


# --- pope_* ---------------------------------------------------------------------------------------------------


def test_pope_fixture_says_where_it_came_from() -> None:
    ref = POPE["reference"]
    assert ref["repository"] == "RUCAIBox/POPE" and len(ref["commit"]) == 40 and ref["file"] == "evaluate.py"
    assert 30 <= len(POPE["cases"]) <= 80 and len(POPE["corpus"]) >= 5


@pytest.mark.parametrize("case", POPE["cases"], ids=[c["id"] for c in POPE["cases"]])
def test_pope_reads_each_answer_and_label_as_pope_does(case: dict[str, Any]) -> None:
    counts = case["counts"]
    assert pope_says_yes(case["answer"]) == bool(counts["tp"] or counts["fp"])
    assert pope_label_is_yes(case["label"]) == bool(counts["tp"] or counts["fn"])
    for name in POPE_NAMES:
        got = METRICS.get(name)(language="en").score(case["answer"], Sample(id=case["id"], reference=case["reference"]))
        assert got.stats == (counts["tp"], counts["fp"], counts["tn"], counts["fn"])
        # a one-answer run of evaluate.py: the figures it printed, and no score for the one it could not divide
        if name in case["printed"]:
            assert got.score == case["printed"][name]
        if case["error"] and POPE_STATEMENTS[case["error"]["at"].split(" =")[0]] == name:
            assert got.score is None


@pytest.mark.parametrize("answer_set", POPE["corpus"], ids=[s["name"] for s in POPE["corpus"]])
def test_pope_corpus_figures_equal_evaluate_py(answer_set: dict[str, Any]) -> None:
    pairs = [(POPE_CASES[i]["answer"], POPE_CASES[i]["reference"]) for i in answer_set["cases"]]
    raised = POPE_STATEMENTS[answer_set["error"]["at"].split(" =")[0]] if answer_set["error"] else None
    for name in POPE_NAMES:
        score, result = _corpus(name, pairs)
        assert result.n == len(pairs)
        details = result.details
        assert (details["tp"], details["fp"], details["tn"], details["fn"]) == tuple(
            answer_set["counts"][k] for k in ("tp", "fp", "tn", "fn")
        )
        if name in answer_set["printed"]:
            assert score == answer_set["printed"][name], name  # same formulas, same floats
            if len(pairs) > 1:
                assert result.ci_low <= score <= result.ci_high
        if name == raised:
            assert math.isnan(score), name  # evaluate.py raised ZeroDivisionError here


def test_pope_f1_is_computed_as_pope_computes_it() -> None:
    """2PR/(P+R) and 2tp/(2tp+fp+fn) differ in the last bit on some counts; POPE prints the former."""
    every_third = next(s for s in POPE["corpus"] if s["name"] == "every third")
    assert every_third["printed"]["pope_f1"] == 0.39999999999999997

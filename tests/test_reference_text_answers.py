"""f1, anls and relaxed_accuracy against their references' own code, per sample and for the corpus.

The expected values in tests/fixtures/references/{f1,anls,relaxed_accuracy}.json were produced by running the
reference scripts (SQuAD v2.0's evaluate-v2.0.py, MLQA's mlqa_evaluation_v1.py, lmms-eval's ``anls`` and the RRC
DocVQA script, pix2struct's and lmms-eval's ``relaxed_correctness``) on the cases; each file's ``source`` says
which commit, which functions and the command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator

FIXTURES = Path(__file__).parent / "fixtures" / "references"
NAMES = ("f1", "anls", "relaxed_accuracy")


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def _cases(name: str) -> list[Any]:
    return [pytest.param(case, id=case["id"]) for case in _fixture(name)["cases"]]


def _metric(name: str, case: dict[str, Any]) -> Any:
    return METRICS.get(name)(language=case.get("language"), **case.get("options", {}))


def _score(name: str, case: dict[str, Any]) -> float | None:
    got = _metric(name, case).score(case["prediction"], Sample(id=case["id"], reference=case["reference"]))
    return got.score


@pytest.mark.parametrize("name", NAMES)
def test_each_fixture_says_where_its_values_come_from(name: str) -> None:
    data = _fixture(name)
    assert data["metric"] == name
    source = data["source"]
    assert source["command"]
    for entry in (source["squad"], source["mlqa"]) if name == "f1" else (source,):
        assert entry["commit"] and entry["functions"]
    assert 30 <= len(data["cases"]) <= 100
    assert len({case["id"] for case in data["cases"]}) == len(data["cases"])


@pytest.mark.parametrize("case", _cases("f1"))
def test_f1_equals_squad_and_mlqa(case: dict[str, Any]) -> None:
    assert _score("f1", case) == pytest.approx(case["expected"], abs=1e-12)


@pytest.mark.parametrize("case", _cases("anls"))
def test_anls_equals_lmms_eval(case: dict[str, Any]) -> None:
    assert _score("anls", case) == pytest.approx(case["expected"], abs=1e-12)


@pytest.mark.parametrize("case", _cases("relaxed_accuracy"))
def test_relaxed_accuracy_equals_pix2struct(case: dict[str, Any]) -> None:
    assert _score("relaxed_accuracy", case) == case["expected"]


def _corpus(name: str, cases: list[dict[str, Any]]) -> float:
    metric = _metric(name, cases[0])
    accumulator = ScoreAccumulator(metric)
    for case in cases:
        accumulator.add(
            _metric(name, case).score(case["prediction"], Sample(id=case["id"], reference=case["reference"]))
        )
    result = accumulator.result()
    assert result.n == len(cases)
    assert result.ci_method == "normal"
    return result.score


def test_f1_corpus_equals_each_scripts_corpus_value() -> None:
    """One SQuAD run over the English cases, one MLQA run per answer language."""
    data = _fixture("f1")
    runs: dict[str, list[dict[str, Any]]] = {}
    for case in data["cases"]:
        runs.setdefault(case["run"], []).append(case)
    assert set(runs) == set(data["corpus"])
    for run, cases in runs.items():
        assert _corpus("f1", cases) == pytest.approx(data["corpus"][run], abs=1e-12), run


@pytest.mark.parametrize("name", ["anls", "relaxed_accuracy"])
def test_corpus_equals_the_references_mean(name: str) -> None:
    data = _fixture(name)
    assert _corpus(name, data["cases"]) == pytest.approx(data["corpus"], abs=1e-12)


# --- behaviours the fixtures pin, stated once more where a reader looks for them ---------------------------------


def _f1(prediction: str, reference: object, language: str | None = None, **options: object) -> float | None:
    metric = METRICS.get("f1")(language=language, **options)
    return metric.score(prediction, Sample(id="s", reference=reference)).score


def test_f1_english_removes_ascii_punctuation_only() -> None:
    assert _f1("$5.00", "5.00") == 1.0
    assert _f1("\u00abOui\u00bb", "oui") == 0.0  # not ASCII: stays in SQuAD
    assert _f1("\uff30\uff21\uff32\uff29\uff33", "paris") == 0.0  # no NFKC in SQuAD
    assert _f1("\u00abOui\u00bb", "oui", "en", normalization="mlqa") == 1.0


def test_f1_no_answer_questions_follow_squad_v2() -> None:
    assert _f1("", []) == 1.0
    assert _f1("Paris", []) == 0.0
    assert _f1("", ["the", "cat"]) == 0.0  # "the" normalises to nothing and is dropped
    assert _f1("", "", "es") == 0.0  # MLQA: nothing in common is 0, even for two empty answers
    for language in (None, "de"):
        got = METRICS.get("f1")(language=language).score("x", Sample(id="s", reference=None))
        assert got.score is None and got.failure == "no reference"
    got = METRICS.get("f1")(language="de").score("x", Sample(id="s", reference=[]))
    assert got.score is None and got.failure == "no reference"


def test_f1_options() -> None:
    # Thai under MLQA's rule is one token per space-separated run; characters: true compares characters
    assert _f1("\u0e01\u0e02", "\u0e01\u0e02\u0e03", "th") == 0.0
    assert _f1("\u0e01\u0e02", "\u0e01\u0e02\u0e03", "th", characters=True) == pytest.approx(0.8)
    assert _f1("\u00abOui\u00bb", "oui", "fr", normalization="squad") == 0.0
    with pytest.raises(ConfigError, match="normalization"):
        METRICS.get("f1")(normalization="nfkc")
    assert METRICS.get("f1")(language="zh").describe()["normalization"] == "mlqa"
    assert METRICS.get("f1")().describe()["normalization"] == "squad"


def test_anls_threshold_option_and_boundary() -> None:
    anls = METRICS.get("anls")
    assert anls().score("ab", Sample(id="s", reference="ac")).score == 0.5  # at the threshold: kept
    assert anls(threshold=0.6).score("ab", Sample(id="s", reference="ac")).score == 0.0
    assert anls().score("x", Sample(id="s", reference=[])).failure == "no reference"

"""sql_score against AU-Harness's Spider execution accuracy, on real SQLite databases built from the fixture.

tests/fixtures/references/sql_score.json: two small Spider-style databases (their SQL is in the fixture) and 36
answers whose 0/1 come from running AU-Harness's SqlScore (the test-suite's eval_exec_match it vendors) after its
Spider postprocessor; the "reference" block names the commit and the command. One case is a known difference
(evalkit opens databases read-only) and says so.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator

pytest.importorskip("sqlparse", reason="sql_score reads DISTINCT with sqlparse: pip install 'evalkit[sql]'")

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "sql_score.json").read_text("utf-8"))
CASES: list[dict[str, Any]] = FIXTURE["cases"]


@pytest.fixture(scope="module")
def database_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("spider") / "database"
    for db_id, script in FIXTURE["databases"].items():
        (root / db_id).mkdir(parents=True)
        connection = sqlite3.connect(root / db_id / f"{db_id}.sqlite")
        connection.executescript(script)
        connection.commit()
        connection.close()
    return root


def _expected(case: dict[str, Any]) -> int:
    return int(case.get("evalkit_exec", case["exec"]))


def test_the_fixture_says_where_it_came_from_and_is_not_one_sided() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "ServiceNow/AU-Harness" and len(ref["commit"]) == 40 and ref["command"]
    assert {case["exec"] for case in CASES} == {0, 1}
    assert [c["why"] for c in CASES if "evalkit_exec" in c] and all(
        "read-only" in c["why"] for c in CASES if "why" in c
    )


@pytest.mark.parametrize("i", range(len(CASES)))
def test_each_answer_scores_as_au_harness(i: int, database_dir: Path) -> None:
    case = CASES[i]
    metric = METRICS.get("sql_score")(language="en", database_dir=str(database_dir))
    reference = f"{case['gold']}\t{case['db_id']}"  # the reference as AU-Harness's Spider preprocessor writes it
    scored = metric.score(case["answer"], Sample(id=str(i), reference=reference))
    assert scored.failure is None and scored.score == _expected(case), scored.details
    assert scored.details["sql"] == case["cleaned"].split("\t")[0].replace("value", "1")


def test_the_corpus_is_au_harness_overall_execution_accuracy(database_dir: Path) -> None:
    metric = METRICS.get("sql_score")(language="en", database_dir=str(database_dir))
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(CASES):
        # the database id from meta this time, the gold query alone as the reference
        acc.add(metric.score(case["answer"], Sample(id=str(i), reference=case["gold"], meta={"db_id": case["db_id"]})))
    differences = sum(_expected(c) - c["exec"] for c in CASES)
    expected = (sum(c["exec"] for c in CASES) + differences) / len(CASES)
    assert acc.result().score == pytest.approx(expected)
    # AU-Harness's printed figure, x 100 and rounded, is the same count before the read-only difference
    assert round(100 * sum(c["exec"] for c in CASES) / len(CASES), 2) == FIXTURE["corpus"]["overall_exec_accuracy"]

"""sql_score as a user meets it: where the database is found, what a missing one or a broken gold query says,
the test suite's databases beside the main one, a query that runs too long, writes that cannot happen, and a run
against the test server with the database folder given as a metric option."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, run, write_config

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.structured.sql import same_rows, sql_of_answer
from evalkit.testing import start_test_server

pytest.importorskip("sqlparse", reason="sql_score reads DISTINCT with sqlparse: pip install 'evalkit[sql]'")

SCRIPT = """
CREATE TABLE city (id INTEGER PRIMARY KEY, name TEXT, population INTEGER);
INSERT INTO city VALUES (1, 'Oslo', 700000), (2, 'Bergen', 285000), (3, 'Tromso', 77000);
"""


def _database(folder: Path, db_id: str = "geo", script: str = SCRIPT, name: str | None = None) -> Path:
    (folder / db_id).mkdir(parents=True, exist_ok=True)
    path = folder / db_id / (name or f"{db_id}.sqlite")
    connection = sqlite3.connect(path)
    connection.executescript(script)
    connection.commit()
    connection.close()
    return path


def _metric(**options: Any) -> Any:
    return METRICS.get("sql_score")(language="en", **options)


def test_the_database_comes_from_db_path_or_database_dir_and_a_missing_one_is_named(tmp_path: Path) -> None:
    path = _database(tmp_path)
    gold = "SELECT name FROM city WHERE population > 100000"
    answer = "SELECT name FROM city WHERE population >= 285000"
    assert _metric().score(answer, Sample(id="p", reference=gold, meta={"db_path": str(path)})).score == 1.0
    by_dir = _metric(database_dir=str(tmp_path))
    assert by_dir.score(answer, Sample(id="d", reference=gold, meta={"db_id": "geo"})).score == 1.0
    missing = by_dir.score(answer, Sample(id="m", reference=f"{gold}\tatlas"))
    assert missing.failure == FailureReason.UNRESOLVABLE_REFERENCE
    assert missing.details["error"] == f"no SQLite database at {tmp_path / 'atlas' / 'atlas.sqlite'}"
    no_dir = _metric().score(answer, Sample(id="n", reference=gold, meta={"db_id": "geo"}))
    assert no_dir.failure == FailureReason.NO_REFERENCE and "option database_dir" in no_dir.details["error"]


def test_config_mistakes_stop_before_any_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="'database_dir': .* is not a directory"):
        _metric(database_dir=str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="'timeout' must be positive"):
        _metric(timeout=0)
    with pytest.raises(ConfigError, match="unknown option 'db_dir'"):
        _metric(db_dir=str(tmp_path))
    monkeypatch.setitem(sys.modules, "sqlparse", None)
    with pytest.raises(ConfigError, match=r"needs the Python package 'sqlparse'.*evalkit\[sql\]"):
        _metric()


def test_a_gold_query_that_fails_is_a_failure_and_an_answer_that_fails_scores_0(tmp_path: Path) -> None:
    path = _database(tmp_path)
    metric = _metric()
    broken_gold = metric.score(
        "SELECT 1", Sample(id="g", reference="SELECT nme FROM city", meta={"db_path": str(path)})
    )
    assert (
        broken_gold.failure == FailureReason.UNRESOLVABLE_REFERENCE
        and "gold query fails" in broken_gold.details["error"]
    )
    broken_answer = metric.score(
        "SELEC name", Sample(id="a", reference="SELECT name FROM city", meta={"db_path": str(path)})
    )
    assert broken_answer.score == 0.0 and "syntax error" in broken_answer.details["reason"]


def test_every_database_of_the_suite_must_agree(tmp_path: Path) -> None:
    path = _database(tmp_path)
    gold = "SELECT name FROM city WHERE population > 100000"
    answer = "SELECT name FROM city WHERE id < 3"  # the same rows here, not on a database where ids differ
    metric = _metric()
    assert metric.score(answer, Sample(id="1", reference=gold, meta={"db_path": str(path)})).score == 1.0
    _database(tmp_path, script=SCRIPT.replace("(3, 'Tromso', 77000)", "(0, 'Tromso', 77000)"), name="geo_2.sqlite")
    scored = metric.score(answer, Sample(id="2", reference=gold, meta={"db_path": str(path)}))
    assert scored.score == 0.0 and scored.details["reason"] == "different rows on geo_2.sqlite"


def test_a_query_past_the_timeout_scores_0_and_writes_cannot_change_the_data(tmp_path: Path) -> None:
    path = _database(tmp_path)
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    metric = _metric(timeout=0.2)
    slow = metric.score(endless, Sample(id="t", reference="SELECT 3", meta={"db_path": str(path)}))
    assert slow.score == 0.0 and "timed out after 0.2 s" in slow.details["reason"]
    dropped = metric.score(
        "DROP TABLE city", Sample(id="w", reference="SELECT name FROM city", meta={"db_path": str(path)})
    )
    assert dropped.score == 0.0 and "readonly" in dropped.details["reason"]
    assert sqlite3.connect(path).execute("SELECT count(*) FROM city").fetchone() == (3,)


def test_reading_the_answer_and_comparing_rows() -> None:
    assert sql_of_answer("Sure:\n```sql\nSELECT 1;\n```\nor ```SELECT 2```") == "SELECT 1;"
    assert sql_of_answer("  SELECT 3  ") == "SELECT 3" and sql_of_answer("  ") == "SELECT"
    gold = [(1, "a"), (2, "b"), (2, "b")]
    assert same_rows(gold, [("b", 2), ("a", 1), ("b", 2)], ordered=False)
    assert not same_rows(gold, [("b", 2), ("a", 1), ("b", 2)], ordered=True)
    assert same_rows(gold, [("a", 1), ("b", 2), ("b", 2)], ordered=True)
    assert not same_rows(gold, [(1, "a"), (2, "b"), (1, "a")], ordered=False)  # a multiset, not a set
    assert same_rows([], [], ordered=True) and not same_rows([(1,)], [], ordered=False)
    assert not same_rows([(1, 2)], [(1, 2, 3)], ordered=False)


ROWS = [
    ("q1", "How many cities are there?", "SELECT count(*) FROM city", "```sql\nSELECT COUNT(id) FROM city\n```"),
    (
        "q2",
        "Which cities have over 100000 people?",
        "SELECT name FROM city WHERE population > 100000",
        "SELECT name FROM city",
    ),
]


def test_a_run_scores_against_the_database_folder_given_as_an_option(tmp_path: Path) -> None:
    databases = tmp_path / "database"
    _database(databases)
    data = tmp_path / "spider.jsonl"
    data.write_text(
        "".join(json.dumps({"id": i, "question": q, "query": g, "db_id": "geo"}) + "\n" for i, q, g, _ in ROWS)
    )
    specs = tmp_path / "runspecs" / "sql"
    specs.mkdir(parents=True)
    spec = {
        "_task": {"description": "text to SQL", "metrics": ["sql_score"]},
        "tiny_spider": {
            "path": str(data),
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "question",
            "target_column": "query",
            "extra_columns": {"db_id": "db_id"},
        },
    }
    (specs / "tiny_spider.json").write_text(json.dumps(spec))
    server = start_test_server({"answers": [{"match": q, "answer": a} for _, q, _, a in ROWS]})
    try:
        config = write_config(
            tmp_path / "config.yaml",
            {
                "dataset_metric": [["tiny_spider", "sql_score", {"database_dir": str(databases)}]],
                "models": [model_entry("m", server.base_url)],
                "runspecs_dir": str(tmp_path / "runspecs"),
                "output_dir": str(tmp_path / "runs"),
            },
        )
        outcome = run(config)
    finally:
        server.stop()
    (row,) = outcome.rows
    assert row.error is None and row.n == 2 and row.n_failed == 0 and row.score == pytest.approx(0.5)

"""How a run's rows read in the console table and results.md: an aggregate is labelled as one, and a pair whose
metric raised shows no score (its error instead), though its records keep what was scored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import evalkit_cli, model_entry, write_config

from evalkit.testing import start_test_server

RAISES_ON_ONE = '''
from evalkit.plugin import METRICS, Metric, Sample, SampleScore


@METRICS.register("raises_on_one")
class RaisesOnOne(Metric):
    """Scores every sample 1 but q2, where it raises: a bug met on one sample of six."""

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        if sample.id == "q2":
            raise RuntimeError("cannot score " + sample.id)
        return SampleScore(1.0)
'''


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    project = tmp_path_factory.mktemp("project")
    (project / "runspecs" / "text").mkdir(parents=True)
    (project / "qa.jsonl").write_text(
        "".join(
            json.dumps({"qid": f"q{i}", "question": f"question {i}", "answer": "Paris"}) + "\n" for i in range(1, 7)
        )
    )
    spec = {
        "_task": {"description": "short answers", "metrics": ["exact_match", "raises_on_one"]},
        "qa": {"path": str(project / "qa.jsonl"), "language": "en", "modality": "text", "id_column": "qid",
               "textual_input_column": "question", "target_column": "answer"},
    }  # fmt: skip
    (project / "runspecs" / "text" / "short_qa.json").write_text(json.dumps(spec))
    (project / "raises_on_one.py").write_text(RAISES_ON_ONE)
    server = start_test_server({"default_answer": "Paris"})
    try:
        config = write_config(
            project / "config.yaml",
            {
                "dataset_metric": [["qa", "exact_match"], ["qa", "raises_on_one"]],
                "aggregate": [["exact_match", ["qa"]]],
                "models": [model_entry("m", server.base_url)],
                "runspecs_dir": ["runspecs"],
                "plugins": ["raises_on_one"],
            },
        )
        done = evalkit_cli(["run", str(config), "--quiet"], project)
    finally:
        server.stop()
    (results,) = (project / "runs").glob("*/results.json")
    yield done, results.parent


def _table_lines(text: str) -> list[str]:
    return [" ".join(line.replace("│", " ").split()) for line in text.splitlines() if line.startswith("│")]


def test_an_aggregate_row_is_labelled_as_one(ran: tuple[Any, Path]) -> None:
    done, run = ran
    lines = _table_lines(done.stdout)
    assert "qa exact_match m 1.0000 [1.0000, 1.0000] 6 0" in lines, lines
    assert "qa (aggregate) exact_match m 1.0000 [1.0000, 1.0000] 6 0" in lines, lines
    assert "| qa (aggregate) | exact_match | m |" in (run / "results.md").read_text()
    (aggregate,) = json.loads((run / "results.json").read_text())["aggregate"]
    assert aggregate["dataset"] == "qa"  # the data keeps the name; only the table says what the row is


def test_a_metric_that_raises_shows_no_score_and_keeps_its_records(ran: tuple[Any, Path]) -> None:
    done, run = ran
    assert done.returncode == 1, done.stdout + done.stderr
    assert "qa raises_on_one m error ! - 5 1" in _table_lines(done.stdout), done.stdout
    assert "| qa | raises_on_one | m | error ! | - | 5 | 1 |" in (run / "results.md").read_text()
    rows = {r["metric"]: r for r in json.loads((run / "results.json").read_text())["results"]}
    broken = rows["raises_on_one"]
    assert (broken["score"], broken["ci_low"], broken["ci_high"]) == (None, None, None)
    assert broken["unreliable"] and broken["error"].startswith("metric 'raises_on_one': score() raised RuntimeError")
    assert (broken["n"], broken["n_failed"]) == (5, 1)
    records = [json.loads(line) for line in (run / "records" / "qa__raises_on_one.jsonl").read_text().splitlines()]
    assert sorted(r["score"] for r in records if r["score"] is not None) == [1.0] * 5 and len(records) == 6
    assert rows["exact_match"]["score"] == 1.0 and rows["exact_match"]["error"] is None

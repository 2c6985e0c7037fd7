"""Bad data: each bad row is named (dataset and row) and counted as failed; every other row is scored as usual.

Duplicate sample ids, an empty reference and a NaN or infinite score from a
plugin metric each end as a failed record with its own reason and an error
naming the dataset, the row and the sample id, plus one warning per kind; a
dataset file changed between a run and its resume is refused by the
fingerprint run.json keeps, naming the dataset and the first row that differs.
Real runs against the test server on loopback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, model_entry, run, text_set

from evalkit.errors import UserError
from evalkit.plugin import METRICS, Metric, Sample, SampleScore
from evalkit.run.manifest import plan_for_resume
from evalkit.run.runner import RunOptions, execute

N = 10


class _LengthOrNaN(Metric):
    """A plugin metric: the answer's length, but NaN for one sample and inf for another."""

    bounds = (0.0, math.inf)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        value = {"s00002": math.nan, "s00005": math.inf}.get(sample.id, float(len(prediction)))
        return SampleScore(value, (value, 1.0))


@pytest.fixture()
def nan_metric() -> Iterator[str]:
    """The plugin metric, registered for one test only (the registry is global)."""
    METRICS.register("bad_data_test_length")(_LengthOrNaN)
    try:
        yield "bad_data_test_length"
    finally:
        METRICS._items.pop("bad_data_test_length", None)


def _rewrite(runspecs: Path, change: Any) -> Path:
    """Rewrite the set's rows through ``change(rows)``; returns the data file."""
    data = runspecs.parent / "data" / "synth_qa.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    rows = change(rows) or rows
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return data


def _records(run_dir: Path, engine: str = "synth_qa__exact_match") -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records" / f"{engine}.jsonl").read_text().splitlines()]


def test_a_repeated_sample_id_is_named_not_sent_and_counted(tmp_path: Path, make_server, caplog) -> None:
    runspecs = text_set(tmp_path, N)

    def repeat(rows: list[dict[str, Any]]) -> None:
        rows[6]["qid"] = rows[2]["qid"]  # row 7 repeats row 3's id

    _rewrite(runspecs, repeat)
    server = make_server()
    with caplog.at_level(logging.WARNING, logger="evalkit"):
        outcome = run(config_for(tmp_path, runspecs, [model_entry("m", server.base_url)]))
    records = _records(outcome.run_dir)
    assert len(records) == N
    repeated = [r for r in records if r.get("failure") == "duplicate_id"]
    assert len(repeated) == 1 and repeated[0]["sample_id"] == "s00002"
    assert repeated[0]["error"] == (
        "dataset synth_qa, row 7 (id 's00002'): the sample id is already row 3's; not sent, not scored"
    )
    assert server.stats()["requests"] == N - 1  # the repeat was never sent
    row = outcome.rows[0]
    assert (row.n, row.n_failed, row.failure_reasons) == (N - 1, 1, {"duplicate_id": 1})
    assert "synth_qa__exact_match: 1 row counted as failed (duplicate_id)" in caplog.text


def test_an_empty_reference_is_named_and_the_rest_is_scored(tmp_path: Path, make_server, caplog) -> None:
    """A missing reference fails the row as `no reference`; "" is scored as the metric defines it, and said."""
    runspecs = text_set(tmp_path, N)

    def empty(rows: list[dict[str, Any]]) -> None:
        rows[3]["answer"] = ""
        rows[8]["answer"] = None

    _rewrite(runspecs, empty)
    server = make_server()
    with caplog.at_level(logging.WARNING, logger="evalkit"):
        outcome = run(config_for(tmp_path, runspecs, [model_entry("m", server.base_url)]))
    records = {r["sample_id"]: r for r in _records(outcome.run_dir)}
    assert [k for k, r in records.items() if r.get("failure")] == ["s00008"]
    assert records["s00008"]["failure"] == "no reference"
    assert records["s00008"]["error"] == "dataset synth_qa, row 9 (id 's00008'): the reference is empty"
    assert records["s00003"]["score"] == 0.0  # exact_match against "" (WER, BLEU define their own)
    row = outcome.rows[0]
    assert (row.n, row.n_failed) == (N - 1, 1) and row.score is not None and math.isfinite(row.score)
    assert (
        "synth_qa__exact_match: 1 row counted as failed (no reference); the first: dataset synth_qa, row 9 "
        "(id 's00008'): the reference is empty"
    ) in caplog.text
    assert (
        "synth_qa__exact_match: 1 row scored against an empty reference; the first: dataset synth_qa, row 4 "
        "(id 's00003'): the reference is empty; scored as is"
    ) in caplog.text


def test_a_nan_or_infinite_score_from_a_plugin_metric_is_a_named_failure(
    tmp_path: Path, make_server, nan_metric: str
) -> None:
    runspecs = text_set(tmp_path, N)
    spec_file = runspecs / "text" / "synth_qa.json"
    spec = json.loads(spec_file.read_text())
    spec["_task"]["metrics"].append("bad_data_test_length")
    spec_file.write_text(json.dumps(spec))
    server = make_server()
    outcome = run(
        config_for(
            tmp_path, runspecs, [model_entry("m", server.base_url)], pairs=[["synth_qa", "bad_data_test_length"]]
        )
    )
    failed = {
        r["sample_id"]: r for r in _records(outcome.run_dir, "synth_qa__bad_data_test_length") if r.get("failure")
    }
    assert {k: r["failure"] for k, r in failed.items()} == {"s00002": "no score", "s00005": "no score"}
    assert failed["s00002"]["error"] == (
        "dataset synth_qa, row 3 (id 's00002'): metric bad_data_test_length returned nan, not a finite number"
    )
    assert "returned inf" in failed["s00005"]["error"]
    row = outcome.rows[0]
    assert row.n == N - 2 and row.n_failed == 2
    assert all(math.isfinite(v) for v in (row.score, row.ci_low, row.ci_high))  # the mean is not poisoned


def test_a_dataset_changed_before_a_resume_is_refused_naming_the_row(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, N)
    server = make_server()
    outcome = run(config_for(tmp_path, runspecs, [model_entry("m", server.base_url)]))
    run_dir = outcome.run_dir
    saved = json.loads((run_dir / "run.json").read_text())["datasets"]["synth_qa"]
    assert saved["rows"] == N and saved["sha256"] and saved["row_digests"]

    def resume() -> Any:
        return asyncio.run(execute(plan_for_resume(run_dir), RunOptions(quiet=True, resume=str(run_dir))))

    # the same rows written with other spacing and key order are the same data: the resume goes ahead
    data = runspecs.parent / "data" / "synth_qa.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    data.write_text(
        "".join(json.dumps(dict(reversed(row.items())), indent=None, separators=(", ", " : ")) + "\n" for row in rows)
    )
    assert resume().requests_sent == 0

    def edit(rows: list[dict[str, Any]]) -> None:
        rows[4]["answer"] = "something else"

    _rewrite(runspecs, edit)
    with pytest.raises(UserError) as error:
        resume()
    assert str(error.value) == (
        f"--resume {run_dir}: dataset synth_qa ({data.resolve()}) changed since the run started: row 5 (id 's00004') "
        f"differs ({N} rows). The answers already recorded belong to the data as it was: restore it, or start a new run"
    )

    def grow(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows[4]["answer"] = "question 4 w0"
        return [*rows, {"qid": "extra", "question": "q", "answer": "a"}]

    _rewrite(runspecs, grow)
    with pytest.raises(UserError, match=f"row {N + 1} and after are new \\({N} rows then, {N + 1} now\\)"):
        resume()
    assert json.loads((run_dir / "run.json").read_text())["datasets"]["synth_qa"] == saved  # nothing overwritten

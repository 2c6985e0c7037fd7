"""What a plain text run loads after its last request: no numpy, no rich, no indexing code (no timings here).

The end of a run used to import numpy for a mean's interval (~80 ms), rich for the table (~25 ms) and the
viewer's indexing code for a run too small to index (~10 ms). A child process runs `evalkit run` to its end,
stdout into a file as a batch job's is, and writes down what it had imported; the run's results are checked
to be complete, so the work was done without them, not skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT, model_entry, write_config

from evalkit.testing import TestServer, start_test_server

_CHILD = r"""
import json, sys
from evalkit.cli.main import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as handle:
    json.dump({"code": code, "modules": sorted(sys.modules)}, handle)
"""


@pytest.fixture(scope="module")
def server() -> Iterator[TestServer]:
    srv = start_test_server({"answers": [{"match": "2+2", "answer": "4"}, {"match": "3+3", "answer": "7"}]})
    yield srv
    srv.stop()


def _config(tmp_path: Path, server: TestServer) -> Path:
    data = tmp_path / "data" / "sums.jsonl"
    data.parent.mkdir(parents=True)
    rows = [{"id": f"s{i}", "question": q, "answer": a} for i, (q, a) in enumerate([("2+2", "4"), ("3+3", "6")] * 3)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    runspecs = tmp_path / "runspecs"
    (runspecs / "bench").mkdir(parents=True)
    entry = {"path": str(data), "language": "en", "modality": "text", "id_column": "id"}
    entry |= {"textual_input_column": "question", "target_column": "answer", "speaker_column": "question"}
    spec = {"_task": {"description": "sums", "metrics": ["exact_match"]}, "sums": entry}
    (runspecs / "bench" / "sums.json").write_text(json.dumps(spec), encoding="utf-8")
    config = {
        "dataset_metric": [["sums", "exact_match"]],
        "models": [model_entry("m", server.base_url)],
        "runspecs_dir": str(runspecs),
        "output_dir": str(tmp_path / "runs"),
    }
    return write_config(tmp_path / "run.yaml", config)


@pytest.mark.parametrize("quiet", [True, False])
def test_a_plain_text_run_ends_without_numpy_rich_or_the_indexing_code(
    tmp_path: Path, server: TestServer, quiet: bool
) -> None:
    seen_path = tmp_path / "seen.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("FORCE_COLOR", None)
    argv = [sys.executable, "-c", _CHILD, str(seen_path), "run", str(_config(tmp_path, server)), "--no-cache"]
    with (tmp_path / "stdout.txt").open("w") as stdout:
        done = subprocess.run(
            [*argv, *(["--quiet"] if quiet else [])], cwd=tmp_path, env=env, stdout=stdout, stderr=subprocess.PIPE
        )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(seen_path.read_text(encoding="utf-8"))
    assert seen["code"] == 0
    modules = set(seen["modules"])
    assert modules & {"numpy", "rich", "evalkit.view.index", "evalkit.view.indexcheck"} == set()
    # the work was done: the mean and its interval, per group too; the table and the report
    (run,) = (tmp_path / "runs").iterdir()
    row = json.loads((run / "results.json").read_text(encoding="utf-8"))["results"][0]
    assert row["score"] == 0.5 and row["n"] == 6
    assert row["ci_low"] < 0.5 < row["ci_high"]
    assert row["details"]["groups"]["speaker"]["2+2"]["score"] == 1.0
    assert (run / "report.html").is_file()
    printed = (tmp_path / "stdout.txt").read_text(encoding="utf-8")
    assert "┃ dataset ┃ metric      ┃ model ┃  score ┃ 95% CI" in printed
    assert f"Records: {run / 'records'}" in printed

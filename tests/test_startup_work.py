"""What a plain run does before its first request: only the work its config asks for (no timings here).

The start-up benchmark (benchmarks/startup.py) measures the time; these tests keep what it bought. A child
process runs `evalkit run` of a config naming one local text dataset against the test server, and at its first
connection to the server writes down what it had imported and done: no numpy, no launching code, no rich,
no preprocessor family it does not use, no scan of installed packages for plugins, one catalogue entry
validated (the one named) of the ~600, no other tool's name table or shipped prompt file read, no alias of
the entries derived, no robustness corruption, stop_at_ci rule, sent-log reference or end-of-run code
loaded, no hosted provider's name pattern compiled, and pydantic's plugin switch taken away again. And a broken
catalogue entry the config does not name no longer stops the run, while `evalkit validate` still reports it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, evalkit_cli, model_entry, write_config

from evalkit.testing import TestServer, start_test_server

#: the child: counts validations, and at its first connection to the server writes what it had done, then exits
_CHILD = r"""
import json, os, sys
sys.modules["uvloop"] = None  # asyncio's own loop: its connections raise the audit event (uvloop's do not)
from evalkit.catalog import table
validated = []
validate = table.WrittenEntry.validate
def counting(self):
    validated.append(self.name)
    return validate(self)
table.WrittenEntry.validate = counting
import evalkit.catalog as catalog
derived = []
aliases = catalog.dataset_aliases
catalog.dataset_aliases = lambda *args: derived.append(1) or aliases(*args)
out, port = sys.argv[1], int(sys.argv[2])
def at_first_request(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple) and args[1][1] == port:
        from evalkit import registry
        from evalkit.prompts import library
        seen = {
            "modules": sorted(sys.modules),
            "validated": validated,
            "plugins_scanned": registry._plugins_loaded,
            "pydantic_switch": os.environ.get("PYDANTIC_DISABLE_PLUGINS"),
            "prompt_files_read": library._load.cache_info().currsize,
            "aliases_derived": len(derived),
        }
        with open(out, "w") as handle:
            json.dump(seen, handle)
        os._exit(0)
sys.addaudithook(at_first_request)
from evalkit.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.fixture(scope="module")
def server() -> Iterator[TestServer]:
    srv = start_test_server({"answers": [{"match": "2+2", "answer": "4"}]})
    yield srv
    srv.stop()


def _runspecs(folder: Path, extra: dict[str, Any] | None = None) -> Path:
    """A runspecs folder with one local text dataset (and ``extra`` entries in a second file)."""
    data = folder / "data" / "sums.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text(json.dumps({"id": "s1", "question": "2+2", "answer": "4"}) + "\n", encoding="utf-8")
    runspecs = folder / "runspecs"
    (runspecs / "bench").mkdir(parents=True)
    entry = {"path": str(data), "language": "en", "modality": "text", "id_column": "id"}
    entry |= {"textual_input_column": "question", "target_column": "answer"}
    spec = {"_task": {"description": "sums", "metrics": ["exact_match"]}, "sums": entry}
    (runspecs / "bench" / "sums.json").write_text(json.dumps(spec), encoding="utf-8")
    if extra:
        (runspecs / "bench" / "other.json").write_text(json.dumps(extra), encoding="utf-8")
    return runspecs


def _config(tmp_path: Path, server: TestServer, runspecs: Path, dataset: str = "sums") -> Path:
    data = {
        "dataset_metric": [[dataset, "exact_match"]],
        "models": [model_entry("m", server.base_url)],
        "runspecs_dir": str(runspecs),
        "output_dir": str(tmp_path / "runs"),
    }
    return write_config(tmp_path / "run.yaml", data)


def _at_first_request(tmp_path: Path, server: TestServer, config: Path) -> dict[str, Any]:
    out = tmp_path / "seen.json"
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env["PYTHONPATH"] = str(ROOT)
    port = server.base_url.split(":")[-1].split("/")[0]
    argv = [sys.executable, "-c", _CHILD, str(out), port, "run", str(config), "--no-cache", "--quiet"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.is_file(), f"the run never reached its first request: {done.returncode} {done.stderr[-2000:]}"
    return dict(json.loads(out.read_text(encoding="utf-8")))


def test_a_plain_run_reaches_its_first_request_without_what_it_does_not_use(tmp_path: Path, server: TestServer) -> None:
    seen = _at_first_request(tmp_path, server, _config(tmp_path, server, _runspecs(tmp_path)))
    modules = set(seen["modules"])
    unused = {
        "numpy",  # no image or audio corruption, no CI yet, no in-context examples
        "aiosqlite",  # --no-cache
        "sqlite3",  # --no-cache: the store's code is not loaded either
        "evalkit.clients.store",
        "rich",  # the console table is drawn after the run
        "evalkit.serve.launch",  # the config launches no server
        "evalkit.prompts.karma.sets",  # preprocessor families the dataset does not use
        "evalkit.prompts.chef.questions",
        "evalkit.prompts.auharness.general",
        "evalkit.config.foreign.auharness",  # AU-Harness's config translator: the config is in evalkit's format
        "evalkit.metrics.references.standard",  # the reference tables: for `evalkit info` and listings
        "evalkit.metrics.references.auharness",
        "evalkit.prompts.image_similarity",  # the image embedder of topk_img in-context examples
        "difflib",  # "did you mean": every name the config gives is known
        "evalkit.data.local_copy",  # a local copy of hub data: the dataset is a local file of its own
        "evalkit.catalog.foreign",  # other tools' name tables (runspecs/_names): the dataset is the catalogue's name
        "evalkit.data.audio.variant",  # a robustness variant's corruptions: the dataset has no `corruption`
        "evalkit.prompts.corrupt_text",
        "evalkit.run.stopping.at_ci",  # the pair has no stop_at_ci: neither the rule nor its CI and merge checks
        "evalkit.metrics.ci",
        "evalkit.run.merge_checks",
        "evalkit.run.sentrefs",  # the sent log's references: built once an answer is back, after the first request
        "evalkit.report.results",  # what the end of the run writes (results rows, package versions, unanswered)
        "evalkit.run.unanswered",
    }
    assert modules & unused == set()
    assert "evalkit.serve.signals" in modules  # the signal watch every run has
    assert "evalkit.config.foreign.auharness_names" in modules  # what tells the two config formats apart
    # the one entry the config names, of the whole catalogue (shipped and the test's own)
    assert seen["validated"] == ["sums"]
    assert seen["plugins_scanned"] is False  # every name was a built-in's
    assert seen["pydantic_switch"] is None  # set while the plan was built, and taken away again
    assert seen["aliases_derived"] == 0  # the dataset's own name was found: no other name of any entry was needed
    assert seen["prompt_files_read"] == 0  # the package's add-ons, system prompts and pools: none was named


def test_a_broken_entry_the_config_does_not_name_stops_no_run_and_validate_reports_it(
    tmp_path: Path, server: TestServer
) -> None:
    broken = {"_task": {"description": "other"}, "noisy": {"path": "x.jsonl", "language": "en", "colour": "red"}}
    runspecs = _runspecs(tmp_path, broken)
    config = _config(tmp_path, server, runspecs)
    ran = evalkit_cli(["run", str(config), "--no-cache", "--quiet"], tmp_path)
    assert ran.returncode == 0, ran.stderr
    checked = evalkit_cli(["validate", str(config)], tmp_path)
    assert checked.returncode == 2
    where = runspecs / "bench" / "other.json"
    assert f"{where}: noisy.colour: unknown key" in checked.stderr
    assert "Traceback" not in checked.stderr
    listed = evalkit_cli(["list", "datasets", "--runspecs-dir", str(runspecs)], tmp_path)
    assert listed.returncode == 2 and f"{where}: noisy.colour: unknown key" in listed.stderr


def test_a_broken_entry_the_config_names_stops_the_run_naming_file_and_key(tmp_path: Path, server: TestServer) -> None:
    broken = {"_task": {"description": "other"}, "noisy": {"path": "x.jsonl", "language": "en", "colour": "red"}}
    runspecs = _runspecs(tmp_path, broken)
    ran = evalkit_cli(["run", str(_config(tmp_path, server, runspecs, "noisy")), "--no-cache", "--quiet"], tmp_path)
    assert ran.returncode == 2
    assert f"{runspecs / 'bench' / 'other.json'}: noisy.colour: unknown key" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_broken_name_table_stops_only_the_runs_whose_names_need_it(tmp_path: Path, server: TestServer) -> None:
    runspecs = _runspecs(tmp_path)
    table = runspecs / "_names" / "other.json"
    table.parent.mkdir()
    table.write_text(json.dumps({"tool": "Other", "datasets": {"theirs": {"evalkit": "sums", "colour": 1}}}))
    ran = evalkit_cli(["run", str(_config(tmp_path, server, runspecs)), "--no-cache", "--quiet"], tmp_path)
    assert ran.returncode == 0, ran.stderr  # "sums" is the catalogue's own name: the table is never read
    said = f"{table}: other.datasets.theirs.colour: unknown key"
    named = evalkit_cli(["run", str(_config(tmp_path, server, runspecs, "other:theirs")), "--no-cache"], tmp_path)
    checked = evalkit_cli(["validate", str(_config(tmp_path, server, runspecs))], tmp_path)
    for stopped in (named, checked):
        assert stopped.returncode == 2 and said in stopped.stderr, stopped.stderr
        assert "Traceback" not in stopped.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "c.yaml", "--no-cache", "--quiet"],
        ["run", "--dataset", "sums,other", "--model-url", "http://h/v1", "--model-name", "m", "--shard", "1/2"],
        ["run", "--help"],
        ["run", "--no-such-flag"],
    ],
)
def test_the_run_command_alone_reads_a_run_as_the_whole_grammar_does(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`evalkit run` builds only the run command's parser: the same values, help and messages as the whole one's."""
    from evalkit.cli.parser import build_parser

    read = []
    for parser in (build_parser(), build_parser(only_run=True)):
        try:
            read.append(vars(parser.parse_args(argv)))
        except SystemExit as stop:
            read.append({"exit": stop.code})
        read.append(capsys.readouterr())
    assert read[0] == read[2] and read[1] == read[3]

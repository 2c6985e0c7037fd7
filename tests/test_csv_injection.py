"""Every CSV evalkit writes shows a formula-like name as text (OWASP "CSV Injection"), and its numbers stay numbers.

A cell a spreadsheet would evaluate starts with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return; OWASP's advice is a leading single quote. The names come
from users (a runspec's dataset, a model entry), so a real run with such names
writes results.csv, and ``evalkit list --format csv`` and ``evalkit compare``
read them back.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from helpers import config_for, evalkit_cli, model_entry, run

from evalkit.cli.listing import render
from evalkit.report.compare import compare_rows, render_comparison
from evalkit.report.results import ResultRow
from evalkit.report.tables import results_csv, spreadsheet_safe

HOSTILE = ['=HYPERLINK("http://x","y")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "\t=1", "\r=1"]


def _parse(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _row(dataset: str, model: str, score: float) -> ResultRow:
    return ResultRow(
        dataset=dataset,
        task="=task",
        category="@cat",
        metric="exact_match",
        model=model,
        score=score,
        ci_low=-0.5,
        ci_high=1e-7,
        n=3,
        n_failed=0,
        failure_rate=0.0,
        unreliable=False,
        seconds=0.1,
    )


def test_spreadsheet_safe_quotes_formulas_and_keeps_numbers() -> None:
    for cell in HOSTILE:
        assert spreadsheet_safe(cell) == "'" + cell
    for cell in ("-0.5", "+0.0100", "-1e-05", "-", "+", "plain", "a=b", "", "[-0.5, 1.0]"):
        assert spreadsheet_safe(cell) == cell
    for value in (-0.5, -3, None, True):
        assert spreadsheet_safe(value) is value


def test_results_csv_quotes_names_not_numbers() -> None:
    rows = _parse(results_csv([_row(name, "@model", -0.5) for name in HOSTILE]))
    assert [r["dataset"] for r in rows] == ["'" + name for name in HOSTILE]
    assert {r["model"] for r in rows} == {"'@model"} and {r["task"] for r in rows} == {"'=task"}
    assert {r["category"] for r in rows} == {"'@cat"}
    assert {r["score"] for r in rows} == {"-0.5"} and {r["ci_low"] for r in rows} == {"-0.5"}
    assert {r["ci_high"] for r in rows} == {"1e-07"}


def test_compare_csv_quotes_names_not_numbers() -> None:
    a = [_row("=evil()", "m", 0.75)]
    b = [_row("=evil()", "m", 0.5)]
    (row,) = _parse(render_comparison(compare_rows(a, b), "csv", "a", "b"))
    assert row["dataset"] == "'=evil()" and row["B − A"] == "-0.2500"


def test_list_csv_quotes_names() -> None:
    text = render("datasets", [{"name": "=cmd()", "task": "-x", "n": -3, "languages": ["@a", "b"]}], "csv")
    (row,) = _parse(text)
    assert row == {"name": "'=cmd()", "task": "'-x", "n": "-3", "languages": "'@a;b"}


def test_a_nul_in_a_name_is_written_as_text_by_every_csv() -> None:
    """Python 3.10's csv cannot write a NUL (``need to escape``); every CSV evalkit writes spells it ``\\x00``."""
    assert spreadsheet_safe("a\x00b") == "a\\x00b" and spreadsheet_safe("=\x00") == "'=\\x00"
    listed = render("datasets", [{"name": "a\x00b", "task": "t"}], "csv")
    assert "\x00" not in listed and "a\\x00b" in listed


def test_a_run_and_the_cli_write_hostile_names_as_text(tmp_path: Path, make_server) -> None:
    dataset, model = "=1+1", "@SUM(A1)"
    (tmp_path / "data.jsonl").write_text(
        "".join(json.dumps({"qid": f"s{i}", "question": f"q {i}", "answer": f"q {i}"}) + "\n" for i in range(3))
    )
    specs = tmp_path / "runspecs" / "text"
    specs.mkdir(parents=True)
    spec = {
        "path": str(tmp_path / "data.jsonl"),
        "language": "en",
        "modality": "text",
        "id_column": "qid",
        "textual_input_column": "question",
        "target_column": "answer",
    }
    task = {"description": "echo", "metrics": ["exact_match"]}
    (specs / "t.json").write_text(json.dumps({"_task": task, dataset: spec}))
    server = make_server()
    config = config_for(
        tmp_path / "cfg", tmp_path / "runspecs", [model_entry(model, server.base_url)], [[dataset, "exact_match"]]
    )
    outcome = run(config)
    (row,) = _parse((outcome.run_dir / "results.csv").read_text())
    assert (row["dataset"], row["model"], row["score"]) == ("'=1+1", "'@SUM(A1)", "1.0")
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert results["results"][0]["dataset"] == dataset  # the record of truth keeps the name as it was

    listed = evalkit_cli(["list", "datasets", "--runspecs-dir", str(tmp_path / "runspecs"), "-f", "csv"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "'=1+1" in [r["name"] for r in _parse(listed.stdout)]

"""Every other way to a results table keeps an AU-Harness config's names and scale: re-scoring, merging shards,
report.html's charts, comparing two runs, and `evalkit info` on AU-Harness's metrics.

The runs are those of tests/test_auharness_reports.py: AU-Harness's ``librispeech_test_clean`` read from a local
copy, against the project's test server.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import run, write_config
from test_auharness_reports import VARIANT, _auharness_run, _server
from test_local_copies import save_to_disk_dict

from evalkit.report.files import load_results
from evalkit.report.results import ResultRow
from evalkit.run.rescore import arescore, rescore
from evalkit.run.shard import Shard

AUHARNESS_NAME = "librispeech_test_clean"


def _reported(row: ResultRow) -> tuple[str, str, float]:
    return row.shown_dataset, row.shown_metric, row.scale


# ---------------------------------------------------------------- evalkit rescore


def test_a_rescore_of_an_auharness_run_reports_as_the_run_does(tmp_path: Path, make_server: Any) -> None:
    run_dir = _auharness_run(tmp_path, _server(make_server).base_url)
    (ran,) = load_results(run_dir)[0]
    (again,) = rescore(run_dir, "auharness:word_error_rate")
    assert (again.dataset, again.metric) == (VARIANT, "auharness:word_error_rate")
    assert _reported(again) == _reported(ran) == (AUHARNESS_NAME, "word_error_rate", 100.0)
    assert again.score == pytest.approx(ran.score) and again.scaled() == pytest.approx(ran.scaled())
    (path,) = run_dir.glob("rescore_auharness_word_error_rate*.json")
    written = json.loads(path.read_text())["results"][0]
    assert written["reported_as"]["dataset"] == AUHARNESS_NAME
    assert written["reported_as"]["score"] == pytest.approx(100 * ran.score)


def test_a_rescore_with_evalkits_own_metric_stays_in_evalkits_terms(tmp_path: Path, make_server: Any) -> None:
    """evalkit's word_error_rate is not AU-Harness's: its row must not pass for AU-Harness's number."""
    run_dir = _auharness_run(tmp_path, _server(make_server).base_url)
    (own,) = rescore(run_dir, "word_error_rate", write=False)
    assert own.reported_as is None and (own.shown_dataset, own.scale) == (VARIANT, 1.0)
    (theirs,) = rescore(run_dir, "cer", write=False)  # a metric AU-Harness has no name for: its dataset name, x1
    assert _reported(theirs) == (AUHARNESS_NAME, "cer", 1.0)


def test_a_rescore_of_evalkits_own_config_reports_nothing_new(tmp_path: Path, make_server: Any) -> None:
    run_dir = _auharness_run(tmp_path, _server(make_server).base_url)
    results = json.loads((run_dir / "results.json").read_text())
    results["config"]["report_as"] = "evalkit"  # the same run, had its config asked for evalkit's table
    (run_dir / "results.json").write_text(json.dumps(results))
    outcome = asyncio.run(arescore(run_dir, "auharness:word_error_rate", write=False))
    assert [r.reported_as for r in outcome.rows] == [None]


# ---------------------------------------------------------------- evalkit merge


def test_merged_shards_report_as_one_run(tmp_path: Path, make_server: Any) -> None:
    from evalkit.run.merge import merge

    path = save_to_disk_dict(tmp_path / "data")
    config = write_config(
        tmp_path / "config.yaml",
        {
            "task_metric": [[AUHARNESS_NAME, "word_error_rate"]],
            "models": [{"name": "m", "model": "m", "url": _server(make_server).base_url, "inference_type": "openai"}],
            "dataset_paths": {AUHARNESS_NAME: str(path)},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    whole = run(config).run_dir
    shards = [run(config, shard=Shard(k, 2)).run_dir for k in range(2)]
    merged = merge(shards, tmp_path / "merged").run_dir
    (one,), (together,) = load_results(whole)[0], load_results(merged)[0]
    assert _reported(together) == _reported(one) == (AUHARNESS_NAME, "word_error_rate", 100.0)
    assert together.scaled() == pytest.approx(one.scaled())
    markdown = (merged / "results.md").read_text()
    assert re.search(rf"\| {AUHARNESS_NAME} \| word_error_rate \| m \| {100 * one.score:.2f} \|", markdown)


# ---------------------------------------------------------------- evalkit info metric


@pytest.mark.parametrize("name", ["auharness:word_error_rate", "auharness:bleu", "auharness:llm_judge_binary"])
def test_info_says_a_metric_for_every_task_fits_every_task(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    from evalkit.catalog import load_catalog
    from evalkit.cli.main import main

    catalog = load_catalog()
    data = describe_metric(name)
    assert data["every_task"] is True
    assert len(data["tasks"]) == len(catalog.tasks) and data["datasets"] == len(catalog.entries())
    assert main(["info", "metric", name]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"fits every task ({len(catalog.tasks)} tasks, {len(catalog.entries())} datasets)" in printed
    assert "fits 0 tasks" not in printed


def test_info_counts_the_tasks_a_metric_declares_beside_those_that_list_it() -> None:
    from evalkit.catalog import load_catalog

    catalog = load_catalog()
    data = describe_metric("meteor")  # its class declares speech_translation; no runspec lists it
    assert data["every_task"] is False and [t["name"] for t in data["tasks"]] == ["speech_translation"]
    assert data["datasets"] == sum(1 for s in catalog.entries().values() if s.task == "speech_translation")
    listed = describe_metric("word_error_rate")  # listed by runspecs, declared nowhere: as before
    assert listed["every_task"] is False and "asr" in [t["name"] for t in listed["tasks"]]


def describe_metric(name: str) -> dict[str, Any]:
    from evalkit.cli.info import describe

    return describe("metric", name)


# ---------------------------------------------------------------- report.html's charts


def _charts(html: str) -> dict[str, str]:
    """report.html's bar charts by their title."""
    return {
        title: svg
        for svg in re.findall(r'<svg class="chart[^"]*".*?</svg>', html, re.DOTALL)
        for title in re.findall(r"<title>([^<]*)</title>", svg)[:1]
    }


def _bars(svg: str) -> list[str]:
    return re.findall(r'<rect class="bar"[^>]*><title>([^<]*)</title>', svg)


def _ticks(svg: str) -> list[float]:
    return [float(t) for t in re.findall(r'<text x="[\d.]+" y="\d+" text-anchor="middle"[^>]*>([\d.]+)</text>', svg)]


def test_report_charts_draw_an_auharness_pair_on_the_scale_its_table_shows(tmp_path: Path, make_server: Any) -> None:
    run_dir = _auharness_run(tmp_path, _server(make_server).base_url)
    (row,) = load_results(run_dir)[0]
    score, low, high = row.scaled()
    assert score is not None and low is not None and high is not None
    charts = _charts((run_dir / "report.html").read_text())
    title = "word_error_rate, ×100 as AU-Harness prints it (lower is better)"
    assert title in charts, list(charts)
    svg = charts[title]
    assert "word_error_rate, ×100 as AU-Harness prints it, 95% CI whiskers" in svg  # the axis says so
    # the bar reads as the table's cell: AU-Harness's dataset name, the score and CI x100 with two decimals
    assert _bars(svg) == [f"{AUHARNESS_NAME} · m: {score:.2f} [{low:.2f}, {high:.2f}] — n=3"]
    assert f">{score:.2f}</text>" in svg
    assert max(_ticks(svg)) >= high > 1  # the axis runs on the x100 scale, not evalkit's 0-1
    grouped = [t for t in charts if t.startswith(f"{AUHARNESS_NAME} · word_error_rate by ")]
    assert grouped and all(t.endswith("×100 as AU-Harness prints it") for t in grouped)
    buckets = row.details["groups"]["audio_length"]
    for label, stats in buckets.items():
        (bar,) = [b for b in _bars(charts[grouped[0]]) if b.startswith(f"{label} · m: ")]
        assert bar.startswith(f"{label} · m: {100 * stats['score']:.2f}")


def test_report_charts_of_evalkits_own_config_are_as_before(tmp_path: Path, make_server: Any) -> None:
    from helpers import model_entry
    from test_local_copies import ENTRY

    path = save_to_disk_dict(tmp_path / "data")
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[ENTRY, "word_error_rate"]],
            "models": [model_entry("m", _server(make_server).base_url)],
            "dataset_paths": {ENTRY: str(path)},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    run_dir = run(config).run_dir
    (row,) = load_results(run_dir)[0]
    charts = _charts((run_dir / "report.html").read_text())
    svg = charts["word_error_rate (lower is better)"]
    assert "prints it" not in "".join(charts)
    (bar,) = _bars(svg)
    assert bar.startswith(f"{ENTRY} · m: ") and max(_ticks(svg)) <= 1


# ---------------------------------------------------------------- evalkit report A B


def _two_runs(tmp_path: Path, make_server: Any) -> tuple[Path, Path]:
    """Two runs of the AU-Harness config: B answers the second clip right and the third wrong."""
    from test_local_copies import _wav

    from evalkit.testing import audio_fingerprint

    other = ["hello there", "good morning", "wait for you"]
    script = {"answers": [{"audio_fingerprint": audio_fingerprint(_wav(i)), "answer": a} for i, a in enumerate(other)]}
    a = _auharness_run(tmp_path / "a", _server(make_server).base_url)
    b = _auharness_run(tmp_path / "b", make_server(script).base_url)
    return a, b


def test_comparing_two_runs_of_an_auharness_config_shows_auharness_names_and_scale(
    tmp_path: Path, make_server: Any
) -> None:
    from rich.console import Console

    from evalkit.report.compare import (
        RunSide,
        compare_rows,
        compare_runs,
        print_comparison,
        render_comparison,
        render_csv,
        render_html,
        render_json,
        render_markdown,
    )

    run_a, run_b = _two_runs(tmp_path, make_server)
    (head_a,), (head_b,) = load_results(run_a)[0], load_results(run_b)[0]
    comparison = compare_runs(RunSide(run_a), RunSide(run_b))
    (row,) = comparison.rows
    assert (row.dataset, row.metric) == (VARIANT, "auharness:word_error_rate")  # evalkit's pair, its records
    assert (row.shown_dataset, row.shown_metric, row.scale) == (AUHARNESS_NAME, "word_error_rate", 100.0)
    assert row.score_a == pytest.approx(head_a.score) and row.score_b == pytest.approx(head_b.score)
    # every view: AU-Harness's names, the scores as the runs' own tables print them, the difference on that scale
    a, b = f"{100 * head_a.score:.2f}", f"{100 * head_b.score:.2f}"
    diff = f"{100 * (head_b.score - head_a.score):+.2f}"
    ci = f"[{100 * row.ci_low:+.2f}, {100 * row.ci_high:+.2f}]"
    assert a == f"{head_a.scaled()[0]:.2f}"  # the runs' own tables print this
    cells = f"| {AUHARNESS_NAME} | word_error_rate | m | 3 | {a} | {b} | {diff} | {ci} |"
    markdown = render_markdown(comparison)
    assert cells in markdown and markdown.rstrip().count(f"| {VARIANT} / auharness:word_error_rate x100 |") == 1
    assert f"## {AUHARNESS_NAME} · word_error_rate · m" in markdown
    assert f"| {VARIANT}-1 | 50.00 → 0.00 | good evening | good morning |" in markdown  # per sample on the scale too
    assert f"| {VARIANT}-2 | 0.00 → 33.33 | wait for me | wait for you |" in markdown
    csv_lines = render_csv(comparison).splitlines()
    assert csv_lines[0].endswith(',verdict,"evalkit entry / metric, scale"')
    assert csv_lines[1].startswith(f"{AUHARNESS_NAME},word_error_rate,m,3,{a},{b},{diff},")
    payload = json.loads(render_json(comparison))["rows"][0]
    assert payload["dataset"] == VARIANT and payload["score_a"] == pytest.approx(head_a.score)
    reported = payload["reported_as"]
    assert (reported["tool"], reported["dataset"], reported["metric"], reported["scale"]) == (
        "AU-Harness",
        AUHARNESS_NAME,
        "word_error_rate",
        100.0,
    )
    assert reported["diff"] == pytest.approx(100 * row.diff)
    html = render_html(comparison)
    assert f"<td>{AUHARNESS_NAME}</td><td>word_error_rate</td>" in html and f"<td>{diff}</td>" in html
    assert f"{quote_pair(VARIANT)}" in html  # sample links still find evalkit's pair in the viewer
    console = Console(file=io.StringIO(), width=250)
    print_comparison(comparison, console)
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert AUHARNESS_NAME in printed and diff in printed and VARIANT in printed
    headline = render_comparison(compare_rows([head_a], [head_b]), "csv", "A", "B").splitlines()[1]
    assert headline == f"{AUHARNESS_NAME},word_error_rate,m,{a},{b},{diff}"
    # --pair in the names the tables show
    (named,) = compare_runs(RunSide(run_a), RunSide(run_b), pairs=[(AUHARNESS_NAME, "word_error_rate")]).rows
    assert named.as_dict() == row.as_dict()


def quote_pair(dataset: str) -> str:
    from urllib.parse import quote

    return quote(dataset)


def test_a_run_reported_otherwise_compares_in_evalkits_terms(tmp_path: Path, make_server: Any) -> None:
    from evalkit.report.compare import RunSide, compare_runs, render_markdown

    run_a, run_b = _two_runs(tmp_path, make_server)
    results = json.loads((run_b / "results.json").read_text())
    del results["results"][0]["reported_as"]  # B's table in evalkit's terms
    (run_b / "results.json").write_text(json.dumps(results))
    (row,) = compare_runs(RunSide(run_a), RunSide(run_b)).rows
    assert row.reported_as is None and (row.shown_dataset, row.scale) == (VARIANT, 1.0)
    assert any("B in evalkit's terms" in note for note in row.notes)
    markdown = render_markdown(compare_runs(RunSide(run_a), RunSide(run_b)))
    assert f"| {VARIANT} | auharness:word_error_rate | m | 3 | {row.score_a:.4f} |" in markdown
    assert "evalkit entry / metric, scale" not in markdown

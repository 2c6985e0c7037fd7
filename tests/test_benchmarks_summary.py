"""BENCHMARKS.md's summary is generated from benchmarks/results/: the latest measurement of each figure, dated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks import report, summary

ROOT = Path(__file__).resolve().parent.parent


def _entry(date: str, load: float, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "date": date,
        "command": f"python -m benchmarks.x --at {date}",
        "machine": "2 CPUs",
        "loadavg_before": [load, 0.0, 0.0],
        "loadavg_after": [load + 1, 0.0, 0.0],
        "rows": rows,
    }


def _row(figure: str, measured: str, **extra: Any) -> dict[str, Any]:
    return {"figure": figure, "measured": measured, "target": "t", "met": True, **extra}


def test_the_committed_summary_is_the_generated_one() -> None:
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert summary.replace_block(text, summary.render(summary.load_entries())) == text, (
        "BENCHMARKS.md's summary differs from benchmarks/results/: run python -m benchmarks.summary"
    )
    assert summary.main(["--check"]) == 0


def test_every_result_file_says_when_where_and_how_it_was_measured() -> None:
    for name, entry in summary.load_entries():
        assert entry["date"][:4].isdigit() and "T" in entry["date"], name
        assert entry["command"].strip(), name
        assert entry["loadavg_before"], name
        assert entry["rows"], name
        for row in entry["rows"]:
            assert row["figure"] and row["measured"], name


def test_the_latest_measurement_of_a_figure_wins_and_keeps_its_own_date(tmp_path: Path) -> None:
    summary.write_entry(
        "old.json", _entry("2026-01-01T00:00:00+00:00", 0.5, [_row("(b) x", "1 s"), _row("(a) y", "2 s")]), tmp_path
    )
    summary.write_entry("new.json", _entry("2026-02-01T00:00:00+00:00", 3.0, [_row("(b) x", "0.5 s")]), tmp_path)
    rows = summary.latest_rows(summary.load_entries(tmp_path))
    assert [(r.figure, r.measured, r.date[:10], r.load, r.source) for r in rows] == [
        ("(a) y", "2 s", "2026-01-01", "0.50 -> 1.50", "old.json"),  # not measured again: its own date and load
        ("(b) x", "0.5 s", "2026-02-01", "3.00 -> 4.00", "new.json"),
    ]
    block = summary.render(summary.load_entries(tmp_path))
    assert "| (b) x | 0.5 s |" in block and "1 s" not in block
    assert "python -m benchmarks.x --at 2026-02-01" in block and "python -m benchmarks.x --at 2026-01-01" in block


def test_adding_a_result_file_adds_its_rows_and_may_retire_a_renamed_figure(tmp_path: Path) -> None:
    summary.write_entry("a.json", _entry("2026-01-01T00:00:00+00:00", 0.5, [_row("(a') start", "0.28 s")]), tmp_path)
    before = summary.render(summary.load_entries(tmp_path))
    (tmp_path / "b.json").write_text(
        json.dumps(
            _entry(
                "2026-03-01T00:00:00+00:00",
                1.0,
                [_row("(a') start, compiled", "1.1x", replaces=["(a') start"]), _row("(z) new", "7")],
            )
        )
    )
    after = summary.render(summary.load_entries(tmp_path))
    assert "0.28 s" in before and "0.28 s" not in after
    assert [r.figure for r in summary.latest_rows(summary.load_entries(tmp_path))] == [
        "(a') start, compiled",
        "(z) new",
    ]


def test_a_suite_run_reports_its_rows_through_the_same_generator(tmp_path: Path) -> None:
    results = {
        "command": "python -m benchmarks --only b",
        "date": "2026-12-01T00:00:00+00:00",
        "machine": {
            "cpu_count": 2,
            "cpus_usable": 2,
            "cpu_model": "cpu",
            "python": "3.11",
            "platform": "x",
            "loadavg": [1.0, 1.0, 1.0],
        },
        "loadavg_after": [2.0, 1.0, 1.0],
        "bytecode": "b",
        "suite_s": 1.0,
        "errors": {},
        "latency": {
            "phase_s": 6.5,
            "ideal_s": 6.25,
            "ratio_phase": 1.04,
            "ratio_execute": 1.05,
            "lag_p99_ms": 2.0,
            "busy_lag_p99_ms": 1.0,
        },
    }
    entry = report.suite_entry(results)
    assert [r["figure"] for r in entry["rows"]] == [
        "(b) 3 models x 2 datasets, 100 ms, batch 64",
        "(e) loop lag p99 during (b)",
    ]
    summary.write_entry("suite.json", entry, tmp_path)
    rows = summary.latest_rows(summary.load_entries(tmp_path))
    assert rows[0].measured.startswith("6.50 s vs ideal 6.25 s") and rows[0].date == results["date"]

"""The end-of-run console output drawn without rich is rich's own output, character for character.

Written to a file or a pipe rich adds no colour, so evalkit draws the table itself there
(evalkit/report/plain_console.py). Each case prints the same outcome both ways: through rich (a
console that is no terminal, as a run's stdout into a file) and through the plain path, and the
texts must be equal; what the plain path cannot draw exactly it leaves to rich.
"""

from __future__ import annotations

import io
import random
import string
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from evalkit.report import console as results_console
from evalkit.report import plain_console
from evalkit.report.results import ResultRow
from evalkit.run.runner import RunOutcome


def _rich(width: int = 120) -> Console:
    return Console(file=io.StringIO(), width=width, highlight=False, force_terminal=False)


def _text(console: Console) -> str:
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def _row(dataset: str = "bench_one", metric: str = "exact_match", model: str = "bench", **extra: Any) -> ResultRow:
    values: dict[str, Any] = {
        "task": "t",
        "category": "c",
        "score": 1.0,
        "ci_low": None,
        "ci_high": None,
        "n": 1,
        "n_failed": 0,
        "failure_rate": 0.0,
        "unreliable": False,
        "seconds": 0.1,
    }
    values.update(extra)
    return ResultRow(dataset=dataset, metric=metric, model=model, **values)


def _usage() -> dict[str, Any]:
    usage = {"requests": 5000, "prompt_tokens": 71_780, "completion_tokens": 71_780}
    return {"usage": {"models": {"bench": usage}, "total": usage}}


def _outcome(rows: list[ResultRow], run_dir: str, meta: dict[str, Any] | None = None, **extra: Any) -> RunOutcome:
    return RunOutcome(
        run_dir=Path(run_dir),
        rows=rows,
        engines=[SimpleNamespace(error=None, spec=SimpleNamespace(id="x"))],  # type: ignore[list-item]
        seconds=12.345,
        requests_sent=5000,
        meta=meta if meta is not None else _usage(),
        **extra,
    )


ROWS = [
    [_row()],
    [_row("bench_overhead", score=0.73125, ci_low=0.7189, ci_high=0.7436, n=5000)],
    [
        _row(
            "a",
            score=0.5,
            ci_low=0.4,
            ci_high=0.6,
            n=40,
            n_failed=3,
            failure_reasons={"timeout": 2, "http_500": 1},
            failure_examples={"timeout": "took\x07 too   long\n(30 s)", "http_500": "x" * 400},
            unreliable=True,
        ),
        _row("b", metric="wer", model="m2", score=123.456, ci_low=100.0, ci_high=150.0, n=12),
        _row("a", model="m2", score=None, error="corpus() raised", n=0),
        _row("speech", kind="aggregate", score=0.25, ci_low=0.1, ci_high=0.4, n=52),
        _row(
            "stopped",
            score=0.8,
            ci_low=0.75,
            ci_high=0.85,
            n=300,
            partial={"reason": "stopped_at_ci", "half_width": 0.05},
        ),
        _row("cut", score=0.8, ci_low=0.7, ci_high=0.9, n=30, partial={"reason": "budget"}),
    ],
    [
        _row(
            "mmau",
            reported_as={"tool": "AU-Harness", "dataset": "MMAU", "metric": "llm_judge", "scale": 100},
            score=0.61,
            ci_low=0.58,
            ci_high=0.64,
            n=1000,
        )
    ],
]
RUN_DIRS = [
    "runs/20261129-165437_15f7f2",
    "/tmp/evalkit-cpu-split-abcdefgh/runs/20261129-165437_15f7f2",
    "/home/someone/projects/evaluations/with a space/runs/20261129-165437_15f7f2",
    "/x",
]


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("run_dir", RUN_DIRS)
def test_the_results_are_printed_as_rich_prints_them(rows: list[ResultRow], run_dir: str) -> None:
    outcome = _outcome(rows, run_dir)
    plain = results_console._plain_results(outcome)
    assert plain is not None  # drawn without rich
    for width in (120, 200):  # the console's width does not matter to a table that fits in 120 columns
        console = _rich(width)
        results_console.print_results(outcome, console)
        assert plain == _text(console)


def test_the_table_and_the_footers_each(capsys: pytest.CaptureFixture[str]) -> None:
    rows = ROWS[2]
    console = _rich()
    results_console.print_table(rows, "evalkit results — runs/x", console)
    results_console.print_failures(rows, console)
    results_console.print_usage(_usage(), console)
    results_console.print_table(rows, "evalkit results — runs/x")  # stdout under pytest is no terminal: plain
    results_console.print_failures(rows)
    results_console.print_usage(_usage())
    assert capsys.readouterr().out == _text(console)


def test_print_results_to_stdout_takes_the_plain_path(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = _outcome(ROWS[2], RUN_DIRS[1], reused=3, changed=1)
    assert plain_console.plain_stdout()
    results_console.print_results(outcome)
    console = _rich()
    results_console.print_results(outcome, console)
    assert capsys.readouterr().out == _text(console)


def _word(rng: random.Random) -> str:
    size = rng.choice([rng.randint(1, 30), rng.randint(60, 260)])  # long ones: a run folder's path, cut by rich
    return "".join(rng.choice(string.ascii_letters + string.digits + "_-./") for _ in range(size))


def test_titles_wrap_as_rich_wraps_them() -> None:
    """Random titles over random tables: wrapped within the table's width, a long word cut, centred, as rich does."""
    rng = random.Random(5)
    for _ in range(500):
        title = (" " * rng.randint(1, 3)).join(_word(rng) for _ in range(rng.randint(1, 5)))
        title = rng.choice(["", "evalkit results — "]) + title + rng.choice(["", " ", "  "])
        rows = [_row(_word(rng)[: rng.randint(1, 12)], score=rng.random(), n=rng.randint(0, 10**6))]
        cells = results_console.table_rows(rows)
        text = plain_console.table_text(title, results_console.headers(rows), cells, ("score", "n", "failed"))
        console = _rich()
        results_console.print_table(rows, title, console)
        assert text == _text(console), title


@pytest.mark.parametrize(
    "change",
    [
        {"dataset": "データセット"},  # wide characters: rich measures them
        {"dataset": "tab\tin name"},
        {"model": "m" * 90},  # a table wider than 120 columns: rich squeezes and wraps it
    ],
)
def test_what_rich_would_draw_otherwise_is_left_to_rich(change: dict[str, str]) -> None:
    rows = [_row(**change)]
    assert results_console._plain_table(rows, "evalkit results — runs/x") is None


@pytest.mark.parametrize("title", ["evalkit results — runs/[bold]x", "evalkit results — runs/:smile:"])
def test_a_title_rich_would_read_as_markup_is_left_to_rich(title: str) -> None:
    assert results_console._plain_table([_row()], title) is None


def test_an_engine_error_or_a_tab_leaves_the_output_to_rich() -> None:
    """An engine's error is printed wrapped at the console's width, a tab expanded to rich's tab stops."""
    outcome = _outcome([_row()], "runs/x")
    outcome.engines = [SimpleNamespace(error="boom", spec=SimpleNamespace(id="x"))]  # type: ignore[list-item]
    assert results_console._plain_results(outcome) is None
    tabbed = _outcome([_row()], "runs/x", meta={"usage": {"models": {"tab\tname": {"requests": 1}}}})
    assert results_console._plain_results(tabbed) is None
    assert results_console._plain_results(_outcome([_row()], "runs/x")) is not None


def test_a_terminal_or_forced_colour_is_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdout", Terminal())
    assert not plain_console.plain_stdout()
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert plain_console.plain_stdout()
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not plain_console.plain_stdout()

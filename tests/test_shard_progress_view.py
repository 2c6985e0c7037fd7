"""Shard runs as the docs write them (``--shard K/N --output-dir runs/shard-K``): progress with an expected total
and ETA, and the runs listed by ``evalkit view runs``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import config_for, evalkit_cli, model_entry, text_set

from evalkit.report.progress import Progress
from evalkit.testing import start_test_server
from evalkit.view.links import Links
from evalkit.view.pages import runs_page
from evalkit.view.viewer import Viewer

N = 40


@pytest.fixture(scope="module")
def shard_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    tmp_path = tmp_path_factory.mktemp("shards")
    server = start_test_server({"default_answer": "no"})
    try:
        config = config_for(tmp_path, text_set(tmp_path, N), [model_entry("m", server.base_url)])
        logs = []
        for k in range(2):
            args = [
                "run",
                str(config),
                "--shard",
                f"{k}/2",
                "--output-dir",
                f"runs/shard-{k}",
                "--progress-interval",
                "0",
            ]
            done = evalkit_cli(args, tmp_path)
            assert done.returncode == 0, done.stderr
            logs.append(done.stderr)
        yield tmp_path / "runs", logs
    finally:
        server.stop()


def test_a_shard_shows_its_expected_share_and_an_eta(shard_runs: tuple[Path, list[str]]) -> None:
    _, logs = shard_runs
    finals = []
    for log in logs:
        assert "/?" not in log, log
        lines = re.findall(r"synth_qa__exact_match · m: (\d+)/~(\d+) samples done, .*", log)
        assert lines, log
        assert {int(total) for _, total in lines} <= {N // 2, *(int(done) for done, _ in lines)}  # ~N/2, or more done
        assert any(", ETA " in line for line in log.splitlines() if "synth_qa__exact_match" in line), log
        finals.append(int(lines[-1][0]))
    assert sum(finals) == N  # the two shards hold every sample once


def test_an_expected_share_is_never_shown_below_what_is_done() -> None:
    progress = Progress(quiet=True, totals={("e", "m"): 3}, estimated=True)
    for _ in range(5):
        progress("e", "m", True)
    line = progress.lines[("e", "m")]
    assert progress.describe(line).startswith("5/~5 samples done") and progress.eta(line) is None


def test_the_viewer_lists_shard_runs_under_their_output_dirs(shard_runs: tuple[Path, list[str]]) -> None:
    runs, _ = shard_runs
    listed = Viewer([runs]).runs()
    assert sorted(r["shard"] for r in listed) == ["0/2", "1/2"], listed
    page = runs_page(listed, Links())
    assert "shard 0/2" in page and "shard 1/2" in page


def test_evalkit_view_exports_the_shard_runs(shard_runs: tuple[Path, list[str]], tmp_path: Path) -> None:
    runs, _ = shard_runs
    done = evalkit_cli(["view", str(runs), "--export", str(tmp_path / "site")], tmp_path)
    assert done.returncode == 0, done.stderr
    index = (tmp_path / "site" / "index.html").read_text()
    assert index.count("shard ") == 2 and "No run folders here" not in index

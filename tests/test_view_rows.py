"""The viewer counts a sample's row from 1, as evalkit's messages do ("row 9 (id 's00008')"), on every page."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from helpers import evalkit_cli
from test_view import RUN, _cache, make_run, pair_url, sample_url, served, wait_indexed

__all__ = ["_cache", "served"]  # the fixtures, used by name


def test_the_samples_table_and_a_sample_count_rows_from_1(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    server = served(tmp_path / "runs")
    wait_indexed(server, RUN, "speech", "word_error_rate")
    rows = server.api(pair_url(RUN, "speech", "word_error_rate", api=True, model="alpha"))["rows"]
    assert rows[0]["sample_id"] == "utt000" and rows[0]["row"] == 0  # the record's field, as stored
    html = server.page(pair_url(RUN, "speech", "word_error_rate", model="alpha"))
    cells = re.findall(r'<tr><td><a href="[^"]*">([^<]*)</a></td><td>alpha</td><td class="num">([^<]*)</td>', html)
    assert cells[:3] == [("utt000", "1"), ("utt001", "2"), ("utt002", "3")], cells[:3]
    page = server.page(sample_url(RUN, "speech", "word_error_rate", "utt000"))
    assert "speech × word_error_rate · row 1</p>" in page or " · row 1 ·" in page, page[:600]
    assert "row 0" not in page


def test_the_export_counts_rows_from_1(tmp_path: Path) -> None:
    make_run(tmp_path / "runs")
    runs, out = tmp_path / "runs", tmp_path / "site"
    env = {**os.environ, "EVALKIT_CACHE_DIR": str(tmp_path / "cache")}
    done = evalkit_cli(
        ["view", str(runs), "--export", str(out), "--media-root", str(runs / "media")], tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    # the exported samples table and sample page are drawn in the browser from the export's data files;
    # test_view_browser checks that both show rows from 1, as here the data they are drawn from stays as recorded
    rows = [
        row
        for block in out.rglob("rows/*.js")
        for row in json.loads(block.read_text().strip().removeprefix("window.EVALKIT_ROWS(").removesuffix(");"))
    ]
    assert rows and min(r["row"] for r in rows if r["row"] is not None) == 0  # the data stays as recorded

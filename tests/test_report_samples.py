"""report.html's sample lists: failed samples with their messages, the worst-scoring samples, links into the viewer."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from evalkit.report.html import render_html
from evalkit.report.results import ResultRow
from evalkit.report.samples import FAILED_SHOWN, VIEWER, SampleLists, sample_url

HOSTILE_ID = '<script>alert("id")</script>/../../etc'


def _record(sid: str, model: str, metric: str, score: float | None, row: int, **extra: Any) -> dict[str, Any]:
    record = {"sample_id": sid, "model": model, "dataset": "qa", "metric": metric, "row": row, "score": score}
    record.update(extra)
    return record


def test_the_worst_are_kept_with_bounded_memory_in_the_metrics_direction() -> None:
    rng = random.Random(2)
    lists = SampleLists(directions={"exact_match": True, "word_error_rate": False}, worst_shown=10)
    records = []
    for i in range(5000):
        records.append(_record(f"e{i}", "m", "exact_match", rng.choice([0.0, 0.5, 1.0]), i))
        records.append(_record(f"w{i}", "m", "word_error_rate", round(rng.random(), 2), i))
    records.append(_record("unknown", "m", "plugin_metric", 0.0, 0))  # no direction known: never listed
    for record in records:
        lists.add(record)
        assert all(len(heap) <= 10 for heap in lists._heaps.values())
    worst = lists.worst()
    assert set(worst) == {("qa", "exact_match", "m"), ("qa", "word_error_rate", "m")}
    # higher is better: the lowest scores, ties in file order
    expected = sorted((r for r in records if r["metric"] == "exact_match"), key=lambda r: (r["score"], r["row"]))[:10]
    assert [s.sample_id for s in worst[("qa", "exact_match", "m")]] == [r["sample_id"] for r in expected]
    # lower is better (WER): the highest scores
    expected = sorted((r for r in records if r["metric"] == "word_error_rate"), key=lambda r: (-r["score"], r["row"]))
    assert [s.sample_id for s in worst[("qa", "word_error_rate", "m")]] == [r["sample_id"] for r in expected[:10]]


def test_every_failure_is_counted_and_the_first_are_kept_with_their_message() -> None:
    lists = SampleLists(directions={"exact_match": True})
    for i in range(120):
        reason = "timeout" if i % 3 else "endpoint_unavailable"
        error = f"Connection refused ({i})" if reason == "endpoint_unavailable" else f"no answer in 10 s ({i})"
        lists.add(_record(f"s{i}", "m", "exact_match", None, i, failure=reason, error=error))
    assert lists.failures == {"timeout": 80, "endpoint_unavailable": 40}
    assert len(lists.first_failures) == FAILED_SHOWN
    assert [f.sample_id for f in lists.first_failures] == [f"s{i}" for i in range(FAILED_SHOWN)]
    assert lists.first_failures[0].error == "Connection refused (0)" and lists.worst() == {}


def _row(metric: str, model: str, failed: int) -> ResultRow:
    return ResultRow("qa", "t", "c", metric, model, 0.5, 0.4, 0.6, 10, failed, 0.1, False, 1.0)


def test_report_lists_failed_and_worst_samples_escaped_and_linked(tmp_path: Path) -> None:
    run_dir = tmp_path / "20261126-120000_abcdef"
    records = run_dir / "records"
    records.mkdir(parents=True)
    lines = [
        _record(HOSTILE_ID, "m<1>", "exact_match", 0.0, 0, prediction="<script>alert('answer')</script>"),
        _record("s1", "m<1>", "exact_match", 1.0, 1, prediction="Paris"),
        _record(
            "s2", "m<1>", "exact_match", None, 2, failure="endpoint_unavailable", error="Connection <b>refused</b>"
        ),
        _record("s3", "m<1>", "exact_match", None, 3, failure="http_500", error="HTTP 500: boom\nsecond line"),
    ]
    text = "".join(json.dumps(r) + "\n" for r in lines) + '{"sample_id": "torn", "mod'  # a run killed mid-write
    (records / "qa__exact_match.jsonl").write_text(text)
    html = render_html([_row("exact_match", "m<1>", 2)], {"run_id": "r"}, records)

    assert "<script" not in html.lower() and "<b>refused" not in html
    assert "&lt;script&gt;alert(&#x27;answer&#x27;)&lt;/script&gt;" in html
    assert "Connection &lt;b&gt;refused&lt;/b&gt;" in html and "HTTP 500: boom\nsecond line" in html
    assert "<h3>endpoint_unavailable: 1</h3>" in html and "<h3>http_500: 1</h3>" in html
    assert f"evalkit view {run_dir}" in html
    # the hostile id is one percent-encoded path segment of the link: no "/", no "..", no quote breaks out
    link = sample_url(run_dir.name, "qa", "exact_match", HOSTILE_ID)
    assert link.startswith(f"http://127.0.0.1:8765/run/{run_dir.name}/sample/qa/exact_match/")
    assert link.count("/") == 8 and "../" not in link and '"' not in link and "<" not in link
    assert f'href="{link}"' in html
    worst = html[html.index("Worst-scoring samples") :]
    assert worst.index("Paris") > worst.index("&lt;script&gt;alert(&quot;id&quot;)")  # 0.0 before 1.0
    assert "1 line that did not decode" in html
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert hrefs and all(
        h.startswith(f"http://127.0.0.1:8765/run/{run_dir.name}/sample/qa/exact_match/") for h in hrefs
    )


def test_a_run_without_failures_says_so(tmp_path: Path) -> None:
    records = tmp_path / "run" / "records"
    records.mkdir(parents=True)
    (records / "qa__exact_match.jsonl").write_text(json.dumps(_record("s1", "m", "exact_match", 1.0, 0)) + "\n")
    html = render_html([_row("exact_match", "m", 0)], {"run_id": "r"}, records)
    assert "No sample failed." in html and "/run/run/sample/qa/exact_match/s1" in html


@pytest.mark.parametrize("sample_id", ["q1", "..", ".", "", "a/b", "../../etc/passwd", "<script>", "ß x"])
def test_report_links_are_the_viewers_own_links(sample_id: str) -> None:
    """report.html links where `evalkit view` links: `.`/`..`/empty ids in the query, others as one path segment."""
    from evalkit.view.links import Links

    url = sample_url("20261126-1_ab", "qa set", "exact_match", sample_id)
    assert url == VIEWER + Links().sample("20261126-1_ab", "qa set", "exact_match", sample_id)
    assert ("?id=" in url) == (sample_id in ("", ".", ".."))


def test_a_record_with_a_lone_surrogate_escape_is_shown_and_the_report_can_be_written(tmp_path: Path) -> None:
    """The lenient parser takes "\\ud800" into a str UTF-8 cannot hold: it becomes U+FFFD, not a missing report."""
    records = tmp_path / "run" / "records"
    records.mkdir(parents=True)
    line = json.dumps(_record("s\ud800", "m", "exact_match", 0.0, 0, prediction="a\udfffb \U0001f600"))
    assert "\\ud800" in line and "\\ud83d\\ude00" in line  # escaped as such in the file: a valid pair, two lone
    (records / "qa__exact_match.jsonl").write_text(line + "\n", encoding="ascii")
    html = render_html([_row("exact_match", "m", 0)], {"run_id": "r"}, records)
    html.encode("utf-8")  # what write_text_atomic does: it raised UnicodeEncodeError before
    worst = html[html.index("Worst-scoring samples") :]
    assert "s\ufffd" in worst and "a\ufffdb \U0001f600" in worst

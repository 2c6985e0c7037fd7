"""report.html from a real run: every section, self-contained, no secrets; drawn by headless Chromium when installed."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from collections.abc import Iterator
from html import escape
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, model_entry, write_config

from evalkit.cli.main import main
from evalkit.report.compare import compare_rows
from evalkit.report.files import load_results
from evalkit.report.html import failure_counts, render_html
from evalkit.report.results import ResultRow
from evalkit.report.svg import PALETTE, fmt_number
from evalkit.testing import start_test_server

QA = {"capital of France": "Paris", "spider": "eight", "sky": "blue", "red planet": "Mars", "opposite of hot": "warm"}
SECRET = "sk-test-secret-7f3a9c"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, speech_runspecs: dict[str, Any]) -> Iterator[Path]:
    """A finished run: 2 models x (QA exact_match, QA bleu, tone ASR wer); model-b fails some requests with HTTP 500."""
    fps = speech_runspecs["fingerprints"]
    audio = [
        {"audio_fingerprint": fps["clip1"], "answer": "hello world"},
        {"audio_fingerprint": fps["clip2"], "answer": "the cat sat on mat"},
    ]
    rules = [{"match": q, "answer": a} for q, a in QA.items()] + audio
    good = start_test_server({"answers": rules, "latency_ms": [5, 40]})
    flaky = start_test_server({"answers": rules, "latency_ms": [20, 80], "faults": {"seed": 1, "rates": {"500": 0.35}}})
    tmp = tmp_path_factory.mktemp("report")
    try:
        config = write_config(
            tmp / "config.yaml",
            {
                "dataset_metric": [["tiny_qa", "exact_match"], ["tiny_qa", "bleu"], ["tiny_asr", "word_error_rate"]],
                "models": [
                    model_entry("model-a", good.base_url, auth_token=SECRET),
                    model_entry("model-b", flaky.base_url, retry_attempts=0),
                ],
                "runspecs_dir": [str(FIXTURES / "runspecs"), str(speech_runspecs["dir"])],
                "output_dir": str(tmp / "runs"),
            },
        )
        assert main(["run", str(config), "--quiet", "--allow-failures"]) == 0  # the flaky model fails often
    finally:
        good.stop()
        flaky.stop()
    (found,) = [p for p in (tmp / "runs").iterdir() if p.is_dir()]
    yield found


def _bars(html: str) -> list[tuple[float, str]]:
    """(width, tooltip) of every bar rect."""
    return [
        (float(w), t)
        for w, t in re.findall(
            r'<rect class="bar" x="[^"]+" y="[^"]+" width="([^"]+)"[^>]*><title>([^<]*)</title>', html
        )
    ]


def test_report_html_has_every_section(run_dir: Path) -> None:
    html = (run_dir / "report.html").read_text()
    rows, _ = load_results(run_dir)
    for heading in (
        "Results",
        "Scores by metric",
        "by audio length",
        "Latency per model",
        "Failures by reason",
        "Run details",
    ):
        assert heading in html, heading
    # the results table carries every row
    for r in rows:
        assert f"<td>{r.dataset}</td>" in html and f"<td>{r.model}</td>" in html
    # one chart per metric, a bar per (dataset, model) with its CI in the tooltip
    bars = _bars(html)
    for r in rows:
        if r.score is None:
            continue
        ci = (
            f" [{fmt_number(r.ci_low)}, {fmt_number(r.ci_high)}]"
            if r.ci_low is not None and r.ci_high is not None
            else ""
        )
        expected = f"{r.dataset} · {r.model}: {fmt_number(r.score)}{ci} — n={r.n}"
        assert expected in [t for _, t in bars], expected
    assert html.count('class="whisker"') >= len([r for r in rows if r.ci_low is not None])
    assert all(w >= 0 for w, _ in bars) and sum(1 for w, _ in bars if w > 0) >= len(rows)
    # WER by audio length (the tone clips are 1-4 s long), latency histogram, failures by reason
    assert 'class="chart group-audio_length"' in html and "0-5s · model-a" in html
    assert "Latency distribution" in html and re.search(r"model-b: \d+ in \[", html)
    wer_b = next(r for r in rows if r.model == "model-b" and r.metric == "word_error_rate")
    assert wer_b.n_failed > 0, "the flaky server should have failed some requests"
    assert 'class="chart failures"' in html and "http_500 · model-b" in html


def test_report_html_is_self_contained_and_keeps_secrets(run_dir: Path) -> None:
    html = (run_dir / "report.html").read_text()
    assert (
        "<script" not in html.lower() and "<link" not in html.lower() and "@import" not in html and "url(" not in html
    )
    assert not re.search(r"\ssrc\s*=", html, re.IGNORECASE)
    # the only links are the sample links into a local `evalkit view`: nothing is fetched when the page opens
    links = re.findall(r"\shref\s*=\s*\"([^\"]*)\"", html, re.IGNORECASE)
    assert links and all(link.startswith(f"http://127.0.0.1:8765/run/{run_dir.name}/sample/") for link in links)
    assert len(links) == len(re.findall(r"\shref\s*=", html, re.IGNORECASE))
    assert SECRET not in html
    assert "***" in html  # the token is shown masked in the configuration block


def test_report_html_lists_failed_and_worst_samples_of_a_real_run(run_dir: Path) -> None:
    html = (run_dir / "report.html").read_text()
    records = [json.loads(line) for path in (run_dir / "records").glob("*.jsonl") for line in path.open()]
    failed = [r for r in records if r.get("failure")]
    assert failed, "the flaky server should have failed some requests"
    section = html[html.index("<h2>Failed samples</h2>") : html.index("<h2>Worst-scoring samples</h2>")]
    assert f"{len(failed)} failed sample record" in section
    assert "<h3>http_500: " in section and "<td>model-b</td>" in section and "<td>model-a</td>" not in section
    first = failed[0]
    assert escape(first["error"]) in section and "HTTP 500" in first["error"]
    link = f"http://127.0.0.1:8765/run/{run_dir.name}/sample/{first['dataset']}/{first['metric']}/{first['sample_id']}"
    assert f'href="{link}"' in section
    worst = html[html.index("<h2>Worst-scoring samples</h2>") :]
    for dataset, metric in (("tiny_qa", "exact_match"), ("tiny_qa", "bleu"), ("tiny_asr", "word_error_rate")):
        assert f"<h3>{dataset} · {metric} · model-a" in worst
    assert "word_error_rate · model-a (lower is better)" in worst
    assert f"evalkit view {run_dir}" in html


def test_failure_counts_count_a_dataset_once_per_model() -> None:
    def row(metric: str, reasons: dict[str, int]) -> ResultRow:
        return ResultRow(
            "d",
            "t",
            "c",
            metric,
            "m",
            0.5,
            0.4,
            0.6,
            10,
            sum(reasons.values()),
            0.1,
            False,
            1.0,
            failure_reasons=reasons,
        )

    rows = [row("exact_match", {"http_500": 3, "timeout": 1}), row("bleu", {"http_500": 3, "metric_error": 2})]
    assert failure_counts(rows) == {("http_500", "m"): 3, ("timeout", "m"): 1, ("metric_error", "m"): 2}


def test_group_chart_per_audio_length_bucket() -> None:
    groups = {
        "audio_length": {
            "0-5s": {"score": 0.1, "ci_low": 0.05, "ci_high": 0.2, "n": 10},
            "10-20s": {"score": 0.3, "ci_low": 0.2, "ci_high": 0.45, "n": 5},
            "30s+": {"score": 0.5, "ci_low": 0.3, "ci_high": 0.7, "n": 2},
        }
    }
    rows = [
        ResultRow(
            "asr_set",
            "asr",
            "speech",
            "word_error_rate",
            m,
            0.2,
            0.1,
            0.3,
            17,
            0,
            0.0,
            False,
            1.0,
            details={"groups": groups},
        )
        for m in ("x", "y")
    ]
    html = render_html(rows, {"run_id": "r"})
    chart = html[html.index('class="chart group-audio_length"') :]
    chart = chart[: chart.index("</svg>")]
    tips = [t for _, t in _bars(chart)]
    assert tips == [
        f"{b} · {m}: {s}"
        for b, s in (
            ("0-5s", "0.1 [0.05, 0.2] — n=10"),
            ("10-20s", "0.3 [0.2, 0.45] — n=5"),
            ("30s+", "0.5 [0.3, 0.7] — n=2"),
        )
        for m in ("x", "y")
    ]
    assert "word_error_rate (lower is better)" in html


def test_compare_marks_disjoint_intervals() -> None:
    def row(score: float, low: float, high: float, model: str = "m") -> ResultRow:
        return ResultRow("d", "t", "c", "word_error_rate", model, score, low, high, 10, 0, 0.0, False, 1.0)

    (worse,) = compare_rows([row(0.2, 0.15, 0.25)], [row(0.4, 0.3, 0.5)])
    assert worse.overlap is False and abs(worse.diff - 0.2) < 1e-12 and worse.verdict(False) == "worse"
    (same,) = compare_rows([row(0.2, 0.1, 0.3)], [row(0.25, 0.2, 0.3)])
    assert same.overlap is True and same.verdict(False) == "within CI"
    only = compare_rows([row(0.2, 0.1, 0.3, "a")], [row(0.2, 0.1, 0.3, "b")])
    assert [c.verdict(False) for c in only] == ["only in A", "only in B"]


# ---------------------------------------------------------------- a real browser


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _chromium_args(profile: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1200,2000",
    ]


def _png_rows(data: bytes, max_rows: int) -> tuple[int, int, list[bytes]]:
    """(width, bytes per pixel, up to ``max_rows`` unfiltered scanlines) of an 8-bit non-interlaced RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, _, depth, color_type, _, _, interlace = header
    assert depth == 8 and color_type in (2, 6) and interlace == 0, header
    bpp = 3 if color_type == 2 else 4
    stride = width * bpp
    raw = zlib.decompressobj().decompress(idat, (stride + 1) * max_rows)
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(min(max_rows, len(raw) // (stride + 1))):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (Debian: apt-get install -y chromium)")
def test_chromium_renders_the_charts(run_dir: Path, tmp_path: Path) -> None:
    browser = _chromium()
    assert browser is not None
    url = (run_dir / "report.html").resolve().as_uri()
    dom = subprocess.run(
        [browser, *_chromium_args(tmp_path / "profile"), "--dump-dom", url], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<svg" in dom.stdout
    widths = [float(w) for w in re.findall(r'<rect class="bar" x="[^"]+" y="[^"]+" width="([^"]+)"', dom.stdout)]
    assert sum(1 for w in widths if w > 0) >= 6, widths

    shot = tmp_path / "report.png"
    proc = subprocess.run(
        [browser, *_chromium_args(tmp_path / "profile"), f"--screenshot={shot}", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    width, bpp, rows = _png_rows(shot.read_bytes(), max_rows=1000)
    colours: dict[tuple[int, ...], int] = {}
    for line in rows[::2]:
        for x in range(0, width * bpp, bpp * 2):
            px = tuple(line[x : x + 3])
            colours[px] = colours.get(px, 0) + 1
    first, second = (tuple(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in PALETTE[:2])
    # the bars of both models were painted (not a blank or error page)
    assert colours.get(first, 0) > 100 and colours.get(second, 0) > 100, sorted(colours.items(), key=lambda kv: -kv[1])[
        :8
    ]
    assert len(colours) > 20

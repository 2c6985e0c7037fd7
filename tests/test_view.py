"""`evalkit view`: the pages, filters, media and bad input, over real HTTP on a real aiohttp server.

The runs here are written by hand in the record format of issue 32 (records
with row, groups, sent keys; sent files with the messages; an old-style run
without them), with real WAV and PNG files, so every page has something to
show and every hostile value (a sample id with ``../`` or ``<script>``, a cut
line, a run in progress) has a place to appear. The browser test
(test_view_browser.py) uses a run made by ``evalkit run`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.client
import io
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf
from helpers import evalkit_cli, tone_wav
from PIL import Image

from evalkit.view import index as view_index
from evalkit.view import scan
from evalkit.view.links import Links, segment
from evalkit.view.queries import PairFilter, samples_page
from evalkit.view.runs import Pair, RunInfo, find_pair
from evalkit.view.server import bind, serve
from evalkit.view.viewer import Viewer

RUN = "20261126-120000_aaaaaa"
OTHER = "20261126-130000_bbbbbb"
EVIL_IDS = ["../../etc/passwd", "<script>alert(1)</script>", ".."]
SCRIPT_ANSWER = "<script>document.title='owned'</script>"


def _key(entry: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:16]


def _tone(path: Path, seconds: float, sr: int = 16000) -> None:
    t = np.arange(int(seconds * sr)) / sr
    sf.write(path, (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), sr, subtype="PCM_16")


def _png(path: Path, colour: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> None:
    Image.new("RGB", size, colour).save(path, format="PNG")


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_run(
    root: Path,
    run_id: str = RUN,
    *,
    status: str = "finished",
    models: tuple[str, ...] = ("alpha", "beta"),
    n: int = 12,
    shift: int = 0,
) -> Path:
    """A run folder of two pairs (speech x wer with audio, pics x exact_match with images), records of issue 32.

    Model ``beta`` fails samples 3 and 7 (timeout); every third sample is ``female``; ``shift`` changes
    alpha's answers on the first ``shift`` samples (for comparisons between two runs).
    """
    media = root / "media"
    media.mkdir(parents=True, exist_ok=True)
    _tone(media / "tone.wav", 3.0)
    _png(media / "red.png", (220, 30, 30))
    clips = [{"id": f"c{i}", "audio": {"bytes": tone_wav(330.0, 1.0 + i), "path": f"c{i}.wav"}} for i in range(2)]
    pq.write_table(pa.Table.from_pylist(clips), media / "clips.parquet")
    run = root / run_id
    ids = [f"utt{i:03d}" for i in range(n)] + EVIL_IDS
    sent_speech, sent_pics, speech, pics = [], [], [], []
    for row, sid in enumerate(ids):
        audio = {"path": str(media / "tone.wav"), "start": 0.5, "end": 1.5, "duration": 1.0, "sample_rate": 16000}
        if row == 1:
            audio = {**audio, "start": 0.0, "end": 2.0, "duration": 2.0, "chunks": [[0.0, 1.0], [1.0, 2.0]]}
        if row == 4:  # audio held inside the dataset file (a parquet row), as the sent log names it
            cell = {"path": str(media / "clips.parquet"), "row": 1, "column": "audio"}
            audio = {"file": cell, "start": 0.0, "end": 0.75, "duration": 0.75, "sample_rate": 16000}
        entry = {
            "dataset": "speech",
            "sample_id": sid,
            "kind": "chat",
            "requests": 2 if row == 1 else 1,
            "messages": [
                {"role": "system", "content": [{"type": "text", "text": "You are a careful transcriber."}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": f"Transcribe clip number {row} <b>now</b>"},
                        {"type": "audio", "audio": audio},
                    ],
                },
            ],
        }
        entry["key"] = _key(entry)
        sent_speech.append(entry)
        image = {"path": str(media / "red.png"), "sha256": "0" * 64, "format": "png", "width": 40, "height": 30}
        pic = {
            "dataset": "pics",
            "sample_id": sid,
            "kind": "chat",
            "requests": 1,
            "messages": [
                {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "Colour?"}]}
            ],
        }
        pic["key"] = _key(pic)
        sent_pics.append(pic)
        groups = {"gender": "female" if row % 3 == 0 else "male", "audio_length": "0-5s", "language": "en"}
        for model in models:
            failed = model == "beta" and row in (3, 7)
            answer = f"hello world {row}" if model == "alpha" else f"hello word {row}"
            if model == "alpha" and row < shift:
                answer = "something else entirely"
            if sid == EVIL_IDS[1]:
                answer = SCRIPT_ANSWER
            if model == "alpha" and row == 6:
                answer = "große Straße 6"  # case-folds to "strasse"
            base = {"sample_id": sid, "model": model, "row": row, "groups": groups, "sent": entry["key"]}
            score = (
                0.0 if model == "alpha" and row >= shift else round(0.1 * (row % 5) + (0.5 if row < shift else 0), 3)
            )
            speech.append(
                {
                    **base,
                    "dataset": "speech",
                    "metric": "word_error_rate",
                    "reference": f"hello world {row}",
                    "response": None if failed else answer,
                    "prediction": None if failed else answer.lower(),
                    "score": None if failed else score,
                    "details": {}
                    if failed
                    else {
                        "normalized_reference": f"hello world {row}",
                        "normalized_prediction": answer.lower(),
                        "substitutions": 0 if model == "alpha" else 1,
                        "deletions": 0,
                        "insertions": 0,
                    },
                    "failure": "timeout" if failed else None,
                    "error": f"Timed out after 10 s waiting for {model}" if failed else None,
                    "latency": 0.25,
                    "attempts": 1,
                    "cached": False,
                    "replica": None,
                    "stats": [] if failed else [score, 3.0],
                }
            )
            colour = "red" if model == "alpha" else "blue"
            pics.append(
                {
                    **base,
                    "sent": pic["key"],
                    "dataset": "pics",
                    "metric": "exact_match",
                    "reference": ["red", "crimson"],
                    "response": colour,
                    "prediction": colour,
                    "score": 1.0 if colour == "red" else 0.0,
                    "details": {
                        "judge": {
                            "model": "judge-x",
                            "prompt": "Is it red?",
                            "response": '{"verdict": 1}',
                            "rationale": "the answer names the colour seen",
                            "verdict": 1,
                        }
                    },
                    "images": [image],
                    "failure": None,
                    "error": None,
                }
            )
    _jsonl(run / "records" / "sent" / "speech.jsonl", sent_speech)
    _jsonl(run / "records" / "sent" / "pics.jsonl", sent_pics)
    _jsonl(run / "records" / "speech__word_error_rate.jsonl", speech)
    _jsonl(run / "records" / "pics__exact_match.jsonl", pics)
    pairs = [["speech", "word_error_rate"], ["pics", "exact_match"]]
    manifest = {
        "run_id": run_id,
        "status": status,
        "started": f"2026-11-26T{run_id[9:11]}:00:00",
        "models": list(models),
        "datasets": {"speech": {}, "pics": {}},
        "config": {"dataset_metric": pairs},
    }
    (run / "run.json").write_text(json.dumps(manifest))
    if status == "finished":
        rows = [
            {
                "dataset": d,
                "task": "t",
                "category": "c",
                "metric": m,
                "model": model,
                "score": 0.25,
                "ci_low": 0.1,
                "ci_high": 0.4,
                "n": len(ids) - (2 if model == "beta" and d == "speech" else 0),
                "n_failed": 2 if model == "beta" and d == "speech" else 0,
                "failure_rate": 0.1,
                "unreliable": False,
                "seconds": 1.0,
                "failure_reasons": {"timeout": 2} if model == "beta" and d == "speech" else {},
                "details": {"groups": {"gender": {"female": {"n": 5}, "male": {"n": 10}}}},
            }
            for d, m in pairs
            for model in models
        ]
        (run / "results.json").write_text(json.dumps({"run_id": run_id, "results": rows, "aggregate": []}))
    return run


# -- a real server in a thread ---------------------------------------------------------------------------------


class Served:
    def __init__(
        self, roots: list[Path], media_roots: list[Path] | None = None, key: str | None = None, **viewer: Any
    ) -> None:
        self.media_roots = media_roots
        self.key = key
        self.viewer = viewer
        self.sock = bind("127.0.0.1", 0)
        self.port = self.sock.getsockname()[1]
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.task: asyncio.Task[None] | None = None
        self.thread = threading.Thread(target=self._main, args=(roots,), daemon=True)
        self.thread.start()
        assert self.ready.wait(20), "the viewer did not start"

    def _main(self, roots: list[Path]) -> None:
        asyncio.set_event_loop(self.loop)
        viewer = Viewer(roots, self.media_roots, **self.viewer)
        self.task = self.loop.create_task(serve(viewer, self.sock, lambda url: self.ready.set(), self.key))
        with contextlib.suppress(asyncio.CancelledError):
            self.loop.run_until_complete(self.task)

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def page(self, path: str, status: int = 200) -> str:
        code, headers, body = self.get(path)
        assert code == status, (path, code, body[:500])
        return body.decode()

    def api(self, path: str, status: int = 200) -> Any:
        code, _, body = self.get(path)
        assert code == status, (path, code, body[:500])
        return json.loads(body)

    def stop(self) -> None:
        if self.task is not None:
            self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(20)


def speech_pair(viewer: Viewer) -> tuple[RunInfo, Pair]:
    """The :func:`make_run` run and its speech × word_error_rate pair, as the viewer found them."""
    run = viewer.catalog.get(RUN)
    assert run is not None
    pair = find_pair(run, "speech", "word_error_rate")
    assert pair is not None
    return run, pair


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A cache folder of the test's own; index builds the test started are ended with it."""
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    yield
    view_index.stop_builds()


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[Any]:
    servers: list[Served] = []

    def start(*roots: Path, media_roots: list[Path] | None = None, **viewer: Any) -> Served:
        """A viewer of ``roots``; the media of make_run's runs sit in ``<root>/media``, outside the run folders,
        so that folder is given as a user gives a dataset's folder (``--media-root``) unless the test says."""
        if media_roots is None:
            media_roots = [root / "media" for root in roots if (root / "media").is_dir()]
        server = Served(list(roots), media_roots, **viewer)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def wait_indexed(server: Served, run: str, dataset: str, metric: str) -> None:
    """Until the pair's index is built (its first request started the build in a child process)."""
    for _ in range(600):
        if server.api(pair_url(run, dataset, metric, api=True, per=1))["indexed"]:
            return
        time.sleep(0.05)
    raise AssertionError(f"{dataset} x {metric} was not indexed within 30 s")


def pair_url(run: str, dataset: str, metric: str, api: bool = False, **query: Any) -> str:
    base = f"{'/api' if api else ''}/run/{segment(run)}/pair/{segment(dataset)}/{segment(metric)}/"
    return base + ("?" + urlencode(query) if query else "")


def sample_url(run: str, dataset: str, metric: str, sample_id: str, api: bool = False) -> str:
    return ("/api" if api else "") + Links().sample(run, dataset, metric, sample_id)


# -- the pages -------------------------------------------------------------------------------------------------


def test_runs_and_results_link_each_cell_to_its_samples(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    make_run(tmp_path / "runs", OTHER, status="running")
    (tmp_path / "runs" / "not-a-run").mkdir()
    server = served(tmp_path / "runs")
    runs = server.api("/api/runs")["runs"]
    assert [r["run_id"] for r in runs] == [OTHER, RUN]  # newest first; a folder that is no run is not listed
    assert runs[0]["in_progress"] and runs[1]["status"] == "finished"
    assert runs[1]["models"] == ["alpha", "beta"] and runs[1]["datasets"] == ["speech", "pics"]
    listing = server.page("/")
    assert f'href="/run/{RUN}/"' in listing and "in progress" in listing
    page = server.page(f"/run/{RUN}/")
    # the score cell of beta on speech x wer links to beta's samples; its failed count to its failures
    assert f'href="/run/{RUN}/pair/speech/word_error_rate/?model=beta"' in page
    assert "model=beta&amp;failure=any" in page and "model=beta&amp;failure=timeout" in page
    running = server.page(f"/run/{OTHER}/")
    assert "in progress" in running and "no results.json yet" in running


def test_pair_filters_sort_page_and_search(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    server = served(tmp_path / "runs")
    first = server.api(pair_url(RUN, "speech", "word_error_rate", api=True))
    if not first["indexed"]:  # read from the file while the index is built: the choices come from results.json
        assert first["facets"]["groups"]["gender"] == {"female": 10, "male": 20} and first["total"] == 30
    wait_indexed(server, RUN, "speech", "word_error_rate")
    every = server.api(pair_url(RUN, "speech", "word_error_rate", api=True))
    assert every["total"] == 2 * 15 and len(every["rows"]) == 30
    assert every["facets"]["models"] == ["alpha", "beta"]
    assert every["facets"]["failures"] == {"timeout": 2}
    assert every["facets"]["groups"]["gender"] == {"female": 10, "male": 20}
    beta = server.api(pair_url(RUN, "speech", "word_error_rate", api=True, model="beta"))
    assert beta["total"] == 15 and {r["model"] for r in beta["rows"]} == {"beta"}
    failed = server.api(pair_url(RUN, "speech", "word_error_rate", api=True, failure="timeout"))
    assert sorted(r["sample_id"] for r in failed["rows"]) == ["utt003", "utt007"]
    assert "Timed out" in failed["rows"][0]["error"]
    scored = server.api(pair_url(RUN, "speech", "word_error_rate", api=True, failure="none", model="beta"))
    assert scored["total"] == 13
    ranged = server.api(pair_url(RUN, "speech", "word_error_rate", api=True, model="beta", min=0.3, max=0.4))
    assert ranged["rows"] and all(0.3 <= r["score"] <= 0.4 for r in ranged["rows"])
    women = server.api(pair_url(RUN, "speech", "word_error_rate", api=True, group="gender:female", model="alpha"))
    assert {r["row"] for r in women["rows"]} == {0, 3, 6, 9, 12}
    # text search: in the answer (beta's "word"), in the reference, and in the prompt as sent
    assert server.api(pair_url(RUN, "speech", "word_error_rate", api=True, q="WORD 5"))["total"] == 1
    assert server.api(pair_url(RUN, "speech", "word_error_rate", api=True, q="hello world 11"))["total"] == 2
    assert server.api(pair_url(RUN, "speech", "word_error_rate", api=True, q="clip number 4 <b>"))["total"] == 2
    ordered = server.api(pair_url(RUN, "speech", "word_error_rate", api=True, model="beta", sort="-score"))
    scores = [r["score"] for r in ordered["rows"]]
    assert scores[-2:] == [None, None] and scores[:-2] == sorted(scores[:-2], reverse=True)
    second = server.api(pair_url(RUN, "speech", "word_error_rate", api=True, per=4, page=2))
    assert second["page"] == 2 and second["pages"] == 8 and [r["row"] for r in second["rows"]] == [2, 2, 3, 3]
    html = server.page(pair_url(RUN, "speech", "word_error_rate", model="beta", per=4))
    assert 'rel="next"' in html and "15 matching records" in html
    assert '<option value="gender:female"' in html
    assert server.api(pair_url(RUN, "speech", "word_error_rate", api=True, min="abc"), 400)["error"].startswith("min=")
    assert "sort=" in server.page(pair_url(RUN, "speech", "word_error_rate", sort="nonsense"), 400)


def test_a_sample_shows_what_was_sent_every_answer_and_why_it_scored(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    server = served(tmp_path / "runs")
    page = server.page(sample_url(RUN, "speech", "word_error_rate", "utt003"))
    assert "You are a careful transcriber." in page and "Transcribe clip number 3 &lt;b&gt;now&lt;/b&gt;" in page
    assert "hello world 3" in page and "hello word 3" not in page  # beta failed this one: its message instead
    assert "Timed out after 10 s waiting for beta" in page and "timeout" in page
    assert "normalized_prediction" in page and "substitutions" in page
    sources = re.findall(r'<audio controls preload="metadata" src="([^"]+)"', page)
    assert len(sources) == 1
    code, headers, body = server.get(sources[0])
    assert code == 200 and headers["content-type"] == "audio/wav"
    clip, rate = sf.read(io.BytesIO(body))
    assert rate == 16000 and len(clip) == 16000  # cut to the 0.5-1.5 s that was sent
    embedded = server.page(sample_url(RUN, "speech", "word_error_rate", "utt004"))
    inside = re.findall(r'<audio controls preload="metadata" src="([^"]+)"', embedded)
    assert "clips.parquet row 1, column audio" in embedded and len(inside) == 1
    assert len(sf.read(io.BytesIO(server.get(inside[0])[2]))[0]) == 12000  # 0.75 s of the row's 2 s
    chunked = server.page(sample_url(RUN, "speech", "word_error_rate", "utt001"))
    chunks = re.findall(r'<audio controls preload="metadata" src="([^"]+)"', chunked)
    assert len(chunks) == 2 and "chunk 2 of 2" in chunked
    assert len(sf.read(io.BytesIO(server.get(chunks[1])[2]))[0]) == 16000
    pics = server.page(sample_url(RUN, "pics", "exact_match", "utt000"))
    image = re.findall(r'<img src="([^"]+)"', pics)
    assert len(image) == 1
    code, headers, body = server.get(image[0])
    assert code == 200 and headers["content-type"] == "image/png"
    assert body == (tmp_path / "runs" / "media" / "red.png").read_bytes()
    assert "the answer names the colour seen" in pics and "judge-x" in pics
    assert "crimson" in pics  # every reference


def test_hostile_sample_ids_and_answers_are_shown_as_text(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    server = served(tmp_path / "runs")
    for sid in EVIL_IDS:
        data = server.api(sample_url(RUN, "speech", "word_error_rate", sid, api=True))
        assert data["sample_id"] == sid and len(data["records"]) == 2
        code, headers, body = server.get(sample_url(RUN, "speech", "word_error_rate", sid))
        assert code == 200, (sid, body[:300])
        text = body.decode()
        assert "<script" not in text.lower()  # the id and the answer are escaped, never markup
        assert "script-src" not in headers["content-security-policy"]  # so no script may run at all
        assert "default-src 'none'" in headers["content-security-policy"]
    page = server.page(sample_url(RUN, "speech", "word_error_rate", EVIL_IDS[1]))
    assert "&lt;script&gt;document.title=&#x27;owned&#x27;&lt;/script&gt;" in page
    listing = server.page(pair_url(RUN, "speech", "word_error_rate", q="script"))
    assert "<script" not in listing.lower() and "&lt;script&gt;alert(1)" in listing
    # each id links to its own page: the encoded segment survives, and ".." travels in the query (a browser
    # would take even %2E%2E as a step up)
    listing = server.page(pair_url(RUN, "speech", "word_error_rate", model="alpha", per=500))
    assert f'href="/run/{RUN}/sample/speech/word_error_rate/?id=..">..</a>' in listing
    assert f'href="/run/{RUN}/sample/speech/word_error_rate/..%2F..%2Fetc%2Fpasswd"' in listing


def test_media_are_served_only_by_key_from_what_the_run_sent(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve")
    server = served(tmp_path / "runs")
    base = f"/run/{RUN}/media/speech"
    for path in (
        f"{base}/{quote('../../../secret.txt', safe='')}/0",
        f"{base}/0000000000000000/0",
        f"{base}/{quote(str(secret), safe='')}/0",
        f"/run/{RUN}/media/{quote('../..', safe='')}/x/0",
        f"{base}/line-abc/0",
    ):
        code, _, body = server.get(path)
        assert code == 404 and b"do not serve" not in body, path
    key = server.api(sample_url(RUN, "speech", "word_error_rate", "utt000", api=True))["conversations"][0]["key"]
    assert server.get(f"{base}/{key}/0")[0] == 200
    assert server.get(f"{base}/{key}/5")[0] == 404  # no such part
    assert server.get(f"{base}/{key}/0-9")[0] == 404  # no such chunk
    assert server.get(f"{base}/{key}/..%2F0")[0] == 404


def test_a_copied_run_shows_missing_media_as_missing(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    (tmp_path / "runs" / "media" / "tone.wav").unlink()
    (tmp_path / "runs" / "media" / "red.png").unlink()
    server = served(tmp_path / "runs")
    page = server.page(sample_url(RUN, "speech", "word_error_rate", "utt002"))
    assert "missing:" in page and "tone.wav is not on this machine" in page and "<audio" not in page
    pics = server.page(sample_url(RUN, "pics", "exact_match", "utt002"))
    assert "red.png is not on this machine" in pics and "<img" not in pics
    key = server.api(sample_url(RUN, "speech", "word_error_rate", "utt002", api=True))["conversations"][0]["key"]
    code, _, body = server.get(f"/run/{RUN}/media/speech/{key}/0")
    assert code == 404 and b"not on this machine" in body
    assert server.get("/")[0] == 200  # still serving


# -- bad input -------------------------------------------------------------------------------------------------


def test_cut_lines_runs_in_progress_and_empty_runs_are_said_not_raised(tmp_path: Path, served: Any) -> None:
    run = make_run(tmp_path / "runs", status="running")
    records = run / "records" / "speech__word_error_rate.jsonl"
    lines = records.read_bytes().splitlines(keepends=True)
    records.write_bytes(b"".join(lines[:10]) + b"{not json}\n" + b"".join(lines[10:20]) + lines[20][:25])
    empty = tmp_path / "runs" / "20261126-110000_cccccc"
    empty.mkdir()
    (empty / "run.json").write_text(json.dumps({"status": "failed", "models": ["alpha"]}))
    broken = tmp_path / "runs" / "20261126-100000_dddddd"
    (broken / "records").mkdir(parents=True)
    (broken / "run.json").write_text("{ this is not json")
    server = served(tmp_path / "runs")
    assert server.api(pair_url(RUN, "speech", "word_error_rate", api=True))["total"] == 20  # indexed or not
    wait_indexed(server, RUN, "speech", "word_error_rate")
    data = server.api(pair_url(RUN, "speech", "word_error_rate", api=True))
    assert data["total"] == 20 and data["in_progress"]
    said = " ".join(data["problems"])
    assert "in progress" in said and "cut mid-write" in said and "line 11" in said
    html = server.page(pair_url(RUN, "speech", "word_error_rate"))
    assert "cut mid-write" in html
    # the run goes on: the file grows and the index reads on from where it stopped
    records.write_bytes(b"".join(lines[:10]) + b"{not json}\n" + b"".join(lines[10:]))
    assert server.api(pair_url(RUN, "speech", "word_error_rate", api=True))["total"] == len(lines)
    assert "no records in this run folder" in server.page("/run/20261126-110000_cccccc/")
    assert "run.json is unreadable" in server.page("/")
    assert "run.json is unreadable" in server.page("/run/20261126-100000_dddddd/")
    assert "has no pair x × y" in server.page(pair_url("20261126-100000_dddddd", "x", "y"), 404)
    assert server.get("/run/nope/")[0] == 404
    assert server.get(sample_url(RUN, "speech", "word_error_rate", "no-such-sample"))[0] == 404
    assert server.get("/")[0] == 200


def test_the_index_lives_in_the_cache_and_follows_a_rewritten_file(tmp_path: Path, served: Any) -> None:
    run = make_run(tmp_path / "runs")
    for path in [run, *run.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        viewer = Viewer([tmp_path / "runs"])
        info = viewer.catalog.get(RUN)
        assert info is not None
        viewer.sources(info, find_pair(info, "speech", "word_error_rate"))  # type: ignore[arg-type]
        assert viewer.pair(RUN, "speech", "word_error_rate", {})["total"] == 30
        made = sorted(p.name for p in (tmp_path / "cache" / "view").iterdir())
        assert len(made) == 2 and all(p.endswith(".sqlite") for p in made)  # records + sent, none in the run
        assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*")) == sorted(
            ["records", "records/sent", "records/sent/speech.jsonl", "records/sent/pics.jsonl", "run.json"]
            + ["records/speech__word_error_rate.jsonl", "records/pics__exact_match.jsonl", "results.json"]
        )
    finally:
        for path in [run, *run.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    records = run / "records" / "speech__word_error_rate.jsonl"
    kept = records.read_text().splitlines()[:6]
    records.write_text("\n".join(kept) + "\n")  # a rescore wrote it again, shorter
    os.utime(records, ns=(1, 1))
    assert viewer.pair(RUN, "speech", "word_error_rate", {})["total"] == 6  # read from the file, or indexed anew
    viewer.sources(info, find_pair(info, "speech", "word_error_rate"))  # type: ignore[arg-type]
    again = viewer.pair(RUN, "speech", "word_error_rate", {})
    assert again["indexed"] and again["total"] == 6
    assert view_index.index_path(records, "records").parent == tmp_path / "cache" / "view"


def test_records_without_the_new_fields_still_show(tmp_path: Path, served: Any) -> None:
    """A run made before issue 32: no row, groups, sent or stats; images named by the record only."""
    run = tmp_path / "runs" / "20250101-000000_old000"
    _png(tmp_path / "blue.png", (0, 0, 200))
    old = [
        {
            "sample_id": f"q{i}",
            "model": "m",
            "dataset": "vqa",
            "metric": "exact_match",
            "reference": "blue",
            "response": "Blue." if i else "green",
            "prediction": "blue" if i else "green",
            "score": 1.0 if i else 0.0,
            "details": {"answers": ["blue", "navy", "blue"]},
            "latency": 0.1,
            "attempts": 1,
            "cached": False,
            "replica": None,
            "images": [{"path": str(tmp_path / "blue.png"), "sha256": "1" * 64, "format": "png"}],
            "prompt": {"pool": "vqa_default", "index": 2},
        }
        for i in range(3)
    ]
    _jsonl(run / "records" / "vqa__exact_match.jsonl", old)
    server = served(tmp_path / "runs", media_roots=[tmp_path])
    page = server.page(sample_url("20250101-000000_old000", "vqa", "exact_match", "q0"))
    assert "green" in page and "navy" in page and "vqa_default" in page and "did not record the prompt" in page
    image = re.findall(r'<img src="([^"]+)"', page)
    assert image and server.get(image[0])[2] == (tmp_path / "blue.png").read_bytes()
    listing = server.api(pair_url("20250101-000000_old000", "vqa", "exact_match", api=True, q="navy"))
    assert listing["total"] == 0  # details are not searched; answers and references are
    assert server.api(pair_url("20250101-000000_old000", "vqa", "exact_match", api=True, q="green"))["total"] == 1


def test_compare_two_runs_lists_the_samples_whose_score_changed(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    make_run(tmp_path / "runs", OTHER, shift=4)
    server = served(tmp_path / "runs")
    query = urlencode({"a": f"{RUN}:alpha", "b": f"{OTHER}:alpha", "pair": "speech/word_error_rate"})
    data = server.api(f"/api/compare/?{query}")
    assert data["compared"] == 15 and data["changed"] == 4 and data["higher_in_b"] == 4
    assert [r["sample_id"] for r in data["rows"]] == ["utt003", "utt002", "utt001", "utt000"]  # biggest first
    assert data["rows"][0]["answer_b"] == "something else entirely"
    stats = data["statistics"]
    assert stats["n_paired"] == 15 and stats["diff"] > 0 and stats["test"] == "paired bootstrap", stats
    assert stats["changed"] == 4 and 0 < stats["p_value"] <= 1
    page = server.page(f"/compare/?{query}")
    assert "4 changed score" in page and "something else entirely" in page and "Paired test" in page
    models = urlencode({"a": f"{RUN}:alpha", "b": f"{RUN}:beta", "pair": "speech/word_error_rate"})
    both = server.api(f"/api/compare/?{models}")
    assert both["compared"] == 15 and both["changed"] == 12  # rows 0, 5 and 10 score 0 for both
    wrong = urlencode({"a": f"{RUN}:zeta", "b": RUN, "pair": "speech/word_error_rate"})
    assert "no model 'zeta'" in server.api(f"/api/compare/?{wrong}", 404)["error"]
    assert server.page("/compare/")  # an empty form


def test_the_compare_page_pages_through_the_changed_samples(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs", n=300)
    server = served(tmp_path / "runs")
    params = {"a": f"{RUN}:alpha", "b": f"{RUN}:beta", "pair": "speech/word_error_rate"}
    first = server.api(f"/api/compare/?{urlencode(params)}")
    rest = server.api(f"/api/compare/?{urlencode({**params, 'offset': '200'})}")
    assert first["changed"] == rest["changed"] > 200 and len(first["rows"]) == 200
    ids = [r["sample_id"] for r in first["rows"] + rest["rows"]]
    assert len(ids) == len(set(ids)) == first["changed"]  # every change once, in the order of one long list
    assert first["statistics"] == rest["statistics"]
    page = server.page(f"/compare/?{urlencode(params)}")
    assert f"changes 1-200 of {first['changed']}" in page
    assert 'offset=200">next ' in page.replace("&amp;", "&")
    later = server.page(f"/compare/?{urlencode({**params, 'offset': '200'})}").replace("&amp;", "&")
    assert 'offset=0">previous 200' in later and rest["rows"][0]["sample_id"] in later
    for bad in ("-1", "x", "1e3", "99999999999"):
        assert "offset=" in server.api(f"/api/compare/?{urlencode({**params, 'offset': bad})}", 400)["error"]
        server.page(f"/compare/?{urlencode({**params, 'offset': bad})}", 400)


def test_the_compare_form_offers_the_runs_and_pairs_one_model_runs_of_other_names(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs", "run-small", models=("small",))
    make_run(tmp_path / "runs", "run-large", models=("large",), shift=4)
    server = served(tmp_path / "runs")
    assert 'href="/compare/"' in server.page("/")  # the runs list leads to the form
    form = server.page("/compare/")
    for offered in ("run-small", "run-large", "run-small:small", "run-large:large", "speech/word_error_rate"):
        assert f'<option value="{offered}">' in form, offered
    assert 'list="compare-runs"' in form and 'list="compare-pairs"' in form
    # picked as offered, without models: each run's only model, though their names differ
    query = urlencode({"a": "run-small", "b": "run-large", "pair": "speech/word_error_rate"})
    data = server.api(f"/api/compare/?{query}")
    assert (data["a"]["model"], data["b"]["model"]) == ("small", "large")
    assert data["compared"] == 15 and data["changed"] == 4


def _js_data(path: Path) -> Any:
    """The JSON a data file of the export hands to its page (``window.X(...);`` or ``window.X = ...;``)."""
    text = path.read_text(encoding="utf-8")
    start = text.index("(") + 1 if text.startswith("window.EVALKIT_") and "(" in text.split("\n", 1)[0][:40] else None
    body = text[start : text.rindex(")")] if start is not None else text[text.index("=") + 1 : text.rindex(";")]
    return json.loads(body)


def _chunks(pair_dir: Path) -> dict[str, Any]:
    """Every chunk file of an exported pair read back: its records, sent entries and media, by chunk number."""
    return {p.stem: _js_data(p) for p in (pair_dir / "samples").glob("*.js")}


def test_export_writes_a_static_site_with_relative_links(tmp_path: Path) -> None:
    make_run(tmp_path / "runs")
    out = tmp_path / "site"
    runs = tmp_path / "runs"
    done = evalkit_cli(
        ["view", str(runs), "--export", str(out), "--media-root", str(runs / "media")], tmp_path, env={**os.environ}
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"60 records of 30 samples in 2 pair\(s\): about [\d,]+ MB in about \d+ files", done.stderr)
    assert (out / "index.html").is_file() and (out / "static" / "view.js").is_file()
    assert (out / "static" / "sample.js").is_file()
    pages_written = list(out.rglob("*.html"))
    assert len(pages_written) == 1 + 1 + 2 * 3  # runs, run, per pair: samples, the sample page, alpha vs beta
    run_page = next(out.glob("r/*/index.html"))
    compares = re.findall(r'href="([^"]*c-[0-9a-f]{20}\.html)"', run_page.read_text())
    assert len(compares) == 2 and all((run_page.parent / h).is_file() for h in compares)
    compared_file = run_page.parent / next(h for h in compares if "speech" in h)
    compared = compared_file.read_text()
    assert "Paired test" in compared and "<form" not in compared and "utt001" in compared
    sample_links = [h for h in re.findall(r'href="([^"]+)"', compared) if "sample.html#" in h]
    assert sample_links and all((compared_file.parent / h.split("#")[0]).is_file() for h in sample_links)
    for page in pages_written:
        text = page.read_text()
        assert 'href="/' not in text and 'src="/' not in text, page  # nothing that needs a server
        assert "<script>" not in text  # scripts only by src
    pair = next(p for p in out.rglob("index.html") if "speech" in p.parent.name)
    data = _js_data(pair.parent / "data.js")
    assert data["records"] == 30 and data["files"] == ["rows/0001.js"]
    rows = _js_data(pair.parent / data["files"][0])
    assert len(rows) == 30 and {"sample_id", "score", "groups", "text", "href"} <= set(rows[0])
    chunks = _chunks(pair.parent)
    for r in rows:
        page, _, where = r["href"].partition("#")
        chunk, _, sid = where.partition("/")
        assert page == "sample.html" and (pair.parent / page).is_file()
        assert any(rec["sample_id"] == r["sample_id"] for rec in chunks[chunk]["records"]), r
    # every record once, every sample's sent entry beside its records, and its media linked to written files
    records = [rec for c in chunks.values() for rec in c["records"]]
    lines = [json.loads(line) for line in (runs / RUN / "records" / "speech__word_error_rate.jsonl").open()]
    assert sorted(map(json.dumps, records)) == sorted(map(json.dumps, lines))
    for c in chunks.values():
        sids = {rec["sample_id"] for rec in c["records"]}
        assert {e["sample_id"] for e in c["sent"]} == sids
        for sid, convs in c["media"].items():
            assert sid in sids
            srcs = [clip["src"] for conv in convs for part in conv["media"] for clip in part.get("clips") or []]
            assert all((pair.parent / src).is_file() for src in srcs), srcs
    wavs = list(out.rglob("*.wav"))
    assert len(wavs) == 15 + 1  # one clip per sample (one from a parquet row), the chunked one as two
    assert len(sf.read(wavs[0])[0]) > 0
    assert list(out.rglob("*.png"))


def test_an_export_in_pages_holds_every_record_once_in_few_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row files of 7 records, chunk files of about 4 samples: the site is complete, and its file count is what
    the sizes say (not one file a sample)."""
    from evalkit.view import export

    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(export, "ROWS_PER_FILE", 7)
    monkeypatch.setattr(export, "SAMPLES_PER_CHUNK", 4)
    make_run(tmp_path / "runs", n=40)
    said: list[str] = []
    runs = tmp_path / "runs"
    written = export.export_site(
        [runs], tmp_path / "site", [runs / "media"], export.Selection(media_samples=2), said.append
    )
    files = [p for p in (tmp_path / "site").rglob("*") if p.is_file()]
    media = [p for p in files if p.suffix in (".wav", ".png")]
    source = runs / RUN / "records" / "speech__word_error_rate.jsonl"
    lines = [json.loads(line) for line in source.open()]
    samples = len({r["sample_id"] for r in lines})
    assert len(lines) > 7 * 4 and samples > 4 * 4
    row_files, chunk_files = -(-len(lines) // 7), -(-samples // 4)
    # per pair (both pairs have as many records): 2 pages, data.js, the comparison, row files, chunk files
    assert len(files) - len(media) == 4 + 1 + 2 * (2 + 1 + 1 + row_files + chunk_files) and written == len(files)
    assert 0 < len(media) <= 2 * 3
    assert "indexing speech__word_error_rate.jsonl" in said[0]
    assert f"{2 * len(lines)} records of {2 * samples} samples in 2 pair(s)" in said[-1]
    pair = next((tmp_path / "site").rglob("speech__word_error_rate"))
    data = _js_data(pair / "data.js")
    rows = [r for name in data["files"] for r in _js_data(pair / name)]
    assert len(data["files"]) == row_files and len(rows) == data["records"] == len(lines)
    assert sorted(r["line"] for r in rows) == list(range(1, len(lines) + 1))
    records = [rec for c in _chunks(pair).values() for rec in c["records"]]
    assert sorted(map(json.dumps, records)) == sorted(map(json.dumps, lines))
    with_media = [sid for c in _chunks(pair).values() for sid in c["media"]]
    assert len(with_media) == 2  # the others' pages say their media are not in the export


def test_an_export_of_a_part_takes_the_chosen_samples_with_all_their_records(tmp_path: Path) -> None:
    make_run(tmp_path / "runs")
    runs = tmp_path / "runs"
    first = evalkit_cli(["view", str(runs), "--export", str(tmp_path / "a"), "--samples", "4"], tmp_path)
    assert first.returncode == 0, first.stderr
    assert "16 records of 8 samples in 2 pair(s) (a part" in first.stderr
    pair = next((tmp_path / "a").rglob("speech__word_error_rate"))
    rows = _js_data(pair / "rows" / "0001.js")
    assert sorted({r["row"] for r in rows}) == [0, 1, 2, 3] and len(rows) == 8
    failed = evalkit_cli(["view", str(runs), "--export", str(tmp_path / "b"), "--filter", "failure=timeout"], tmp_path)
    assert failed.returncode == 0, failed.stderr
    pair = next((tmp_path / "b").rglob("speech__word_error_rate"))
    rows = _js_data(pair / "rows" / "0001.js")
    # beta timed out on samples 3 and 7: both samples, with alpha's records beside beta's
    assert sorted((r["row"], r["model"]) for r in rows) == [(3, "alpha"), (3, "beta"), (7, "alpha"), (7, "beta")]
    wrong = evalkit_cli(["view", str(runs), "--export", str(tmp_path / "c"), "--filter", "colour=red"], tmp_path)
    assert wrong.returncode == 2 and "unknown key 'colour'" in wrong.stderr and "Traceback" not in wrong.stderr
    alone = evalkit_cli(["view", str(runs), "--samples", "3", "--no-browser"], tmp_path)
    assert alone.returncode == 2 and "give --export DIR" in alone.stderr


def test_the_command_prints_its_url_and_names_bad_folders(tmp_path: Path) -> None:
    make_run(tmp_path / "runs")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalkit", "view", "runs", "--no-browser", "--port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.fullmatch(r"evalkit view: http://127\.0\.0\.1:(\d+)/\n", line)
        assert found, (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        conn = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=30)
        conn.request("GET", "/")
        assert RUN in conn.getresponse().read().decode()
        conn.close()
    finally:
        proc.terminate()
        proc.wait(20)
    done = evalkit_cli(["view", str(tmp_path / "nowhere"), "--no-browser"], tmp_path)
    assert done.returncode == 2 and "nowhere is not a folder" in done.stderr and "Traceback" not in done.stderr
    help_text = evalkit_cli(["view", "--help"], tmp_path).stdout
    assert "--export" in help_text and "--no-browser" in help_text


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"model": "beta", "sort": "-score"},
        {"model": "alpha", "sort": "score", "per": "3", "page": "2"},
        {"failure": "timeout"},
        {"failure": "none", "min": "0.2", "max": "0.4"},
        {"failure": "any"},
        {"group": "gender:female", "sort": "id"},
        {"q": "WORD 1"},
        {"q": "clip number 1 <b>", "model": "alpha"},
        {"q": "<script>"},
        {"q": "STRASSE", "sort": "-score"},
    ],
)
def test_reading_the_file_answers_as_the_index_does(tmp_path: Path, query: dict[str, str]) -> None:
    """While the index is built, pages read the file: the same records, in the same order, on the same page."""
    make_run(tmp_path / "runs")
    viewer = Viewer([tmp_path / "runs"])
    run = viewer.catalog.get(RUN)
    assert run is not None
    pair = find_pair(run, "speech", "word_error_rate")
    assert pair is not None
    f = PairFilter.parse(query)
    indexed = samples_page(viewer.sources(run, pair), f)
    read = scan.samples_page(pair.records, pair.sent, f)
    assert read == indexed and indexed["total"] > 0


def _engine_order(path: Path, every: int) -> None:
    """Rewrite a records file so every ``every``-th record is written as the engine writes it (its keys' order)
    and a line cut mid-write (then followed by a newline, as after a kill) sits in the middle."""
    from evalkit.util import jsonutil

    head = ("sample_id", "model", "dataset", "metric", "row", "groups", "reference")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    lines = []
    for i, rec in enumerate(records):
        if i % every == 0:
            rec = {**{k: rec[k] for k in head if k in rec}, **rec}
        lines.append(jsonutil.dumps_bytes(rec))
    cut = lines[3][: len(lines[3]) // 2]
    path.write_bytes(b"\n".join([*lines[:5], cut, *lines[5:]]) + b"\n")


@pytest.mark.parametrize(
    "query",
    [{}, {"model": "alpha"}, {"sort": "id"}, {"model": "beta", "sort": "id", "per": "3", "page": "2"}, {"per": "5"}],
)
def test_records_read_by_their_head_answer_as_the_index_does(tmp_path: Path, query: dict[str, str]) -> None:
    """Lines written in the engine's key order are placed without parsing them; the answer is still the index's."""
    make_run(tmp_path / "runs")
    viewer = Viewer([tmp_path / "runs"])
    run = viewer.catalog.get(RUN)
    assert run is not None
    pair = find_pair(run, "speech", "word_error_rate")
    assert pair is not None
    _engine_order(pair.records, every=2)
    f = PairFilter.parse(query)
    indexed = samples_page(viewer.sources(run, pair), f)
    read = scan.samples_page(pair.records, pair.sent, f)
    assert read == indexed and indexed["total"] > 0
    assert any(scan._ENGINE_HEAD.match(line) for line in pair.records.read_bytes().splitlines())


def test_a_read_answer_is_kept_until_the_file_changes(tmp_path: Path) -> None:
    make_run(tmp_path / "runs")
    viewer = Viewer([tmp_path / "runs"])
    run = viewer.catalog.get(RUN)
    assert run is not None
    pair = find_pair(run, "speech", "word_error_rate")
    assert pair is not None
    f = PairFilter.parse({"model": "alpha"})
    first = scan.samples_page(pair.records, pair.sent, f)
    assert scan.samples_page(pair.records, pair.sent, f) is first
    last = pair.records.read_bytes().splitlines()[0]
    with pair.records.open("ab") as out:  # the run goes on: one more record of alpha
        out.write(last.replace(b'"utt000"', b'"utt999"') + b"\n")
    again = scan.samples_page(pair.records, pair.sent, f)
    assert again["total"] == first["total"] + 1


def test_the_viewer_indexes_its_runs_before_any_page_asks(tmp_path: Path, served: Any) -> None:
    """From its start the viewer builds the indexes of its runs' pairs, so a first click finds them ready."""
    make_run(tmp_path / "runs")
    make_run(tmp_path / "runs", "20261126-130000_bbbbbb")
    files = sorted((tmp_path / "runs").glob("*/records/**/*.jsonl"))
    assert len(files) == 8  # 2 runs x (2 records files + 2 sent files)
    assert all(view_index.status(p, "sent" if p.parent.name == "sent" else "records") == "build" for p in files)
    served(tmp_path / "runs")  # no request at all
    deadline = time.monotonic() + 60
    waiting = files
    while waiting and time.monotonic() < deadline:
        time.sleep(0.2)
        waiting = [
            p for p in waiting if view_index.status(p, "sent" if p.parent.name == "sent" else "records") != "ready"
        ]
    assert not waiting, f"not indexed within 60 s: {waiting}"
    assert not any((tmp_path / "runs").glob("*/**/*.sqlite*"))  # never written into the run folders


def _hub_ref(repo: str, row: int, column: str, **more: Any) -> dict[str, Any]:
    return {
        "hub": {"repo": repo, "config": None, "split": "test", "revision": None, "row": row, "column": column, **more}
    }


def _point_sent_at_hub(sent: Path, sample_id: str, kind: str, ref: dict[str, Any]) -> None:
    """Make the sent entry of one sample name a hub row for its audio or image, as a run on a hub dataset writes it."""
    entries = [json.loads(line) for line in sent.read_text().splitlines()]
    for entry in entries:
        if entry["sample_id"] == sample_id:
            for message in entry["messages"]:
                for part in message["content"]:
                    if part["type"] == kind:
                        kept = {k: v for k, v in part[kind].items() if k not in ("path", "file")}
                        part[kind] = {**kept, **ref}
    sent.write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_media_of_hub_rows_come_from_the_local_hub_store(tmp_path: Path, served: Any) -> None:
    """A hub row's clip is cut from evalkit's stored copy of the dataset; a row not stored says how to store it."""
    from evalkit.catalog import DatasetSpec
    from evalkit.data.hubcache import HubRowCache

    green, blue = io.BytesIO(), io.BytesIO()
    Image.new("RGB", (8, 6), (0, 200, 0)).save(green, format="PNG")
    Image.new("RGB", (8, 6), (0, 0, 200)).save(blue, format="PNG")
    rows = [
        {"id": f"h{i}", "audio": {"bytes": tone_wav(220.0 * (i + 1), 2.0), "path": f"h{i}.flac"},
         "images": [{"bytes": green.getvalue(), "path": None}, {"bytes": blue.getvalue(), "path": None}]}
        for i in range(3)
    ]  # fmt: skip
    spec = DatasetSpec(
        name="tiny_speech", task="asr", category="c", file="x.json", hf_repo="org/tiny_speech", language="en"
    )
    stored = list(HubRowCache(spec).extend(lambda: iter(rows)))  # what `evalkit fetch` leaves, no network
    assert len(stored) == 3 and (tmp_path / "cache" / "hub").is_dir()

    run = make_run(tmp_path / "runs")
    sent = run / "records" / "sent"
    _point_sent_at_hub(sent / "speech.jsonl", "utt002", "audio", _hub_ref("org/tiny_speech", 1, "audio"))
    _point_sent_at_hub(sent / "speech.jsonl", "utt005", "audio", _hub_ref("org/not_here", 5, "audio"))
    _point_sent_at_hub(sent / "pics.jsonl", "utt002", "image", _hub_ref("org/tiny_speech", 2, "images", item=1))
    server = served(tmp_path / "runs")

    found = server.api(sample_url(RUN, "speech", "word_error_rate", "utt002", api=True))["conversations"][0]
    assert found["media"][0]["missing"] is None and "org/tiny_speech" in found["media"][0]["where"]
    code, headers, body = server.get(f"/run/{RUN}/media/speech/{found['key']}/0")
    assert code == 200 and headers["content-type"] == "audio/wav"
    clip, rate = sf.read(io.BytesIO(body), dtype="float32")
    whole, _ = sf.read(io.BytesIO(rows[1]["audio"]["bytes"]), dtype="float32")  # type: ignore[index]
    assert rate == 16000 and len(clip) == 16000  # cut to the sent bounds, 0.5 s to 1.5 s
    assert np.allclose(clip, whole[8000:24000], atol=1e-4)
    assert "<audio" in server.page(sample_url(RUN, "speech", "word_error_rate", "utt002"))

    pic = server.api(sample_url(RUN, "pics", "exact_match", "utt002", api=True))["conversations"][0]
    code, headers, body = server.get(f"/run/{RUN}/media/pics/{pic['key']}/0")
    assert code == 200 and headers["content-type"] == "image/png" and body == blue.getvalue()

    absent = "not available offline: org/not_here row 5 (evalkit fetch speech stores it)"
    page = server.page(sample_url(RUN, "speech", "word_error_rate", "utt005"))
    assert absent in page and "<audio" not in page
    key = server.api(sample_url(RUN, "speech", "word_error_rate", "utt005", api=True))["conversations"][0]["key"]
    code, _, body = server.get(f"/run/{RUN}/media/speech/{key}/0")
    assert code == 404 and absent.encode() in body


def test_audio_answers_byte_ranges_as_browsers_seek(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    server = served(tmp_path / "runs")
    key = server.api(sample_url(RUN, "speech", "word_error_rate", "utt000", api=True))["conversations"][0]["key"]
    path = f"/run/{RUN}/media/speech/{key}/0"
    code, headers, whole = server.get(path)
    assert code == 200 and headers["accept-ranges"] == "bytes" and len(whole) > 1000

    def ranged(value: str) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            conn.request("GET", path, headers={"Range": value})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    size = len(whole)
    code, headers, body = ranged("bytes=100-199")
    assert code == 206 and body == whole[100:200] and headers["content-range"] == f"bytes 100-199/{size}"
    code, headers, body = ranged("bytes=1000-")
    assert code == 206 and body == whole[1000:] and headers["content-range"] == f"bytes 1000-{size - 1}/{size}"
    code, _, body = ranged("bytes=-44")
    assert code == 206 and body == whole[-44:]
    code, headers, _ = ranged(f"bytes={size}-")
    assert code == 416 and headers["content-range"] == f"bytes */{size}"
    assert ranged("bytes=0-1,5-9")[0] == 200 and ranged("lines=1-2")[2] == whole  # served whole


def test_reading_the_file_a_small_window_at_a_time_answers_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is searched mapped a window at a time (the viewer's memory stays small): lines across windows, and
    one longer than a window, are found all the same."""
    import mmap

    make_run(tmp_path / "runs", n=60)
    viewer = Viewer([tmp_path / "runs"])
    run = viewer.catalog.get(RUN)
    assert run is not None
    pair = find_pair(run, "speech", "word_error_rate")
    assert pair is not None
    lines = pair.records.read_bytes().splitlines()
    long = json.loads(lines[7])
    long["response"] = "very long answer " * 2000  # ~34 KB: longer than a window
    lines.insert(20, json.dumps(long).encode())
    pair.records.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(scan, "_WINDOW", mmap.ALLOCATIONGRANULARITY)
    assert pair.records.stat().st_size > 8 * mmap.ALLOCATIONGRANULARITY
    for query in ({"model": "beta"}, {"model": "alpha", "sort": "-score", "per": "7", "page": "3"}, {"failure": "any"}):
        f = PairFilter.parse(query)
        indexed = samples_page(viewer.sources(run, pair), f)
        assert scan.samples_page(pair.records, pair.sent, f) == indexed and indexed["total"] > 0


def test_opening_a_run_indexes_its_pairs_first(tmp_path: Path, served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run beyond the newest ones indexed at start is indexed once its page is opened, before any pair is asked."""
    from evalkit.view import warm

    monkeypatch.setattr(warm, "WARM_RUNS", 0)  # nothing indexed at start
    make_run(tmp_path / "runs")
    other = make_run(tmp_path / "runs", "20261126-130000_bbbbbb")
    server = served(tmp_path / "runs")
    time.sleep(0.5)
    assert not any((tmp_path / "cache" / "view").glob("*.sqlite"))
    server.page(f"/run/{RUN}/")
    wanted = [p for p in (tmp_path / "runs" / RUN / "records").glob("*.jsonl")]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(view_index.status(p, "records") != "ready" for p in wanted):
        time.sleep(0.2)
    assert all(view_index.status(p, "records") == "ready" for p in wanted)
    assert all(view_index.status(p, "records") == "build" for p in (other / "records").glob("*.jsonl"))


def test_a_conversation_shows_each_turns_answer_and_the_tools_offered(tmp_path: Path, served: Any) -> None:
    """MT-Bench's judge rates every turn: the sample page shows each turn's answer; BFCL's offered tools show too."""
    run = tmp_path / "runs" / "20260101-000000_turns0"
    tools = [{"type": "function", "function": {"name": "math_factorial", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Write a haiku."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Autumn moon rises"}]},
        {"role": "user", "content": [{"type": "text", "text": "Now make it rhyme."}]},
    ]
    entry = {"key": "k" * 16, "dataset": "chat", "sample_id": "q1", "requests": 2, "kind": "chat"}
    params = {"temperature": 0.0, "top_k": 7, "chat_template_kwargs": {"enable_thinking": False}}
    _jsonl(run / "records" / "sent" / "chat.jsonl", [{**entry, "messages": messages, "tools": tools, "params": params}])
    record = {
        "sample_id": "q1",
        "row": 0,
        "model": "m",
        "dataset": "chat",
        "metric": "mt_bench_llm_judge",
        "reference": None,
        "response": "Moon in june, a tune",
        "answers": ["Autumn moon rises", "Moon in june, a tune"],
        "prediction": "Moon in june, a tune",
        "score": 70.0,
        "details": {"ratings": [8, 6]},
        "sent": "k" * 16,
        "latency": 0.1,
        "attempts": 1,
        "cached": False,
        "replica": None,
    }
    _jsonl(run / "records" / "chat__mt_bench_llm_judge.jsonl", [record])
    server = served(tmp_path / "runs")
    page = server.page(sample_url(run.name, "chat", "mt_bench_llm_judge", "q1"))
    assert "each turn&#x27;s answer" in page or "each turn's answer" in page
    assert page.index("turn 1") < page.index("Autumn moon rises", page.index("turn 1")) < page.index("turn 2")
    assert "tools offered" in page and "math_factorial" in page
    assert "request fields" in page and "&quot;top_k&quot;: 7" in page and "enable_thinking" in page

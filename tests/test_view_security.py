"""`evalkit view`, its export and `evalkit report` against hostile run folders and foreign web pages.

A run folder is input someone else may have made: its sent entries name any
path, its files may be links out of it, a line may be 300 MB. The viewer is a
local web server any page in the browser can address. Each test here builds
the hostile case with real files (a "private key", symlinks, a huge line) and
asks a real viewer on loopback over HTTP, or runs the command.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import evalkit_cli
from test_view import RUN, Served, make_run, pair_url, sample_url, wait_indexed

from evalkit.util.confine import MAX_LINE_BYTES
from evalkit.view import index as view_index


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    yield
    view_index.stop_builds()


@pytest.fixture()
def served() -> Iterator[Any]:
    """Viewers on loopback; make_run's media folder is given as a user gives a dataset's (``--media-root``)."""
    servers: list[Served] = []

    def start(*roots: Path, media_roots: list[Path] | None = None, **viewer: Any) -> Served:
        if media_roots is None:
            media_roots = [root / "media" for root in roots if (root / "media").is_dir()]
        servers.append(Served(list(roots), media_roots, **viewer))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA-SECRET-MATERIAL\n"
NOTES = b"PRIVATE-NOTES: the first bytes of a file that is not audio\n"


def _rewrite(path: Path, change: Any) -> None:
    """Rewrite a JSONL file entry by entry (``change`` edits an entry in place)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        change(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _point(run: Path, dataset: str, sample_id: str, kind: str, ref: dict[str, Any]) -> None:
    """Make the sent entry of ``sample_id`` name ``ref`` as its audio or image (its key stays)."""

    def change(entry: dict[str, Any]) -> None:
        if entry["sample_id"] == sample_id:
            for message in entry["messages"]:
                for part in message["content"]:
                    if part["type"] == kind:
                        part[kind] = ref

    _rewrite(run / "records" / "sent" / f"{dataset}.jsonl", change)


def _media_urls(page: str) -> list[str]:
    return re.findall(r'(?:<img|<audio controls preload="metadata") src="([^"]+)"', page)


def _hostile_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run whose sent entries name a private key (directly and through a link in the run folder) and a
    text file as audio; the run's own copy of a clip, inside its folder."""
    run = make_run(tmp_path / "runs")
    secret = tmp_path / "home" / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(SECRET)
    (run / "innocent.png").symlink_to(secret)
    (tmp_path / "runs" / "media" / "notes.txt").write_bytes(NOTES)
    shutil.copy(tmp_path / "runs" / "media" / "tone.wav", run / "clip.wav")
    _point(run, "pics", "utt000", "image", {"path": str(secret), "format": "png"})
    _point(run, "pics", "utt001", "image", {"path": str(run / "innocent.png"), "format": "png"})
    _point(run, "pics", "utt002", "image", {"path": "../../home/.ssh/id_rsa", "format": "png"})
    _point(run, "speech", "utt000", "audio", {"path": str(secret), "start": 0.0, "end": 1.0})
    _point(run, "speech", "utt002", "audio", {"path": str(tmp_path / "runs" / "media" / "notes.txt")})
    _point(run, "speech", "utt005", "audio", {"path": str(run / "clip.wav"), "start": 0.0, "end": 1.0})
    return run, secret


def test_a_file_a_run_names_outside_its_folders_is_never_read(tmp_path: Path, served: Any) -> None:
    _hostile_run(tmp_path)
    server = served(tmp_path / "runs")
    for sample_id in ("utt000", "utt001", "utt002"):
        page = server.page(sample_url(RUN, "pics", "exact_match", sample_id))
        assert "outside the run folder" in page and not _media_urls(page), sample_id
        api = server.api(sample_url(RUN, "pics", "exact_match", sample_id, api=True))
        key = api["conversations"][0]["key"]
        code, headers, body = server.get(f"/run/{RUN}/media/pics/{key}/0")
        assert code == 404 and b"SECRET" not in body and b"PRIVATE KEY" not in body, (sample_id, code)
    speech = server.page(sample_url(RUN, "speech", "word_error_rate", "utt000"))
    assert "outside the run folder" in speech and "<audio" not in speech
    # a text file given as audio (inside a folder the user gave): named unreadable, its bytes never quoted
    key = server.api(sample_url(RUN, "speech", "word_error_rate", "utt002", api=True))["conversations"][0]["key"]
    code, _, body = server.get(f"/run/{RUN}/media/speech/{key}/0")
    assert code == 404 and b"not audio" in body and b"PRIVATE-NOTES" not in body
    # what the run keeps inside its own folder is served, and the dataset folder the user gave
    own = server.page(sample_url(RUN, "speech", "word_error_rate", "utt005"))
    (source,) = _media_urls(own)
    code, headers, body = server.get(source.replace("&amp;", "&"))
    assert code == 200 and headers["content-type"] == "audio/wav" and body[:4] == b"RIFF"
    given = server.page(sample_url(RUN, "pics", "exact_match", "utt003"))
    assert server.get(_media_urls(given)[0])[0] == 200


def test_without_media_roots_only_the_run_folder_is_read(tmp_path: Path, served: Any) -> None:
    _hostile_run(tmp_path)
    server = served(tmp_path / "runs", media_roots=[])
    page = server.page(sample_url(RUN, "pics", "exact_match", "utt003"))  # the dataset's image: not given
    assert "outside the run folder" in page and "--media-root" in page and not _media_urls(page)
    own = server.page(sample_url(RUN, "speech", "word_error_rate", "utt005"))
    assert server.get(_media_urls(own)[0])[0] == 200


def test_the_export_copies_nothing_from_outside(tmp_path: Path) -> None:
    _hostile_run(tmp_path)
    out = tmp_path / "site"
    runs = tmp_path / "runs"
    done = evalkit_cli(["view", str(runs), "--export", str(out), "--media-root", str(runs / "media")], tmp_path)
    assert done.returncode == 0, done.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files and not [
        p for p in files if b"SECRET-MATERIAL" in p.read_bytes() or b"PRIVATE-NOTES" in p.read_bytes()
    ]
    assert list(out.rglob("*.wav")) and list(out.rglob("*.png"))  # what the run may show is still there


def test_files_of_a_run_that_link_out_of_it_are_not_read(tmp_path: Path, served: Any) -> None:
    run = make_run(tmp_path / "runs")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    leaked = {"sample_id": "x", "model": "alpha", "dataset": "leak", "metric": "exact_match", "row": 0}
    (elsewhere / "private.jsonl").write_text(json.dumps({**leaked, "response": "LEAKED-RECORD", "score": 1.0}) + "\n")
    (run / "records" / "leak__exact_match.jsonl").symlink_to(elsewhere / "private.jsonl")
    (elsewhere / "other.json").write_text(json.dumps({"status": "finished", "models": ["LEAKED-MANIFEST"]}))
    (run / "run.json").unlink()
    (run / "run.json").symlink_to(elsewhere / "other.json")
    server = served(tmp_path / "runs")
    listing = server.page("/")
    assert "LEAKED-MANIFEST" not in listing and "run.json is a link to a file outside the run folder" in listing
    page = server.page(f"/run/{RUN}/")
    assert "leak__exact_match.jsonl is a link to a file outside the run folder" in page
    code, _, body = server.get(pair_url(RUN, "leak", "exact_match"))
    assert code == 404 and b"LEAKED-RECORD" not in body
    # `evalkit report` reads the same folder the same way
    done = evalkit_cli(["report", str(run)], tmp_path)
    assert "LEAKED" not in done.stdout + done.stderr
    assert "LEAKED-RECORD" not in (run / "report.html").read_text()


def test_names_with_braces_are_reached_through_the_viewers_own_links(tmp_path: Path, served: Any) -> None:
    run_id = "2026{x}_run"
    run = make_run(tmp_path / "runs", run_id)
    for name in ("speech__word_error_rate.jsonl", "sent/speech.jsonl"):
        path = run / "records" / name
        path.write_text(path.read_text().replace('"utt001"', '"utt{001}"'))
    server = served(tmp_path / "runs")
    runs = server.page("/")
    (run_link,) = [h for h in re.findall(r'href="([^"]+)"', runs) if h.startswith("/run/")]
    run_page = server.page(run_link)
    pair_link = next(h for h in re.findall(r'href="([^"]+)"', run_page) if "/pair/speech/" in h)
    listing = server.page(pair_link.replace("&amp;", "&") + ("&" if "?" in pair_link else "?") + "per=500")
    sample_link = next(h for h in re.findall(r'href="([^"]+)"', listing) if "utt%7B001%7D" in h)
    page = server.page(sample_link)
    assert "utt{001}" in page and "hello world 1" in page


def test_a_foreign_host_or_origin_is_refused_and_paths_are_left_out(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    server = served(tmp_path / "runs")
    here = f"127.0.0.1:{server.port}"
    # DNS rebinding: a page of evil.example.com whose name now points at 127.0.0.1
    for host in ("evil.example.com", f"evil.example.com:{server.port}", "127.0.0.1.evil.example.com"):
        code, _, body = server.get("/api/runs", {"Host": host})
        assert code == 403 and RUN.encode() not in body, host
    code, _, body = server.get("/api/runs", {"Host": here, "Origin": "http://evil.example.com"})
    assert code == 403 and RUN.encode() not in body
    for host in (here, f"localhost:{server.port}", f"[::1]:{server.port}"):
        assert server.get("/api/runs", {"Host": host})[0] == 200, host
    assert server.get("/api/runs", {"Host": here, "Origin": f"http://{here}"})[0] == 200
    # no absolute path of this machine in the API unless asked
    for path in ("/api/runs", f"/api/run/{RUN}/", "/", f"/run/{RUN}/"):
        code, _, body = server.get(path)
        assert code == 200 and str(tmp_path).encode() not in body, path
    shown = served(tmp_path / "runs", show_paths=True)
    assert shown.api("/api/runs")["runs"][0]["path"] == str(tmp_path / "runs" / RUN)


def test_a_key_is_asked_of_every_request_when_set(tmp_path: Path, served: Any) -> None:
    make_run(tmp_path / "runs")
    server = served(tmp_path / "runs", key="k3y-for-the-viewer")
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic " + base64.b64encode(b"u:no").decode()},
    ):
        code, got, body = server.get("/api/runs", headers)
        assert code == 401 and RUN.encode() not in body and "Basic" in got["www-authenticate"], headers
    assert server.get("/static/view.css")[0] == 401
    assert server.get("/api/runs", {"Authorization": "Bearer k3y-for-the-viewer"})[0] == 200
    basic = "Basic " + base64.b64encode(b"anyone:k3y-for-the-viewer").decode()
    assert server.get(f"/run/{RUN}/", {"Authorization": basic})[0] == 200


def _view_process(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalkit", "view", "runs", "--no-browser", "--port", "0", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.fullmatch(r"evalkit view: http://[^:]+:(\d+)/\n", line)
    assert found, line
    return proc, int(found.group(1))


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    return err


def test_listening_beyond_loopback_warns_unless_a_key_is_set(tmp_path: Path) -> None:
    import http.client

    make_run(tmp_path / "runs")
    env = {k: v for k, v in os.environ.items() if k != "EVALKIT_VIEW_API_KEY"}
    proc, _ = _view_process(tmp_path, "--host", "0.0.0.0", env={"EVALKIT_CACHE_DIR": str(tmp_path / "c")})
    err = _stop(proc)
    assert "warning: listening on every network interface" in err and "EVALKIT_VIEW_API_KEY" in err
    os.environ.pop("EVALKIT_VIEW_API_KEY", None)
    proc, port = _view_process(
        tmp_path,
        "--host",
        "0.0.0.0",
        env={**env, "EVALKIT_VIEW_API_KEY": "s3cret", "EVALKIT_CACHE_DIR": str(tmp_path / "c")},
    )
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/runs")
        assert conn.getresponse().status == 401
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/runs", headers={"Authorization": "Bearer s3cret"})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        err = _stop(proc)
    assert "warning" not in err and "s3cret" not in err
    done = evalkit_cli(["view", "runs", "--api-key", "two words", "--no-browser"], tmp_path)
    assert done.returncode == 2 and "printable ASCII" in done.stderr and "two words" not in done.stderr


def _big_records(path: Path, n: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for i in range(n):
            rec = {
                "sample_id": f"q-{i:06d}",
                "model": ("model-a", "model-b")[i % 2],
                "dataset": "qa",
                "metric": "exact_match",
                "row": i // 2,
                "groups": {"language": "en", "topic": ("geo", "history", "science")[i % 3]},
                "reference": "Paris",
                "response": "Paris" if i % 3 else "London",
                "prediction": "paris" if i % 3 else "london",
                "score": float(bool(i % 3)),
                "details": {},
                "stats": [float(bool(i % 3))],
                "latency": 0.25,
                "attempts": 1,
                "cached": False,
                "replica": None,
                "sent": f"{i:016x}",
            }
            handle.write(json.dumps(rec, separators=(",", ":")) + "\n")


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_the_index_cache_is_private_small_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    run = tmp_path / "runs" / RUN
    records = run / "records" / "qa__exact_match.jsonl"
    _big_records(records, 60_000)
    run.chmod(0o700)
    records.chmod(0o600)
    old_umask = os.umask(0o022)
    try:
        cache = view_index.cache_dir()
        cache.mkdir(parents=True)  # made world-readable before, as an older evalkit left it
        cache.chmod(0o755)
        stale = cache / f"{view_index.index_path(records, 'records').name}.999999999.1.tmp"
        stale.write_bytes(b"\0" * 4096)
        # a build killed midway leaves its temporary file; the next build removes it
        view_index.start_build(records, "records")
        child = view_index._builders[str(view_index.index_path(records, "records"))]
        for _ in range(2000):
            if [p for p in cache.glob("*.tmp") if p != stale] or child.poll() is not None:
                break
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
        child.wait(20)
        state = view_index.refresh(records, "records")
    finally:
        os.umask(old_umask)
    assert not list(cache.glob("*.tmp"))
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    for path in cache.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
    assert state.lines == 60_000
    assert state.db.stat().st_size < 0.75 * records.stat().st_size


def test_a_line_too_long_is_skipped_unread_and_said(tmp_path: Path, served: Any) -> None:
    run = make_run(tmp_path / "runs")
    records = run / "records" / "speech__word_error_rate.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    huge = {"sample_id": "huge", "model": "alpha", "dataset": "speech", "metric": "word_error_rate", "row": 99}
    huge["response"] = "x" * (MAX_LINE_BYTES + 1000)
    with records.open("w") as handle:
        handle.writelines(lines[:3])
        handle.write(json.dumps(huge) + "\n")
        handle.writelines(lines[3:])
    server = served(tmp_path / "runs")
    first = server.api(pair_url(RUN, "speech", "word_error_rate", api=True, per=500))  # read from the file
    assert first["total"] == len(lines) and "huge" not in {r["sample_id"] for r in first["rows"]}
    wait_indexed(server, RUN, "speech", "word_error_rate")
    page = server.page(pair_url(RUN, "speech", "word_error_rate"))
    assert "1 line(s) are longer than 16 MiB (the first is line 4); skipped" in page
    data = server.api(pair_url(RUN, "speech", "word_error_rate", api=True, per=500))
    assert data["total"] == len(lines) and "huge" not in {r["sample_id"] for r in data["rows"]}
    assert server.get(sample_url(RUN, "speech", "word_error_rate", "huge"))[0] == 404
    assert "hello world 5" in server.page(sample_url(RUN, "speech", "word_error_rate", "utt005"))

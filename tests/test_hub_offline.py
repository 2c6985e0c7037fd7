"""A hub that cannot be reached is known within seconds and said once; stored rows never ask the hub.

Nothing can be downloaded on this machine, so the "hub" is HF_ENDPOINT pointed
at a loopback port: closed (connection refused), a listener that accepts and
never answers (a black hole: the probe must still give up), or a server that
answers 503. Runs and dry runs are real ``python -m evalkit`` subprocesses on
a config naming catalogue hub datasets (medqa); stored rows are made with
evalkit's own storage (``HubRowCache.rows``, what ``evalkit fetch`` calls).
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import closed_port, evalkit_cli, model_entry, write_config

from evalkit.catalog import DatasetSpec, load_catalog
from evalkit.data import hubprobe
from evalkit.data.hubcache import HubRowCache, HubUnreachable, require_hub_or_stored
from evalkit.testing import start_test_server

#: what none of the console output may hold: the hub library's retries, its raw error, a traceback
NOISE = ("Retrying", "thrown while requesting", "Couldn't reach", "LocalEntryNotFoundError", "Traceback")
#: generous: the probe gives up after 4 s; a child's start-up is about a second on an idle machine
BOUND_S = 10.0

ROWS = [
    {"data": {"Question": f"Question {i}?", "Options": {"A": "yes", "B": "no"}, "Correct Option": letter}}
    for i, letter in enumerate("AAB")
]


class Listener:
    """A loopback port that accepts connections, counts them and never answers (a black hole)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)  # held open, never read or answered

    def close(self) -> None:
        for conn in self.accepted:
            conn.close()
        self.sock.close()


class _Busy(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self.server.requests += 1  # type: ignore[attr-defined]
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = _answer

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture()
def listener() -> Iterator[Listener]:
    hole = Listener()
    yield hole
    hole.close()


@pytest.fixture()
def busy_hub() -> Iterator[Any]:
    """A hub that answers every request with HTTP 503; ``.requests`` counts them."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    server.requests = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture()
def model() -> Iterator[Any]:
    server = start_test_server({"default_answer": "A"})
    yield server
    server.stop()


def _env(tmp_path: Path, endpoint: str) -> dict[str, str]:
    env = {**os.environ, "HF_ENDPOINT": endpoint, "EVALKIT_CACHE_DIR": str(tmp_path / "cache"),
           "HF_HOME": str(tmp_path / "hf")}  # fmt: skip
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env.pop(key, None)
        env.pop(key.lower(), None)
    return env


def _config(tmp_path: Path, url: str, *datasets: str) -> Path:
    return write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[name, "exact_match"] for name in datasets or ("medqa",)],
            "models": [model_entry("m", url)],
            "output_dir": str(tmp_path / "runs"),
        },
    )


def _timed(args: list[str], tmp_path: Path, env: dict[str, str]) -> tuple[Any, float]:
    started = time.monotonic()
    done = evalkit_cli(args, tmp_path, env=env, timeout=120)
    return done, time.monotonic() - started


def _said_once(done: Any, *names: str) -> str:
    """The one message of an exit 2 for an unreachable hub; checks what it names and what the console lacks."""
    assert done.returncode == 2, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert output.count("is unreachable") == 1, output
    for noise in NOISE:
        assert noise not in output, output
    (line,) = [line for line in done.stderr.splitlines() if "is unreachable" in line]
    assert line.startswith("evalkit: error: the Hugging Face hub at http://127.0.0.1:")
    for name in names:
        assert f"{name} (openlifescienceai/{name}, split test;" in line
    assert f"`evalkit fetch {' '.join(names)}` where the network is reachable" in line
    assert "HF_HUB_OFFLINE=1" in line
    return line


def _endpoints(kind: str, listener: Listener, busy_hub: Any) -> tuple[str, str]:
    return {
        "refused": (f"http://127.0.0.1:{closed_port()}", "(connection refused)"),
        "blackhole": (f"http://127.0.0.1:{listener.port}", "(no answer within 3 s)"),
        "503": (f"http://127.0.0.1:{busy_hub.server_port}", "(answered HTTP 503)"),
    }[kind]


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
@pytest.mark.parametrize("kind", ["refused", "blackhole", "503"])
@pytest.mark.parametrize("dry", [False, True], ids=["run", "dry-run"])
def test_an_unreachable_hub_stops_the_run_at_once_with_one_message(
    tmp_path: Path, listener: Listener, busy_hub: Any, kind: str, dry: bool
) -> None:
    endpoint, reason = _endpoints(kind, listener, busy_hub)
    config = _config(tmp_path, f"http://127.0.0.1:{closed_port()}/v1")
    done, seconds = _timed(["run", str(config), *(["--dry-run"] if dry else [])], tmp_path, _env(tmp_path, endpoint))
    line = _said_once(done, "medqa")
    assert reason in line and "(HF_ENDPOINT)" in line
    assert seconds < BOUND_S, f"{seconds:.1f} s"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # no run folder was started
    if kind == "503":
        assert busy_hub.requests == 1  # one probe, no retries
    if kind == "blackhole":
        assert len(listener.accepted) == 1


def test_every_unstored_hub_dataset_is_named_in_the_one_message(tmp_path: Path) -> None:
    config = _config(tmp_path, f"http://127.0.0.1:{closed_port()}/v1", "medqa", "pubmedqa")
    done, seconds = _timed(
        ["run", str(config), "--quiet"], tmp_path, _env(tmp_path, f"http://127.0.0.1:{closed_port()}")
    )
    _said_once(done, "medqa", "pubmedqa")
    assert seconds < BOUND_S


def test_fetch_says_at_once_that_it_needs_the_hub(tmp_path: Path) -> None:
    done, seconds = _timed(["fetch", "medqa"], tmp_path, _env(tmp_path, f"http://127.0.0.1:{closed_port()}"))
    assert done.returncode == 2 and seconds < BOUND_S
    assert "fetch: the Hugging Face hub at" in done.stderr and "(connection refused)" in done.stderr
    assert "`evalkit fetch medqa` where the network is reachable" in done.stderr
    assert not any(noise in done.stderr + done.stdout for noise in NOISE)


def _medqa() -> DatasetSpec:
    return load_catalog().datasets["medqa"]


def _store(spec: DatasetSpec, rows: list[dict[str, Any]], keep: int | None = None) -> None:
    """Store rows as `evalkit fetch` does (the run's own storage); ``keep`` stops early, leaving a partial copy."""
    stored = HubRowCache(spec).extend(lambda: iter(rows))
    for number, _ in enumerate(stored, 1):
        if number == keep:
            break
    stored.close()


def _results(tmp_path: Path) -> list[dict[str, Any]]:
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    return json.loads((run_dir / "results.json").read_text())["results"]


def test_stored_rows_are_used_without_asking_the_hub(
    tmp_path: Path, listener: Listener, model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(tmp_path, f"http://127.0.0.1:{listener.port}")
    monkeypatch.setenv("EVALKIT_CACHE_DIR", env["EVALKIT_CACHE_DIR"])
    _store(_medqa(), ROWS)
    config = _config(tmp_path, model.base_url)
    dry, _ = _timed(["run", str(config), "--dry-run"], tmp_path, env)
    assert dry.returncode == 0, dry.stderr
    assert "medqa__exact_match" in dry.stdout and "unknown (hub)" not in dry.stdout  # walked like local data
    done, _ = _timed(["run", str(config), "--quiet"], tmp_path, env)
    assert done.returncode == 0, done.stderr
    (row,) = _results(tmp_path)
    assert (row["n"], row["score"]) == (3, pytest.approx(2 / 3))
    assert listener.accepted == []  # not even a probe: the hub was never asked


def test_a_partial_copy_serves_its_rows_and_says_what_is_missing(
    tmp_path: Path, busy_hub: Any, model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(tmp_path, f"http://127.0.0.1:{busy_hub.server_port}")
    monkeypatch.setenv("EVALKIT_CACHE_DIR", env["EVALKIT_CACHE_DIR"])
    _store(_medqa(), ROWS, keep=2)
    config = _config(tmp_path, model.base_url)
    enough, _ = _timed(["run", str(config), "--quiet", "--num-samples", "2"], tmp_path, env)
    assert enough.returncode == 0, enough.stderr
    assert busy_hub.requests == 0  # the two stored rows were enough
    more, seconds = _timed(["run", str(config), "--quiet", "--output-dir", str(tmp_path / "more")], tmp_path, env)
    assert seconds < BOUND_S and not any(noise in more.stderr for noise in NOISE), more.stderr
    (run_dir,) = [p for p in (tmp_path / "more").iterdir() if p.is_dir()]
    (row,) = json.loads((run_dir / "results.json").read_text())["results"]
    assert "is unreachable (answered HTTP 503) and only 2 rows of it are stored" in row["error"]
    assert "evalkit fetch medqa" in row["error"] and "HF_HUB_OFFLINE=1" in row["error"]
    assert busy_hub.requests == 1


def test_the_hub_is_probed_once_per_process(tmp_path: Path, busy_hub: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{busy_hub.server_port}")
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    hubprobe.forget_probes()
    try:
        for _ in range(3):
            with pytest.raises(HubUnreachable, match="answered HTTP 503"):
                require_hub_or_stored([_medqa()])
        assert busy_hub.requests == 1
    finally:
        hubprobe.forget_probes()


def test_the_hub_librarys_retry_notices_are_dropped_and_its_errors_kept(
    busy_hub: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils import http_backoff

    hubprobe.quiet_hub_retries()
    # --verbose (evalkit's logger at DEBUG) keeps the notices; an earlier in-process `main([... "--verbose"])` of
    # another test may have left it there, so this test says which case it is in
    caplog.set_level(logging.INFO, logger="evalkit")
    url = f"http://127.0.0.1:{busy_hub.server_port}/"
    with caplog.at_level(logging.WARNING, logger="huggingface_hub"):
        try:
            http_backoff("HEAD", url, max_retries=2, base_wait_time=0.01)
        except HfHubHTTPError as error:  # huggingface_hub >= 1 raises the final 503; older versions return it
            assert "503" in str(error)
        logging.getLogger("huggingface_hub.utils._http").error("a real error")
    assert busy_hub.requests == 3  # the library still retried, and its final error still reached the caller
    said = [r.getMessage() for r in caplog.records if r.name.startswith("huggingface_hub")]
    assert said == ["a real error"]

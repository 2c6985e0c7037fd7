"""``evalkit serve`` left running: an API key, bounded body memory, a body deadline, quiet disconnects.

Every test talks to the real ``evalkit serve`` (the pocketsphinx backend: no torch, no download)
in a subprocess. Raw sockets send what a well-behaved client would not (a 2 GB Content-Length,
a body trickled a byte a second, a request cut off halfway), so the server's answer to each is
seen exactly as a client on the network would see it.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil
import pytest
from helpers import ServeProcess, run, serving, write_config

from evalkit.config import load_config
from evalkit.serve.guard import API_KEY_ENV
from evalkit.serve.launch import _child_env

KEY = "sk-test-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
MAX_BODY_MB = 8
BUDGET_MB = 24
BODY_TIMEOUT_S = 2.0
UPLOAD_BYTES = 6 * 2**20  # four fit in the budget at once


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    started = {
        "guarded": ServeProcess(
            "--backend", "pocketsphinx", "--port", "0", "--api-key", KEY,
            "--max-body-mb", str(MAX_BODY_MB), "--body-budget-mb", str(BUDGET_MB),
            "--body-timeout", str(BODY_TIMEOUT_S), "--log-level", "info",
        )
    }  # fmt: skip
    with serving(started) as servers:
        yield servers["guarded"]


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.port is not None
    host = "127.0.0.1" if parts.hostname in ("0.0.0.0", "::") else parts.hostname or "127.0.0.1"
    return host, parts.port


@dataclass
class RawAnswer:
    """One HTTP answer as read off the socket: the interim ``100 Continue`` (if any) and the final one."""

    continued: bool = False
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    closed: bool = False  # the server closed the connection after answering


def _head(path: str, length: int, *, key: str | None = KEY, expect: bool = False) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: test", "Content-Type: application/json", f"Content-Length: {length}"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    if expect:
        lines.append("Expect: 100-continue")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_answer(sock: socket.socket, answer: RawAnswer, timeout: float) -> RawAnswer:
    """Read one answer (skipping a 100 Continue); ``closed`` tells whether EOF followed it."""
    sock.settimeout(timeout)
    data = b""
    while True:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError(f"connection closed before an answer; got {data!r}")
            data += chunk
        head, data = data.split(b"\r\n\r\n", 1)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        if status == 100:
            answer.continued = True
            if not data:
                return answer  # the caller sends the body, then reads again
            continue
        answer.status = status
        answer.headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
        length = int(answer.headers.get("content-length", "0"))
        while len(data) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        answer.body = data[:length]
        sock.settimeout(min(timeout, 2.0))  # a connection kept alive stays silent: do not wait long to tell
        try:
            answer.closed = sock.recv(1) == b""
        except TimeoutError:
            answer.closed = False
        return answer


def _error(answer: RawAnswer) -> dict[str, object]:
    error = json.loads(answer.body)["error"]
    assert isinstance(error, dict)
    return error


# ---------------------------------------------------------------------- the API key


def test_api_key_is_required_except_on_health(server: ServeProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        missing = client.get("/v1/models")
        wrong = client.get("/v1/models", headers={"Authorization": "Bearer sk-wrong"})
        basic = client.get("/v1/models", headers={"Authorization": f"Basic {KEY}"})
        post = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        right = client.get("/v1/models", headers=AUTH)
        stats = client.get("/_stats", headers=AUTH)
        health = client.get("/health")
    for refused in (missing, wrong, basic, post):
        assert refused.status_code == 401, refused.text
        assert refused.headers["WWW-Authenticate"] == "Bearer"
        error = refused.json()["error"]
        assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
        assert KEY not in refused.text
    assert "no API key" in missing.json()["error"]["message"]
    assert "incorrect API key" in wrong.json()["error"]["message"]
    assert right.status_code == 200 and right.json()["data"][0]["id"] == "pocketsphinx-en-us"
    assert stats.status_code == 200
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert KEY not in server.stderr()


def _wait_for(server: ServeProcess, text: str, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in server.stderr():
            return True
        time.sleep(0.05)
    return False


def test_listening_beyond_loopback_without_a_key_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    open_server = ServeProcess("--backend", "pocketsphinx", "--host", "0.0.0.0", "--port", "0")
    monkeypatch.setenv(API_KEY_ENV, KEY)  # the second server takes its key from the environment
    keyed = ServeProcess("--backend", "pocketsphinx", "--host", "0.0.0.0", "--port", "0")
    with serving({"open": open_server, "keyed": keyed}):
        assert _wait_for(open_server, "without an API key"), open_server.stderr()
        warning = open_server.stderr()
        assert "warning: listening on every network interface" in warning and API_KEY_ENV in warning
        host, port = _address(keyed.url)
        with httpx.Client(base_url=f"http://{host}:{port}", timeout=10) as client:
            assert client.get("/v1/models").status_code == 401
            assert client.get("/v1/models", headers=AUTH).status_code == 200
        assert "warning" not in keyed.stderr() and KEY not in keyed.stderr()


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_launched_evalkit_serve_requires_the_entrys_auth_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the key the run's client sends is the one the launched server requires; evalkit's own environment's key
    # (for some other server) is not passed on, and the launcher's readiness poll sends the key too
    monkeypatch.setenv(API_KEY_ENV, "sk-not-this-servers-key")
    key = "sk-launch-0123456789abcdef"
    info = {
        "name": "ps",
        "inference_type": "transcription",
        "model": "pocketsphinx-en-us",
        "auth_token": key,
        "timeout": 120,
        "launch": {"backend": "pocketsphinx", "startup_timeout": 120},
    }
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
            "models": [{"info": info}],
            "filters": {"num_samples": 2},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    (launched,) = load_config(config).models
    assert _child_env(launched.info)[API_KEY_ENV] == key
    outcome = run(config)
    (row,) = outcome.rows
    assert row.n == 2 and row.n_failed == 0
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


def test_a_bad_api_key_is_a_usage_error() -> None:
    server = ServeProcess("--backend", "pocketsphinx", "--port", "0", "--api-key", "has a space")
    assert server.wait(60) == 2
    assert "--api-key: the API key must be printable ASCII without spaces" in server.stderr()
    assert "has a space" not in server.stderr() and "Traceback" not in server.stderr()


# ---------------------------------------------------------------------- body size, budget, deadline


@pytest.mark.parametrize("expect", [False, True], ids=["plain", "expect-100-continue"])
def test_a_huge_content_length_is_refused_before_the_body(server: ServeProcess, expect: bool) -> None:
    rss_before = psutil.Process(server.proc.pid).memory_info().rss
    with socket.create_connection(_address(server.url), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(_head("/v1/chat/completions", 2_000_000_000, expect=expect) + (b"" if expect else b"{}"))
        answer = _read_answer(sock, RawAnswer(), timeout=10)
        took = time.monotonic() - started
    assert answer.status == 413 and not answer.continued
    error = _error(answer)
    assert error["code"] == "request_too_large"
    assert "2000000000 bytes is larger than this server's limit" in str(error["message"])
    assert answer.closed and took < 5  # at once, not after a body-read timeout
    assert psutil.Process(server.proc.pid).memory_info().rss - rss_before < 20 * 2**20


def _upload(url: str, results: list[RawAnswer], lock: threading.Lock) -> None:
    """One 6 MB chat body that asks first (Expect: 100-continue) and then sends its body in pieces."""
    with socket.create_connection(_address(url), timeout=60) as sock:
        sock.sendall(_head("/v1/chat/completions", UPLOAD_BYTES, expect=True))
        answer = _read_answer(sock, RawAnswer(), timeout=60)
        if answer.continued and not answer.status:
            piece = b"x" * (UPLOAD_BYTES // 8)
            for _ in range(8):
                sock.sendall(piece)
                time.sleep(0.05)  # keep the admitted ones in flight together
            answer = _read_answer(sock, answer, timeout=60)
    with lock:
        results.append(answer)


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_the_body_budget_bounds_memory_and_answers_503(server: ServeProcess) -> None:
    process = psutil.Process(server.proc.pid)
    baseline = process.memory_info().rss
    peak = baseline
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, process.memory_info().rss)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    results: list[RawAnswer] = []
    lock = threading.Lock()
    uploaders = [threading.Thread(target=_upload, args=(server.url, results, lock)) for _ in range(30)]
    for uploader in uploaders:
        uploader.start()
    for uploader in uploaders:
        uploader.join(120)
    done.set()
    watcher.join()
    assert len(results) == 30
    refused = [a for a in results if a.status == 503]
    admitted = [a for a in results if a.continued]
    assert refused and admitted, [(a.status, a.continued) for a in results]
    assert len(refused) + len(admitted) == 30
    for answer in refused:
        assert answer.headers["retry-after"] == "1" and _error(answer)["code"] == "server_busy"
        assert not answer.continued and answer.closed  # the body was never asked for
    for answer in admitted:  # read to the end, then parsed: the body is not JSON
        assert answer.status == 400 and "not valid JSON" in str(_error(answer)["message"])
    # 30 bodies of 6 MB held at once would be 180 MB before any parsing; the budget holds 4 at a time
    growth = peak - baseline
    print(f"server RSS: baseline {baseline / 2**20:.0f} MiB, peak {peak / 2**20:.0f} MiB, +{growth / 2**20:.0f} MiB")
    assert growth < 120 * 2**20
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/v1/models", headers=AUTH).status_code == 200


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_slow_sender_is_cut_off_at_the_body_timeout(server: ServeProcess) -> None:
    with socket.create_connection(_address(server.url), timeout=30) as sock:
        sock.sendall(_head("/v1/chat/completions", 1000))
        started = time.monotonic()
        sent = 0
        # a byte every half second until shortly before the deadline, then silence: a byte sent after the server's
        # 408 and close would draw a TCP reset that discards the unread 408 on this side (seen under load)
        while True:
            if time.monotonic() - started < BODY_TIMEOUT_S - 0.5:
                sock.sendall(b"{")
                sent += 1
            if select.select([sock], [], [], 0.5)[0]:
                break
            assert time.monotonic() - started < 20, "the server never cut the slow sender off"
        answer = _read_answer(sock, RawAnswer(), timeout=10)
        took = time.monotonic() - started
    assert answer.status == 408 and _error(answer)["code"] == "request_timeout"
    assert f"within {BODY_TIMEOUT_S:g} s" in str(_error(answer)["message"])
    assert answer.closed
    assert BODY_TIMEOUT_S - 0.5 < took < BODY_TIMEOUT_S + 8 and sent >= 1


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/audio/transcriptions"])
def test_a_client_that_goes_away_is_one_log_line(server: ServeProcess, path: str) -> None:
    before = len(server.stderr().splitlines())
    with socket.create_connection(_address(server.url), timeout=10) as sock:
        head = _head(path, 1_000_000).replace(
            b"application/json", b"multipart/form-data; boundary=xx" if "audio" in path else b"application/json"
        )
        sock.sendall(head + b"--xx\r\n" + b"a" * 1000)
        time.sleep(0.3)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(server.stderr().splitlines()) == before:
        time.sleep(0.05)
    time.sleep(0.5)  # anything more it would write
    new = server.stderr().splitlines()[before:]
    assert len(new) == 1, new
    assert "closed the connection" in new[0] and path in new[0] and "of 1000000 body bytes" in new[0]
    assert "Traceback" not in server.stderr()
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/v1/models", headers=AUTH).status_code == 200

"""Start the test server in its own process and talk to it from tests and benchmarks.

A subprocess, not a task in the caller's loop: the server's CPU time must not
be the client's (benchmarks measure the client), and a test can kill it to see
what the client does when the server dies. The handle speaks plain
``http.client`` to 127.0.0.1 so no proxy variables or client pools interfere.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import selectors
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import evalkit
from evalkit.testing.requestlog import read_events
from evalkit.testing.script import load_script, script_dict

LISTENING_PREFIX = "LISTENING "


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode


def _finalize(proc: subprocess.Popen[bytes], tmpdir: str) -> None:
    """Last resort when a handle is garbage-collected or the interpreter exits."""
    _terminate(proc, 2.0)
    shutil.rmtree(tmpdir, ignore_errors=True)


class TestServer:
    """A running test server process.

    ``url`` is ``http://127.0.0.1:PORT`` (``https://`` when started with
    ``tls``); ``base_url`` adds ``/v1`` (what an OpenAI client wants). Use as
    a context manager or call :meth:`stop`.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        url: str,
        log_path: Path | None,
        script_path: Path,
        tmpdir: Path,
        stderr_path: Path,
        cafile: Path | None = None,
    ) -> None:
        self.process = process
        #: the certificate an https server was started with (what its inspection requests trust)
        self.cafile = cafile
        self.url = url
        self.base_url = url + "/v1"
        self.port = int(url.rsplit(":", 1)[1])
        self.pid = process.pid
        self.log_path = log_path
        self.script_path = script_path
        self.stderr_path = stderr_path
        self._tmpdir = tmpdir
        self._finalizer = weakref.finalize(self, _finalize, process, str(tmpdir))

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited {self.process.returncode}"
        return f"<TestServer {self.url} pid={self.pid} {state}>"

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    # -- inspection ----------------------------------------------------------------------

    def _request(self, method: str, path: str, timeout: float = 10.0) -> Any:
        conn: http.client.HTTPConnection
        if self.url.startswith("https://"):
            context = ssl.create_default_context(cafile=str(self.cafile) if self.cafile is not None else None)
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=context)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{method} {path} -> HTTP {resp.status}: {data[:200]!r}")
            return json.loads(data)
        finally:
            conn.close()

    def stats(self) -> dict[str, Any]:
        """GET /_stats: requests by path and status, faults, in-flight gauges."""
        return self._request("GET", "/_stats")

    def reset_stats(self, faults: bool = False) -> dict[str, Any]:
        """POST /_reset_stats; ``faults=True`` also restarts fault draws as on a fresh server."""
        return self._request("POST", "/_reset_stats?faults=1" if faults else "/_reset_stats")

    def log_events(self, event: str | None = None) -> list[dict[str, Any]]:
        """The request log's events (all, or only those of one kind: received/completed/fault)."""
        if self.log_path is None:
            raise RuntimeError("this server has no request log; start it with request_log=True or a path")
        events = read_events(self.log_path)
        return events if event is None else [e for e in events if e.get("event") == event]

    def stderr_text(self) -> str:
        """What the server wrote to stderr (for failure messages)."""
        try:
            return self.stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    # -- lifecycle -----------------------------------------------------------------------

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; returns the exit code.

        The request log and stderr stay readable until the handle is collected.
        """
        return _terminate(self.process, timeout)

    def kill(self) -> int | None:
        """SIGKILL now (a crash, as a test of the client's recovery sees it)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        return self.process.wait()

    def __enter__(self) -> TestServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _package_root() -> str:
    return str(Path(evalkit.__file__).resolve().parent.parent)


def _read_listening_line(proc: subprocess.Popen[bytes], timeout: float) -> str | None:
    """Read stdout until the LISTENING line, the process' exit or the deadline."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    buf = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not sel.select(remaining):
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                text = line.decode("utf-8", errors="replace").strip()
                if text.startswith(LISTENING_PREFIX):
                    return text[len(LISTENING_PREFIX) :].strip()


def start_test_server(
    script: Mapping[str, Any] | str | Path | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    startup_timeout: float = 20.0,
    env: Mapping[str, str] | None = None,
    tls: tuple[Path, Path] | None = None,
    **overrides: Any,
) -> TestServer:
    """Start ``python -m evalkit.testing.server`` and wait until it listens.

    ``script`` is a dict, a YAML/JSON path or None (defaults); ``overrides`` set
    script keys (``latency_ms=5``, ``max_concurrency=4``, ``faults={...}``).
    ``request_log=True`` logs to a temporary file (``.log_path``). ``tls``
    (certificate, key: PEM files) serves https. The script is validated here
    first, so a bad key raises :class:`ConfigError` in the caller.
    """
    tmpdir = Path(tempfile.mkdtemp(prefix="evalkit-test-server-"))
    try:
        request_log = overrides.pop("request_log", None)
        data = script_dict(script, overrides)
        if request_log is True:
            request_log = tmpdir / "requests.jsonl"
        if request_log is False:
            data.pop("request_log", None)
        elif request_log is not None:
            data["request_log"] = request_log
        for key in ("answer_file", "request_log"):
            if data.get(key) is not None:
                data[key] = str(Path(data[key]).resolve())
        loaded = load_script(data)
        script_path = tmpdir / "script.json"
        script_path.write_text(json.dumps(data, default=str, indent=1), encoding="utf-8")
    except BaseException:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise

    child_env = dict(os.environ if env is None else env)
    root = _package_root()
    child_env["PYTHONPATH"] = root + (os.pathsep + child_env["PYTHONPATH"] if child_env.get("PYTHONPATH") else "")
    stderr_path = tmpdir / "stderr.log"
    cmd = [
        sys.executable,
        "-m",
        "evalkit.testing.server",
        "--script",
        str(script_path),
        "--host",
        host,
        "--port",
        str(port),
    ]
    if tls is not None:
        cmd += ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
    with open(stderr_path, "wb") as stderr_file:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr_file, env=child_env
        )
    try:
        url = _read_listening_line(proc, startup_timeout)
    except BaseException:
        _terminate(proc, 1.0)
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise
    finally:
        assert proc.stdout is not None
        proc.stdout.close()
    if url is None:
        exited = proc.poll() is not None
        code = _terminate(proc, 1.0)
        stderr = stderr_path.read_text(encoding="utf-8", errors="replace").strip()
        shutil.rmtree(tmpdir, ignore_errors=True)
        state = f"exited with code {code}" if exited else "no LISTENING line; killed"
        raise RuntimeError(
            f"test server did not start within {startup_timeout:g} s ({state}); command: {' '.join(cmd)}\n"
            f"stderr:\n{stderr[-4000:] or '(empty)'}"
        )
    log_path = loaded.spec.request_log
    return TestServer(
        proc,
        url,
        Path(log_path) if log_path is not None else None,
        script_path,
        tmpdir,
        stderr_path,
        cafile=tls[0] if tls is not None else None,
    )

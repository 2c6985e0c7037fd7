"""The Ray actor behind one ``launch.ray`` replica: it runs the server process on the node Ray placed it on.

Why an actor and not Ray Serve: an actor that runs the same command line as a
local launch serves every backend (vLLM, transformers serve, evalkit serve,
the test server), on CPUs as on GPUs, and what it reserves (``num_gpus``) is
what the server sees (Ray sets ``CUDA_VISIBLE_DEVICES`` for the actor, and
the server inherits it).

The module uses the standard library only and the launcher sends it to the
cluster by value (``ray.cloudpickle.register_pickle_by_value``), so a node
needs the server it runs (vLLM, say) but not evalkit's launcher. The same
care as a local launch, on the node:

- the server runs in its own session, so stopping its process group also
  stops the workers it spawned;
- it is started with a parent-death signal bound to a thread that lives as
  long as the server, so an actor that dies (``ray.kill``, its node's raylet
  killing it when the driver goes) takes its server along;
- its output reaches a log on the node through a pipe, secrets masked (the
  launcher hands over every form a secret may take, from
  :func:`evalkit.util.redact.secret_forms`; :class:`_Masker` is
  :class:`evalkit.util.redact.StreamScrubber`'s hold-back rule, here so the
  node needs no evalkit).

Placeholders in the command (whole arguments ``{python}``, ``{host}``,
``{port}``, ``{port_file}``) are filled in here: the node's Python, the node's address,
and a port free on the node (or a file the server writes the port it bound).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

# The same shim as a local launch (evalkit.serve.launch): parent-death signal, then exec the server.
_PDEATHSIG_SHIM = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(143)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


class _Masker:
    """Masks secrets in output cut anywhere: the end of a piece that could begin a secret waits for the next."""

    def __init__(self, forms: list[bytes], mask: bytes) -> None:
        ordered = sorted({f for f in forms if f}, key=len, reverse=True)
        self.pattern = re.compile(b"|".join(re.escape(f) for f in ordered)) if ordered else None
        self.hold = max((len(f) for f in ordered), default=1) - 1
        self.mask = mask
        self.pending = b""

    def feed(self, data: bytes) -> bytes:
        if self.pattern is None:
            return data
        buffer = self.pattern.sub(self.mask, self.pending + data)
        # a secret holds no line break, so a finished line can go; otherwise all but what could start a secret
        cut = max(buffer.rfind(b"\n") + 1, len(buffer) - self.hold)
        self.pending = buffer[cut:]
        return buffer[:cut]

    def close(self) -> bytes:
        rest, self.pending = self.pending, b""
        return self.pattern.sub(self.mask, rest) if self.pattern is not None else rest


def _node_address() -> str:
    """The address other machines of the cluster reach this node at (Ray's own idea of it)."""
    import ray

    return str(ray.util.get_node_ip_address())


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """One server process on this actor's node; every method answers at once except :meth:`wait_exit`."""

    def __init__(
        self,
        label: str,
        argv: list[str],
        env: dict[str, str],
        unset: list[str],
        secret_forms: list[bytes],
        mask: bytes = b"***",
    ) -> None:
        self.label = label
        self.argv_template = list(argv)
        self.env_overrides = dict(env)
        self.unset = list(unset)
        self.masker = _Masker(secret_forms, mask)
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.port_file: Path | None = None
        self.log_path: Path | None = None
        self.started = threading.Event()
        self.exited = threading.Event()
        self.start_error: str | None = None
        self.killed = False

    # -- starting ---------------------------------------------------------------------------

    def start(self) -> dict[str, Any]:
        """Start the server (does not wait for it to answer); where it runs and where it logs."""
        import ray

        host = _node_address()
        folder = Path(tempfile.gettempdir()) / "evalkit-ray-servers"
        folder.mkdir(parents=True, exist_ok=True)
        tag = uuid.uuid4().hex[:12]
        if "{port}" in self.argv_template:
            self.port = _free_port(host)
        if "{port_file}" in self.argv_template:
            self.port_file = folder / f".port-{tag}"
        values = {
            "python": sys.executable,
            "host": host,
            "port": str(self.port or ""),
            "port_file": str(self.port_file or ""),
        }
        command = [_fill(part, values) for part in self.argv_template]
        self.log_path = folder / f"server-{self.label}-{tag}.log"
        # the thread that starts the server waits for it: the parent-death signal is bound to a living thread
        threading.Thread(target=self._run, args=(command,), name=f"server-{tag}", daemon=True).start()
        self.started.wait()
        if self.start_error is not None:
            raise RuntimeError(self.start_error)
        assert self.process is not None
        return {
            "host": host,
            "pid": self.process.pid,
            "port": self.port,
            "log": str(self.log_path),
            "node_id": ray.get_runtime_context().get_node_id(),
            "command": command,
        }

    def _run(self, command: list[str]) -> None:
        env = dict(os.environ)
        for name in self.unset:
            env.pop(name, None)
        env.update(self.env_overrides)
        argv = command
        if sys.platform.startswith("linux"):
            argv = [sys.executable, "-c", _PDEATHSIG_SHIM, str(os.getpid()), *command]
        assert self.log_path is not None
        try:
            self.process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except OSError as error:
            self.start_error = f"cannot start {command[0]} on {_node_address()}: {error}"
            self.started.set()
            self.exited.set()
            return
        self.started.set()
        try:
            self._pump(self.process)
        finally:
            self.process.wait()
            self.exited.set()

    def _pump(self, process: subprocess.Popen[bytes]) -> None:
        """Copy the server's output to its log as it comes, masked; returns when the output ends."""
        assert process.stdout is not None and self.log_path is not None
        fd = process.stdout.fileno()
        try:
            with self.log_path.open("ab") as sink:
                while chunk := os.read(fd, 65536):
                    sink.write(self.masker.feed(chunk))
                    sink.flush()
                sink.write(self.masker.close())
        except OSError:
            with contextlib.suppress(OSError):
                while os.read(fd, 65536):  # the log cannot be written: still drain, so the server never blocks
                    pass
        finally:
            with contextlib.suppress(OSError):
                process.stdout.close()

    # -- what the launcher asks ---------------------------------------------------------------

    def bound_port(self) -> int | None:
        """The port the server listens on: chosen here, or read from the file the server wrote."""
        if self.port is None and self.port_file is not None:
            with contextlib.suppress(OSError, ValueError):
                self.port = int(self.port_file.read_text().strip())
        return self.port

    def returncode(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    def wait_exit(self) -> int | None:
        """Block until the server exits; its exit code (the launcher keeps one such call pending per replica)."""
        self.exited.wait()
        return self.process.returncode if self.process is not None else None

    def tail(self, lines: int = 25) -> str:
        if self.log_path is None:
            return "(no output)"
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(errors="replace").splitlines()
            return "\n".join(text[-lines:]) if text else "(no output)"
        return "(no output)"

    def collect_log(self, limit: int) -> bytes:
        """The last ``limit`` bytes of the server's log, for the run's own server-logs folder.

        A log that fits is removed from the node once read: the run's folder keeps it, and a node that serves
        many runs does not fill its temporary folder. A longer one stays on the node, whole.
        """
        if self.log_path is None:
            return b""
        try:
            with self.log_path.open("rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(0, size - limit))
                text = handle.read()
            if size <= limit and self.exited.is_set():
                self.log_path.unlink()
            return text
        except OSError:
            return b""

    def stop(self, grace: float) -> dict[str, Any]:
        """SIGTERM the server's group, SIGKILL what is left after ``grace`` seconds; how it ended."""
        begun = time.monotonic()
        process = self.process
        if process is None:
            return {"returncode": None, "killed": False, "stop_seconds": 0.0}
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
            os.killpg(process.pid, signal.SIGCONT)  # a stopped (hung) server can take its SIGTERM too
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.killed = True
        # whatever the server spawned and left in its group goes too (nothing when all is gone)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5.0)
        self.exited.wait(timeout=2.0)  # the log has the server's last words
        if self.port_file is not None:
            with contextlib.suppress(OSError):
                self.port_file.unlink()
        return {
            "returncode": process.returncode,
            "killed": self.killed,
            "stop_seconds": round(time.monotonic() - begun, 3),
        }


def _fill(part: str, values: dict[str, str]) -> str:
    """A placeholder is a whole argument (``{port}``); the same text inside a user's argument stays as written."""
    if part.startswith("{") and part.endswith("}") and part[1:-1] in values:
        return values[part[1:-1]]
    return part

"""What every benchmark needs: data and configs on disk, servers, child processes, timings.

Everything a benchmark measures runs in a child process (evalkit, the raw
loop, each test server), so no two measured things share an interpreter or
an event loop with this driver. Timestamps are ``time.time()``: the servers'
request logs and this driver read the same clock, which is how the request
phase (first request received -> last response completed) is measured
without touching evalkit.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalkit.testing import TestServer, start_test_server

ROOT = Path(__file__).resolve().parent.parent


# -- the machine -------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """CPU count, model and load: the figures mean little without them."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count() or 0
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "loadavg": os.getloadavg(),
    }


# -- data and configs ---------------------------------------------------------------------------


def write_text_dataset(runspecs: Path, name: str, n: int, *, tag: str = "") -> Path:
    """``n`` distinct questions as jsonl plus their runspec; returns the jsonl path.

    Distinct prompts matter: identical requests in flight are sent once, and a
    benchmark that counts requests must not be answered by de-duplication.
    The answer is the question itself, which the echoing test server returns.
    """
    data = runspecs.parent / "data" / f"{name}.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    with data.open("w", encoding="utf-8") as handle:
        for i in range(n):
            question = f"{tag}question {i}: what is {i} plus {i}?"
            handle.write(json.dumps({"id": f"{name}-{i}", "question": question, "answer": question}) + "\n")
    folder = runspecs / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "_task": {"description": f"benchmark text set {name}", "metrics": ["exact_match"]},
        name: {
            "path": str(data),
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "question",
            "target_column": "answer",
        },
    }
    (folder / f"{name}.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return data


def model_entry(name: str, url: str | list[str], batch_size: int, **extra: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "name": name,
        "inference_type": "vllm",
        "url": url,
        "model": "test-model",
        "batch_size": batch_size,
        "timeout": 60,
        "retry_attempts": 2,
    }
    info.update(extra)
    return {"info": info}


def write_config(
    path: Path,
    pairs: Sequence[tuple[str, str]],
    models: list[dict[str, Any]],
    runspecs: Path,
    output_dir: Path,
    num_samples: int | None = None,
) -> Path:
    config: dict[str, Any] = {
        "dataset_metric": [list(p) for p in pairs],
        "models": models,
        "runspecs_dir": str(runspecs),
        "output_dir": str(output_dir),
        "cache": {"enabled": False},
    }
    if num_samples is not None:
        config["filters"] = {"num_samples": num_samples}
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


# -- servers ------------------------------------------------------------------------------------


@contextmanager
def servers(
    count: int, scripts: Sequence[dict[str, Any]] | dict[str, Any] | None = None, **overrides: Any
) -> Iterator[list[TestServer]]:
    """``count`` test server processes on loopback, stopped (by pid) on exit."""
    started: list[TestServer] = []
    try:
        for i in range(count):
            script = scripts[i] if isinstance(scripts, Sequence) else scripts
            started.append(start_test_server(script, **overrides))
        yield started
    finally:
        for server in started:
            server.stop()


@dataclass
class Phase:
    """The request phase seen by the servers: first request received -> last response completed."""

    first_received: float
    last_completed: float
    completed: int

    @property
    def seconds(self) -> float:
        return self.last_completed - self.first_received


def request_phase(group: Sequence[TestServer]) -> Phase:
    received: list[float] = []
    completed: list[float] = []
    for server in group:
        for event in server.log_events():
            if event.get("event") == "received":
                received.append(event["ts"])
            elif event.get("event") == "completed" and event.get("status") == 200:
                completed.append(event["ts"])
    if not received or not completed:
        raise RuntimeError("the servers logged no request: did the run reach them?")
    return Phase(min(received), max(completed), len(completed))


# -- child processes ----------------------------------------------------------------------------


@dataclass
class Child:
    """A finished child process with its own wall and CPU time (from wait4, not polling)."""

    argv: list[str]
    started: float
    wall_s: float
    cpu_s: float
    maxrss_bytes: int
    returncode: int
    stdout: str
    stderr: str
    extra: dict[str, Any] = field(default_factory=dict)

    def json(self) -> dict[str, Any]:
        """The last JSON line of stdout (harness and raw loop print one)."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError(
            f"no JSON line from {' '.join(self.argv)}\nstdout: {self.stdout[-2000:]}\nstderr: {self.stderr[-4000:]}"
        )

    def check(self) -> Child:
        if self.returncode != 0:
            raise RuntimeError(f"{' '.join(self.argv)} exited {self.returncode}\nstderr: {self.stderr[-4000:]}")
        return self


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_child(argv: Sequence[str], cwd: Path, timeout: float = 600.0, env: dict[str, str] | None = None) -> Child:
    """Run ``argv`` to completion; wall from just before spawn to reaping, CPU from wait4."""
    argv = list(argv)
    out_path = cwd / f".child-{time.monotonic_ns()}.out"
    err_path = out_path.with_suffix(".err")
    with out_path.open("wb") as out, err_path.open("wb") as err:
        started = time.time()
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env or child_env(), stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout = out_path.read_text(encoding="utf-8", errors="replace")
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    out_path.unlink()
    err_path.unlink()
    return Child(
        argv=argv,
        started=started,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        maxrss_bytes=usage.ru_maxrss * 1024,
        returncode=proc.returncode,
        stdout=stdout,
        stderr=stderr,
    )


def evalkit_argv(*args: str) -> list[str]:
    """``evalkit ...`` as users run it (the console script is this module's entry point)."""
    return [sys.executable, "-m", "evalkit", *args]


def harness_argv(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.harness", str(config), *args]


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def client_figures(phase: Phase, child: Child, server_cpu: float) -> dict[str, Any]:
    """What every client run against one server reports: request phase (from the server's log), whole process,
    start-up, the client's CPU and the server's."""
    return {
        "rps_phase": phase.completed / phase.seconds,
        "phase_s": phase.seconds,
        "process_s": child.wall_s,
        "rps_process": phase.completed / child.wall_s,
        "startup_s": phase.first_received - child.started,
        "cpu_s": child.cpu_s,
        "server_cpu_s": server_cpu,
        "completed": phase.completed,
    }


def server_cpu_s(server: TestServer) -> float:
    """CPU seconds a running server has used so far (from /proc, Linux only)."""
    try:
        fields = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"

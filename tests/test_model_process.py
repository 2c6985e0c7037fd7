"""evalkit serve's transformers model in a process of its own: same answers, honest failure, clean shutdown.

Real tiny models (Llama, Qwen2-Audio, Whisper, built here), real model
processes (``ModelProcessBackend`` spawns one) and real ``evalkit serve``
subprocesses on loopback. Each server runs in a session of its own, so its
model process (and multiprocessing's resource tracker) can be found through
its process group and signalled as a terminal's Ctrl-C would. The batcher's
pipelining is tested alone with a fake ``run_batch`` whose batches the test
holds and releases; nothing asserts speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import pickle
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from helpers import ServeProcess, live_group_members, serve_app, serving, speech_clips

from evalkit.serve.batcher import BatchStats, DynamicBatcher
from evalkit.serve.cli import main as serve_main

_MISSING = [name for name in ("torch", "transformers", "tokenizers") if importlib.util.find_spec(name) is None]
needs_torch = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"needs {', '.join(_MISSING)} (pip install torch==2.13.0 transformers tokenizers, or bash "
    ".ci/install_vllm.sh)",
)

ROOT = Path(__file__).resolve().parent.parent
MAX_BATCH = 4
#: the model process's torch threads: one, so the tests leave the shared machine's other core to the front
THREADS = 1
PROMPTS = [
    ("Hello there", 1),
    ("What is the capital of France?", 7),
    ("x", 12),
    ("A much longer prompt, with many more tokens than the others, so the short ones are padded.", 3),
    ("Tell me a story about a wooden boat near the harbour.", 20),
    ("Count from one to ten.", 5),
]


# ---------------------------------------------------------------------- tiny models


def _both(folder: Path) -> tuple[Any, Any]:
    """(a ModelProcessBackend, an in-process TransformersBackend) on ``folder``; the caller closes both."""
    from evalkit.serve.backends.model_process import ModelProcessBackend
    from evalkit.serve.backends.transformers_backend import TransformersBackend

    separate = ModelProcessBackend(folder, max_batch_size=MAX_BATCH, threads=THREADS)
    try:
        return separate, TransformersBackend(folder, max_batch_size=MAX_BATCH, threads=THREADS)
    except BaseException:
        separate.close()
        raise


def _same_facts(separate: Any, alone: Any) -> None:
    """What the front learnt from the model process equals what the model in this process says."""
    assert separate.model is None and alone.model is not None  # the front holds no weights
    assert separate._stop_ids() == alone._stop_ids() and separate._stop_ids()
    assert separate.dtype == alone.dtype == alone.model.dtype
    assert separate.runtime() == {**alone.runtime(), "process": "separate"}
    assert separate.languages == alone.languages
    assert separate.failure() is None and alone.failure() is None


def _answers(backend: Any, items: list[Any]) -> list[tuple[str, int | None, int | None]]:
    return [(str(a), a.completion_tokens, a.prompt_tokens) for a in backend.chat_batch(items)]


# ---------------------------------------------------------------------- 1. the same answers


@needs_torch
def test_text_answers_and_model_facts_equal_the_in_process_backend(tiny_llama: Path) -> None:
    from evalkit.serve.backends.base import ChatInput, GenerationParams

    items = [ChatInput([{"role": "user", "content": text}], GenerationParams(max_tokens=n)) for text, n in PROMPTS]
    # seeded sampling: the seed is set where generate runs, in the model process
    items.append(
        ChatInput([{"role": "user", "content": "Sample me."}], GenerationParams(max_tokens=9, temperature=0.9, seed=7))
    )
    separate, alone = _both(tiny_llama)
    try:
        _same_facts(separate, alone)
        assert separate._pad_id() == alone._pad_id()
        expected = _answers(alone, items)
        got = _answers(separate, items)
        one_by_one = [_answers(separate, [item])[0] for item in items]
    finally:
        separate.close()
        alone.close()
    assert got == expected == one_by_one
    # the batch held mixed max_tokens: each answer was cut to its own (or ended earlier, at its end token)
    completions = [completion for _, completion, _ in got[: len(PROMPTS)]]
    assert all(c is not None and 1 <= c <= n for c, (_, n) in zip(completions, PROMPTS)), completions
    assert len(set(completions)) > 2, completions
    assert len({prompt for _, _, prompt in got}) > 1


@needs_torch
def test_audio_chat_answers_equal_the_in_process_backend(tiny_audio: Path) -> None:
    import numpy as np

    from evalkit.serve.backends.base import ChatInput, GenerationParams

    clips = speech_clips(3)
    clips.append(np.tile(clips[0], 3))  # a longer clip: the batch's audio is padded
    items = [
        ChatInput(
            [{"role": "user", "content": [{"type": "audio", "array": clip}, {"type": "text", "text": "Transcribe."}]}],
            GenerationParams(max_tokens=4 + 3 * i),
        )
        for i, clip in enumerate(clips)
    ]
    separate, alone = _both(tiny_audio)
    try:
        _same_facts(separate, alone)
        assert separate._pad_id() == alone._pad_id()
        expected = _answers(alone, items)
        got = _answers(separate, items)
    finally:
        separate.close()
        alone.close()
    assert got == expected
    assert all(completion for _, completion, _ in got)


@needs_torch
def test_transcripts_and_languages_equal_the_in_process_backend(tiny_whisper: Path) -> None:
    clips = speech_clips(2 * MAX_BATCH + 1)  # three generate chunks
    separate, alone = _both(tiny_whisper)
    try:
        _same_facts(separate, alone)
        assert separate.supports_transcription and separate.languages == frozenset({"en"})
        expected = alone.transcribe_batch(clips)
        got = separate.transcribe_batch(clips)
    finally:
        separate.close()
        alone.close()
    assert got == expected
    assert len(set(got)) > 1  # the transcripts depend on the audio


# ---------------------------------------------------------------------- 8. tensors on the pipe


@needs_torch
def test_tensors_cross_the_pipe_exactly() -> None:
    import torch

    from evalkit.serve.backends.model_process import _Array, _packed, _unpacked

    generator = torch.Generator().manual_seed(0)
    floats = torch.randn(3, 5, generator=generator)
    value = {
        "input_features": floats,
        "bf16": torch.randn(2, 7, generator=generator).to(torch.bfloat16),
        "ids": torch.tensor([[1, 2**40, -3], [0, 5, 6]], dtype=torch.int64),
        "mask": torch.tensor([[True, False, True]]),
        "transposed": floats.t(),  # not contiguous
        "nested": {"bf16": torch.tensor([1.5, -2.25, 3e38], dtype=torch.bfloat16), "note": "kept", "n": 3},
        "scalar": torch.tensor(7, dtype=torch.int64),
    }
    packed = _packed(value)
    assert isinstance(packed["nested"]["bf16"], _Array) and packed["nested"]["note"] == "kept"
    back = _unpacked(pickle.loads(pickle.dumps(packed, pickle.HIGHEST_PROTOCOL)))

    def check(expected: Any, got: Any, key: str) -> None:
        if isinstance(expected, dict):
            assert isinstance(got, dict) and sorted(got) == sorted(expected), key
            for name in expected:
                check(expected[name], got[name], f"{key}.{name}")
        elif isinstance(expected, torch.Tensor):
            assert isinstance(got, torch.Tensor), key
            assert got.dtype == expected.dtype and got.shape == expected.shape, key
            assert torch.equal(got, expected), key
        else:
            assert got == expected, key

    check(value, back, "value")
    assert _unpacked(pickle.loads(pickle.dumps(_packed(floats)))).equal(floats)  # a tensor alone
    assert _packed([1, 2]) == [1, 2]  # anything else crosses as it is


# ---------------------------------------------------------------------- 3. a killed model process (in this process)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead already)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def _wait_for(condition: Callable[[], bool], timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def killed(tiny_llama: Path) -> Iterator[dict[str, Any]]:
    """A ModelProcessBackend whose model process was SIGKILLed while a batch was in it.

    The process is stopped (SIGSTOP) first, so the batch is surely in its pipe
    and unanswered when the kill comes.
    """
    from evalkit.serve.backends.base import ChatInput, GenerationParams
    from evalkit.serve.backends.model_process import ModelProcessBackend

    backend = ModelProcessBackend(tiny_llama, max_batch_size=MAX_BATCH, threads=THREADS)
    pid = backend._process.pid
    item = ChatInput([{"role": "user", "content": "Hello there"}], GenerationParams(max_tokens=4))
    in_flight: dict[str, BaseException] = {}

    def ask() -> None:
        try:
            backend.chat_batch([item])
        except BaseException as exc:
            in_flight["error"] = exc

    try:
        os.kill(pid, signal.SIGSTOP)
        asking = threading.Thread(target=ask)
        asking.start()
        _wait_for(lambda: len(backend._pending) == 1, what="the batch to be handed over")
        os.kill(pid, signal.SIGKILL)
        asking.join(30)
        assert not asking.is_alive()
        yield {"backend": backend, "pid": pid, "in_flight": in_flight.get("error"), "item": item}
    finally:
        if _alive(pid):  # the test failed before its kill
            os.kill(pid, signal.SIGKILL)
        backend.close()


@needs_torch
def test_a_killed_model_process_fails_the_batch_in_it_and_every_later_one(killed: dict[str, Any]) -> None:
    from evalkit.serve.backends.model_process import ModelProcessError

    backend = killed["backend"]
    error = killed["in_flight"]
    assert isinstance(error, ModelProcessError), error
    assert "the model process was killed by signal 9 while it ran a batch" in str(error)
    assert not _alive(killed["pid"])
    failure = backend.failure()
    assert failure is not None and "killed by signal 9" in failure and failure == str(error)
    with pytest.raises(ModelProcessError, match="killed by signal 9"):
        backend.chat_batch([killed["item"]])
    with pytest.raises(ModelProcessError, match="killed by signal 9"):
        backend.generate_chat(backend.prepare_chat([killed["item"]]))


@needs_torch
def test_health_answers_503_failed_with_the_reason_once_the_model_process_is_gone(killed: dict[str, Any]) -> None:
    from evalkit.serve.app import STATE, attach_backend, create_app

    backend = killed["backend"]

    async def go() -> tuple[tuple[int, Any], tuple[int, Any]]:
        app = create_app(None, max_batch_size=MAX_BATCH, batch_wait_ms=1)
        runner, url = await serve_app(app)
        attach_backend(app, backend)
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{url}/health") as response:
                    health = (response.status, await response.json())
                body = {"model": backend.model_id, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
                async with session.post(f"{url}/v1/chat/completions", json=body) as response:
                    chat = (response.status, await response.json())
            return health, chat
        finally:
            app[STATE].backend = None  # the fixture closes it
            await runner.cleanup()

    health, chat = asyncio.run(go())
    assert health == (503, {"status": "failed", "error": backend.failure()})
    assert "killed by signal 9" in health[1]["error"]
    assert chat[0] == 500 and "killed by signal 9" in chat[1]["error"]["message"], chat


@needs_torch
def test_an_idle_model_process_killed_is_reported_with_its_signal_once(tiny_llama: Path) -> None:
    """``watch`` (which ends ``evalkit serve``) and ``failure`` (``/health``) give the same reason: the signal.

    The reader thread, the watcher and ``failure`` all learn of the death at
    once; none may reap the process under another's feet (which read as "still
    alive" or "exit code None"), and no batch was running, so none is blamed.
    """
    from evalkit.serve.backends.model_process import ModelProcessBackend

    backend = ModelProcessBackend(tiny_llama, max_batch_size=MAX_BATCH, threads=THREADS)
    reasons: queue.Queue[str] = queue.Queue()
    try:
        backend.watch(reasons.put)
        os.kill(backend._process.pid, signal.SIGKILL)
        reason = reasons.get(timeout=30)
        failure = backend.failure()
    finally:
        backend.close()
    assert reason == failure == "the model process was killed by signal 9; restart evalkit serve"
    assert reasons.empty()


@needs_torch
def test_a_batch_failing_in_the_model_process_fails_alone_and_close_ends_it_with_code_0(tiny_llama: Path) -> None:
    from evalkit.serve.backends.base import ChatInput, GenerationParams
    from evalkit.serve.backends.model_process import ModelProcessBackend, ModelProcessError

    item = ChatInput([{"role": "user", "content": "Hello there"}], GenerationParams(max_tokens=4))
    backend = ModelProcessBackend(tiny_llama, max_batch_size=MAX_BATCH, threads=THREADS)
    process = backend._process
    try:
        expected = _answers(backend, [item])
        broken = backend.prepare_chat([item])
        broken.chunks[0].encoded["input_ids"] = broken.chunks[0].encoded["input_ids"].float()  # not token ids
        with pytest.raises(RuntimeError) as raised:
            backend.generate_chat(broken)
        assert not isinstance(raised.value, ModelProcessError), raised.value  # the model's own error, sent back
        assert "Float" in str(raised.value), raised.value
        assert _alive(process.pid) and backend.failure() is None
        assert _answers(backend, [item]) == expected  # the next batch is answered as before
    finally:
        backend.close()
    assert process.exitcode == 0
    assert not _alive(process.pid)


# ---------------------------------------------------------------------- evalkit serve in a subprocess


def _children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] not in ("Z", "X") and int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def _model_processes(pid: int) -> list[int]:
    """``pid``'s children that multiprocessing spawned to run a target (not its resource tracker)."""
    found = []
    for child in _children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            found.append(child)
    return found


class _Server(ServeProcess):
    """The tiny model behind ``evalkit serve`` in a session of its own (its group: the server and its children)."""

    def __init__(self, model: Path, *extra: str) -> None:
        super().__init__(
            *["--backend", "transformers", "--model", str(model), "--port", "0"],
            *["--max-batch-size", str(MAX_BATCH), "--threads", str(THREADS), *extra],
            own_session=True,
        )

    def wait_listening(self, timeout: float = 120) -> str:
        return super().wait_listening(timeout)

    def model_process(self) -> int:
        found = _model_processes(self.proc.pid)
        assert len(found) == 1, found
        return found[0]

    def group_gone(self, timeout: float = 30) -> None:
        """Every process of the server's group has ended (the resource tracker ends once nobody holds it)."""
        _wait_for(lambda: not live_group_members(self.proc.pid), timeout, f"group {self.proc.pid} to end")

    def close(self) -> None:
        """SIGTERM, then SIGKILL whatever of its group is left."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.wait(30)
        finally:
            self.stop()

    def stop(self) -> None:
        """SIGKILL whatever is left of this server's group (a test that failed half-way)."""
        if live_group_members(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(self.proc.pid, signal.SIGKILL)  # a stopped process too
        self.proc.wait(timeout=30)


async def _ask(url: str, bodies: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    async with aiohttp.ClientSession() as session:

        async def one(body: dict[str, Any]) -> tuple[int, Any]:
            async with session.post(f"{url}/v1/chat/completions", json=body) as response:
                return response.status, await response.json()

        return list(await asyncio.gather(*(one(body) for body in bodies)))


async def _get(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json()


def _bodies(model: Path) -> list[dict[str, Any]]:
    return [
        {"model": str(model), "temperature": 0, "max_tokens": n, "messages": [{"role": "user", "content": text}]}
        for text, n in PROMPTS
    ]


@pytest.fixture(scope="module")
def servers(tiny_llama: Path) -> Iterator[dict[str, _Server]]:
    """Two servers of the tiny Llama for the module (started together): the default one and --in-process."""
    with serving({"separate": _Server(tiny_llama), "in_process": _Server(tiny_llama, "--in-process")}) as started:
        yield started


@pytest.fixture(scope="module")
def ending(tiny_llama: Path) -> Iterator[dict[str, _Server]]:
    """Three servers of the tiny Llama, started together, each for one test that ends it its own way."""
    started = {name: _Server(tiny_llama) for name in ("kill", "term", "interrupt")}
    try:
        yield started
    finally:
        for server in started.values():
            server.stop()


@needs_torch
def test_serve_runs_the_model_in_a_child_process_and_in_process_on_request(
    servers: dict[str, _Server], tiny_llama: Path
) -> None:
    separate, in_process = servers["separate"], servers["in_process"]
    child = separate.model_process()
    assert _alive(child)
    assert _model_processes(in_process.proc.pid) == []
    stats = {name: asyncio.run(_get(f"{server.url}/_stats")) for name, server in servers.items()}
    threads = str(THREADS)  # the servers were started with --threads THREADS
    assert stats["separate"][1]["model"] == {
        "device": "cpu",
        "dtype": "float32",
        "threads": threads,
        "process": "separate",
    }
    assert stats["in_process"][1]["model"] == {"device": "cpu", "dtype": "float32", "threads": threads}
    answers = {name: asyncio.run(_ask(server.url, _bodies(tiny_llama))) for name, server in servers.items()}
    for status, payload in answers["separate"]:
        assert status == 200, payload

    def content(replies: list[tuple[int, Any]]) -> list[tuple[str, Any]]:
        return [(payload["choices"][0]["message"]["content"], payload["usage"]) for _, payload in replies]

    assert content(answers["separate"]) == content(answers["in_process"])
    assert asyncio.run(_get(f"{separate.url}/health")) == (200, {"status": "ok"})
    assert separate.model_process() == child  # the same model process answered


@needs_torch
def test_a_killed_model_process_ends_the_server_with_code_1_naming_the_signal(ending: dict[str, _Server]) -> None:
    server = ending["kill"]
    try:
        server.wait_listening()
        os.kill(server.model_process(), signal.SIGKILL)
        code = server.wait(60)
        stderr = server.stderr()
        assert code == 1, stderr
        errors = [line for line in stderr.splitlines() if line.startswith("evalkit serve: error: ")]
        assert errors == ["evalkit serve: error: the model process was killed by signal 9; restart evalkit serve"], (
            stderr
        )
        assert "Traceback" not in stderr
        server.group_gone()
    finally:
        server.stop()


@needs_torch
def test_sigterm_ends_the_server_and_its_model_process(ending: dict[str, _Server]) -> None:
    server = ending["term"]
    try:
        server.wait_listening()
        child = server.model_process()
        server.proc.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0, server.stderr()
        assert not _alive(child)
        server.group_gone()
        assert "Traceback" not in server.stderr()
    finally:
        server.stop()


@needs_torch
def test_ctrl_c_leaves_the_model_process_to_the_front_which_finishes_its_request(
    ending: dict[str, _Server], tiny_llama: Path
) -> None:
    """SIGINT to the whole group while a request is in the model process: it is answered, all exit cleanly.

    The model process is stopped (SIGSTOP) while the Ctrl-C comes, so the
    request is surely in it; had it not ignored SIGINT, the pending signal
    would kill it when it continues, and the request would fail.
    """
    server = ending["interrupt"]
    try:
        url = server.wait_listening()
        child = server.model_process()
        os.kill(child, signal.SIGSTOP)
        replies: list[tuple[int, Any]] = []
        asking = threading.Thread(target=lambda: replies.extend(asyncio.run(_ask(url, _bodies(tiny_llama)[:1]))))
        asking.start()
        _wait_for(lambda: asyncio.run(_get(f"{url}/_stats"))[1]["requests"] == 1, what="the request to be handed over")
        os.killpg(server.proc.pid, signal.SIGINT)

        def refusing() -> bool:  # the front took the Ctrl-C: it stopped listening
            try:
                asyncio.run(_get(f"{url}/health"))
            except aiohttp.ClientConnectionError:
                return True
            return False

        _wait_for(refusing, what="the server to stop listening")
        assert _alive(child)
        os.kill(child, signal.SIGCONT)
        asking.join(60)
        assert replies and replies[0][0] == 200, replies
        assert server.wait(60) == 0, server.stderr()
        assert "KeyboardInterrupt" not in server.stderr() and "Traceback" not in server.stderr()
        server.group_gone()
    finally:
        server.stop()


@needs_torch
def test_sigterm_while_the_model_loads_exits_0_and_leaves_no_process(tiny_llama: Path) -> None:
    server = _Server(tiny_llama)
    try:
        _wait_for(lambda: bool(_model_processes(server.proc.pid)), what="the model process to start")
        server.proc.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0, server.stderr()
        assert server._lines.get(timeout=10) == ""  # it never listened
        server.group_gone()
        assert "Traceback" not in server.stderr()
    finally:
        server.stop()


# ---------------------------------------------------------------------- 5. load errors


@needs_torch
@pytest.mark.parametrize("layout", [(), ("--in-process",)], ids=["model-process", "in-process"])
def test_broken_weights_exit_with_one_line_and_leave_no_process(
    tiny_llama: Path, tmp_path: Path, layout: tuple[str, ...]
) -> None:
    broken = tmp_path / "broken-llama"
    shutil.copytree(tiny_llama, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    server = _Server(broken, *layout)
    try:
        code = server.wait(120)
        stderr = server.stderr()
        assert code == 2, stderr  # the model process's load error is the user's to fix: a UserError
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert len(lines) == 1, stderr
        assert lines[0].startswith(f"evalkit serve: error: cannot load model {str(broken)!r}: "), stderr
        assert "Traceback" not in stderr
        assert server._lines.get(timeout=10) == ""  # nothing on stdout: it never listened
        server.group_gone()
    finally:
        server.stop()


# ---------------------------------------------------------------------- 7. --threads and --in-process


def test_threads_0_is_a_usage_error_with_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-m", "evalkit.serve", "--backend", "transformers", "--model", str(tmp_path)]
        + ["--threads", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr.strip() == "evalkit serve: error: --threads must be auto or a whole number of at least 1, got '0'"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "2"], "--threads only applies to --backend transformers"),
        (["--in-process"], "--in-process only applies to backends whose model can run apart"),
    ],
)
def test_transformers_only_options_are_usage_errors_for_pocketsphinx(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve_main(["--backend", "pocketsphinx", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"evalkit serve: error: {message}") and len(captured.err.splitlines()) == 1


# ---------------------------------------------------------------------- 6. pipelining in the batcher


class _HeldModel:
    """A fake ``run_batch``: each batch notes when it ran and waits until the test releases it."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.started: list[list[int]] = []
        self.times: list[tuple[float, float]] = []
        self.fail_on = fail_on
        self._release: dict[int, threading.Event] = {}
        self._lock = threading.Lock()

    def __call__(self, items: list[int]) -> list[int]:
        with self._lock:
            index = len(self.started)
            self.started.append(list(items))
            gate = self._release.setdefault(index, threading.Event())
        began = time.monotonic()
        assert gate.wait(30), f"batch {index} was never released"
        self.times.append((began, time.monotonic()))
        if self.fail_on is not None and self.fail_on in items:
            raise RuntimeError(f"model failed on {self.fail_on}")
        return [x * 10 for x in items]

    def release(self, index: int) -> None:
        with self._lock:
            self._release.setdefault(index, threading.Event()).set()


async def _until(condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def _pipelined(model: _HeldModel, pool: ThreadPoolExecutor, stats: BatchStats) -> DynamicBatcher[int, int]:
    return DynamicBatcher(model, executor=pool, max_batch_size=2, batch_wait_s=0.005, stats=stats, pipeline=2)


def test_pipeline_hands_over_a_full_batch_while_one_runs_but_a_partial_one_waits() -> None:
    model = _HeldModel()
    stats = BatchStats()

    async def go() -> list[int]:
        with ThreadPoolExecutor(2, thread_name_prefix="backend") as pool:
            batcher = _pipelined(model, pool, stats)
            batcher.start()
            first = [asyncio.ensure_future(batcher.submit(i)) for i in (1, 2)]
            await _until(lambda: len(model.started) == 1, "the first batch")
            second = [asyncio.ensure_future(batcher.submit(i)) for i in (3, 4)]
            # a full batch goes to the model while the first is still in it
            await _until(lambda: len(model.started) == 2, "the second, full batch")
            partial = asyncio.ensure_future(batcher.submit(5))
            model.release(0)
            assert await asyncio.gather(*first) == [10, 20]
            await asyncio.sleep(0.3)  # many gathering windows: the partial batch stays while a batch generates
            assert len(model.started) == 2 and not partial.done()
            model.release(1)
            assert await asyncio.gather(*second) == [30, 40]
            await _until(lambda: len(model.started) == 3, "the partial batch once none generates")
            model.release(2)
            results = [await partial]
            await batcher.close()
            return results

    assert asyncio.run(go()) == [50]
    assert model.started == [[1, 2], [3, 4], [5]]
    assert stats.as_dict()["batch_sizes"] == {"1": 1, "2": 2}


def test_pipeline_counts_the_models_time_once_for_overlapping_batches() -> None:
    """Two batches in the model at once: generate_seconds is their union, not the sum of their durations."""
    model = _HeldModel()
    stats = BatchStats()

    async def go() -> None:
        with ThreadPoolExecutor(2, thread_name_prefix="backend") as pool:
            batcher = _pipelined(model, pool, stats)
            batcher.start()
            answers = [asyncio.ensure_future(batcher.submit(i)) for i in range(4)]
            await _until(lambda: len(model.started) == 2, "two batches in the model")
            await asyncio.sleep(0.4)  # both are in the model for at least this long
            model.release(0)
            await _until(lambda: len(model.times) == 1, "the first batch's end")
            await asyncio.sleep(0.2)  # the second alone
            model.release(1)
            assert await asyncio.gather(*answers) == [0, 10, 20, 30]
            await batcher.close()

    asyncio.run(go())
    (start_a, end_a), (start_b, end_b) = model.times
    overlap = end_a - start_b
    assert overlap >= 0.4 and end_b - end_a >= 0.2
    union = end_b - start_a
    summed = (end_a - start_a) + (end_b - start_b)
    # the batcher's clock brackets run_batch's own: a little more than the union, far less than the sum
    assert union <= stats.generate_seconds < union + overlap / 2, (stats.generate_seconds, union, summed)
    assert stats.generate_seconds < summed - overlap / 2


def test_pipeline_failure_fails_only_its_batch_and_frees_its_slot() -> None:
    model = _HeldModel(fail_on=1)
    stats = BatchStats()

    async def go() -> list[Any]:
        with ThreadPoolExecutor(2, thread_name_prefix="backend") as pool:
            batcher = _pipelined(model, pool, stats)
            batcher.start()
            first = [asyncio.ensure_future(batcher.submit(i)) for i in (1, 2)]
            second = [asyncio.ensure_future(batcher.submit(i)) for i in (3, 4)]
            await _until(lambda: len(model.started) == 2, "both batches in the model")
            model.release(0)
            model.release(1)
            results = list(await asyncio.gather(*first, *second, return_exceptions=True))
            # with a slot still taken, a lone request would wait for a batch that never ends
            model.release(2)
            results.append(await asyncio.wait_for(batcher.submit(6), 10))
            await batcher.close()
            return results

    results = asyncio.run(go())
    assert [type(r) for r in results[:2]] == [RuntimeError, RuntimeError]
    assert str(results[0]) == "model failed on 1"
    assert results[2:] == [30, 40, 60]
    assert model.started == [[1, 2], [3, 4], [6]]

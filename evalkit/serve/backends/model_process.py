"""The transformers model in a process of its own, behind a front that does everything else.

Why: a server process has one GIL. With the model in the same process as the
HTTP side, every request's parsing, JSON, templating, tokenizing and decoding
takes GIL time from ``generate``, whose Python (the decoding loop, the
launching of each step's kernels) needs it nearly all the time; measured on
the tiny text model, the server then reached 0.86-0.90x of ``generate`` in a
process of its own. vLLM splits the same way: an API server process in front
of an engine process.

:class:`ModelProcessBackend` is the front: a :class:`TransformersBackend`
without weights (config, tokenizer, processor) that runs the preparation and
finishing stages in the server process; only each batch's ``generate`` goes
to the model process, as the batch's CPU tensors over a pipe, and the
generated ids come back. The model process is started first, so the two
load in parallel; it runs one loop on one thread (receive a batch, generate,
send the ids), so nothing in it competes with the model for its GIL.
Batches are pipelined (``pipeline_depth`` 2): the server hands over a full
batch while the previous one generates, so the next is already in the pipe
when the model ends one; a reader thread hands each answer to its caller, in
order. Tensors cross as numpy arrays (see :class:`_Array`).

The model process ignores SIGINT (a Ctrl-C reaches the whole process group;
the front decides) and ends when the front closes the pipe, even if the
front was killed. If it dies (killed, or out of memory), the front's
requests fail with that cause, ``/health`` says so, and ``evalkit serve``
exits with code 1 so a supervisor can restart it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import multiprocessing
import pickle
import signal
import threading
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from evalkit.errors import UserError
from evalkit.serve.backends.transformers_backend import (
    PreparedChat,
    PreparedTranscription,
    TransformersBackend,
    chunk_max_new_tokens,
)

_log = logging.getLogger("evalkit.serve")

#: messages over the pipe: front -> model ("chat" | "transcription", jobs) or None to stop;
#: model -> front ("ready", facts) | ("ok", outputs, max_batch_size) | ("error", exception) | ("load_error", text)
_CHAT = "chat"
_TRANSCRIPTION = "transcription"


class ModelProcessError(RuntimeError):
    """The model process is gone: every later batch fails with this cause."""


def _model_main(conn: Connection, backend_kwargs: dict[str, Any], log_level: int) -> None:
    """The model process: load the model, then receive batches, generate, send back their ids; ends on EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=log_level, format="evalkit serve (model): %(levelname)s %(name)s: %(message)s")
    try:
        backend = TransformersBackend(**backend_kwargs)
    except UserError as exc:
        conn.send(("load_error", str(exc)))
        return
    except Exception as exc:  # e.g. a truncated weights file: the user's to fix, so say which model
        conn.send(
            ("load_error", f"cannot load model {str(backend_kwargs['model_path'])!r}: {type(exc).__name__}: {exc}")
        )
        return
    conn.send(("ready", {"generation_config": backend.generation_config, "runtime": backend.runtime()}))
    run: dict[str, Callable[..., Any]] = {
        _CHAT: backend.generate_chat_chunk,
        _TRANSCRIPTION: backend.generate_transcription_chunk,
    }
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the front is gone
            break
        if message is None:
            break
        kind, jobs = message
        try:
            outputs = [_packed(run[kind](*(_unpacked(part) for part in job))) for job in jobs]
        except Exception as exc:
            conn.send(("error", _picklable(exc)))
        else:
            conn.send(("ok", outputs, backend.max_batch_size))
    backend.close()


class _Array:
    """A CPU tensor on the pipe as a numpy array (bfloat16, which numpy lacks, as its 16-bit pattern).

    ``import torch`` registers multiprocessing reducers that send every tensor
    through shared memory, one file descriptor handed over a socket per
    tensor: measured 2.6 ms a batch on the tiny text model (14.0 against 11.4
    ms of generate), where a pickled array costs a copy of its bytes.
    """

    __slots__ = ("array", "bfloat16")

    def __init__(self, tensor: Any) -> None:
        self.bfloat16 = tensor.dtype == torch.bfloat16
        self.array = (tensor.view(torch.int16) if self.bfloat16 else tensor).numpy()

    def __getstate__(self) -> tuple[Any, bool]:
        return self.array, self.bfloat16

    def __setstate__(self, state: tuple[Any, bool]) -> None:
        self.array, self.bfloat16 = state

    def tensor(self) -> Any:
        tensor = torch.from_numpy(self.array)
        return tensor.view(torch.bfloat16) if self.bfloat16 else tensor


def _packed(value: Any) -> Any:
    """``value`` with its tensors (alone, or as the values of a dict) made :class:`_Array` for the pipe."""
    if isinstance(value, torch.Tensor):
        return _Array(value.detach().cpu())
    if isinstance(value, dict):
        return {key: _packed(item) for key, item in value.items()}
    return value


def _unpacked(value: Any) -> Any:
    if isinstance(value, _Array):
        return value.tensor()
    if isinstance(value, dict):
        return {key: _unpacked(item) for key, item in value.items()}
    return value


def _picklable(exc: Exception) -> Exception:
    """``exc`` itself when it crosses the pipe intact, else a RuntimeError with its type and text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class ModelProcessBackend(TransformersBackend):
    """A transformers backend whose model runs in a child process (``evalkit serve``'s default)."""

    pipeline_depth = 2

    def __init__(
        self,
        model_path: str | Path,
        device: str = "cpu",
        max_batch_size: int = 8,
        model_id: str | None = None,
        dtype: str = "auto",
        threads: int | str | None = None,
    ) -> None:
        """``threads``: torch's CPU threads in the model process (None: torch's default there; "auto": chosen by
        measuring, see :meth:`TransformersBackend.choose_threads`).

        The front's own tensor work is joining and padding a batch's rows, so it runs torch on one thread:
        more would spin on the cores the model uses.
        """
        context = multiprocessing.get_context("spawn")  # a fork of a process with threads and torch is unsafe
        self._conn, child_conn = context.Pipe()
        backend_kwargs = {
            "model_path": model_path,
            "device": device,
            "max_batch_size": max_batch_size,
            "dtype": dtype,
            "threads": threads,
        }
        self._process = context.Process(
            target=_model_main,
            args=(child_conn, backend_kwargs, logging.getLogger().getEffectiveLevel()),
            name="evalkit-model",
            daemon=True,
        )
        self._process.start()
        child_conn.close()
        #: held while a batch is written to the pipe, so batches and their callers stay in the same order
        self._send_lock = threading.Lock()
        #: one waiter per batch sent and not yet answered, oldest first
        self._pending: deque[concurrent.futures.Future[tuple[Any, ...]]] = deque()
        self._closing = False
        self._failure: str | None = None
        #: held while the process's end is recorded: the reader, the watcher and ``failure`` learn of it at once,
        #: and one reaping the process under another's feet makes it read as alive or as "exit code None"
        self._death_lock = threading.Lock()
        self._runtime: dict[str, str] = {}
        try:
            # the front's tokenizer and processor load while the model process loads the weights
            super().__init__(model_path, device, max_batch_size, model_id, dtype, load_model=False, threads=1)
            self._adopt(self._receive("loading the model"))
        except BaseException:
            self._stop_process()
            raise
        threading.Thread(target=self._read_answers, name="evalkit-model-answers", daemon=True).start()

    def _adopt(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "load_error":
            raise UserError(message[1])
        if kind != "ready":
            raise ModelProcessError(f"the model process answered {kind!r} while loading")
        facts = message[1]
        self._runtime = facts["runtime"]
        self.dtype = getattr(torch, self._runtime.get("dtype", ""), self.dtype)
        self.use_generation_config(facts["generation_config"])

    # ------------------------------------------------------------ the generate stage, in the model process

    def generate_chat(self, prepared: Any) -> Any:
        if not isinstance(prepared, PreparedChat):
            return super().generate_chat(prepared)
        jobs = [(chunk.encoded, chunk.params, chunk_max_new_tokens(chunk)) for chunk in prepared.chunks]
        for chunk, output in zip(prepared.chunks, self._call(_CHAT, jobs)):
            chunk.output = output
        return prepared

    def generate_transcription(self, prepared: Any) -> Any:
        if not isinstance(prepared, PreparedTranscription):
            return super().generate_transcription(prepared)
        jobs = [(chunk.inputs, chunk.gen_kwargs) for chunk in prepared.chunks]
        for chunk, sequences in zip(prepared.chunks, self._call(_TRANSCRIPTION, jobs)):
            chunk.sequences = sequences
        return prepared

    def _call(self, kind: str, jobs: list[tuple[Any, ...]]) -> list[Any]:
        """Send one batch's jobs to the model process and wait for their ids (on a server's backend thread)."""
        data = pickle.dumps((kind, [tuple(_packed(part) for part in job) for job in jobs]), pickle.HIGHEST_PROTOCOL)
        waiter: concurrent.futures.Future[tuple[Any, ...]] = concurrent.futures.Future()
        with self._send_lock:
            if self._failure is not None:
                raise ModelProcessError(self._failure)
            self._pending.append(waiter)
            # a closed pipe: the reader sees the process's end and fails every waiter, this one too
            with contextlib.suppress(OSError, ValueError):
                self._conn.send_bytes(data)
        message = waiter.result()
        if message[0] == "error":
            raise message[1]
        _, outputs, max_batch_size = message
        if max_batch_size < self.max_batch_size:  # it ran out of accelerator memory and made batches smaller
            self.max_batch_size = max_batch_size
        return [_unpacked(output) for output in outputs]

    def _read_answers(self) -> None:
        """The reader thread: each answer to the oldest waiter; when the process ends, every waiter fails."""
        while True:
            try:
                message: tuple[Any, ...] = self._conn.recv()
            except (EOFError, OSError):
                break
            self._pending.popleft().set_result(message)
        if self._closing:
            reason = "the server is shutting down"
        else:
            reason = self._died("while it ran a batch" if self._pending else "")
        with self._send_lock:
            self._failure = self._failure or reason
            waiters = list(self._pending)
            self._pending.clear()
        for waiter in waiters:
            waiter.set_exception(ModelProcessError(reason))

    def _receive(self, doing: str) -> tuple[Any, ...]:
        try:
            message: tuple[Any, ...] = self._conn.recv()
        except (EOFError, OSError):
            raise ModelProcessError(self._died(doing)) from None
        return message

    def _died(self, doing: str = "") -> str:
        """Record (once) and log why the model process is gone: its exit code or signal, and what it was doing."""
        with self._death_lock:
            if self._failure is not None:
                return self._failure
            self._process.join(timeout=5)
            code = self._process.exitcode
            how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            self._failure = f"the model process {how}{' ' + doing if doing else ''}; restart evalkit serve"
            _log.error("%s", self._failure)
            return self._failure

    # ------------------------------------------------------------ lifecycle

    def failure(self) -> str | None:
        """Why this backend can answer nothing more (its model process is gone), else None."""
        # its sentinel, not is_alive(): that reaps the process, racing the reader thread's join in _died
        if self._failure is None and multiprocessing.connection.wait([self._process.sentinel], timeout=0):
            self._died()
        return self._failure

    def watch(self, on_exit: Callable[[str], None]) -> None:
        """Call ``on_exit(reason)`` from a daemon thread if the model process ends before :meth:`close`."""

        def wait() -> None:
            multiprocessing.connection.wait([self._process.sentinel])
            if not self._closing:
                on_exit(self.failure() or "the model process ended")

        threading.Thread(target=wait, name="evalkit-model-watch", daemon=True).start()

    def runtime(self) -> dict[str, str]:
        return {**self._runtime, "process": "separate"} if self._runtime else {}

    def close(self) -> None:
        self._closing = True
        self._stop_process()
        super().close()

    def _stop_process(self) -> None:
        """Ask the model process to end (it finishes a running batch first), then make sure it does."""
        with self._send_lock, contextlib.suppress(OSError, ValueError):  # a closed pipe: it has ended
            self._conn.send(None)
        self._process.join(timeout=30)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=5)
        self._conn.close()

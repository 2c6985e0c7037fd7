"""Prompt + prepared audio -> concrete requests for one model.

Audio is decoded once per sample (16 kHz mono int16 PCM) and every model
slices its own chunks from those bytes: chunking and truncation are a byte
slice plus a WAV header, with no second decode.

Decoding, resampling and cutting run in a small pool of worker *processes*
(:func:`run_audio_job`), not threads: measured on a 2-core machine, six
decode threads competing with the event loop for the GIL pushed the loop's
p99 wake-up lag to ~270 ms during a run of 10 s clips; in processes the loop
keeps the interpreter to itself. ``EVALKIT_AUDIO_WORKERS`` sets the number of
processes (default: CPU count, at most 4); ``0`` decodes in threads instead
(also the fallback when processes cannot be started).
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, TypeVar

from evalkit.clients.request import AudioPart, ModelRequest
from evalkit.data import audio as audio_codec
from evalkit.data.sample import Audio
from evalkit.prompts.prompt import Prompt

SAMPLE_RATE = 16000
_BYTES_PER_SECOND = SAMPLE_RATE * 2

log = logging.getLogger("evalkit")
T = TypeVar("T")


def pcm16_of(audio: Audio) -> bytes:
    """Decode any supported audio to 16 kHz mono little-endian int16 PCM (blocking; run in a thread)."""
    import numpy as np

    array = audio_codec.load_16k_mono(audio)
    # x * 32768 inverts soundfile's int16 -> float scaling exactly, so 16-bit sources pass losslessly
    return np.clip(np.rint(array * 32768.0), -32768, 32767).astype("<i2").tobytes()


def wav_from_pcm16(pcm: bytes) -> bytes:
    header = b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, SAMPLE_RATE, _BYTES_PER_SECOND, 2, 16)
    header += b"data" + struct.pack("<I", len(pcm))
    return header + pcm


def piece_bounds(n_bytes: int, chunk_size: float | None, mode: str) -> list[tuple[int, int]]:
    """Byte ranges of the pieces of ``n_bytes`` of PCM cut at ``chunk_size`` seconds (``chunk`` or ``truncate``).

    A chunk is ``int(chunk_size * 16000)`` samples (at least one), so every
    piece but the last is exactly that long and the pieces cover the audio once.
    """
    if not chunk_size:
        return [(0, n_bytes)]
    step = max(1, int(chunk_size * SAMPLE_RATE)) * 2
    if n_bytes <= step:
        return [(0, n_bytes)]
    if mode == "truncate":
        return [(0, step)]
    return [(i, min(i + step, n_bytes)) for i in range(0, n_bytes, step)]


def audio_pieces(pcm: bytes, chunk_size: float | None, mode: str) -> list[bytes]:
    """Split (``chunk``) or cut (``truncate``) PCM at ``chunk_size`` seconds; whole audio when None."""
    return [pcm[start:stop] for start, stop in piece_bounds(len(pcm), chunk_size, mode)]


#: how a model wants its audio cut: (chunk_size seconds or None, "chunk" | "truncate")
Shape = tuple[float | None, str]


@dataclass(slots=True)
class RequestContext:
    """What one model needs to turn a prompt into requests."""

    model: str
    kind: str  # "chat" | "transcription"
    params: dict[str, Any]
    chunk_size: float | None
    long_audio: str
    language: str | None
    #: the model's system prompt when it differs from the prompt's default
    system: str | None = None
    #: True when ``system`` is this model's own choice even if None (a model that wants no system prompt)
    system_override: bool = False

    @property
    def shape(self) -> Shape:
        return (self.chunk_size, self.long_audio)


class PreparedAudio:
    """A sample's audio, decoded once, and its WAV pieces per shape, shared by every model.

    Keys are turn indexes (0, 1, ...) and in-context examples (:func:`example_key`,
    negative). :meth:`build` makes all the pieces the engine's models need off
    the loop (WAV header, copy and sha256 are CPU work) and then lets the raw
    PCM go, so a sample in flight holds its audio once, not twice; a piece
    that two shapes share (a clip shorter than both chunk sizes) is one object.
    """

    __slots__ = ("pcm_by_turn", "seconds", "_parts", "_pieces")

    def __init__(self, pcm_by_turn: dict[int, bytes]) -> None:
        self.pcm_by_turn = dict(pcm_by_turn)
        self.seconds = {key: len(pcm) / _BYTES_PER_SECOND for key, pcm in self.pcm_by_turn.items()}
        self._parts: dict[tuple[int, float | None, str], list[AudioPart]] = {}
        self._pieces: dict[tuple[int, int, int], AudioPart] = {}

    def __contains__(self, key: object) -> bool:
        return key in self.seconds

    @property
    def n_examples(self) -> int:
        return sum(1 for key in self.seconds if key < 0)

    def parts(self, key: int, chunk_size: float | None, mode: str) -> list[AudioPart]:
        """The WAV pieces of ``key`` cut to ``(chunk_size, mode)``; examples are always truncated."""
        if key < 0:
            mode = "truncate"
        cache_key = (key, chunk_size, mode)
        found = self._parts.get(cache_key)
        if found is None:
            if key not in self.pcm_by_turn:
                raise KeyError(f"audio {key} was not prepared for chunk_size={chunk_size}, {mode}")
            pcm = self.pcm_by_turn[key]
            found = []
            for start, stop in piece_bounds(len(pcm), chunk_size, mode):
                piece = self._pieces.get((key, start, stop))
                if piece is None:
                    piece = self._pieces[(key, start, stop)] = AudioPart.from_wav(wav_from_pcm16(pcm[start:stop]))
                found.append(piece)
            self._parts[cache_key] = found
        return found

    def build(self, shapes: Iterable[Shape], release_pcm: bool = True) -> PreparedAudio:
        """Make every piece ``shapes`` need (blocking: run it off the loop); then drop the PCM."""
        wanted = list(dict.fromkeys(shapes))
        for key in list(self.pcm_by_turn):
            for chunk_size, mode in wanted:
                self.parts(key, chunk_size, mode)
        if release_pcm:
            self.pcm_by_turn = {}
            self._pieces = {}
        return self

    def adopt(self, key: int, other: PreparedAudio, other_key: int) -> None:
        """Use ``other``'s audio under ``key``: an in-context example's pieces, made once per engine."""
        self.seconds[key] = other.seconds[other_key]
        if other_key in other.pcm_by_turn:
            self.pcm_by_turn[key] = other.pcm_by_turn[other_key]
        for (source, chunk_size, mode), parts in other._parts.items():
            if source == other_key:
                self._parts[(key, chunk_size, mode)] = parts


def example_key(index: int) -> int:
    """PreparedAudio key of the audio of in-context example ``index`` (turns use 0, 1, ...)."""
    return -(index + 1)


def prepare_audio(prompt: Prompt, shapes: Iterable[Shape]) -> PreparedAudio:
    """Decode every turn's audio once and cut it for every shape (blocking: run it off the loop).

    Raises ValueError/OSError/RuntimeError (AudioDecodeError is a ValueError)
    when the audio cannot be read; the engine records that sample as failed.
    """
    return prepare_turn_audio({index: turn.audio for index, turn in enumerate(prompt.turns) if turn.audio is not None}, list(shapes))


def prepare_turn_audio(audio_by_turn: dict[int, Audio], shapes: list[Shape]) -> PreparedAudio:
    """:func:`prepare_audio` on just the audio (what crosses to a worker process: no prompt text)."""
    return PreparedAudio({index: pcm16_of(audio) for index, audio in audio_by_turn.items()}).build(shapes)


def prepare_example_audio(audio: Audio, shapes: Iterable[Shape]) -> PreparedAudio:
    """An in-context example's audio, truncated for every chunk size (key -1); blocking."""
    return PreparedAudio({-1: pcm16_of(audio)}).build([(chunk_size, "truncate") for chunk_size, _ in shapes])


# --------------------------------------------------------------------------- audio worker processes

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()
_pool_failed = False


def audio_workers() -> int:
    """Worker processes for audio: ``EVALKIT_AUDIO_WORKERS``, else the CPU count capped at 4 (0: threads)."""
    value = os.environ.get("EVALKIT_AUDIO_WORKERS", "").strip()
    if value:
        try:
            return max(0, int(value))
        except ValueError:
            log.warning("EVALKIT_AUDIO_WORKERS=%r is not a number; using the default", value)
    return max(1, min(4, os.cpu_count() or 1))


def _worker_init() -> None:
    """Audio workers yield the CPU to the event loop: decoding is throughput work, the loop's wake-ups are latency."""
    try:
        os.nice(5)
    except (AttributeError, OSError):  # no nice() on Windows; not allowed in some sandboxes
        pass


def _audio_pool() -> Executor | None:
    """The shared process pool, started and warmed on first use (blocking: call it in a thread), or None for threads.

    Workers are started here, not lazily by ``submit``: starting processes
    blocks the caller for up to a second, which must not be the event loop.
    """
    global _pool, _pool_failed
    if _pool_failed or audio_workers() == 0:
        return None
    with _pool_lock:
        if _pool is None:
            import multiprocessing

            workers = audio_workers()
            try:
                # forkserver: workers fork from a clean process that imported the decoders once;
                # plain fork would copy this process' threads and sockets, spawn re-imports per worker
                method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
                context = multiprocessing.get_context(method)
                if method == "forkserver":
                    context.set_forkserver_preload(["evalkit.request_builder"])
                pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_init)
                warm = [pool.submit(os.getpid) for _ in range(workers)]
                for future in warm:
                    future.result(timeout=120)
            except (OSError, ValueError, RuntimeError, TimeoutError, BrokenProcessPool) as error:
                log.warning("audio worker processes unavailable (%s); decoding audio in threads", error)
                _pool_failed = True
                return None
            _pool = pool
        return _pool


async def run_audio_job(fn: Callable[..., T], *args: Any) -> T:
    """Run blocking audio work (``fn`` must be a module-level function) off the event loop.

    A worker process that dies (killed, out of memory) breaks the pool: the
    job is retried once in a thread and later jobs use threads, so one bad
    file never stops a run.
    """
    global _pool, _pool_failed
    if _pool_failed or audio_workers() == 0:
        return await asyncio.to_thread(fn, *args)
    pool = _pool if _pool is not None else await asyncio.to_thread(_audio_pool)
    if pool is not None and not _pool_failed:
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
        except BrokenProcessPool:
            with _pool_lock:
                if not _pool_failed:
                    log.warning("an audio worker process died; decoding audio in threads from now on")
                _pool_failed = True
                if _pool is pool:
                    _pool = None
            pool.shutdown(wait=False, cancel_futures=True)
    return await asyncio.to_thread(fn, *args)


def shutdown_audio_workers() -> None:
    """Stop the worker processes (the next job starts new ones); for hosts that outlive a run."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def _user_content(text: str | None, first_audio: int, n_audio: int) -> Any:
    """A user message's content: plain text, or text then ``n_audio`` audio parts from index ``first_audio``."""
    if n_audio == 0:
        return text or ""
    audio = [{"type": "input_audio", "input_audio": {"audio_index": first_audio + j}} for j in range(n_audio)]
    return ([{"type": "text", "text": text}] if text else []) + audio


def _prefix(prompt: Prompt, audio: PreparedAudio, ctx: RequestContext) -> tuple[list[dict[str, Any]], list[AudioPart]]:
    """System message and in-context examples (user turn + reference answer), with the examples' audio."""
    prefix: list[dict[str, Any]] = []
    system = ctx.system if (ctx.system is not None or ctx.system_override) else prompt.system
    if system:
        prefix.append({"role": "system", "content": system})
    example_audio: list[AudioPart] = []
    for index, (example, answer) in enumerate(prompt.examples):
        key = example_key(index)
        pieces = audio.parts(key, ctx.chunk_size, "truncate") if key in audio else []
        prefix += [{"role": "user", "content": _user_content(example.text, len(example_audio), len(pieces))}, {"role": "assistant", "content": answer}]
        example_audio += pieces
    return prefix, example_audio


def turn_requests(
    prompt: Prompt,
    turn: int,
    history: list[dict[str, Any]],
    history_audio: list[AudioPart],
    audio: PreparedAudio,
    ctx: RequestContext,
    repeat: int = 0,
) -> list[ModelRequest]:
    """The requests for one user turn: one per audio chunk (one when there is no audio).

    ``history`` holds earlier turns (user messages whose audio parts index into
    the examples' audio followed by ``history_audio``, and the model's answers),
    so each sample carries its own conversation and nothing is shared between
    samples. An empty list means the model cannot answer this turn (a
    transcription model and a turn without audio).
    """
    current = prompt.turns[turn]
    pieces: list[AudioPart] = audio.parts(turn, ctx.chunk_size, ctx.long_audio) if turn in audio else []
    if ctx.kind == "transcription":
        return [
            ModelRequest(kind="transcription", model=ctx.model, audio=[piece], params=ctx.params, language=ctx.language, repeat=repeat)
            for piece in pieces
        ]
    prefix, example_audio = _prefix(prompt, audio, ctx)
    earlier = [*example_audio, *history_audio]
    if not pieces:
        messages = [*prefix, *history, {"role": "user", "content": _user_content(current.text, len(earlier), 0)}]
        return [ModelRequest(kind="chat", model=ctx.model, messages=messages, audio=earlier, params=ctx.params, repeat=repeat)]
    requests = []
    for piece in pieces:
        messages = [*prefix, *history, {"role": "user", "content": _user_content(current.text, len(earlier), 1)}]
        requests.append(ModelRequest(kind="chat", model=ctx.model, messages=messages, audio=[*earlier, piece], params=ctx.params, repeat=repeat))
    return requests


def joined_answer(texts: list[str | None]) -> str:
    """One turn's answer from its chunks' answers: in order, joined by one space (a lone answer as it came)."""
    if len(texts) == 1:
        return texts[0] or ""
    return " ".join(stripped for stripped in ((t or "").strip() for t in texts) if stripped)


def history_after(
    prompt: Prompt,
    turn: int,
    history: list[dict[str, Any]],
    history_audio: list[AudioPart],
    audio: PreparedAudio,
    ctx: RequestContext,
    answer: str,
) -> tuple[list[dict[str, Any]], list[AudioPart]]:
    """The conversation after ``turn``: the user turn as the model heard it (every chunk) and its answer.

    New lists are returned; the caller's are never changed, so a conversation
    can be replayed or branched without one sample seeing another's history.
    """
    if ctx.kind != "chat":
        return history, history_audio
    pieces = audio.parts(turn, ctx.chunk_size, ctx.long_audio) if turn in audio else []
    _, example_audio = _prefix(prompt, audio, ctx)
    first = len(example_audio) + len(history_audio)
    message = {"role": "user", "content": _user_content(prompt.turns[turn].text, first, len(pieces))}
    return [*history, message, {"role": "assistant", "content": answer}], [*history_audio, *pieces]

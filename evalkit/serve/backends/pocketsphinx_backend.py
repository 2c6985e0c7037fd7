"""CMU PocketSphinx as an evalkit backend: a small, CPU-only English recognizer.

It needs no download (the en-us acoustic model, dictionary and language model
ship inside the ``pocketsphinx`` wheel), which makes it the backend for tests
and for trying ``evalkit serve`` on any machine. With ``grammar=FILE`` the
search is limited to the sentences in FILE, so a test can expect exact text.
Utterances are decoded in a child process (:mod:`pocketsphinx_process`), whose
GIL the decoder may hold as long as it likes: the server keeps answering.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pocketsphinx

from evalkit.errors import UserError
from evalkit.serve.backends.base import Backend, ChatInput, Generated, InputError
from evalkit.serve.backends.pocketsphinx_process import DecoderProcess

SAMPLE_RATE = 16000

# Formant-synthesised speech (espeak) has exact digital silence and empty
# spectral bands; their log energies are -inf-like and wreck the decoder's
# cepstral mean normalisation (a clear sentence decodes as "oh" or nothing).
# A fixed, seeded noise floor at -50 dBFS fixes that and is far below the
# noise floor of any real recording, so real speech is unaffected. The seed
# is fixed so the same audio always gives the same transcript.
_DITHER_RMS = 10 ** (-50 / 20)
_DITHER_SEED = 1234

_WORD = re.compile(r"[a-z0-9']+(?:[-.][a-z0-9']+)*")


def _words(line: str) -> list[str]:
    """Dictionary spelling of a sentence: lower case, punctuation (but apostrophes) dropped."""
    return _WORD.findall(line.lower().replace("\u2019", "'"))


def _to_pcm16(audio: np.ndarray) -> bytes:
    samples = np.asarray(audio, dtype=np.float32).reshape(-1)
    if samples.size:
        noise = np.random.default_rng(_DITHER_SEED).normal(0.0, _DITHER_RMS, samples.size)
        samples = samples + noise.astype(np.float32)
    return (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


class PocketsphinxBackend(Backend):
    """English speech recognition; chat answers with the transcript of the last user turn's audio."""

    model_id = "pocketsphinx-en-us"
    supports_chat = True
    supports_transcription = True
    languages = frozenset({"en"})
    audio_tokens_per_second = 100.0  # the decoder's feature frames per second

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        max_batch_size: int = 8,
        grammar: str | os.PathLike[str] | None = None,
        **_: Any,
    ) -> None:
        if device not in ("cpu", "auto"):
            raise UserError(f"the pocketsphinx backend runs on the CPU only, not on device {device!r}")
        self.max_batch_size = max_batch_size
        self.grammar_path = os.fspath(grammar) if grammar is not None else None
        config: dict[str, Any] = {"loglevel": "FATAL"}
        if model_path:
            if not Path(model_path).is_dir():
                raise UserError(
                    f"--model {model_path}: not a directory (expected a pocketsphinx acoustic model folder)"
                )
            config["hmm"] = os.fspath(model_path)
        self._sentences: dict[tuple[str, ...], str] = {}
        jsgf = None
        if self.grammar_path is not None:
            # a decoder here only to check the grammar's words: utterances are decoded in a child process
            jsgf = self._use_grammar(self.grammar_path, pocketsphinx.Decoder(**config))
        self._process: DecoderProcess | None = DecoderProcess(config, jsgf)

    # ------------------------------------------------------------------ grammar

    def _use_grammar(self, path: str, decoder: pocketsphinx.Decoder) -> str:
        """The JSGF grammar that limits recognition to the sentences of ``path`` (one per line, '#' a comment)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--grammar {path}: cannot read it ({exc.strerror or exc})") from None
        unknown: list[str] = []
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            words = _words(line)
            if not words:
                raise UserError(f"--grammar {path} line {number}: {line!r} has no words")
            for word in words:
                if decoder.lookup_word(word) is None:
                    unknown.append(f"{word!r} (line {number})")
            self._sentences.setdefault(tuple(words), line)
        if unknown:
            raise UserError(
                f"--grammar {path}: not in the pocketsphinx dictionary: {', '.join(unknown[:10])}"
                + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
                + "; spell numbers and symbols as words"
            )
        if not self._sentences:
            raise UserError(f"--grammar {path}: no sentences (write one allowed sentence per line)")
        alternatives = " | ".join(f"( {' '.join(words)} )" for words in self._sentences)
        jsgf = f"#JSGF V1.0;\ngrammar evalkit;\npublic <sentence> = {alternatives} ;\n"
        try:
            decoder.add_jsgf_string("evalkit_grammar", jsgf)
        except ValueError as exc:
            raise UserError(f"--grammar {path}: pocketsphinx rejected the grammar ({exc})") from None
        return jsgf

    # ------------------------------------------------------------------ recognition

    def _recognize(self, audio: np.ndarray) -> str:
        process = self._process
        if process is None:
            raise RuntimeError("the pocketsphinx backend is closed")
        text = process.decode(_to_pcm16(audio))
        if self._sentences:
            # give back the sentence as the grammar file wrote it (case, punctuation)
            return self._sentences.get(tuple(text.split()), text)
        return text

    def transcribe_batch(self, audios: list[np.ndarray], language: str | None = None) -> list[str]:
        # No real batching in pocketsphinx: the gain is one thread hop per batch.
        return [self._recognize(audio) for audio in audios]

    def check_chat(self, item: ChatInput) -> None:
        if not _last_user_audio(item.messages):
            raise InputError("pocketsphinx backend needs audio: the last user message has no input_audio part")

    def chat_batch(self, inputs: list[ChatInput]) -> list[str]:
        answers: list[str] = []
        for item in inputs:
            parts = _last_user_audio(item.messages)
            words = " ".join(t for t in (self._recognize(a) for a in parts) if t).split()
            # its tokens are the recognised words: max_tokens keeps the first ones, and usage counts them
            kept = words[: max(1, item.params.max_tokens)]
            answers.append(Generated(" ".join(kept), completion_tokens=len(kept)))
        return answers

    def failure(self) -> str | None:
        process = self._process
        return process.failure if process is not None else None

    def watch(self, on_exit: Callable[[str], None]) -> None:
        """Call ``on_exit(reason)`` if the decoder process ends before :meth:`close` (evalkit serve then exits 1)."""
        if self._process is not None:
            self._process.watch(on_exit)

    def close(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.close()


def _last_user_audio(messages: list[dict[str, Any]]) -> list[np.ndarray]:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if not isinstance(content, list):
            return []
        return [part["array"] for part in content if isinstance(part, dict) and part.get("type") == "audio"]
    return []

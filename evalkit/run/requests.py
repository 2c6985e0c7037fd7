"""Prompt + prepared audio -> concrete requests for one model.

The audio arrives prepared (:class:`evalkit.data.audio.pcm.PreparedAudio`: decoded
once per sample, cut into WAV pieces per model shape); this module only
arranges messages, audio parts and parameters per inference type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.clients.request import ModelRequest
from evalkit.config import RequestKind
from evalkit.data.audio.pcm import AudioPart, PreparedAudio, Shape, example_key
from evalkit.prompts.prompt import Prompt


@dataclass(slots=True)
class RequestContext:
    """What one model needs to turn a prompt into requests."""

    model: str
    kind: RequestKind
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
        prefix += [
            {"role": "user", "content": _user_content(example.text, len(example_audio), len(pieces))},
            {"role": "assistant", "content": answer},
        ]
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
    if ctx.kind == RequestKind.TRANSCRIPTION:
        return [
            ModelRequest(
                kind=RequestKind.TRANSCRIPTION,
                model=ctx.model,
                audio=[piece],
                params=ctx.params,
                language=ctx.language,
                repeat=repeat,
            )
            for piece in pieces
        ]
    prefix, example_audio = _prefix(prompt, audio, ctx)
    earlier = [*example_audio, *history_audio]
    if not pieces:
        messages = [*prefix, *history, {"role": "user", "content": _user_content(current.text, len(earlier), 0)}]
        return [
            ModelRequest(
                kind=RequestKind.CHAT,
                model=ctx.model,
                messages=messages,
                audio=earlier,
                params=ctx.params,
                repeat=repeat,
            )
        ]
    requests = []
    for piece in pieces:
        messages = [*prefix, *history, {"role": "user", "content": _user_content(current.text, len(earlier), 1)}]
        requests.append(
            ModelRequest(
                kind=RequestKind.CHAT,
                model=ctx.model,
                messages=messages,
                audio=[*earlier, piece],
                params=ctx.params,
                repeat=repeat,
            )
        )
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
    if ctx.kind != RequestKind.CHAT:
        return history, history_audio
    pieces = audio.parts(turn, ctx.chunk_size, ctx.long_audio) if turn in audio else []
    _, example_audio = _prefix(prompt, audio, ctx)
    first = len(example_audio) + len(history_audio)
    message = {"role": "user", "content": _user_content(prompt.turns[turn].text, first, len(pieces))}
    return [*history, message, {"role": "assistant", "content": answer}], [*history_audio, *pieces]


#: what a likelihood request asks: the echoed prompt's log-probabilities and one token (servers refuse 0)
LIKELIHOOD_PARAMS = {"max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}


def likelihood_context(prompt: Prompt) -> str | None:
    """The text an option continues (system, examples with their answers, the question, "Answer:"); None with audio.

    The completions API takes text only, so a prompt with audio cannot be scored this way.
    """
    if any(turn.audio is not None for turn in prompt.turns) or any(t.audio is not None for t, _ in prompt.examples):
        return None
    parts = [prompt.system] if prompt.system else []
    parts += [f"{turn.text or ''}\nAnswer: {answer}" for turn, answer in prompt.examples]
    parts.append("\n".join(turn.text or "" for turn in prompt.turns) + "\nAnswer:")
    return "\n\n".join(parts)


def likelihood_requests(context: str, choices: list[str], model: str) -> list[tuple[ModelRequest, int, int]]:
    """One completions request per option, with the character span of `` <option>`` in its prompt."""
    out = []
    for choice in choices:
        continuation = f" {choice}"
        request = ModelRequest(
            kind=RequestKind.COMPLETION, model=model, prompt=context + continuation, params=dict(LIKELIHOOD_PARAMS)
        )
        out.append((request, len(context), len(context) + len(continuation)))
    return out

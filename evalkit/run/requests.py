"""Prompt + prepared audio and images -> concrete requests for one model.

The audio arrives prepared (:class:`evalkit.data.audio.pcm.PreparedAudio`: decoded
once per sample, cut into WAV pieces per model shape), and so do the images
(:class:`evalkit.data.image.prepare.PreparedImages`: data URIs per model
limit); this module only arranges messages, media parts and parameters per
inference type. A request's images are numbered in the order they appear:
the in-context examples' first, then each user turn's, so every message of a
conversation can name its images without carrying state between turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.clients.request import ModelRequest
from evalkit.config import RequestKind
from evalkit.data.audio.pcm import AudioPart, PreparedAudio, Shape, example_key
from evalkit.data.image.prepare import NO_LIMIT, ImageLimit, ImagePart, PreparedImages
from evalkit.prompts.prompt import Prompt
from evalkit.util import jsonutil


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
    #: the model's (max_image_side, max_image_pixels)
    image_limit: ImageLimit = NO_LIMIT
    #: the dataset's image_position: images "before" or "after" the turn's text, or "messages_after" it
    image_position: str = "before"
    #: AU-Harness's request style (a dataset's ``request_style``): a user message always as parts, the text part
    #: first (empty if need be), also in a conversation's history; a transcription form with only file and model
    auharness: bool = False
    #: KARMA's transcription form (a dataset's ``request_style: karma``): the file, the model and the turn's text as
    #: the prompt, nothing else
    karma: bool = False

    @property
    def shape(self) -> Shape:
        return (self.chunk_size, self.long_audio)

    def sent_view(self) -> tuple[Any, ...]:
        """What of the context shapes the sent entry: the messages and the fields beside them (not the model's name).

        Models with the same view send a sample the same messages and fields, so its sent entry is made once for them.
        """
        return (
            self.kind,
            self.system,
            self.system_override,
            self.chunk_size,
            self.long_audio,
            self.language,
            self.image_limit,
            self.image_position,
            self.auharness,
            self.karma,
            # the fields sent beside the messages are part of the entry (records/sent's params)
            jsonutil.dumps_bytes(self.params, sort_keys=True),
        )


def _user_content(
    text: str | None,
    first_audio: int,
    n_audio: int,
    first_image: int = 0,
    n_images: int = 0,
    image_position: str = "before",
    text_parts: bool = False,
) -> Any:
    """A user message's content: plain text, or parts: images, text, audio (images after the text when asked).

    Media parts name their index in the request's ``audio`` / ``images`` lists;
    the client writes the data in when it makes the body. ``text_parts``: text
    alone as a one-part list, and a text part (empty if need be) before any
    audio, as AU-Harness sends them.
    """
    if n_audio == 0 and n_images == 0:
        return [{"type": "text", "text": text or ""}] if text_parts else text or ""
    audio = [{"type": "input_audio", "input_audio": {"audio_index": first_audio + j}} for j in range(n_audio)]
    images = [{"type": "image_url", "image_url": {"image_index": first_image + j}} for j in range(n_images)]
    # AU-Harness writes the text part even when it is empty (BFCL's spoken questions without a prompt)
    texts = [{"type": "text", "text": text or ""}] if text or text_parts else []
    ordered = [*texts, *images] if image_position == "after" else [*images, *texts]
    return ordered + audio


def _user_messages(
    text: str | None,
    first_audio: int,
    n_audio: int,
    first_image: int = 0,
    n_images: int = 0,
    image_position: str = "before",
    text_parts: bool = False,
) -> list[dict[str, Any]]:
    """A user turn as messages: one, or with ``messages_after`` the text (and audio) then one message per image.

    KARMA's OpenAI client sends each image as a user message of its own after
    the text; a model reads that as another prompt, so KARMA's entries ask for it.
    """
    if image_position != "messages_after" or n_images == 0:
        content = _user_content(text, first_audio, n_audio, first_image, n_images, image_position, text_parts)
        return [{"role": "user", "content": content}]
    lead = (
        [{"role": "user", "content": _user_content(text, first_audio, n_audio, text_parts=text_parts)}]
        if text or n_audio
        else []
    )
    pictures = [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"image_index": first_image + j}}]}
        for j in range(n_images)
    ]
    return lead + pictures


_NO_IMAGES = PreparedImages()


def _prefix(
    prompt: Prompt, audio: PreparedAudio, ctx: RequestContext, images: PreparedImages = _NO_IMAGES
) -> tuple[list[dict[str, Any]], list[AudioPart], list[ImagePart]]:
    """System message, in-context examples (user turn + reference answer) and the dataset-given conversation.

    With the examples' audio and images. A dataset-given conversation that
    opens with system messages has them joined to evalkit's system prompt
    (after it, a blank line between) into the one system message at the head,
    which every chat template accepts; the rest of it goes as it is, last.
    """
    prefix: list[dict[str, Any]] = []
    system = ctx.system if (ctx.system is not None or ctx.system_override) else prompt.system
    given = prompt.history
    lead = next((i for i, m in enumerate(given) if m["role"] != "system"), len(given))
    texts = [t for t in (system, *(m["content"] for m in given[:lead])) if t]
    if texts:
        prefix.append({"role": "system", "content": "\n\n".join(texts)})
    example_audio: list[AudioPart] = []
    example_images: list[ImagePart] = []
    for index, (example, answer) in enumerate(prompt.examples):
        key = example_key(index)
        pieces = audio.parts(key, ctx.chunk_size, "truncate") if key in audio else []
        pictures = images.parts(key, ctx.image_limit)
        asked = _user_messages(
            example.text, len(example_audio), len(pieces), len(example_images), len(pictures), ctx.image_position
        )
        prefix += [*asked, {"role": "assistant", "content": answer}]
        example_audio += pieces
        example_images += pictures
    prefix += [dict(m) for m in given[lead:]]
    return prefix, example_audio, example_images


def _turn_images(images: PreparedImages, ctx: RequestContext, turns: range) -> list[ImagePart]:
    return [part for turn in turns for part in images.parts(turn, ctx.image_limit)]


def turn_requests(
    prompt: Prompt,
    turn: int,
    history: list[dict[str, Any]],
    history_audio: list[AudioPart],
    audio: PreparedAudio,
    ctx: RequestContext,
    repeat: int = 0,
    images: PreparedImages = _NO_IMAGES,
) -> list[ModelRequest]:
    """The requests for one user turn: one per audio chunk (one when there is no audio).

    ``history`` holds earlier turns (user messages whose audio parts index into
    the examples' audio followed by ``history_audio``, and the model's answers),
    so each sample carries its own conversation and nothing is shared between
    samples. Images are numbered the same way: the examples', then every
    turn's up to this one. An empty list means the model cannot answer this
    turn (a transcription model and a turn without audio).
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
                prompt=current.text if ctx.karma else None,
                language=None if ctx.auharness or ctx.karma else ctx.language,
                repeat=repeat,
                bare_form=ctx.auharness or ctx.karma,
            )
            for piece in pieces
        ]
    prefix, example_audio, example_images = _prefix(prompt, audio, ctx, images)
    # the sample's function tools and its own settings join the model's parameters, so the store key covers them
    params = ctx.params
    if prompt.generation:
        params = {**params, **{k: v for k, v in prompt.generation.items() if k in params}}
    if prompt.tools:
        params = {**params, "tools": prompt.tools}
    earlier = [*example_audio, *history_audio]
    shown = [*example_images, *_turn_images(images, ctx, range(turn))]
    pictures = images.parts(turn, ctx.image_limit)
    all_images = [*shown, *pictures]

    def asked(n_audio: int) -> list[dict[str, Any]]:
        return _user_messages(
            current.text, len(earlier), n_audio, len(shown), len(pictures), ctx.image_position, ctx.auharness
        )

    if not pieces:
        messages = [*prefix, *history, *asked(0)]
        return [
            ModelRequest(
                kind=RequestKind.CHAT,
                model=ctx.model,
                messages=messages,
                audio=earlier,
                images=all_images,
                params=params,
                repeat=repeat,
            )
        ]
    requests = []
    for piece in pieces:
        messages = [*prefix, *history, *asked(1)]
        requests.append(
            ModelRequest(
                kind=RequestKind.CHAT,
                model=ctx.model,
                messages=messages,
                audio=[*earlier, piece],
                images=all_images,
                params=params,
                repeat=repeat,
            )
        )
    return requests


def joined_answer(texts: list[str | None], auharness: bool = False) -> str:
    """One turn's answer from its chunks' answers: in order, joined by one space (a lone answer as it came).

    ``auharness``: as AU-Harness's model class joins them, run together with nothing between, an empty
    answer counted as one space (its request handler's stand-in for no text), so a transcription's
    ``part one`` and ``part two`` make ``part onepart two`` there and here alike.
    """
    if len(texts) == 1:
        return texts[0] or ""
    if auharness:
        return "".join(t or " " for t in texts)
    return " ".join(stripped for stripped in ((t or "").strip() for t in texts) if stripped)


def history_after(
    prompt: Prompt,
    turn: int,
    history: list[dict[str, Any]],
    history_audio: list[AudioPart],
    audio: PreparedAudio,
    ctx: RequestContext,
    answer: str,
    images: PreparedImages = _NO_IMAGES,
) -> tuple[list[dict[str, Any]], list[AudioPart]]:
    """The conversation after ``turn``: the user turn as the model heard and saw it (every chunk) and its answer.

    New lists are returned; the caller's are never changed, so a conversation
    can be replayed or branched without one sample seeing another's history.
    """
    if ctx.kind != RequestKind.CHAT:
        return history, history_audio
    pieces = audio.parts(turn, ctx.chunk_size, ctx.long_audio) if turn in audio else []
    _, example_audio, example_images = _prefix(prompt, audio, ctx, images)
    first = len(example_audio) + len(history_audio)
    first_image = len(example_images) + len(_turn_images(images, ctx, range(turn)))
    n_images = len(images.parts(turn, ctx.image_limit))
    asked = _user_messages(
        prompt.turns[turn].text, first, len(pieces), first_image, n_images, ctx.image_position, ctx.auharness
    )
    said = answer or (" " if ctx.auharness else "")  # AU-Harness carries an empty answer as one space
    return [*history, *asked, {"role": "assistant", "content": said}], [*history_audio, *pieces]


#: what a likelihood request asks: the echoed prompt's log-probabilities and one token (servers refuse 0)
LIKELIHOOD_PARAMS = {"max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}


def likelihood_context(prompt: Prompt) -> str | None:
    """The text an option continues (system, examples with their answers, the question, "Answer:"); None with media.

    The completions API takes text only, so a prompt with audio or images cannot be scored this way.
    """
    turns = [*prompt.turns, *(t for t, _ in prompt.examples)]
    if any(turn.audio is not None or turn.images for turn in turns):
        return None
    parts = [prompt.system] if prompt.system else []
    parts += [f"{turn.text or ''}\nAnswer: {answer}" for turn, answer in prompt.examples]
    parts += [f"{m['role']}: {m['content']}" for m in prompt.history]
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


#: what a chat likelihood request asks: continue the final assistant message, and the prompt's log-probabilities
#: (vLLM's extensions ``continue_final_message`` and ``prompt_logprobs``); one token, as servers refuse 0
CHAT_LIKELIHOOD_PARAMS = {
    "max_tokens": 1,
    "temperature": 0,
    "add_generation_prompt": False,
    "continue_final_message": True,
    "prompt_logprobs": 0,
}


def chat_likelihood_requests(asked: ModelRequest, choices: list[str]) -> list[ModelRequest]:
    """The chat of ``asked`` with an empty assistant answer, then with each option as the answer.

    The completions API takes no images or audio, so a prompt with media is
    scored through the chat endpoint: the first request's prompt is the
    context, and each option's log-probability is that of the tokens its
    request's prompt has beyond it (:func:`evalkit.clients.protocol.continuation_after`).
    """
    return [
        ModelRequest(
            kind=RequestKind.CHAT,
            model=asked.model,
            messages=[*asked.messages, {"role": "assistant", "content": answer}],
            audio=asked.audio,
            images=asked.images,
            params=dict(CHAT_LIKELIHOOD_PARAMS),
        )
        for answer in ["", *choices]
    ]

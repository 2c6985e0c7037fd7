"""Serve a local Hugging Face model with transformers (``evalkit serve --backend transformers``).

This module is the only place evalkit imports torch and transformers, and it
is imported only when this backend is chosen, so a plain evaluation run never
pays for them. Install them with ``pip install 'evalkit[local]'`` (or
``bash .ci/install_vllm.sh``).

Three kinds of model are recognised from the folder's ``config.json``:

``causal_lm``
    Text chat models (Llama, Qwen, Mistral, ...). The prompt is the
    tokenizer's chat template, rendered and tokenized without adding special
    tokens again (as vLLM does), and a batch is generated at once with left
    padding. Tested here against real vLLM on a tiny local model.
``speech_to_text``
    Whisper-style encoder-decoders (AutoModelForSpeechSeq2Seq +
    AutoProcessor) behind ``transcribe_batch``. Audio longer than 30 s goes
    through Whisper's long-form (sequential) decoding.
``audio_chat``
    Audio-text-to-text chat models such as Qwen2-Audio: the processor's chat
    template gets audio placeholders and the processor the audio arrays.
    Tested with a tiny Qwen2-Audio (tests/test_audio_llm.py); processors
    differ, so check one request by hand before a long run of another model.
``image_chat``
    Image-text-to-text models (Idefics3/SmolVLM, LLaVA, Qwen2-VL, ...):
    AutoModelForImageTextToText (or the config's class) + AutoProcessor; the
    images of ``image_url`` parts, decoded by the server, go to the processor
    with the rendered chat template (see :mod:`evalkit.serve.backends.vision`).
    Tested against transformers' ``generate`` and vLLM on a tiny Idefics3.

A chat batch runs in three stages (see backends/base.py): ``prepare_chat``
(refusals, generate() groups, the kind's encoder from ``_chat_encoders``:
templating, features, padding, tensors moved to the device), then
``generate_chat`` (only ``generate``, on the model thread), then
``finish_chat`` (decoding). The server overlaps the first and last with the
model; a new chat kind adds its encoder to ``_chat_encoders``. Transcription
runs the same way: ``prepare_transcription`` (log-mel features, padding),
``generate_transcription`` (only ``generate``), ``finish_transcription``
(decoding).

Loading is local by default: ``local_files_only=True`` is always passed, so a
folder path loads and a hub id loads only if it is already in the local
Hugging Face cache. Set ``EVALKIT_ALLOW_HUB_DOWNLOAD=1`` to let transformers
download a hub id.

Decoding: ``temperature == 0`` is greedy (``do_sample=False``); otherwise
sampling with ``temperature``/``top_p``, seeded per request when the request
has a seed. ``max_tokens`` becomes ``max_new_tokens``. Only the newly
generated text is returned, with special tokens skipped and no clean-up of
spaces, like vLLM's detokenizer, so both servers give the same text for the
same tokens.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.errors import UserError
from evalkit.serve.backends.base import Backend, ChatInput, Generated, GenerationParams, InputError
from evalkit.serve.backends.vision import encode_image_chats, has_images
from evalkit.serve.by_name import HUB_DOWNLOAD_ENV, LOCAL_INSTALL_HINT

try:
    import torch
    import transformers
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise UserError(f"the transformers backend needs torch and transformers: {LOCAL_INSTALL_HINT} ({exc})") from exc

_log = logging.getLogger("evalkit.serve")
#: what torch raises when the accelerator's memory runs out (torch.cuda's name before torch 2.5)
_OUT_OF_MEMORY: type[BaseException] = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
SAMPLING_RATE = 16_000
#: torch's own thread count in this process, before any backend changed it
_DEFAULT_THREADS = torch.get_num_threads()
#: Whisper's window: longer audio needs long-form decoding
WHISPER_WINDOW_SECONDS = 30.0

KIND_CAUSAL_LM = "causal_lm"
KIND_SPEECH_TO_TEXT = "speech_to_text"
KIND_AUDIO_CHAT = "audio_chat"
KIND_IMAGE_CHAT = "image_chat"

_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}


def hub_downloads_allowed() -> bool:
    return os.environ.get(HUB_DOWNLOAD_ENV, "").strip() == "1"


def detect_kind(config: Any) -> str:
    """Which of the four kinds a model config describes.

    Audio-chat models are recognised by an audio sub-config next to a text
    one, image-chat models by a vision sub-config next to a text one (or by
    being registered for image-text-to-text); Whisper-style models by being
    encoder-decoders registered for speech seq2seq. Everything else is
    treated as a causal LM.
    """
    from transformers.models.auto import modeling_auto

    model_type = getattr(config, "model_type", "")
    if getattr(config, "audio_config", None) is not None and getattr(config, "text_config", None) is not None:
        return KIND_AUDIO_CHAT
    image_text = getattr(modeling_auto, "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", {})
    if getattr(config, "text_config", None) is not None and (
        getattr(config, "vision_config", None) is not None or model_type in image_text
    ):
        return KIND_IMAGE_CHAT
    speech_seq2seq = getattr(modeling_auto, "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", {})
    if model_type in speech_seq2seq and getattr(config, "is_encoder_decoder", False):
        return KIND_SPEECH_TO_TEXT
    return KIND_CAUSAL_LM


def message_text(content: Any) -> str:
    """The text of an OpenAI message content: a string, or text parts joined by newlines.

    Joining with "\\n" is what vLLM does for templates that expect strings,
    so both servers build the same prompt from a list of parts.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = [part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"]
    return "\n".join(texts)


def _has_audio(messages: Sequence[dict[str, Any]]) -> bool:
    return any(
        isinstance(part, dict) and part.get("type") == "audio"
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )


def _torch_dtype(name: str, device: Any = None) -> Any:
    """The torch dtype for ``name``; ``auto`` picks by device, not by the checkpoint's config.

    ``auto``: bfloat16 on a CUDA device that supports it (float16 on one that does
    not), float32 on the CPU. A 7B model in float32 needs about 33 GB and runs
    several times slower on a GPU than in bfloat16, and the CPU kernels of
    half-precision types are slow or missing.
    """
    if name == "auto":
        if device is not None and getattr(device, "type", str(device)) == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    try:
        return getattr(torch, _DTYPES[name.lower()])
    except KeyError:
        raise UserError(
            f"unknown dtype {name!r}: use one of auto, {', '.join(sorted(set(_DTYPES.values())))}"
        ) from None


def _dtype_kwarg() -> str:
    """transformers renamed ``torch_dtype`` to ``dtype`` in 4.56."""
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


@dataclass
class ChatChunk:
    """One generate() call of a batch: which requests, their encoded inputs and, once generated, the output."""

    indices: list[int]
    per_item: list[GenerationParams]
    params: GenerationParams
    encoded: dict[str, Any]
    output: Any = None


@dataclass
class PreparedChat:
    """A chat batch between the stages: refusals already in ``results``, the rest in ``chunks``."""

    results: list[Any]
    chunks: list[ChatChunk] = field(default_factory=list)


@dataclass
class TranscriptionChunk:
    """One generate() call of a transcription batch: its features on the device and, once generated, the ids."""

    inputs: dict[str, Any]
    gen_kwargs: dict[str, Any]
    sequences: Any = None


@dataclass
class PreparedTranscription:
    """A transcription batch between the stages, in chunks of at most ``max_batch_size`` clips."""

    chunks: list[TranscriptionChunk]


class TransformersBackend(Backend):
    """A local transformers model answering batches of chat or transcription requests."""

    #: set by the loader of the model's kind (``_init_*``); None once closed, and in a front (``load_model=False``)
    model: Any
    #: the model's generation config (end and pad ids, Whisper's languages): the model's own, or the model
    #: process's for a front
    generation_config: Any = None

    def __init__(
        self,
        model_path: str | Path,
        device: str = "cpu",
        max_batch_size: int = 8,
        model_id: str | None = None,
        dtype: str = "auto",
        load_model: bool = True,
        threads: int | str | None = None,
    ) -> None:
        """``load_model=False`` makes a front: config, tokenizer and processor only, for the preparation and
        finishing stages of a server whose model runs in another process (see ``model_process``).

        ``threads``: torch's CPU threads in this process (``torch.set_num_threads``); None keeps torch's default;
        ``"auto"`` measures the model on the CPU once loaded (see :meth:`choose_threads`).
        """
        #: torch threads for generate (None: torch's default); set on the generating thread itself, since a thread
        #: that already ran torch work keeps the count it had (OpenMP's is per thread)
        self.threads: int | None = max(1, threads) if isinstance(threads, int) else None
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        #: how the thread count was chosen, for GET /_stats
        self.threads_note = ""
        self.model_path = str(model_path)
        self.device = torch.device(device)
        self.max_batch_size = max(1, int(max_batch_size))
        # like vLLM, the served name defaults to the path as given
        self.model_id = model_id or self.model_path
        #: the weights' and inputs' dtype (a front learns the model's from the model process)
        self.dtype = _torch_dtype(dtype, self.device)
        self._load_model_weights = load_model
        # generate() is not re-entrant with seeded sampling; one batch at a time
        self._lock = threading.Lock()

        self._load_kwargs: dict[str, Any] = {"local_files_only": not hub_downloads_allowed()}
        local = Path(self.model_path).expanduser()
        if local.exists():
            if not (local / "config.json").is_file():
                raise UserError(f"{self.model_path}: no config.json there; expected a Hugging Face model folder")
            self.model_path = str(local)

        #: the prepare step of each chat kind: conversations -> generate() inputs on the device
        self._chat_encoders: dict[str, Callable[[list[list[dict[str, Any]]]], dict[str, Any]]] = {
            KIND_CAUSAL_LM: self._encode_text_chats,
            KIND_AUDIO_CHAT: self._encode_audio_chats,
            KIND_IMAGE_CHAT: self._encode_image_chats,
        }
        config = self._load(transformers.AutoConfig.from_pretrained)
        self.kind = detect_kind(config)
        self.config = config
        self.tokenizer: Any = None
        self.processor: Any = None
        if self.kind == KIND_CAUSAL_LM:
            self._init_causal_lm()
        elif self.kind == KIND_SPEECH_TO_TEXT:
            self._init_speech_to_text()
        elif self.kind == KIND_IMAGE_CHAT:
            self._init_image_chat()
        else:
            self._init_audio_chat()
        if self.model is not None:
            self.model.eval()
            self.dtype = self.model.dtype
            self.use_generation_config(getattr(self.model, "generation_config", None))
            if threads == "auto" and self.device.type == "cpu":
                self.choose_threads()

    def choose_threads(self, speedup: float = 1.5) -> int:
        """One torch thread, unless torch's default count makes a full batch ``speedup`` times as fast; the count.

        A small model's generate is mostly Python: extra threads buy it little
        and, in a server, spin on the cores its HTTP side and clients need. The
        tiny Llama on 2 cores took 8.6 ms a batch on one thread and 7.1 ms on
        two when timed alone (1.2x), yet evalkit serve on two threads reached
        0.75x / 0.86x of generate at 8 / 32 in flight against 0.82x / 0.99x on
        one, at twice the CPU a request (serve benchmark, same minutes). A
        model whose matrices are large (the tiny Qwen2-Audio's encoder over
        30 s of features: 385 ms on one thread, 223 ms on two, 1.7x) needs every
        core (in the server: 32 req/s on two threads, 18 on one). So both are
        timed on a batch of synthetic requests, three times each after a
        warm-up, alternating, and the default count kept only when its best time
        is ``speedup`` times as fast. A machine busy at that moment slows the
        many-thread runs most; GET /_stats shows the choice and its times, and
        ``--threads`` sets the count outright.
        """
        default = _DEFAULT_THREADS
        if default <= 1:
            return default
        run = self._sample_batch()
        seconds = {default: math.inf, 1: math.inf}
        for round_index in range(4):  # alternating, the first round a warm-up: a busy moment hits both alike
            for count in (default, 1):
                torch.set_num_threads(count)
                started = time.perf_counter()
                run()
                if round_index:
                    seconds[count] = min(seconds[count], time.perf_counter() - started)
        chosen = default if seconds[default] * speedup <= seconds[1] else 1
        self.threads = chosen
        torch.set_num_threads(chosen)
        self.threads_note = (
            f"{chosen} (auto: a batch of {self.max_batch_size} took {1000 * seconds[1]:.1f} ms on 1 thread, "
            f"{1000 * seconds[default]:.1f} ms on {default})"
        )
        _log.info("torch threads: %s", self.threads_note)
        return chosen

    def _sample_batch(self) -> Callable[[], Any]:
        """A full batch of short synthetic requests of this model's kind, as a call (for :meth:`choose_threads`)."""
        rows = self.max_batch_size
        params = GenerationParams(max_tokens=8)
        if self.kind == KIND_SPEECH_TO_TEXT:
            silence = [np.zeros(SAMPLING_RATE, dtype=np.float32)] * rows
            return lambda: self.transcribe_batch(silence)
        content: Any = "Say one short sentence."
        if self.kind == KIND_AUDIO_CHAT:
            content = [
                {"type": "audio", "array": np.zeros(SAMPLING_RATE, dtype=np.float32)},
                {"type": "text", "text": content},
            ]
        inputs = [ChatInput([{"role": "user", "content": content}], params) for _ in range(rows)]
        return lambda: self.chat_batch(inputs)

    def use_generation_config(self, generation_config: Any) -> None:
        """The model's generation config, and what follows from it (a Whisper model's languages)."""
        self.generation_config = generation_config
        if self.kind == KIND_SPEECH_TO_TEXT:
            self.languages = _whisper_languages(generation_config)

    # ------------------------------------------------------------ loading

    def _load(self, loader: Callable[..., Any], **kwargs: Any) -> Any:
        """Call a from_pretrained with the local-only policy, turning a miss into a clear error."""
        try:
            return loader(self.model_path, **self._load_kwargs, **kwargs)
        except OSError as exc:
            hint = (
                ""
                if hub_downloads_allowed()
                else f"; only local folders and the local Hugging Face cache are used (set {HUB_DOWNLOAD_ENV}=1 to "
                "download)"
            )
            raise UserError(f"cannot load model {self.model_path!r}: {exc}{hint}") from exc

    def _load_model(self, *auto_classes: Any) -> Any:
        """The model on its device, or None for a front (``load_model=False``)."""
        if not self._load_model_weights:
            return None
        kwargs = {_dtype_kwarg(): self.dtype}
        last: Exception | None = None
        for auto_class in auto_classes:
            if auto_class is None:
                continue
            try:
                model = self._load(auto_class.from_pretrained, **kwargs)
            except ValueError as exc:  # this auto class does not know the architecture
                last = exc
                continue
            except UserError:
                raise
            except Exception as exc:  # e.g. a truncated weights file: the user's to fix, so say which model
                raise UserError(f"cannot load model {self.model_path!r}: {type(exc).__name__}: {exc}") from exc
            return model.to(self.device)
        raise UserError(f"cannot load model {self.model_path!r} with {[c for c in auto_classes if c]}: {last}")

    def _architecture_class(self) -> Any:
        """The class named in config.architectures, when transformers has it."""
        for name in getattr(self.config, "architectures", None) or []:
            cls = getattr(transformers, name, None)
            if cls is not None:
                return cls
        return None

    def _init_causal_lm(self) -> None:
        self.supports_chat = True
        self.tokenizer = self._load(transformers.AutoTokenizer.from_pretrained)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = self._load_model(transformers.AutoModelForCausalLM)

    def _init_speech_to_text(self) -> None:
        self.supports_transcription = True
        self.processor = self._load(transformers.AutoProcessor.from_pretrained)
        self.tokenizer = getattr(self.processor, "tokenizer", None)
        self.model = self._load_model(transformers.AutoModelForSpeechSeq2Seq, self._architecture_class())

    def _init_audio_chat(self) -> None:
        self.supports_chat = True
        self.processor = self._load(transformers.AutoProcessor.from_pretrained)
        self.tokenizer = getattr(self.processor, "tokenizer", None)
        if self.tokenizer is not None:
            self.tokenizer.padding_side = "left"
            if self.tokenizer.pad_token_id is None:
                self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = self._load_model(
            self._architecture_class(),
            getattr(transformers, "AutoModelForImageTextToText", None),
            getattr(transformers, "AutoModelForMultimodalLM", None),
            getattr(transformers, "AutoModelForSeq2SeqLM", None),
        )

    def _init_image_chat(self) -> None:
        # the processor, tokenizer and loading of audio chat; AutoModelForImageTextToText is among the classes tried
        self._init_audio_chat()

    # ------------------------------------------------------------ chat

    def chat_batch(self, inputs: list[ChatInput]) -> list[str]:
        """All three stages in the calling thread (the server runs them on two threads, overlapped)."""
        if not self.supports_chat:
            return super().chat_batch(inputs)
        return self.finish_chat(self.generate_chat(self.prepare_chat(inputs)))

    def prepare_chat(self, inputs: list[ChatInput]) -> Any:
        """Refusals, generate() groups of at most ``max_batch_size``, and their encoded, padded tensors."""
        if not self.supports_chat:
            return super().prepare_chat(inputs)
        prepared = PreparedChat(results=[None] * len(inputs))
        runnable: list[int] = []
        for index, item in enumerate(inputs):
            try:
                self.check_chat(item)
            except InputError as exc:
                prepared.results[index] = exc  # refused alone; the rest of the batch still runs
            else:
                runnable.append(index)
        encode = self._chat_encoders[self.kind]
        for group, params in _generation_groups([inputs[i] for i in runnable]):
            for indices in self._uniform_parts([runnable[i] for i in group], inputs):
                self._add_chunks(prepared, indices, inputs, params, encode)
        return prepared

    def prepare_chat_item(self, item: ChatInput) -> None:
        """Text and audio chat: this request's template, tokens and features now, joined with its batch's later."""
        if self.kind not in (KIND_CAUSAL_LM, KIND_AUDIO_CHAT):
            return
        try:
            self.check_chat(item)
        except InputError:
            return  # refused when its batch is prepared
        item.encoded = self._chat_encoders[self.kind]([item.messages])

    def _uniform_parts(self, indices: list[int], inputs: list[ChatInput]) -> list[list[int]]:
        """Indices that one processor call can take: an image model's processor takes one image list per text or
        none, so requests with images and text-only ones go to generate() apart."""
        if self.kind != KIND_IMAGE_CHAT:
            return [indices]
        with_images = [i for i in indices if has_images(inputs[i].messages)]
        without = [i for i in indices if not has_images(inputs[i].messages)]
        return [part for part in (with_images, without) if part]

    def _add_chunks(
        self,
        prepared: PreparedChat,
        indices: list[int],
        inputs: list[ChatInput],
        params: GenerationParams,
        encode: Callable[[list[list[dict[str, Any]]]], dict[str, Any]],
    ) -> None:
        """Chunks of at most ``max_batch_size`` requests, each encoded now (on the preparing thread).

        Requests prepared as they arrived (:meth:`prepare_chat_item`) are only joined here.
        """
        for start in range(0, len(indices), self.max_batch_size):
            chunk = indices[start : start + self.max_batch_size]
            ready = [inputs[i].encoded for i in chunk]
            joined = self._join_encoded(ready) if all(e is not None for e in ready) else None
            prepared.chunks.append(
                ChatChunk(
                    indices=chunk,
                    per_item=[inputs[i].params for i in chunk],
                    params=params,
                    encoded=joined if joined is not None else encode([inputs[i].messages for i in chunk]),
                )
            )

    def _join_encoded(self, parts: list[dict[str, Any]]) -> dict[str, Any] | None:
        """One batch's inputs from requests encoded alone, as the batch's own encoding would give them.

        Token rows (the tensors as long as ``input_ids``) are padded on the left with the pad id (0 for the
        masks), as the tokenizer pads a batch here; the rest (audio features padded to the extractor's fixed
        length and their masks) are stacked. None when a part does not fit that shape: the batch is encoded whole.
        """
        if len({tuple(sorted(part)) for part in parts}) != 1 or "input_ids" not in parts[0]:
            return None
        pad_id = self.tokenizer.pad_token_id if self.tokenizer is not None else None
        if pad_id is None:
            return None
        width = max(int(part["input_ids"].shape[1]) for part in parts)
        joined: dict[str, Any] = {}
        for key in parts[0]:
            values = [part[key] for part in parts]
            if not all(isinstance(v, torch.Tensor) and v.dim() >= 2 and v.shape[0] == 1 for v in values):
                return None
            if all(v.shape[1] == part["input_ids"].shape[1] for v, part in zip(values, parts)):
                fill = pad_id if key == "input_ids" else 0
                values = [torch.nn.functional.pad(v, (width - v.shape[1], 0), value=fill) for v in values]
            elif len({tuple(v.shape[1:]) for v in values}) != 1:
                return None
            joined[key] = torch.cat(values, dim=0)
        return joined

    def generate_chat(self, prepared: Any) -> Any:
        """Only generate(): everything else happened in :meth:`prepare_chat` or waits for :meth:`finish_chat`."""
        if not isinstance(prepared, PreparedChat):
            return super().generate_chat(prepared)
        for chunk in prepared.chunks:
            chunk.output = self.generate_chat_chunk(chunk.encoded, chunk.params, chunk_max_new_tokens(chunk))
        return prepared

    def generate_chat_chunk(self, encoded: dict[str, Any], params: GenerationParams, max_new_tokens: int) -> Any:
        """One generate() call of a chat batch: its sequences on the CPU (what a model process runs per chunk)."""
        with self._lock, torch.inference_mode():
            self._use_threads()
            if params.temperature > 0 and params.seed is not None:
                torch.manual_seed(params.seed)
            return self._generate_fitting(encoded, self._decoding_kwargs(params, max_new_tokens))

    def generate_transcription_chunk(self, inputs: dict[str, Any], gen_kwargs: dict[str, Any]) -> Any:
        """One generate() call of a transcription batch: its sequences on the CPU."""
        with self._lock, torch.inference_mode():
            self._use_threads()
            return self._generate_fitting(inputs, gen_kwargs)

    def _use_threads(self) -> None:
        if self.threads is not None and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

    def _generate_fitting(self, inputs: dict[str, Any], kwargs: dict[str, Any]) -> Any:
        """generate()'s sequences, on the CPU; a batch that runs out of accelerator memory runs in halves.

        The batch that ran out is split (every tensor whose first dimension
        is the batch's rows) and each half generated alone; later batches are
        made no larger than the half that fitted, so a default that is too big
        for a smaller GPU costs one retry and a warning, not failed requests.
        Greedy answers are the same either way: each row is generated from the
        same padded prompt.
        """
        try:
            output = self.model.generate(**self._on_device(inputs), **kwargs)
        except _OUT_OF_MEMORY:
            rows = int(inputs["input_ids"].shape[0]) if "input_ids" in inputs else 0
            splittable = rows > 1 and all(
                not hasattr(v, "shape") or (v.dim() > 0 and v.shape[0] == rows) for v in inputs.values()
            )
            if not splittable:
                raise
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            half = (rows + 1) // 2
            if self.max_batch_size > half:
                _log.warning(
                    "a batch of %d ran out of accelerator memory: run in halves; batches of at most %d from now on",
                    rows,
                    half,
                )
                self.max_batch_size = half
            parts = [
                self._generate_fitting(
                    {k: (v[start:stop] if hasattr(v, "shape") else v) for k, v in inputs.items()}, kwargs
                )
                for start, stop in ((0, half), (half, rows))
            ]
            return _right_padded(parts, self._pad_id())
        return (output.sequences if hasattr(output, "sequences") else output).cpu()

    def _pad_id(self) -> int:
        """The id that fills answers that ended before the longest of their batch (after their end token)."""
        for source in (self.tokenizer, self.generation_config):
            value = getattr(source, "pad_token_id", None)
            if value is not None:
                return int(value)
        eos = getattr(self.generation_config, "eos_token_id", None)
        return int(eos[0] if isinstance(eos, (list, tuple)) else eos or 0)

    def _on_device(self, encoded: dict[str, Any]) -> dict[str, Any]:
        """A batch's CPU tensors on the model's device, moved by the model thread itself.

        Preparation and finishing stay on the CPU: a tensor op on the device from
        another thread shares the model's CUDA stream, so it would queue behind
        (and hold back) the running generate(); measured on an H200, per-request
        copies from the preparation threads cost a 7B audio model half its
        throughput at batches of 32.
        """
        if self.device.type == "cpu":
            return encoded
        return {k: (v.to(self.device, non_blocking=True) if hasattr(v, "to") else v) for k, v in encoded.items()}

    def finish_chat(self, generated: Any) -> list[Any]:
        """The answers' text and token counts, cut to each request's own max_tokens."""
        if not isinstance(generated, PreparedChat):
            return super().finish_chat(generated)
        results = generated.results
        stops = self._stop_ids()
        for chunk in generated.chunks:
            encoded = chunk.encoded
            prompt_len = int(encoded["input_ids"].shape[1])
            # plain lists, once per chunk: per-row tensor slices and sums were GIL time taken from the model thread
            rows = chunk.output[:, prompt_len:].tolist()
            mask = encoded.get("attention_mask")
            prompts = mask.sum(dim=1).tolist() if mask is not None else [prompt_len] * len(rows)
            for row, prompt, item, index in zip(rows, prompts, chunk.per_item, chunk.indices):
                # a shorter max_tokens is the prefix of a longer greedy answer
                ids = _until_stop(row[: max(1, item.max_tokens)], stops)
                results[index] = Generated(self._decode(ids), completion_tokens=len(ids), prompt_tokens=int(prompt))
        return results

    def check_chat(self, item: ChatInput) -> None:
        if self.kind == KIND_CAUSAL_LM and _has_audio(item.messages):
            raise InputError(f"model {self.model_id!r} is a text-only model; the request has audio")
        if self.kind != KIND_IMAGE_CHAT and has_images(item.messages):
            raise InputError(f"model {self.model_id!r} does not take images ({self.kind} model); the request has one")
        if self.kind == KIND_IMAGE_CHAT and _has_audio(item.messages):
            raise InputError(f"model {self.model_id!r} is an image-text model; the request has audio")

    def count_tokens(self, text: str) -> int:
        """Tokens as this model's tokenizer counts them, for the usage figures."""
        if self.tokenizer is None or not text:
            return super().count_tokens(text)
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def _generated_ids(self, row: Any) -> Any:
        """The ids the model generated for one answer: up to and including its first end-of-sequence id.

        A batch pads shorter answers after their end with pad ids (often the EOS id
        itself); those were never generated for this answer and are not counted.
        """
        return row[: len(_until_stop(row.tolist(), self._stop_ids()))]

    def _stop_ids(self) -> set[int]:
        """The end-of-sequence ids: the model's generation config's, else the tokenizer's."""
        eos = getattr(self.generation_config, "eos_token_id", None)
        if eos is None and self.tokenizer is not None:
            eos = self.tokenizer.eos_token_id
        return set(eos) if isinstance(eos, (list, tuple)) else ({eos} if eos is not None else set())

    def truncate(self, text: str, max_tokens: int) -> str:
        if self.tokenizer is None:
            return super().truncate(text, max_tokens)
        ids = self.tokenizer.encode(text, add_special_tokens=False)[:max_tokens]
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def _encode_image_chats(self, conversations: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return encode_image_chats(self.processor, conversations, self.dtype)

    def _encode_text_chats(self, conversations: list[list[dict[str, Any]]]) -> dict[str, Any]:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            prompts = [
                tok.apply_chat_template(
                    [{**m, "content": message_text(m.get("content"))} for m in conv],
                    tokenize=False,
                    add_generation_prompt=True,
                )
                for conv in conversations
            ]
            # the rendered template already holds BOS and friends
            add_special = False
        else:
            # a base model without a template: the texts, one per line
            prompts = ["\n".join(message_text(m.get("content")) for m in conv) for conv in conversations]
            add_special = True
        return dict(tok(prompts, add_special_tokens=add_special, padding=True, return_tensors="pt"))

    def _encode_audio_chats(self, conversations: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Processor inputs for audio chat: template text with audio placeholders, plus the arrays."""
        prompts: list[str] = []
        audios: list[np.ndarray] = []
        for conv in conversations:
            messages = []
            for message in conv:
                content = message.get("content")
                if isinstance(content, list):
                    parts = []
                    for part in content:
                        if part.get("type") == "audio":
                            audios.append(np.asarray(part["array"], dtype=np.float32))
                            parts.append({"type": "audio", "audio_url": f"audio_{len(audios)}"})
                        elif part.get("type") == "text":
                            parts.append({"type": "text", "text": part.get("text", "")})
                    messages.append({**message, "content": parts})
                else:
                    messages.append({**message, "content": [{"type": "text", "text": message_text(content)}]})
            prompts.append(self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
        kwargs: dict[str, Any] = {"text": prompts, "return_tensors": "pt", "padding": True}
        if audios:
            kwargs["sampling_rate"] = SAMPLING_RATE
            try:
                encoded = self.processor(audio=audios, **kwargs)
            except TypeError:  # older processors call it "audios"
                encoded = self.processor(audios=audios, **kwargs)
        else:
            encoded = self.processor(**kwargs)
        return dict(encoded)

    def _decoding_kwargs(self, params: GenerationParams, max_new_tokens: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens}
        if self.tokenizer is not None and self.tokenizer.pad_token_id is not None:
            kwargs["pad_token_id"] = self.tokenizer.pad_token_id
        if params.temperature <= 0:
            # greedy: also clear sampling defaults a generation_config may carry
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(do_sample=True, temperature=params.temperature, top_p=params.top_p, top_k=None)
        return kwargs

    def _decode(self, token_ids: Any) -> str:
        tok = self.tokenizer if self.tokenizer is not None else self.processor
        return tok.decode(token_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    # ------------------------------------------------------------ transcription

    def transcribe_batch(self, audios: list[np.ndarray], language: str | None = None) -> list[str]:
        """All three transcription stages in the calling thread (the server overlaps them, as for chat)."""
        if not self.supports_transcription:
            return super().transcribe_batch(audios, language)
        return self.finish_transcription(self.generate_transcription(self.prepare_transcription(audios, language)))

    def prepare_transcription(self, audios: list[np.ndarray], language: str | None = None) -> Any:
        """Log-mel features, padding and the attention mask of each generate() chunk, moved to the device."""
        if not self.supports_transcription:
            return super().prepare_transcription(audios, language)
        gen_kwargs: dict[str, Any] = {}
        if language and getattr(self.generation_config, "is_multilingual", False):
            gen_kwargs.update(language=language, task="transcribe")
        chunks = [
            TranscriptionChunk(self._transcription_features(audios[start : start + self.max_batch_size]), gen_kwargs)
            for start in range(0, len(audios), self.max_batch_size)
        ]
        return PreparedTranscription(chunks)

    def _transcription_features(self, audios: list[np.ndarray]) -> dict[str, Any]:
        arrays = [np.asarray(a, dtype=np.float32).reshape(-1) for a in audios]
        long_form = any(len(a) > WHISPER_WINDOW_SECONDS * SAMPLING_RATE for a in arrays)
        # the mask tells generate() where each clip's padding starts (and silences its warning)
        feature_kwargs: dict[str, Any] = {
            "sampling_rate": SAMPLING_RATE,
            "return_tensors": "pt",
            "return_attention_mask": True,
        }
        if long_form:
            feature_kwargs.update(truncation=False, padding="longest")
        inputs = dict(self.processor(arrays, **feature_kwargs))
        if "input_features" in inputs:
            inputs["input_features"] = inputs["input_features"].to(self.dtype)
        return inputs

    def generate_transcription(self, prepared: Any) -> Any:
        """Only generate(), chunk by chunk: the features were made in :meth:`prepare_transcription`."""
        if not isinstance(prepared, PreparedTranscription):
            return super().generate_transcription(prepared)
        for chunk in prepared.chunks:
            chunk.sequences = self.generate_transcription_chunk(chunk.inputs, chunk.gen_kwargs)
        return prepared

    def finish_transcription(self, generated: Any) -> list[Any]:
        """The transcripts' text, special tokens skipped."""
        if not isinstance(generated, PreparedTranscription):
            return super().finish_transcription(generated)
        return [self._decode(row) for chunk in generated.chunks for row in chunk.sequences]

    # ------------------------------------------------------------ lifecycle

    def runtime(self) -> dict[str, str]:
        if self.model is None:
            return {}
        facts = {"device": str(self.device), "dtype": str(self.model.dtype).removeprefix("torch.")}
        if self.device.type == "cpu":
            facts["threads"] = self.threads_note or str(self.threads or _DEFAULT_THREADS)
        return facts

    def close(self) -> None:
        self.model = None
        self.processor = None
        self.tokenizer = None
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def _whisper_languages(generation_config: Any) -> frozenset[str] | None:
    """Languages a Whisper-style model can be told to transcribe: its <|xx|> tokens, or English only."""
    if generation_config is None:
        return None
    lang_to_id = getattr(generation_config, "lang_to_id", None) or {}
    if getattr(generation_config, "is_multilingual", False) and lang_to_id:
        return frozenset(code.strip("<|>") for code in lang_to_id)
    if hasattr(generation_config, "is_multilingual"):
        return frozenset({"en"})
    return None


def _generation_groups(inputs: Iterable[ChatInput]) -> list[tuple[list[int], GenerationParams]]:
    """Split a batch into groups that can share one generate() call.

    Greedy requests share one call whatever their max_tokens (each answer is
    cut to its own length afterwards). Unseeded sampling shares a call per
    (temperature, top_p). A seeded sampling request runs alone so that its
    answer depends only on its seed, not on what it was batched with.
    """
    groups: dict[tuple[Any, ...], list[int]] = {}
    first: dict[tuple[Any, ...], GenerationParams] = {}
    for index, item in enumerate(inputs):
        p = item.params
        if p.temperature <= 0:
            key: tuple[Any, ...] = ("greedy",)
        elif p.seed is None:
            key = ("sample", p.temperature, p.top_p)
        else:
            key = ("seeded", index)
        groups.setdefault(key, []).append(index)
        first.setdefault(key, p)
    return [(indices, first[key]) for key, indices in groups.items()]


def chunk_max_new_tokens(chunk: ChatChunk) -> int:
    """The longest answer a chunk's requests ask for: generate() runs that long, each answer is cut to its own."""
    return max(max(1, p.max_tokens) for p in chunk.per_item)


def _until_stop(ids: list[int], stops: set[int]) -> list[int]:
    """``ids`` up to and including the first stop id (all of them when none is there)."""
    for position, value in enumerate(ids):
        if value in stops:
            return ids[: position + 1]
    return ids


def _right_padded(parts: list[Any], pad_id: int) -> Any:
    """Sequences of two halves of a batch as one tensor: the shorter half filled on the right with ``pad_id``."""
    width = max(int(part.shape[1]) for part in parts)
    return torch.cat([torch.nn.functional.pad(part, (0, width - int(part.shape[1])), value=pad_id) for part in parts])

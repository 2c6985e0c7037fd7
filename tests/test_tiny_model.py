"""The tiny local Llama and the transformers backend on it: real weights, real generate().

Needs torch, transformers and tokenizers (``bash .ci/install_vllm.sh`` with
EVALKIT_SKIP_VLLM=1 installs just those); the module is skipped without them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

_MISSING = [name for name in ("torch", "transformers", "tokenizers") if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"needs {', '.join(_MISSING)} (pip install torch==2.13.0 transformers tokenizers, or bash "
    ".ci/install_vllm.sh)",
)

from evalkit.serve.backends.base import ChatInput, GenerationParams, InputError  # noqa: E402
from evalkit.testing.tiny_model import CHAT_TEMPLATE, MARKER_FILE, build_tiny_llama  # noqa: E402

PROMPTS = [
    "Hello there",
    "What is the capital of France?",
    "x",
    "A much longer prompt, with many more tokens than the others in the batch, so that the "
    "short ones get a lot of left padding and any mistake in it shows.",
    "Tell me a story about a wooden boat near the harbour.",
]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _chat(text: str, **params: object) -> ChatInput:
    return ChatInput(messages=[{"role": "user", "content": text}], params=GenerationParams(**params))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def backend(tiny_llama: Path):
    from evalkit.serve.backends.transformers_backend import TransformersBackend

    b = TransformersBackend(tiny_llama, max_batch_size=8)
    yield b
    b.close()


# ------------------------------------------------------------------ the model folder


def test_build_is_deterministic_cached_and_seeded(tiny_llama: Path, tmp_path: Path) -> None:
    again = build_tiny_llama(tmp_path / "again", seed=0)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert _digest(again / name) == _digest(tiny_llama / name), name

    # a complete folder is returned as it is, not rebuilt
    before = (again / "model.safetensors").stat().st_mtime_ns
    assert build_tiny_llama(again, seed=0) == again.resolve()
    assert (again / "model.safetensors").stat().st_mtime_ns == before

    # another seed rebuilds the same folder with other weights
    build_tiny_llama(again, seed=1)
    assert json.loads((again / MARKER_FILE).read_text())["seed"] == 1
    assert _digest(again / "model.safetensors") != _digest(tiny_llama / "model.safetensors")


def test_half_built_folder_is_rebuilt(tiny_llama: Path, tmp_path: Path) -> None:
    folder = build_tiny_llama(tmp_path / "m", seed=0)
    (folder / "model.safetensors").unlink()
    build_tiny_llama(folder, seed=0)
    assert _digest(folder / "model.safetensors") == _digest(tiny_llama / "model.safetensors")


def test_transformers_loads_it_as_a_small_llama_chat_model(tiny_llama: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_llama, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama, local_files_only=True)
    n_params = sum(p.numel() for p in model.parameters())
    assert model.config.model_type == "llama"
    assert 100_000 < n_params < 1_000_000
    assert model.config.vocab_size == len(tokenizer) >= 1000
    assert model.config.hidden_size // model.config.num_attention_heads >= 32  # vLLM's CPU attention minimum

    prompt = tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert prompt == "<|bos|><|system|>Be brief.<|user|>Hi<|assistant|>"
    assert json.loads((tiny_llama / "tokenizer_config.json").read_text())["chat_template"] == CHAT_TEMPLATE
    # one BOS whether or not the caller asks for special tokens: the template writes it
    assert tokenizer(prompt).input_ids == tokenizer(prompt, add_special_tokens=False).input_ids
    assert tokenizer(prompt).input_ids.count(tokenizer.bos_token_id) == 1

    text = "The old fisherman found 3 red apples near the harbour, at 7:30!"
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert len(ids) < len(text) / 2  # real BPE merges, not one token per byte
    assert tokenizer.decode(ids) == text
    # non-ASCII becomes <|unk|>, a special token, so a decode never shows half a character
    assert tokenizer.decode(tokenizer("café", add_special_tokens=False).input_ids, skip_special_tokens=True) == "caf"


def test_cli_builds_into_a_folder(tmp_path: Path) -> None:
    from evalkit.testing.tiny_model import main

    assert main([str(tmp_path / "cli"), "--seed", "0"]) == 0
    assert (tmp_path / "cli" / "model.safetensors").is_file()


# ------------------------------------------------------------------ the backend


def test_backend_detects_a_chat_model(backend, tiny_llama: Path) -> None:
    assert backend.kind == "causal_lm"
    assert backend.supports_chat and not backend.supports_transcription
    assert backend.model_id == str(tiny_llama)  # the path as given, as vLLM names it
    # usage counts come from the model's tokenizer, not whitespace words
    expected = len(backend.tokenizer("Hello there", add_special_tokens=False).input_ids)
    assert backend.count_tokens("Hello there") == expected != 2


def test_dtype_auto_is_the_default_and_chooses_by_device(backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """float32 on the CPU; on CUDA bfloat16 where supported, else float16.

    No GPU here: torch's own answer about bfloat16 support is patched for the CUDA cases.
    """
    import torch

    from evalkit.serve.backends.transformers_backend import _torch_dtype

    assert backend.model.dtype == torch.float32  # built with the default, dtype="auto", on the CPU
    # what evalkit serve's /_stats reports; made with torch's own thread count
    from evalkit.serve.backends import transformers_backend

    assert backend.runtime() == {
        "device": "cpu",
        "dtype": "float32",
        "threads": str(transformers_backend._DEFAULT_THREADS),
    }
    assert _torch_dtype("auto", torch.device("cpu")) is torch.float32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert _torch_dtype("auto", torch.device("cuda")) is torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert _torch_dtype("auto", torch.device("cuda")) is torch.float16
    assert _torch_dtype("bfloat16", torch.device("cpu")) is torch.bfloat16  # an explicit choice is kept


@pytest.fixture(scope="module")
def greedy_answers(backend) -> list[str]:
    return backend.chat_batch([_chat(p, max_tokens=16) for p in PROMPTS])


def test_greedy_batch_is_deterministic_and_depends_on_the_prompt(backend, greedy_answers: list[str]) -> None:
    assert backend.chat_batch([_chat(p, max_tokens=16) for p in PROMPTS]) == greedy_answers
    assert all(isinstance(text, str) and text for text in greedy_answers)
    assert len(set(greedy_answers)) == len(PROMPTS)


def test_batched_equals_one_by_one(backend, greedy_answers: list[str]) -> None:
    # left padding done right: a short prompt padded next to a long one answers as it does alone
    assert [backend.chat_batch([_chat(p, max_tokens=16)])[0] for p in PROMPTS] == greedy_answers


def test_batches_larger_than_max_batch_size_are_split(tiny_llama: Path, greedy_answers: list[str]) -> None:
    from evalkit.serve.backends.transformers_backend import TransformersBackend

    small = TransformersBackend(tiny_llama, max_batch_size=2)
    try:
        assert small.chat_batch([_chat(p, max_tokens=16) for p in PROMPTS]) == greedy_answers
    finally:
        small.close()


def _out_of_memory_above(model, rows: int, calls: list[int]):
    """A stand-in for a GPU that fits ``rows`` rows: generate() raises torch's out-of-memory error above that.

    No accelerator here: the error torch raises on one is the only part faked; generate() itself runs.
    """
    import torch

    real = model.generate

    def generate(**inputs):
        calls.append(int(inputs["input_ids"].shape[0]))
        if inputs["input_ids"].shape[0] > rows:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(**inputs)

    return generate


def test_a_batch_out_of_accelerator_memory_runs_in_halves_and_later_batches_shrink(
    tiny_llama: Path, greedy_answers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.serve.backends.transformers_backend import TransformersBackend

    big = TransformersBackend(tiny_llama, max_batch_size=8)
    try:
        calls: list[int] = []
        monkeypatch.setattr(big.model, "generate", _out_of_memory_above(big.model, 2, calls))
        # five prompts of different lengths: the halves end at different lengths and are joined, padded
        assert big.chat_batch([_chat(p, max_tokens=16) for p in PROMPTS]) == greedy_answers
        assert calls == [5, 3, 2, 1, 2]  # 5 -> 3 + 2, 3 -> 2 + 1
        assert big.max_batch_size == 2  # the largest half that fitted
        calls.clear()
        assert big.chat_batch([_chat(p, max_tokens=16) for p in PROMPTS]) == greedy_answers
        assert calls == [2, 2, 1]  # later batches are made to fit from the start
        monkeypatch.setattr(big.model, "generate", _out_of_memory_above(big.model, 0, []))
        with pytest.raises(torch_out_of_memory()):  # one row that does not fit is the model's error, not a loop
            big.chat_batch([_chat("x", max_tokens=4)])
    finally:
        big.close()


def torch_out_of_memory() -> type[BaseException]:
    import torch

    return torch.OutOfMemoryError


def test_each_answer_keeps_its_own_max_tokens(backend) -> None:
    short, long = backend.chat_batch([_chat("Hello there", max_tokens=3), _chat("Hello there", max_tokens=16)])
    assert long.startswith(short) and len(short) < len(long)
    assert backend.count_tokens(short) <= 3 < backend.count_tokens(long)


def _ids(encoded: object) -> list[int]:
    """Token ids from apply_chat_template(tokenize=True): a list, or a BatchEncoding in recent transformers."""
    return list(encoded["input_ids"] if not isinstance(encoded, list) else encoded)  # type: ignore[index]


def test_usage_counts_the_chat_template_and_the_generated_ids(backend) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
    short, long = backend.chat_batch(
        [ChatInput(messages, GenerationParams(max_tokens=3)), ChatInput(messages[1:], GenerationParams(max_tokens=16))]
    )
    # prompt tokens are those the model read: the rendered template with its special tokens, as vLLM reports them
    rendered = _ids(backend.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True))
    assert (
        short.prompt_tokens == len(rendered) > backend.count_tokens("Be brief.") + backend.count_tokens("Hello there")
    )
    alone = _ids(backend.tokenizer.apply_chat_template(messages[1:], add_generation_prompt=True, tokenize=True))
    assert long.prompt_tokens == len(alone)  # left padding in the batch is not counted
    # completion tokens are the generated ids (never more than max_tokens), not the answer re-tokenised
    assert short.completion_tokens == 3
    assert 1 <= long.completion_tokens <= 16


def test_seeded_sampling_is_reproducible(backend) -> None:
    def sample(seed: int, others: int = 0) -> str:
        batch = [_chat("Hello there", max_tokens=16, temperature=5.0, seed=seed)]
        batch += [_chat(p, max_tokens=16, temperature=5.0) for p in PROMPTS[:others]]
        return backend.chat_batch(batch)[0]

    assert sample(7) == sample(7, others=2)  # the batch it rides in does not matter
    assert sample(7) != sample(8)
    greedy = backend.chat_batch([_chat("Hello there", max_tokens=16)])[0]
    assert sample(7) != greedy


def test_list_content_is_joined_text(backend) -> None:
    parts = {"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]}
    plain = {"role": "user", "content": "Hello\nthere"}
    got = backend.chat_batch(
        [ChatInput([parts], GenerationParams(max_tokens=8)), ChatInput([plain], GenerationParams(max_tokens=8))]
    )
    assert got[0] == got[1]


def test_audio_in_a_text_model_is_refused_alone(backend) -> None:
    import numpy as np

    audio = {"role": "user", "content": [{"type": "audio", "array": np.zeros(1600, dtype=np.float32)}]}
    bad = ChatInput([audio], GenerationParams(max_tokens=4))
    with pytest.raises(InputError):
        backend.check_chat(bad)
    results = backend.chat_batch([bad, _chat("Hello there", max_tokens=4)])
    assert isinstance(results[0], InputError)
    assert results[1] == backend.chat_batch([_chat("Hello there", max_tokens=4)])[0]


def test_transcription_is_not_offered(backend) -> None:
    import numpy as np

    with pytest.raises(NotImplementedError):
        backend.transcribe_batch([np.zeros(1600, dtype=np.float32)])


def test_hub_ids_are_not_downloaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from evalkit.errors import UserError
    from evalkit.serve.backends.transformers_backend import (
        HUB_DOWNLOAD_ENV,
        TransformersBackend,
    )

    monkeypatch.delenv(HUB_DOWNLOAD_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # belt and braces: this test must not touch the network
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # an empty cache
    with pytest.raises(UserError, match=HUB_DOWNLOAD_ENV):
        TransformersBackend("evalkit-tests/no-such-model")


def test_a_folder_without_config_is_a_clear_error(tmp_path: Path) -> None:
    from evalkit.errors import UserError
    from evalkit.serve.backends.transformers_backend import TransformersBackend

    with pytest.raises(UserError, match="config.json"):
        TransformersBackend(tmp_path)


# ------------------------------------------------------------------ speech to text (tiny Whisper)


@pytest.fixture(scope="module")
def whisper_backend(tmp_path_factory: pytest.TempPathFactory):
    from evalkit.serve.backends.transformers_backend import TransformersBackend
    from evalkit.testing.tiny_model import build_tiny_whisper

    folder = build_tiny_whisper(tmp_path_factory.getbasetemp() / "tiny-whisper-seed0", seed=0)
    b = TransformersBackend(folder, max_batch_size=4)
    yield b
    b.close()


def _sounds():
    import numpy as np

    t = np.arange(2 * 16_000) / 16_000
    return [
        np.random.default_rng(0).standard_normal(16_000).astype(np.float32) * 0.1,
        (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32),
        np.zeros(8_000, dtype=np.float32),
        (0.3 * np.sign(np.sin(2 * np.pi * 3 * t))).astype(np.float32),
    ]


def test_whisper_is_detected_as_speech_to_text(whisper_backend) -> None:
    assert whisper_backend.kind == "speech_to_text"
    assert whisper_backend.supports_transcription and not whisper_backend.supports_chat
    assert whisper_backend.languages == frozenset({"en"})  # English-only: no language tokens
    with pytest.raises(NotImplementedError):
        whisper_backend.chat_batch([_chat("Hello")])


def test_whisper_transcribes_batches_like_single_requests(whisper_backend) -> None:
    sounds = _sounds()
    batched = whisper_backend.transcribe_batch(sounds)
    assert batched == [whisper_backend.transcribe_batch([s])[0] for s in sounds]
    assert all(isinstance(text, str) and text.strip() for text in batched)
    assert len(set(batched)) >= 2  # the text depends on the audio
    assert not any("<|" in text for text in batched)  # special tokens are skipped

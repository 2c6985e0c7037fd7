"""A tiny random-weight Llama chat model, built locally, for tests of real serving.

Tests must exercise the real loading and generation code of transformers and
vLLM, yet nothing may be downloaded. So the model is made here: a byte-level
BPE tokenizer trained on English text generated in this module and a
LlamaForCausalLM of about 200k parameters whose weights come from numpy's
seeded generator (not torch's initialisers, which may change between
releases), saved with ``save_pretrained`` as safetensors so that both
``transformers`` and ``vllm`` load the folder as they would a real model.

The answers are gibberish, but deterministic: greedy decoding of the same
prompt gives the same tokens in every engine, which is what the tests compare.

Choices that keep engines in exact agreement:

* The tokenizer's alphabet is the printable ASCII set only; any other byte is
  ``<|unk|>`` (a special token). Every generated token therefore decodes to
  whole characters, so a streaming detokenizer (vLLM) and a one-shot decode
  (transformers) give the same text.
* The tokenizer adds no special tokens on its own; the chat template writes
  ``<|bos|>`` itself, so a prompt tokenized from the rendered template has one
  BOS whichever engine tokenizes it.
* ``clean_up_tokenization_spaces`` is off: vLLM never applies it.
* The output projection is not tied to the embeddings and the weights are
  scaled so that the top logits are well apart (smallest top-1/top-2 gap
  seen on the test prompts: 0.05 on logits of spread about 8), so float32
  rounding differences between kernels do not flip a greedy choice.
* Each attention head is 32 wide: vLLM's CPU attention refuses 16
  ("Unsupported CPU attention configuration: head_dim=16"), and only at the
  first request, not at start-up.

``build_tiny_whisper(dir)`` makes a Whisper of the same size from the same
tokenizer, for the speech-to-text path in transformers;
``build_tiny_whisper_tied(dir)`` one whose output head is its embeddings, the
form vLLM serves (vLLM ties Whisper's ``proj_out`` whatever the checkpoint says).

Use ``build_tiny_llama(dir)`` from Python or
``python -m evalkit.testing.tiny_model OUT_DIR [--kind whisper]`` from a
shell. torch, transformers and tokenizers are imported inside the builders
only. A folder that already holds a complete model of the same kind, seed and
recipe is returned as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

#: bump when the recipe changes, so cached folders built by an older recipe are rebuilt
RECIPE_VERSION = 1
MARKER_FILE = "evalkit_tiny_model.json"

BOS, EOS, PAD, UNK = "<|bos|>", "<|eos|>", "<|pad|>", "<|unk|>"
SYSTEM, USER, ASSISTANT = "<|system|>", "<|user|>", "<|assistant|>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK, SYSTEM, USER, ASSISTANT]

#: renders e.g. "<|bos|><|user|>Hi<|assistant|>"; assistant turns end with <|eos|>
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}<|system|>{{ message['content'] }}"
    "{% elif message['role'] == 'user' %}<|user|>{{ message['content'] }}"
    "{% elif message['role'] == 'assistant' %}<|assistant|>{{ message['content'] }}{{ eos_token }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

VOCAB_SIZE = 1024
HIDDEN_SIZE = 64
INTERMEDIATE_SIZE = 128
NUM_LAYERS = 2
# vLLM's CPU attention supports head sizes of 32 and more (not 16): 64 / 2 = 32;
# one key/value head so grouped-query attention is exercised too
NUM_HEADS = 2
NUM_KV_HEADS = 1
MAX_POSITIONS = 512

_COMMON_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer_config.json", MARKER_FILE)
_REQUIRED_FILES = {
    "llama": (*_COMMON_FILES, "tokenizer.json"),
    "whisper": (*_COMMON_FILES, "vocab.json", "merges.txt"),
    "whisper-tied": (*_COMMON_FILES, "vocab.json", "merges.txt"),
}

# the tiny Whisper: decoding stops after this many tokens, so its tests stay fast
WHISPER_MAX_LENGTH = 12
WHISPER_SPECIAL_TOKENS = [
    "<|startoftranscript|>",
    "<|en|>",
    "<|transcribe|>",
    "<|translate|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
]

# ---------------------------------------------------------------- training text

_SUBJECTS = [
    "the old fisherman",
    "a young teacher",
    "my neighbour",
    "the small robot",
    "our team",
    "the farmer",
    "a curious child",
    "the city council",
    "every student",
    "the pilot",
    "her brother",
    "the museum guide",
    "a tired doctor",
    "the baker",
    "two engineers",
    "the quiet cat",
    "a travelling musician",
    "the river",
    "the morning train",
    "the committee",
]
_VERBS = [
    "found",
    "carried",
    "painted",
    "repaired",
    "described",
    "measured",
    "forgot",
    "planted",
    "opened",
    "sold",
    "explained",
    "borrowed",
    "counted",
    "watched",
    "answered",
    "built",
    "cleaned",
    "followed",
    "wrote",
    "heard",
]
_OBJECTS = [
    "a wooden boat",
    "the broken clock",
    "three red apples",
    "a long letter",
    "the blue door",
    "a map of the island",
    "the heavy box",
    "a strange noise",
    "the last question",
    "fresh bread",
    "the garden wall",
    "an old song",
    "the weather report",
    "a paper kite",
    "the missing key",
    "a cup of tea",
    "the school bus",
    "a bright lamp",
    "the empty bottle",
    "a new bridge",
]
_PLACES = [
    "near the harbour",
    "in the kitchen",
    "behind the library",
    "at the station",
    "on the hill",
    "under the bridge",
    "in a small village",
    "by the window",
    "across the street",
    "inside the museum",
    "at the market",
    "in the forest",
    "on the roof",
    "beside the lake",
]
_TIMES = [
    "yesterday",
    "last winter",
    "every morning",
    "before dinner",
    "on Monday",
    "after the storm",
    "at midnight",
    "in 1998",
    "twice a week",
    "this afternoon",
    "during the holidays",
    "at 7:30",
]
_ADJECTIVES = [
    "quick",
    "gentle",
    "careful",
    "noisy",
    "bright",
    "patient",
    "strange",
    "honest",
    "clever",
    "cold",
    "warm",
    "ancient",
    "simple",
    "happy",
    "serious",
]
_QUESTIONS = [
    "What time does the shop open?",
    "Where did you put the keys?",
    "How far is the station?",
    "Why is the sky blue?",
    "Who wrote this letter?",
    "Can you help me with my homework?",
    "How many people live in the city?",
    "What is the capital of France?",
    "Which road leads to the coast?",
    "When will the rain stop?",
    "Is it going to be sunny?",
    "Could you repeat the last sentence, please?",
    "What does this word mean?",
    "How do you say thank you in Spanish?",
    "Did you hear the news today?",
]
_ANSWERS = [
    "The shop opens at nine o'clock.",
    "I put them on the table.",
    "It is about two miles away.",
    "Sunlight is scattered by the air.",
    "Paris is the capital of France.",
    "Of course, I will help you.",
    "The rain should stop soon.",
    "Yes, it will be sunny.",
    "Nobody knows the answer yet.",
    "That word means happy.",
    "Take the road to the left.",
    "About 250,000 people live there.",
    "I did not hear anything.",
    "You say gracias.",
]


def training_lines(seed: int = 0, n: int = 400) -> list[str]:
    """English-like lines for the tokenizer; varied enough for useful BPE merges."""
    rng = random.Random(seed)
    lines: list[str] = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            line = (
                f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} "
                f"{rng.choice(_OBJECTS)} {rng.choice(_PLACES)} {rng.choice(_TIMES)}."
            )
        elif kind == 1:
            line = f"{rng.choice(_QUESTIONS)} {rng.choice(_ANSWERS)}"
        elif kind == 2:
            line = (
                f"It was a {rng.choice(_ADJECTIVES)} and {rng.choice(_ADJECTIVES)} day, "
                f"so {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}."
            )
        elif kind == 3:
            a, b = rng.randint(1, 999), rng.randint(1, 99)
            line = f"There were {a} boxes and {b} bags; in total {a + b} items (about {a * b % 97}%)."
        else:
            line = (
                f'"{rng.choice(_QUESTIONS)}" asked {rng.choice(_SUBJECTS)}. '
                f"'{rng.choice(_ANSWERS)}' said {rng.choice(_SUBJECTS)} {rng.choice(_TIMES)}!"
            )
        lines.append(line)
    # every printable ASCII character, so each has a token of its own
    lines.append("".join(chr(c) for c in range(32, 127)))
    lines.append("tabs\tand\nnew lines\n\nmatter too")
    return lines


# ---------------------------------------------------------------- building


def train_tokenizer(seed: int, special_tokens: list[str] = SPECIAL_TOKENS):
    """A byte-level BPE tokenizer over the ASCII alphabet, special tokens first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=special_tokens,
        min_frequency=1,
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_lines(seed), trainer=trainer)
    return tokenizer


def fill_weights(model, seed: int) -> None:
    """Overwrite every parameter from numpy's seeded generator, in name order."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("norm.weight"):
                values = np.ones(param.shape, dtype=np.float32)
            elif name.endswith(".bias"):
                # random biases add the same vector at every step and drown the input
                values = np.zeros(param.shape, dtype=np.float32)
            else:
                fan_in = param.shape[-1] if param.dim() > 1 else 1
                # unit-variance activations through each projection; the
                # embedding and the output head get larger weights so that
                # greedy choices are decisive
                std = 1.0 if ("embed_tokens" in name or "lm_head" in name) else 1.0 / np.sqrt(fan_in)
                values = rng.standard_normal(param.shape).astype(np.float32) * np.float32(std)
            param.copy_(torch.from_numpy(values))


def chat_tokenizer(
    raw: Any, *, eos: str, pad: str, special: list[str], max_positions: int, bos: str | None = None
) -> Any:
    """A transformers tokenizer around ``raw`` (:func:`train_tokenizer`) with the rules every tiny chat model shares.

    No clean-up of spaces (streaming and one-shot decoding agree, as vLLM needs),
    left padding (batched generation), and the recipe's own special tokens.
    """
    from transformers import PreTrainedTokenizerFast

    optional = {"bos_token": bos} if bos is not None else {}  # absent, not null, in a checkpoint without one
    return PreTrainedTokenizerFast(
        tokenizer_object=raw,
        **optional,
        eos_token=eos,
        pad_token=pad,
        unk_token=UNK,
        additional_special_tokens=special,
        clean_up_tokenization_spaces=False,
        model_max_length=max_positions,
        padding_side="left",
    )


def _build_llama_into(folder: Path, seed: int) -> tuple[int, int]:
    import torch
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
    )

    raw = train_tokenizer(seed)
    tokenizer = chat_tokenizer(
        raw, bos=BOS, eos=EOS, pad=PAD, special=[SYSTEM, USER, ASSISTANT], max_positions=MAX_POSITIONS
    )
    tokenizer.chat_template = CHAT_TEMPLATE

    vocab_size = raw.get_vocab_size()
    ids = {tok: raw.token_to_id(tok) for tok in (BOS, EOS, PAD)}
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=ids[BOS],
        eos_token_id=ids[EOS],
        pad_token_id=ids[PAD],
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    fill_weights(model, seed)
    model.generation_config = GenerationConfig(bos_token_id=ids[BOS], eos_token_id=ids[EOS], pad_token_id=ids[PAD])
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    store_chat_template(folder, CHAT_TEMPLATE)

    return sum(p.numel() for p in model.parameters()), vocab_size


#: decoder projections into the residual stream are scaled up in the tied Whisper: with the output
#: head tied to the embeddings a random decoder otherwise predicts the token it was just given
TIED_WHISPER_DECODER_SCALE = 4.0


def _build_whisper_into(folder: Path, seed: int, tied: bool = False) -> tuple[int, int]:
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    # Whisper's tokenizer reads GPT-2 style vocab.json + merges.txt
    train_tokenizer(seed).model.save(str(folder))
    eot = "<|endoftext|>"
    tokenizer = WhisperTokenizer.from_pretrained(
        str(folder), unk_token=UNK, bos_token=eot, eos_token=eot, pad_token=eot
    )
    tokenizer.add_special_tokens({"additional_special_tokens": WHISPER_SPECIAL_TOKENS})
    ids = {tok: tokenizer.convert_tokens_to_ids(tok) for tok in [eot, *WHISPER_SPECIAL_TOKENS]}
    processor = WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer)

    config = WhisperConfig(
        vocab_size=len(tokenizer),
        num_mel_bins=80,
        d_model=HIDDEN_SIZE,
        encoder_layers=NUM_LAYERS,
        decoder_layers=NUM_LAYERS,
        encoder_attention_heads=NUM_HEADS,
        decoder_attention_heads=NUM_HEADS,
        encoder_ffn_dim=INTERMEDIATE_SIZE,
        decoder_ffn_dim=INTERMEDIATE_SIZE,
        max_source_positions=1500,
        max_target_positions=64,
        pad_token_id=ids[eot],
        bos_token_id=ids[eot],
        eos_token_id=ids[eot],
        decoder_start_token_id=ids["<|startoftranscript|>"],
        begin_suppress_tokens=None,
        suppress_tokens=None,
        # vLLM always ties the output head to the embeddings; transformers-only tests keep them apart
        tie_word_embeddings=tied,
    )
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).to(torch.float32).eval()
    fill_weights(model, seed)
    if tied:
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.startswith("model.decoder.layers.") and name.endswith(("out_proj.weight", "fc2.weight")):
                    param.mul_(TIED_WHISPER_DECODER_SCALE)
        model.tie_weights()
    model.generation_config = GenerationConfig(
        decoder_start_token_id=ids["<|startoftranscript|>"],
        bos_token_id=ids[eot],
        eos_token_id=ids[eot],
        pad_token_id=ids[eot],
        no_timestamps_token_id=ids["<|notimestamps|>"],
        is_multilingual=False,
        max_length=WHISPER_MAX_LENGTH,
    )
    model.save_pretrained(folder, safe_serialization=True)
    processor.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters()), len(tokenizer)


def _build_tied_whisper_into(folder: Path, seed: int) -> tuple[int, int]:
    return _build_whisper_into(folder, seed, tied=True)


_BUILDERS: dict[str, Callable[[Path, int], tuple[int, int]]] = {
    "llama": _build_llama_into,
    "whisper": _build_whisper_into,
    "whisper-tied": _build_tied_whisper_into,
}


def folder_is_built(out_dir: str | Path, required: Iterable[str], kind: str, recipe: int, seed: int) -> bool:
    """True when out_dir holds every required file and the marker of this kind, recipe and seed (the marker is
    moved in last, so a half-built folder never passes)."""
    folder = Path(out_dir)
    if not all((folder / name).is_file() for name in required):
        return False
    try:
        marker = json.loads((folder / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return marker.get("recipe") == recipe and marker.get("seed") == seed and marker.get("kind", "llama") == kind


def store_chat_template(folder: Path, template: str) -> None:
    """The chat template also in tokenizer_config.json, for readers (older transformers, other tools) that do
    not look for chat_template.jinja."""
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg["chat_template"] = template
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def builder_main(argv: list[str] | None, prog: str, description: str, build: Callable[[str, int], Path]) -> int:
    """The command line of a tiny-model module: build (or reuse) the model in a folder and say what it is."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("out_dir", help="folder to write the model into (reused when complete)")
    parser.add_argument("--seed", type=int, default=0, help="weights and training-text seed")
    args = parser.parse_args(argv)
    path = build(args.out_dir, args.seed)
    marker = json.loads((path / MARKER_FILE).read_text(encoding="utf-8"))
    print(f"{path} ({marker['parameters']:,} parameters, vocabulary {marker['vocab_size']})")
    return 0


def build_into_folder(
    out_dir: str | Path,
    seed: int,
    kind: str,
    build: Callable[[Path, int], tuple[int, int]],
    recipe: int,
) -> Path:
    """Run ``build(staging, seed)`` and move its files into out_dir, the marker last.

    The files are written into a temporary sibling folder and moved in one by
    one with the marker last, so a half-built folder is never taken as done.
    ``build`` returns (parameter count, vocabulary size) for the marker.
    """
    folder = Path(out_dir).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER_FILE).unlink(missing_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".tiny-{kind}-", dir=folder.parent))
    try:
        n_params, vocab_size = build(staging, seed)
        marker = {"recipe": recipe, "kind": kind, "seed": seed, "parameters": n_params, "vocab_size": vocab_size}
        (staging / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        names = sorted(p.name for p in staging.iterdir() if p.name != MARKER_FILE)
        for name in [*names, MARKER_FILE]:
            target = folder / name
            if target.is_dir():
                shutil.rmtree(target)
            (staging / name).chmod(0o644)
            os.replace(staging / name, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def build_once(
    out_dir: str | Path,
    seed: int,
    kind: str,
    build: Callable[[Path, int], tuple[int, int]],
    recipe: int,
    required: Iterable[str],
) -> Path:
    """out_dir when it already holds this kind, recipe and seed (every required file there); else built there."""
    if folder_is_built(out_dir, required, kind, recipe, seed):
        return Path(out_dir).resolve()
    return build_into_folder(out_dir, seed, kind, build, recipe)


def _build_cached(out_dir: str | Path, seed: int, kind: str) -> Path:
    """Build (or reuse) a model of ``kind`` in out_dir and return its path."""
    return build_once(out_dir, seed, kind, _BUILDERS[kind], RECIPE_VERSION, _REQUIRED_FILES[kind])


def build_tiny_llama(out_dir: str | Path, seed: int = 0) -> Path:
    """The tiny Llama chat model in out_dir (built unless already there for this seed)."""
    return _build_cached(out_dir, seed, "llama")


def build_tiny_whisper(out_dir: str | Path, seed: int = 0) -> Path:
    """A tiny random English-only Whisper (WhisperForConditionalGeneration + WhisperProcessor).

    For tests of the speech-to-text path: the transcripts are gibberish but
    deterministic. It has no timestamp tokens, so it cannot do Whisper's
    long-form (over 30 s) decoding; keep test audio shorter.
    """
    return _build_cached(out_dir, seed, "whisper")


def build_tiny_whisper_tied(out_dir: str | Path, seed: int = 0) -> Path:
    """The tiny Whisper with its output head tied to the embeddings, as vLLM serves Whisper.

    vLLM's Whisper ignores ``proj_out`` and uses the decoder's embeddings, so
    only a tied checkpoint gives the same answers in vLLM and transformers.
    """
    return _build_cached(out_dir, seed, "whisper-tied")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evalkit.testing.tiny_model",
        description="Build a tiny random-weight Llama chat model or Whisper (no downloads).",
    )
    parser.add_argument("--kind", choices=sorted(_BUILDERS), default="llama", help="which model (default: llama)")
    parser.add_argument("out_dir", help="folder to write the model into (reused when complete)")
    parser.add_argument("--seed", type=int, default=0, help="weights and training-text seed")
    args = parser.parse_args(argv)
    path = _build_cached(args.out_dir, args.seed, args.kind)
    marker = json.loads((path / MARKER_FILE).read_text(encoding="utf-8"))
    print(f"{path} ({marker['parameters']:,} parameters, vocabulary {marker['vocab_size']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

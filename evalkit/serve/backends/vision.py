"""Images in ``evalkit serve``: decoding OpenAI ``image_url`` parts and preparing image chat for a processor.

Requests carry images as OpenAI chat parts,
``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``
(the form vLLM, OpenAI and Azure accept). The server decodes each one with
Pillow in its parse pool (never on the event loop) into an RGB image and
puts ``{"type": "image", "image": PIL.Image}`` in its place, as it does for
audio. Only data URIs are accepted: ``evalkit serve`` runs on machines with
no network and never fetches a URL on a client's behalf, so an ``http(s)://``
or ``file:`` URL is refused with a 400 that says so.

For the model, :func:`encode_image_chats` renders each conversation with the
processor's chat template (an ``{"type": "image"}`` placeholder per image, in
the order the client sent them) and calls the processor on the texts and the
images of the whole batch at once, with the tokenizer's left padding, as the
text and audio paths do.

Pillow is imported here, torch is not: the server parses requests with this
module whatever the backend.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings
from collections.abc import Sequence
from typing import Any

from PIL import Image

#: what a request may send as an image: the MIME types Pillow decodes and servers accept
IMAGE_MIME_TYPES = frozenset({"image/png", "image/jpeg", "image/jpg", "image/webp", "image/gif", "image/bmp"})
#: refuse images larger than this many pixels (about 8k x 8k) before decoding them fully
MAX_IMAGE_PIXELS = 64_000_000


class ImageInputError(ValueError):
    """An image part that cannot be used; the message names the part and why (the server replies 400)."""


def decode_image_url(url: Any, where: str) -> Image.Image:
    """The RGB image of a ``data:image/<fmt>;base64,...`` URI; ImageInputError naming ``where`` otherwise."""
    if not isinstance(url, str) or not url:
        raise ImageInputError(f"{where} must be a data:image/<format>;base64,... URI")
    lowered = url[:16].lower()
    if lowered.startswith(("http://", "https://", "file:", "ftp://")):
        scheme = url.split(":", 1)[0]
        raise ImageInputError(
            f"{where}: {scheme} URLs are not fetched (evalkit serve does not download images); "
            "send the image inline as a data:image/<format>;base64,... URI"
        )
    if not lowered.startswith("data:") or ";base64," not in url:
        raise ImageInputError(f"{where} must be a data:image/<format>;base64,... URI, got {url[:40]!r}")
    header, payload = url.split(";base64,", 1)
    mime = header[len("data:") :].strip().lower()
    if mime not in IMAGE_MIME_TYPES:
        raise ImageInputError(
            f"{where}: unsupported media type {mime!r} (supported: {', '.join(sorted(IMAGE_MIME_TYPES))})"
        )
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageInputError(f"{where}: the image data is not valid base64") from None
    if not raw:
        raise ImageInputError(f"{where}: the image data is empty")
    return decode_image_bytes(raw, where)


def decode_image_bytes(raw: bytes, where: str) -> Image.Image:
    """Decode encoded image bytes fully (a truncated file fails here, not in the model) into RGB."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(raw))
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:
                raise ImageInputError(
                    f"{where}: the image is {width}x{height} pixels, more than {MAX_IMAGE_PIXELS:,}; send it smaller"
                )
            image.load()
            return image.convert("RGB")
    except ImageInputError:
        raise
    except Image.DecompressionBombWarning as exc:
        raise ImageInputError(f"{where}: {exc}") from None
    except Image.UnidentifiedImageError:
        raise ImageInputError(f"{where}: the data is not an image Pillow can decode") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        # OSError: "image file is truncated (N bytes not processed)" and broken data streams
        raise ImageInputError(f"{where}: the image cannot be decoded: {exc}") from None


def image_part(part: dict[str, Any], where: str) -> dict[str, Any]:
    """An OpenAI ``image_url`` part as the backend's ``{"type": "image", "image": PIL.Image}``."""
    payload = part.get("image_url")
    url = payload.get("url") if isinstance(payload, dict) else payload
    return {"type": "image", "image": decode_image_url(url, f"{where}.image_url.url")}


def has_images(messages: Sequence[dict[str, Any]]) -> bool:
    return any(
        isinstance(part, dict) and part.get("type") == "image"
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )


def _template_messages(conversation: list[dict[str, Any]], images: list[Image.Image]) -> list[dict[str, Any]]:
    """Messages for the processor's chat template: image placeholders, text parts; images collected in order."""
    messages: list[dict[str, Any]] = []
    for message in conversation:
        content = message.get("content")
        parts: list[dict[str, Any]] = []
        if isinstance(content, list):
            for part in content:
                if part.get("type") == "image":
                    images.append(part["image"])
                    parts.append({"type": "image"})
                elif part.get("type") == "text":
                    parts.append({"type": "text", "text": part.get("text", "")})
        else:
            parts.append({"type": "text", "text": "" if content is None else str(content)})
        messages.append({**message, "content": parts})
    return messages


def encode_image_chats(processor: Any, conversations: list[list[dict[str, Any]]], dtype: Any = None) -> dict[str, Any]:
    """Processor inputs for a batch of image chats, left-padded, on the CPU (the model thread moves them).

    Floating-point inputs (the pixel values) take the model's ``dtype``: a
    bfloat16 model on a GPU refuses float32 pixels.

    Conversations without images may share the batch only with others
    without images (processors want one image list per text or none at all);
    the backend's caller keeps them apart.
    """
    prompts: list[str] = []
    images: list[list[Image.Image]] = []
    for conversation in conversations:
        own: list[Image.Image] = []
        messages = _template_messages(conversation, own)
        prompts.append(processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
        images.append(own)
    kwargs: dict[str, Any] = {"text": prompts, "return_tensors": "pt", "padding": True}
    if any(images):
        kwargs["images"] = images
    encoded = dict(processor(**kwargs))
    if dtype is not None:
        for key, value in encoded.items():
            if getattr(value, "is_floating_point", lambda: False)():
                encoded[key] = value.to(dtype=dtype)
    return encoded

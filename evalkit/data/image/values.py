"""What a dataset's image column holds, turned into :class:`~evalkit.data.sample.Image` values without decoding.

A cell may be a path (relative to the data file), raw bytes, a Hugging Face
``Image`` feature as stored (``{"bytes": ..., "path": ...}``), a
``data:image/...;base64,`` URI, or a list of any of these (multi-image
questions such as MMMU's). Nothing here opens an image, so it is cheap
enough for the thread that streams rows.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from typing import Any

from evalkit.data.sample import Image

__all__ = ["ImageDecodeError", "image_from_value", "images_from_cell"]


class ImageDecodeError(ValueError):
    """An image that cannot be read: a per-sample failure (reason ``image``), not a crash of the run."""


def _resolve(path: str, base_dir: str | os.PathLike[str] | None) -> str:
    p = os.path.expanduser(path)
    if base_dir is not None and not os.path.isabs(p):
        p = os.path.join(os.fspath(base_dir), p)
    return p


def _from_data_uri(uri: str) -> Image:
    header, _, payload = uri.partition(",")
    if ";base64" not in header:
        raise ImageDecodeError(f"image data URI {header[:40]!r}... is not base64; expected data:image/<format>;base64,")
    try:
        return Image(data=base64.b64decode(payload, validate=True))
    except (binascii.Error, ValueError) as error:
        raise ImageDecodeError(f"image data URI holds invalid base64: {error}") from None


def image_from_value(value: Any, base_dir: str | os.PathLike[str] | None = None) -> Image:
    """One image from one cell value (not a list); raises :class:`ImageDecodeError` for what is no image at all."""
    if isinstance(value, Image):
        if value.path is not None and value.data is None:
            return Image(path=_resolve(value.path, base_dir), name=value.name)
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) == 0:
            raise ImageDecodeError("image value is an empty byte string")
        return Image(data=bytes(value))
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if not text.strip():
            raise ImageDecodeError("image value is an empty path")
        if text.startswith("data:"):
            return _from_data_uri(text)
        if text.startswith(("http://", "https://")):
            raise ImageDecodeError(f"image value {text[:80]!r} is a URL; evalkit reads local files and bytes only")
        return Image(path=_resolve(text, base_dir))
    if isinstance(value, Mapping):
        data = value.get("bytes")
        path = value.get("path")
        if data is not None and len(data) > 0:
            return Image(data=bytes(data), name=str(path) if path else None)
        if path:
            return Image(path=_resolve(str(path), base_dir))
        raise ImageDecodeError(f"image value has neither bytes nor a path (keys: {sorted(map(str, value))})")
    raise ImageDecodeError(
        f"image value of type {type(value).__name__} is not understood; expected a path, bytes, "
        "{'bytes', 'path'} (a Hugging Face Image feature) or a list of these"
    )


def images_from_cell(value: Any, base_dir: str | os.PathLike[str] | None = None) -> list[Image]:
    """Every image of one cell, in order: [] for None or an empty list."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        found = []
        for index, item in enumerate(value):
            if item is None:
                continue  # datasets pad multi-image columns (MMMU's image_1..image_7) with nulls
            try:
                found.append(image_from_value(item, base_dir))
            except ImageDecodeError as error:
                raise ImageDecodeError(f"image {index + 1} of {len(value)}: {error}") from None
        return found
    return [image_from_value(value, base_dir)]

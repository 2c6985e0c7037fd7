"""What the test server sees in a request's images: it decodes the ``data:image/...`` URIs it receives.

With ``image_answer`` in the script, a chat request whose last user message
carries images is answered from their pixels, one word per image in the
order received, so a test knows the exact answer of every sample by hand:

* ``colour``: the name of each image's dominant colour (the nearest of a
  small palette: black, white, gray, red, green, blue, yellow, cyan,
  magenta, orange, purple);
* ``size``: each image's size as decoded, ``<width>x<height>`` (what a
  client's downsizing actually delivered);
* ``format``: each image's format as decoded (png, jpeg, ...).

An image that does not decode is a 400, as a real server answers it.
Pillow is imported only when a request carries images.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any

from evalkit.testing.wire import BadRequest

IMAGE_ANSWERS = ("colour", "size", "format")

PALETTE: dict[str, tuple[int, int, int]] = {
    "black": (0, 0, 0),
    "white": (255, 255, 255),
    "gray": (128, 128, 128),
    "red": (255, 0, 0),
    "green": (0, 160, 0),
    "blue": (0, 0, 255),
    "yellow": (255, 255, 0),
    "cyan": (0, 255, 255),
    "magenta": (255, 0, 255),
    "orange": (255, 140, 0),
    "purple": (128, 0, 128),
}


def image_bytes(url: str, where: str) -> bytes:
    """The encoded image inside a ``data:image/<format>;base64,`` URI; BadRequest otherwise."""
    header, comma, payload = url.partition(",")
    if not comma or not header.startswith("data:image/") or not header.endswith(";base64"):
        raise BadRequest(f"{where}.image_url.url must be a data:image/<format>;base64, URI.", f"{where}.image_url.url")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadRequest(f"{where}: invalid base64 image ({exc}).", f"{where}.image_url.url") from exc


def _open(data: bytes, where: str) -> Any:
    from PIL import Image

    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise BadRequest(f"{where}: the image cannot be decoded ({exc}).", where) from exc
    return image


def nearest_colour(rgb: tuple[int, int, int]) -> str:
    """The palette name closest to ``rgb`` (squared distance)."""
    return min(PALETTE, key=lambda name: sum((a - b) ** 2 for a, b in zip(PALETTE[name], rgb)))


def dominant_colour(image: Any) -> str:
    """The palette name of the most frequent colour of a 64x64 thumbnail."""
    small = image.convert("RGB")
    small.thumbnail((64, 64))
    colours = small.getcolors(64 * 64) or [(1, small.getpixel((0, 0)))]
    return nearest_colour(max(colours)[1])


def describe(data: bytes, mode: str, where: str) -> str:
    """One image as ``mode`` describes it (see the module docstring)."""
    image = _open(data, where)
    if mode == "size":
        return f"{image.width}x{image.height}"
    if mode == "format":
        return str(image.format or "unknown").lower()
    return dominant_colour(image)


def header_info(url: str) -> dict[str, Any]:
    """Format, size and byte count of a data URI's image for the request log (the header only; nothing decoded)."""
    from PIL import Image

    if not url.startswith("data:"):
        return {"url": url[:200]}
    try:
        data = image_bytes(url, "image")
    except BadRequest:
        return {"format": None}
    try:
        with Image.open(io.BytesIO(data)) as image:
            return {
                "format": str(image.format).lower(),
                "width": image.width,
                "height": image.height,
                "bytes": len(data),
            }
    except (OSError, SyntaxError, ValueError):
        return {"format": None, "bytes": len(data)}

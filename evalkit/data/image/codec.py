"""Reading, checking, downsizing and encoding images with Pillow (blocking: runs off the loop, in a thread or worker).

An image is *probed*, not decoded, when it is sent as it came: Pillow reads
the header (format, width x height), and the file's end is checked so a
truncated file fails its sample here rather than at the model (PNG: every
chunk's CRC up to IEND through ``verify()``; JPEG: an end-of-image marker
after the last scan). Other formats are decoded once to be sure. Pixels are
decoded only to downsize (``max_image_side`` / ``max_image_pixels``) or to
turn a format chat APIs refuse (BMP, TIFF, ...) into PNG.
"""

from __future__ import annotations

import io
import math
import os
import struct
from dataclasses import dataclass

from evalkit.data.image.values import ImageDecodeError
from evalkit.data.sample import Image

__all__ = ["SENT_AS_IS", "EncodedImage", "ProbedImage", "fit_size", "probe", "read_bytes", "transform"]

#: formats chat APIs take as they are (OpenAI: png, jpeg, webp, non-animated gif), with their MIME type;
#: MPO is a camera JPEG with extra frames, readable as a JPEG
SENT_AS_IS = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
#: what a downsized image is written as: its own format where it is one of these, else PNG
_REENCODE_AS = {"PNG": "PNG", "JPEG": "JPEG", "MPO": "JPEG", "WEBP": "WEBP"}
_MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}
#: quality of re-encoded JPEG/WebP: close to the source, a fraction of PNG's size
_QUALITY = 90


def _pil_errors() -> tuple[type[BaseException], ...]:
    from PIL import Image as PILImage

    # Pillow raises OSError (UnidentifiedImageError, "truncated"), SyntaxError ("broken PNG file"),
    # ValueError, EOFError and struct.error on malformed data; a decompression bomb is an error of its own
    return (OSError, SyntaxError, ValueError, EOFError, struct.error, IndexError, PILImage.DecompressionBombError)


@dataclass(frozen=True, slots=True)
class ProbedImage:
    """What the header says: Pillow's format name and the size in pixels."""

    format: str
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class EncodedImage:
    """An image as it will be sent: bytes, MIME type and size."""

    data: bytes
    mime: str
    format: str
    width: int
    height: int


def describe(image: Image) -> str:
    """How an error names the image: its path, its name inside the dataset, or 'image bytes'."""
    if image.path is not None:
        return f"image file {image.path!r}"
    if image.name:
        return f"image bytes ({image.name!r})"
    return "image bytes"


def read_bytes(image: Image) -> bytes:
    """The encoded bytes of ``image`` (the file read for a path); ImageDecodeError when there are none."""
    if image.data is not None:
        if not image.data:
            raise ImageDecodeError("image bytes are empty")
        return bytes(image.data)
    if image.path is None:
        raise ImageDecodeError("image has neither bytes nor a path")
    path = os.fspath(image.path)
    if not os.path.isfile(path):
        raise ImageDecodeError(f"image file {path!r}: no such file")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise ImageDecodeError(f"cannot read image file {path!r}: {error}") from None
    if not data:
        raise ImageDecodeError(f"image file {path!r} is empty")
    return data


def _jpeg_complete(data: bytes) -> bool:
    """A JPEG whose last scan (SOS, FFDA) is followed by an end-of-image marker (FFD9): not cut short.

    The last EOI sits at the end of a whole file, so it is found from the end;
    then a scan must start before it and none after it. (Searching for the
    last SOS from the end would cross the whole entropy-coded image.)
    """
    end = data.rfind(b"\xff\xd9")
    return end >= 0 and data.find(b"\xff\xda", 0, end + 1) >= 0 and data.find(b"\xff\xda", end) < 0


def probe(data: bytes, what: str) -> ProbedImage:
    """Format and size from the header, after checking the file is whole; ImageDecodeError naming ``what``."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data)) as opened:
            found = ProbedImage(str(opened.format or "unknown"), int(opened.width), int(opened.height))
            if found.format == "PNG":
                opened.verify()
            elif found.format not in ("JPEG", "MPO"):
                opened.load()
    except _pil_errors() as error:
        raise ImageDecodeError(f"cannot decode {what} ({len(data)} bytes): {error}") from None
    if found.format in ("JPEG", "MPO") and not _jpeg_complete(data):
        raise ImageDecodeError(f"cannot decode {what} ({len(data)} bytes): the JPEG is truncated (no end-of-image)")
    if found.width <= 0 or found.height <= 0:
        raise ImageDecodeError(f"{what} has no pixels ({found.width}x{found.height})")
    return found


def fit_size(width: int, height: int, max_side: int | None, max_pixels: int | None) -> tuple[int, int]:
    """The largest size with the same aspect ratio within both limits (the size itself when it fits)."""
    scale = 1.0
    if max_side is not None:
        scale = min(scale, max_side / max(width, height))
    if max_pixels is not None:
        scale = min(scale, math.sqrt(max_pixels / (width * height)))
    if scale >= 1.0:
        return width, height
    new_w, new_h = max(1, math.floor(width * scale)), max(1, math.floor(height * scale))
    while max_pixels is not None and new_w * new_h > max_pixels and (new_w > 1 or new_h > 1):
        # floating-point scale can land one pixel over; step the longer side down
        if new_w >= new_h:
            new_w -= 1
        else:
            new_h -= 1
    return new_w, new_h


def transform(data: bytes, found: ProbedImage, size: tuple[int, int], what: str) -> EncodedImage:
    """Decode, downsize to ``size`` (keeping the aspect ratio the caller computed) and re-encode.

    JPEG and WebP stay what they are (quality 90, EXIF kept so orientation
    survives), PNG stays PNG, anything else becomes PNG.
    """
    from PIL import Image as PILImage

    target = _REENCODE_AS.get(found.format, "PNG")
    try:
        with PILImage.open(io.BytesIO(data)) as opened:
            if found.format in ("JPEG", "MPO") and size != (found.width, found.height):
                opened.draft(opened.mode, size)  # DCT scaling: decode at 1/2, 1/4 or 1/8 when that is enough
            picture = opened.convert("RGBA") if opened.mode == "P" and target != "PNG" else opened
            if size != picture.size:
                picture = picture.resize(size, PILImage.Resampling.LANCZOS, reducing_gap=3.0)
            if target == "JPEG" and picture.mode not in ("RGB", "L", "CMYK"):
                picture = picture.convert("RGB")
            out = io.BytesIO()
            options: dict[str, object] = {}
            if target in ("JPEG", "WEBP"):
                options["quality"] = _QUALITY
                exif = opened.info.get("exif")
                if exif:
                    options["exif"] = exif
            picture.save(out, format=target, **options)
    except _pil_errors() as error:
        raise ImageDecodeError(f"cannot decode {what} ({len(data)} bytes) to resize it: {error}") from None
    return EncodedImage(out.getvalue(), _MIME[target], target, size[0], size[1])

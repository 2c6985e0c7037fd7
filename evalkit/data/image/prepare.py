"""A sample's images as the models of one engine will send them, made once per sample off the event loop.

Each model has an image *limit* (``max_image_side``, ``max_image_pixels``);
an image within a model's limit goes as it came (probed, never decoded), a
bigger one is downsized once per distinct limit. A part keeps only its data
URI and a reference for the record (hash, format, size): the raw bytes are
let go as soon as the URI is made, so a sample in flight holds each image once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evalkit.data.image.codec import (
    SENT_AS_IS,
    EncodedImage,
    ProbedImage,
    describe,
    fit_size,
    probe,
    read_bytes,
    transform,
)
from evalkit.data.image.corrupt import ImageCorruption, corrupt_image
from evalkit.data.sample import Image
from evalkit.util.b64 import b64_text

#: how a model wants its images: (max_image_side, max_image_pixels), None for no limit
ImageLimit = tuple[int | None, int | None]
NO_LIMIT: ImageLimit = (None, None)


@dataclass(slots=True)
class ImagePart:
    """One image of a request: the data URI sent, what identifies it in the store key, and the record's reference.

    ``identity`` is the source's sha256 when the image goes as it came, and
    the sha256 with the size, format and limits it was re-encoded under
    otherwise: the answer depends on exactly these.
    """

    url: str
    identity: str
    ref: dict[str, Any] = field(default_factory=dict)


def _data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{b64_text(data)}"


def _source_ref(image: Image, sha: str, fmt: str, width: int, height: int, size: int) -> dict[str, Any]:
    ref: dict[str, Any] = {}
    if image.path is not None:
        ref["path"] = image.path
    elif image.name:
        ref["name"] = image.name
    ref.update(sha256=sha, format=fmt.lower(), width=width, height=height, bytes=size)
    return ref


def image_parts(
    image: Image,
    limits: Iterable[ImageLimit],
    as_is_only: bool = False,
    corruption: ImageCorruption | None = None,
    place: tuple[int, int] = (0, 0),
) -> dict[ImageLimit, ImagePart] | None:
    """The part of ``image`` for every limit (blocking); ImageDecodeError when it cannot be read or decoded.

    With ``as_is_only`` the answer is None as soon as some limit needs the
    image decoded and re-encoded: the caller then sends the work where
    decoding belongs (the worker processes).

    With ``corruption`` (a robustness variant) the image is corrupted first, seeded by its ``place`` (turn or
    example key, index); what is sent, and keyed in the store, is the corrupted image, and the reference keeps
    the source's fields plus ``corruption``: name, level, seed and the sha256, format and size of what was sent.
    """
    what = describe(image)
    data = read_bytes(image)
    found = probe(data, what)
    sha = hashlib.sha256(data).hexdigest()
    source = _source_ref(image, sha, found.format, found.width, found.height, len(data))
    if corruption is not None:
        if as_is_only:
            return None  # decoding belongs in the worker processes
        changed = corrupt_image(data, corruption, *place, what)
        data, sha = changed.data, hashlib.sha256(changed.data).hexdigest()
        found = ProbedImage(changed.format.upper(), changed.width, changed.height)
        source["corruption"] = {
            **corruption.describe(),
            "place": list(place),
            "sha256": sha,
            "format": changed.format,
            "width": changed.width,
            "height": changed.height,
            "bytes": len(data),
        }
    parts: dict[ImageLimit, ImagePart] = {}
    by_size: dict[tuple[int, int], ImagePart] = {}
    for limit in dict.fromkeys(limits):
        size = fit_size(found.width, found.height, *limit)
        part = by_size.get(size)
        if part is None:
            if size == (found.width, found.height) and found.format in SENT_AS_IS:
                part = ImagePart(_data_uri(SENT_AS_IS[found.format], data), sha, source)
            elif as_is_only:
                return None
            else:
                encoded: EncodedImage = transform(data, found, size, what)
                side, pixels = limit
                identity = (
                    f"{sha}|{encoded.format.lower()}|{encoded.width}x{encoded.height}|side={side}|pixels={pixels}"
                )
                sent = {
                    "format": encoded.format.lower(),
                    "width": encoded.width,
                    "height": encoded.height,
                    "bytes": len(encoded.data),
                }
                part = ImagePart(_data_uri(encoded.mime, encoded.data), identity, {**source, "sent": sent})
            by_size[size] = part
        parts[limit] = part
    return parts


class PreparedImages:
    """A sample's images per key and limit: key 0, 1, ... a user turn's images, negative keys in-context examples."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: dict[tuple[int, ImageLimit], list[ImagePart]] = {}

    def __contains__(self, key: object) -> bool:
        return bool(self._parts) and any(k == key for k, _ in self._parts)

    def parts(self, key: int, limit: ImageLimit) -> list[ImagePart]:
        """The images of ``key`` as a model with ``limit`` sends them; [] when ``key`` has none."""
        return self._parts.get((key, limit), [])

    def put(self, key: int, limit: ImageLimit, parts: list[ImagePart]) -> None:
        self._parts[(key, limit)] = parts


def prepare_images(
    images_by_key: dict[int, list[Image]], limits: list[ImageLimit], corruption: ImageCorruption | None = None
) -> PreparedImages:
    """Read and check every image once and make its part for every limit (blocking: what a worker runs).

    Raises ImageDecodeError (a ValueError) naming the image that cannot be
    read; the engine records the sample as failed with reason ``image``.
    """
    prepared = _prepare(images_by_key, limits, as_is_only=False, corruption=corruption)
    assert prepared is not None
    return prepared


def prepare_images_as_is(
    images_by_key: dict[int, list[Image]], limits: list[ImageLimit], corruption: ImageCorruption | None = None
) -> PreparedImages | None:
    """:func:`prepare_images` when every image goes as it came, else None (blocking).

    Sending an image as it came is read + header probe + sha256 + base64:
    file reads and hashing release the GIL, so a thread does it without the
    ~270 KB round trip of each data URI through a worker process' pipes.
    Errors are the same :class:`ImageDecodeError` as :func:`prepare_images`'.
    """
    if corruption is not None:
        return None  # a corrupted image is decoded: the worker processes' job
    return _prepare(images_by_key, limits, as_is_only=True)


def _prepare(
    images_by_key: dict[int, list[Image]],
    limits: list[ImageLimit],
    as_is_only: bool,
    corruption: ImageCorruption | None = None,
) -> PreparedImages | None:
    prepared = PreparedImages()
    wanted = list(dict.fromkeys(limits)) or [NO_LIMIT]
    for key, images in images_by_key.items():
        per_image = []
        for index, image in enumerate(images):
            try:
                parts = image_parts(image, wanted, as_is_only, corruption, (key, index))
                if parts is None:
                    return None
                per_image.append(parts)
            except ValueError as error:
                where = f"image {index + 1} of {len(images)}: " if len(images) > 1 else ""
                raise type(error)(f"{where}{error}") from None
        for limit in wanted:
            prepared.put(key, limit, [parts[limit] for parts in per_image])
    return prepared

"""Seeded image corruptions for robustness runs (ChEF's ``img_crp`` desideratum), made in the worker pool.

ChEF measures robustness on copies of its data with corrupted images (ScienceQA_C, MMBench_C) that it ships
ready-made; the code that made them is not in its repository (OpenGVLab/LAMM at
ea571363883ceba58a0f724ef197ed7205e07465). evalkit corrupts any image dataset itself, the same on every run:
each image's random numbers come from the run's corruption seed, the corruption's name, the sample id and the
image's place in the sample, never from global state, so a shard, a resume or the viewer makes the same pixels.

Levels 1-5 follow ImageNet-C's published parameters (Hendrycks & Dietterich 2019, the ``imagecorruptions``
package) where it has the corruption: Gaussian noise sigma (on 0-1 pixels) 0.08-0.38, Gaussian blur sigma 1-6,
JPEG quality 25-7. ``crop`` (keep a seeded window of 90%-50% of each side, scaled back to the image's size) and
``colour_jitter`` (seeded brightness, contrast and saturation factors within 1 +/- 0.1-0.5) are evalkit's own.
Every corrupted image but ``jpeg``'s is written as PNG, so no second loss is added.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evalkit.data.image.values import ImageDecodeError

if TYPE_CHECKING:  # numpy is imported where it is used: a run that needs none starts without it
    import numpy as np

#: the level used when a config names none: ImageNet-C's middle one
DEFAULT_SEVERITY = 3

_NOISE_SIGMA = (0.08, 0.12, 0.18, 0.26, 0.38)
_BLUR_SIGMA = (1.0, 2.0, 3.0, 4.0, 6.0)
_JPEG_QUALITY = (25, 18, 15, 10, 7)
_CROP_KEEP = (0.9, 0.8, 0.7, 0.6, 0.5)
_JITTER_SPAN = (0.1, 0.2, 0.3, 0.4, 0.5)


@dataclass(frozen=True, slots=True)
class ImageCorruption:
    """One corruption at one level, seeded for one sample (picklable: it travels to the worker processes)."""

    name: str
    severity: int
    #: the sample's seed (see :func:`sample_seed`); each image mixes in its own place
    seed: int

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "severity": self.severity, "seed": self.seed}


@dataclass(frozen=True, slots=True)
class CorruptedImage:
    """The corrupted image as it will be sent: encoded bytes and what they are."""

    data: bytes
    format: str
    width: int
    height: int


def sample_seed(seed: int, corruption: str, sample_id: str) -> int:
    """A 63-bit seed for one sample's corruption: stable across processes and runs (no Python ``hash``)."""
    digest = hashlib.sha256(f"{seed}\x00{corruption}\x00{sample_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _rng(corruption: ImageCorruption, key: int, item: int) -> np.random.Generator:
    # key: the turn (0, 1, ...) or in-context example (negative) the image belongs to; item: its index there
    import numpy as np

    return np.random.default_rng([corruption.seed, key + 2**20, item])


def _pixels(data: bytes, what: str) -> np.ndarray:
    import numpy as np
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(data)) as opened:
            return np.asarray(opened.convert("RGB"), dtype=np.uint8)
    except Exception as error:  # Pillow's many decode errors: the sample fails with reason "image"
        raise ImageDecodeError(f"{what}: cannot decode the image to corrupt it ({error})") from None


def _gaussian_noise(pixels: np.ndarray, level: int, rng: np.random.Generator) -> np.ndarray:
    import numpy as np

    noisy = pixels / 255.0 + rng.normal(scale=_NOISE_SIGMA[level - 1], size=pixels.shape)
    return np.asarray(np.clip(noisy, 0.0, 1.0) * 255.0 + 0.5, dtype=np.uint8)


def _gaussian_blur(pixels: np.ndarray, level: int, rng: np.random.Generator) -> np.ndarray:
    import numpy as np
    from PIL import Image as PILImage
    from PIL import ImageFilter

    blurred = PILImage.fromarray(pixels).filter(ImageFilter.GaussianBlur(radius=_BLUR_SIGMA[level - 1]))
    return np.asarray(blurred, dtype=np.uint8)


def _crop(pixels: np.ndarray, level: int, rng: np.random.Generator) -> np.ndarray:
    import numpy as np
    from PIL import Image as PILImage

    height, width = pixels.shape[:2]
    keep = _CROP_KEEP[level - 1]
    ch, cw = max(1, round(height * keep)), max(1, round(width * keep))
    top = int(rng.integers(0, height - ch + 1))
    left = int(rng.integers(0, width - cw + 1))
    window = PILImage.fromarray(pixels[top : top + ch, left : left + cw])
    return np.asarray(window.resize((width, height), PILImage.Resampling.BILINEAR), dtype=np.uint8)


def _colour_jitter(pixels: np.ndarray, level: int, rng: np.random.Generator) -> np.ndarray:
    import numpy as np
    from PIL import Image as PILImage
    from PIL import ImageEnhance

    span = _JITTER_SPAN[level - 1]
    brightness, contrast, saturation = (float(f) for f in rng.uniform(1.0 - span, 1.0 + span, size=3))
    image = PILImage.fromarray(pixels)
    image = ImageEnhance.Brightness(image).enhance(brightness)
    image = ImageEnhance.Contrast(image).enhance(contrast)
    image = ImageEnhance.Color(image).enhance(saturation)
    return np.asarray(image, dtype=np.uint8)


_PIXEL_CORRUPTIONS: dict[str, Callable[[np.ndarray, int, np.random.Generator], np.ndarray]] = {
    "gaussian_noise": _gaussian_noise,
    "gaussian_blur": _gaussian_blur,
    "crop": _crop,
    "colour_jitter": _colour_jitter,
}
#: every image corruption by its evalkit name
IMAGE_CORRUPTIONS: tuple[str, ...] = (*_PIXEL_CORRUPTIONS, "jpeg")
#: other spellings users bring (ImageNet-C's and American ones)
IMAGE_ALIASES = {
    "noise": "gaussian_noise",
    "blur": "gaussian_blur",
    "jpeg_compression": "jpeg",
    "color_jitter": "colour_jitter",
    "colour": "colour_jitter",
    "color": "colour_jitter",
}


def corrupt_image(data: bytes, corruption: ImageCorruption, key: int, item: int, what: str) -> CorruptedImage:
    """``data`` (any format Pillow reads) corrupted as ``corruption`` says, deterministically (blocking)."""
    from PIL import Image as PILImage

    if corruption.name not in IMAGE_CORRUPTIONS:
        raise ValueError(f"unknown image corruption {corruption.name!r}; known: {', '.join(IMAGE_CORRUPTIONS)}")
    if not 1 <= corruption.severity <= 5:
        raise ValueError(f"corruption severity must be 1-5, got {corruption.severity}")
    pixels = _pixels(data, what)
    out = io.BytesIO()
    if corruption.name == "jpeg":
        PILImage.fromarray(pixels).save(out, format="JPEG", quality=_JPEG_QUALITY[corruption.severity - 1])
        fmt = "jpeg"
    else:
        changed = _PIXEL_CORRUPTIONS[corruption.name](pixels, corruption.severity, _rng(corruption, key, item))
        PILImage.fromarray(changed).save(out, format="PNG")
        fmt = "png"
    height, width = pixels.shape[:2]
    return CorruptedImage(out.getvalue(), fmt, width, height)


def remake(source: bytes, reference: dict[str, object]) -> bytes:
    """The image a robustness variant sent, made again from its source bytes and its reference's ``corruption``.

    ``reference`` is the ``corruption`` object of an image reference in a record or sent entry (name, severity,
    seed, place, sha256); ValueError when the result is not the image that was sent (another source, another
    Pillow), so a viewer never shows a look-alike as what the model saw.
    """
    place = reference.get("place") or [0, 0]
    assert isinstance(place, list)
    corruption = ImageCorruption(str(reference["name"]), int(str(reference["severity"])), int(str(reference["seed"])))
    data = corrupt_image(source, corruption, int(place[0]), int(place[1]), "source").data
    if reference.get("sha256") and hashlib.sha256(data).hexdigest() != reference["sha256"]:
        raise ValueError("the remade image differs from the one sent (sha256 mismatch)")
    return data

"""Image embeddings for ``topk_img`` (ChEF's image retriever of in-context examples).

Two embedders, both giving one L2-normalised vector per sample, compared by
cosine similarity (a dot product of unit vectors):

- :class:`ThumbnailEmbedder`, the default, needs no model: each image is
  squashed to a 16x16 RGB thumbnail (area averaging) and its 768 pixel
  values form the vector. This is the "tiny image" descriptor of Torralba et
  al. (80 million tiny images, 2008): at that size a picture keeps its colour
  layout (a red square, a left-to-right gradient, a sky above a field) and
  loses texture and text, which is what a cheap nearest-neighbour over a pool
  of a few hundred images can use. It is sensitive to layout, unlike a colour
  histogram, so a gradient is told from its mirror; decoding a JPEG uses
  Pillow's draft mode (DCT scaling), so a large photograph costs little.
- :class:`ModelEmbedder` (``embedding_model``: a local path or hub id) uses a
  CLIP-class model's ``get_image_features`` through transformers, as ChEF's
  ``topk_img`` does; it needs the ``local`` extra (torch, transformers).

A sample with several images is embedded as the normalised mean of its
images' vectors. A sample whose images cannot be read gets no vector
(``None``): it ranks after every readable example, and as a query it leaves
the examples in pool order (the sample fails on its image anyway). All of it
is blocking work: the engine calls it in worker threads, never on the loop.
"""

from __future__ import annotations

import io
import threading
from typing import TYPE_CHECKING, Any, Protocol

from evalkit.data.image.codec import read_bytes
from evalkit.data.image.values import ImageDecodeError
from evalkit.data.sample import Image, Sample

if TYPE_CHECKING:  # numpy is imported where it is used: a run that needs none starts without it
    import numpy as np

#: side of the default thumbnail, in pixels: 16 x 16 x RGB = 768 numbers per image
THUMBNAIL_SIDE = 16


class Embedder(Protocol):
    """Turns a sample's images into one unit vector (None: no readable image)."""

    name: str

    def embed(self, images: list[Image]) -> np.ndarray | None:
        """The unit vector of ``images`` taken together, or None when none can be read."""


def _unit(vector: np.ndarray) -> np.ndarray | None:
    import numpy as np

    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else None


def _pil(image: Image, size_hint: tuple[int, int] | None = None) -> Any:
    """``image`` decoded as RGB; ImageDecodeError when it is not a readable image."""
    from PIL import Image as PILImage

    try:
        picture = PILImage.open(io.BytesIO(read_bytes(image)))
        if size_hint is not None:
            picture.draft("RGB", size_hint)  # JPEG: decode at 1/2..1/8 scale, enough for a thumbnail
        return picture.convert("RGB")
    except ImageDecodeError:
        raise
    except Exception as error:  # Pillow raises many types on bad data; any of them means "not readable"
        raise ImageDecodeError(f"cannot decode image: {error}") from None


def _mean_unit(vectors: list[np.ndarray]) -> np.ndarray | None:
    import numpy as np

    return _unit(np.mean(np.stack(vectors), axis=0)) if vectors else None


class ThumbnailEmbedder:
    """The default, model-free embedding: the image as a 16x16 RGB thumbnail (see the module docstring)."""

    name = f"thumbnail{THUMBNAIL_SIDE}"

    def _vector(self, image: Image) -> np.ndarray | None:
        import numpy as np
        from PIL import Image as PILImage

        side = THUMBNAIL_SIDE
        picture = _pil(image, (side * 4, side * 4))
        small = picture.resize((side, side), PILImage.Resampling.BOX)
        return _unit(np.asarray(small, dtype=np.float64).reshape(-1) / 255.0)

    def embed(self, images: list[Image]) -> np.ndarray | None:
        """The normalised mean of the readable images' thumbnail vectors."""
        vectors = []
        for image in images:
            try:
                vector = self._vector(image)
            except ImageDecodeError:
                continue
            if vector is not None:
                vectors.append(vector)
        return _mean_unit(vectors)


class ModelEmbedder:
    """A CLIP-class model's image features (``AutoModel.get_image_features``), loaded once per pool.

    Calls are serialised by a lock: the engine embeds samples from several
    threads, and one model instance is shared.
    """

    def __init__(self, model: str) -> None:
        import torch
        from transformers import AutoImageProcessor, AutoModel

        self.name = model
        self._torch = torch
        self._processor = AutoImageProcessor.from_pretrained(model)
        self._model = AutoModel.from_pretrained(model).eval()
        self._lock = threading.Lock()

    def embed(self, images: list[Image]) -> np.ndarray | None:
        """The normalised mean of the readable images' feature vectors."""
        import numpy as np

        pictures = []
        for image in images:
            try:
                pictures.append(_pil(image))
            except ImageDecodeError:
                continue
        if not pictures:
            return None
        with self._lock, self._torch.no_grad():
            inputs = self._processor(images=pictures, return_tensors="pt")
            features = self._model.get_image_features(pixel_values=inputs["pixel_values"])
        if not isinstance(features, self._torch.Tensor):  # newer transformers may return a model output
            features = features.pooler_output
        rows = [_unit(row) for row in features.float().numpy().astype(np.float64)]
        return _mean_unit([row for row in rows if row is not None])


def make_embedder(model: str | None) -> Embedder:
    """The thumbnail embedder, or the named model's when ``embedding_model`` is set."""
    return ThumbnailEmbedder() if model is None else ModelEmbedder(model)


def embed_sample(embedder: Embedder, sample: Sample) -> np.ndarray | None:
    """The sample's vector (blocking: call it in a worker thread)."""
    return embedder.embed(list(sample.images or []))


def rank(pool_vectors: list[np.ndarray | None], query: np.ndarray | None) -> list[int]:
    """Pool indexes, most similar first (cosine); ties keep pool order, unreadable examples go last."""
    import numpy as np

    if query is None:
        return sorted(range(len(pool_vectors)), key=lambda i: (pool_vectors[i] is None, i))
    # rounded, so images equal up to float noise tie and keep pool order
    scores = [round(float(np.dot(vector, query)), 9) if vector is not None else None for vector in pool_vectors]
    return sorted(range(len(scores)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))

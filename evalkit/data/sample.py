"""The unit of evaluation: one dataset row, normalised to the fields evalkit needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Audio:
    """Audio as it came from the dataset, decoded lazily and once.

    Exactly one of ``data`` (encoded file bytes: wav, flac, mp3, ogg), ``path``
    (a local file) or ``array`` (decoded float samples at ``sampling_rate``) is set.
    Keeping the encoded bytes avoids ``datasets``' own audio decoding, which in
    recent releases requires torchcodec (not installable on every machine).
    """

    data: bytes | None = None
    path: str | None = None
    array: Any = None
    sampling_rate: int | None = None


@dataclass(slots=True)
class Image:
    """An image as it came from the dataset: encoded ``data`` (png, jpeg, ...) or a local ``path``.

    Like :class:`Audio`, an image is carried encoded and read only when a
    request is prepared, in a worker; ``name`` is the file name a Hugging
    Face ``Image`` feature stores next to its bytes (kept for the record).
    """

    data: bytes | None = None
    path: str | None = None
    name: str | None = None


@dataclass(slots=True)
class Turn:
    """One user turn of a multi-turn conversation."""

    text: str | None = None
    audio: Audio | None = None
    #: where the audio sits in its row (``turns[1].audio``, or ``audio[1]`` for a list of recordings), for references
    audio_column: str | None = None


@dataclass(slots=True)
class Sample:
    """One row of a dataset after column mapping.

    ``reference`` is the target (a string, or a list of acceptable strings);
    ``meta`` carries everything filters and grouped metrics use (language,
    accent, gender, duration, speaker, choices, ...).
    """

    id: str
    reference: Any = None
    text: str | None = None
    instruction: str | None = None
    audio: Audio | None = None
    #: the sample's images, shown with its (first) user turn; None: no image column
    images: list[Image] | None = None
    turns: list[Turn] | None = None
    #: a dataset-given conversation (``messages_column``): checked {role, content} messages, the last the user's
    messages: list[dict[str, str]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def references(self) -> list[str]:
        """The acceptable answers as strings, one per reference.

        ``str(sample.reference)`` of a list reference is its Python text (``"['Paris']"``),
        which no answer matches; a metric iterates this instead and scores the best.
        """
        return reference_strings(self.reference)


def reference_strings(reference: Any) -> list[str]:
    """A sample's reference as a list of strings: a string is one reference, a list several.

    ``None`` and empty lists give ``[]`` (the caller decides whether that is a failure);
    non-string items (numbers) are converted with ``str``.
    """
    if reference is None:
        return []
    if isinstance(reference, (list, tuple)):
        return [r if isinstance(r, str) else str(r) for r in reference if r is not None]
    return [reference if isinstance(reference, str) else str(reference)]

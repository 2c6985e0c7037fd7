"""What a dataset row's audio column holds, as an :class:`~evalkit.data.sample.Audio` still encoded.

Apart from :mod:`evalkit.data.audio.decode` because reading rows needs none
of its decoders: soundfile and soxr (~15 ms to load) are loaded only where
audio is decoded by them, and a run whose clips are WAV in the form sent, or
FLAC that dr_flac reads, never loads them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from evalkit.data.sample import Audio

__all__ = ["AudioDecodeError", "audio_from_value"]


class AudioDecodeError(ValueError):
    """Audio that cannot be read: a per-sample failure, not a crash of the run."""


def _resolve(path: str | os.PathLike[str], base_dir: str | os.PathLike[str] | None) -> str:
    p = os.path.expanduser(os.fspath(path))
    if base_dir is not None and not os.path.isabs(p):
        p = os.path.join(os.fspath(base_dir), p)
    return p


def audio_from_value(value: Any, base_dir: str | os.PathLike[str] | None = None) -> Audio:
    """Turn what a dataset row holds in its audio column into an :class:`Audio`.

    Accepted: ``{"bytes": b, "path": p}`` (raw ``datasets`` storage; ``bytes``
    may be None, then ``path`` is read), ``{"array": a, "sampling_rate": sr}``
    (decoded form), a path string, raw bytes, or an ``Audio``. Relative paths
    are resolved against ``base_dir`` (the dataset's directory). Nothing is
    decoded here, so this is cheap to call on the event loop.
    """
    if isinstance(value, Audio):
        if value.path is not None and value.data is None and value.array is None:
            return Audio(path=_resolve(value.path, base_dir))
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) == 0:
            raise AudioDecodeError("audio value is an empty byte string")
        return Audio(data=bytes(value))
    if isinstance(value, (str, os.PathLike)):
        if not os.fspath(value):
            raise AudioDecodeError("audio value is an empty path")
        return Audio(path=_resolve(value, base_dir))
    if isinstance(value, Mapping):
        data = value.get("bytes")
        if data is not None and len(data) > 0:
            return Audio(data=bytes(data))
        array = value.get("array")
        if array is not None:
            sr = value.get("sampling_rate")
            if not sr:
                raise AudioDecodeError("audio value has an 'array' but no 'sampling_rate'")
            return Audio(array=array, sampling_rate=int(sr))
        path = value.get("path")
        if path:
            return Audio(path=_resolve(path, base_dir))
        raise AudioDecodeError(f"audio value has neither bytes, array nor path (keys: {sorted(map(str, value))})")
    if value is None:
        raise AudioDecodeError("audio value is missing (None)")
    raise AudioDecodeError(
        f"audio value of type {type(value).__name__} is not understood; expected "
        "{'bytes', 'path'}, {'array', 'sampling_rate'}, a path or bytes"
    )

"""The audio and images a sample sent, found from the references the run recorded, never from a URL.

A media URL names a sent entry's key and a part number; the file it serves is
the path that entry (or, for runs made before sent files, the record) names.
So nothing outside what the run itself sent can be asked for, whatever the
URL holds. And since a run folder may be someone else's, a path it names is
opened only when it resolves (symlinks followed) inside the run folder, a
folder the user gave with ``--media-root``, or evalkit's own package (its
``pkg://`` datasets): see :class:`evalkit.util.confine.Roots`. Anything else
is "not shown", never read; what cannot be decoded is named, never quoted.
Audio is cut to the bounds that were sent (a clip, or one chunk of a long
file sent in several requests) and served as 16-bit WAV; a file no longer at
its path (a run folder copied to another machine) is "missing", said on the
page, never an error.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import Any

from evalkit.util.confine import MAX_LINE_BYTES, Roots, capped_lines, read_capped, too_long
from evalkit.view import hubrows

IMAGE_TYPES = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "jpg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "bmp": "image/bmp",
}
#: the longest clip served (a chunk of a long file is short; a whole hour-long file is cut here)
MAX_SECONDS = 600.0
#: the largest image file read
MAX_IMAGE_BYTES = 64 << 20
#: how a path outside the folders the viewer may read is said (the path itself is the run's text, not a file read)
OUTSIDE = (
    "not shown: {path} is outside the run folder; the viewer opens only files inside the run folder and the "
    "folders given with --media-root"
)


class MediaMissing(Exception):
    """The media a part names cannot be served here; the message says why (shown on the page)."""


@dataclass(frozen=True)
class MediaPart:
    """One audio or image part of what was sent: where it sits in the conversation and its reference."""

    index: int
    kind: str  # "audio" | "image"
    ref: dict[str, Any]
    message: int
    #: the dataset it was sent for (what `evalkit fetch` takes, when the media is a hub row not stored here)
    dataset: str = ""
    #: the folders a file it names may be read from (none: nothing is read)
    roots: Roots = Roots(())

    @property
    def chunks(self) -> list[tuple[float, float]]:
        found = self.ref.get("chunks") or []
        return [(float(c[0]), float(c[1])) for c in found if isinstance(c, (list, tuple)) and len(c) == 2]


def sent_parts(entry: dict[str, Any], roots: Roots) -> list[MediaPart]:
    """The audio and image parts of a sent entry, numbered in the order they were sent."""
    parts: list[MediaPart] = []
    dataset = str(entry.get("dataset") or "")
    for m, message in enumerate(entry.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            ref = part.get(kind) if kind in ("audio", "image") else None
            if isinstance(ref, dict):
                parts.append(MediaPart(len(parts), str(kind), ref, m, dataset, roots))
    return parts


def record_parts(record: dict[str, Any], roots: Roots) -> list[MediaPart]:
    """The images a record made before sent files names (its ``images`` list)."""
    images = record.get("images")
    if not isinstance(images, list):
        return []
    dataset = str(record.get("dataset") or "")
    return [MediaPart(i, "image", ref, 0, dataset, roots) for i, ref in enumerate(images) if isinstance(ref, dict)]


def where(ref: dict[str, Any]) -> str:
    """How a reference reads on the page: its path, dataset row, hub row or name."""
    if ref.get("path"):
        return str(ref["path"])
    cell = ref.get("file")
    if isinstance(cell, dict):
        return f"{cell.get('path')} row {cell.get('row')}, column {cell.get('column')}"
    hub = ref.get("hub")
    if isinstance(hub, dict):
        return f"hub {hub.get('repo')} ({hub.get('config') or 'default'}, {hub.get('split')}) row {hub.get('row')}"
    return str(ref.get("name") or "(no path recorded)")


def _local(path: str) -> str:
    """A dataset file's path on this machine (``pkg://evalkit/...`` is looked up in the installed package)."""
    if path.startswith("pkg://"):
        from evalkit.catalog import resolve_runspec_path
        from evalkit.errors import UserError

        try:
            return str(resolve_runspec_path(".", path))
        except UserError:
            return path
    return path


def missing_reason(ref: dict[str, Any], dataset: str, roots: Roots) -> str | None:
    """None when the media can be served here, else why not (for the page).

    A file is served only inside ``roots``; a hub row is served from evalkit's local hub store
    (:mod:`evalkit.view.hubrows`), never fetched.
    """
    path = ref.get("path")
    if path:
        return _file_reason(str(path), roots, "")
    cell = ref.get("file")
    if isinstance(cell, dict) and cell.get("path"):
        name = str(cell["path"])
        reason = _file_reason(_local(name), roots, "the dataset file ", name)
        if reason:
            return reason
        if not isinstance(cell.get("row"), int) or not str(name).endswith((".parquet", ".jsonl")):
            return f"inside {where(ref)}, which the viewer cannot read a row of"
        return None
    hub = ref.get("hub")
    if isinstance(hub, dict):
        return hubrows.unavailable(hub, dataset)
    return "the run recorded no file for it"


def _file_reason(path: str, roots: Roots, what: str, shown: str | None = None) -> str | None:
    """Why the file at ``path`` is not served (outside ``roots``, or absent); None when it is."""
    shown = shown or path
    found = roots.find(path)
    if found is None:
        return OUTSIDE.format(path=f"{what}{shown}")
    if not os.path.isfile(found):
        return f"missing: {what}{shown} is not on this machine"
    return None


def _cell(ref: dict[str, Any], dataset: str, roots: Roots) -> Any:
    """The dataset cell a ``file`` or ``hub`` reference names (blocking): bytes, or a path for a file's cell."""
    hub = ref.get("hub")
    if isinstance(hub, dict):
        try:
            value = hubrows.stored_cell(hub, dataset)
        except (hubrows.NotStored, KeyError, IndexError, ValueError) as error:
            raise MediaMissing(
                str(error) if isinstance(error, hubrows.NotStored) else f"{where(ref)}: {error}"
            ) from None
        return _media_value(value, hub.get("item", ref.get("item")), ref, None)
    cell = ref["file"]
    path = roots.file(_local(str(cell["path"])))
    if path is None:
        raise MediaMissing(OUTSIDE.format(path=f"the dataset file {cell['path']}"))
    row = int(cell["row"])
    column = str(cell.get("column") or "")
    try:
        if path.endswith(".parquet"):
            value = _parquet_cell(path, row, column)
        else:
            value = _jsonl_cell(path, row, column)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as error:
        raise MediaMissing(f"unreadable: {where(ref)}: {type(error).__name__}") from None
    return _media_value(value, cell.get("item"), ref, os.path.dirname(path))


def _media_value(value: Any, item: Any, ref: dict[str, Any], folder: str | None) -> Any:
    """The bytes of a cell (or, in a local dataset, the path it names, relative to the dataset file's folder).

    A hub row's path (``folder`` None) means nothing here: only its bytes are served.
    """
    if isinstance(value, list) and isinstance(item, int) and 0 <= item < len(value):
        value = value[item]
    if isinstance(value, dict) and value.get("bytes") is None and value.get("path"):
        value = value["path"]
    if isinstance(value, str):  # a path in the dataset: relative to the dataset file
        if folder is None:
            raise MediaMissing(f"{where(ref)} names a file of the hub repository ({value}), not its bytes")
        return os.path.join(folder, value)
    if isinstance(value, dict):
        value = value.get("bytes")
    if not isinstance(value, (bytes, bytearray)) or not value:
        raise MediaMissing(f"{where(ref)} holds no media bytes")
    return bytes(value)


def _parquet_cell(path: str, row: int, column: str) -> Any:
    import pyarrow.parquet as pq

    name = column.split(".", 1)[0].split("[", 1)[0]
    handle = pq.ParquetFile(path)
    start = 0
    for group in range(handle.num_row_groups):
        rows = handle.metadata.row_group(group).num_rows
        if row < start + rows:
            table = handle.read_row_group(group, columns=[name])
            value = table.column(name)[row - start].as_py()
            return hubrows.nested(value, column[len(name) :])
        start += rows
    raise IndexError(f"row {row} is past the file's {start} rows")


def _jsonl_cell(path: str, row: int, column: str) -> Any:
    import json

    name = column.split(".", 1)[0].split("[", 1)[0]
    with open(path, "rb") as handle:
        for number, (_, _, line) in enumerate(capped_lines(handle)):
            if number == row:
                if line is None:
                    raise ValueError(f"row {row} is {too_long(MAX_LINE_BYTES)}")
                return hubrows.nested(json.loads(line)[name], column[len(name) :])
    raise IndexError(f"row {row} is past the file's end")


def _source(ref: dict[str, Any], dataset: str, roots: Roots) -> str | bytes:
    """A path to read (resolved, inside ``roots``), or the bytes themselves (blocking); MediaMissing otherwise."""
    reason = missing_reason(ref, dataset, roots)
    if reason:
        raise MediaMissing(reason)
    if ref.get("path"):
        found_path = roots.file(str(ref["path"]))
        if found_path is None:
            raise MediaMissing(f"missing: {ref['path']} is not on this machine")
        return found_path
    found = _cell(ref, dataset, roots)
    if isinstance(found, str):
        reason = _file_reason(found, roots, "")
        if reason:
            raise MediaMissing(reason)
        return roots.find(found) or found
    return found


def _bounds(part: MediaPart, chunk: int | None) -> tuple[float, float | None]:
    if chunk is not None:
        chunks = part.chunks
        if not 0 <= chunk < len(chunks):
            raise MediaMissing(f"part {part.index} has no chunk {chunk}")
        return chunks[chunk]
    start = float(part.ref.get("start") or 0.0)
    end = part.ref.get("end")
    return start, float(end) if isinstance(end, (int, float)) and end > start else None


#: the suffix of a media part name that asks for a corrupted clip's clean source ("2-clean")
CLEAN = "-clean"


def audio_wav(part: MediaPart, chunk: int | None = None, clean: bool = False) -> bytes:
    """The clip that was sent, as 16-bit PCM WAV at the file's own rate (blocking: run it in a thread).

    A robustness variant's clip is the corrupted one it sent, made again from its source (and checked against
    the sha256 sent); ``clean`` is its source instead, whole, to play beside it.
    """
    import numpy as np
    import soundfile as sf

    corruption = part.ref.get("corruption")
    if isinstance(corruption, dict) and not clean:
        return _corrupted_clip(part, corruption, *_bounds(part, chunk))
    start, end = (0.0, None) if clean else _bounds(part, chunk)
    source = _source(part.ref, part.dataset, part.roots)
    if end is not None:
        end = min(end, start + MAX_SECONDS)
    try:
        with sf.SoundFile(source if isinstance(source, str) else io.BytesIO(source)) as handle:
            rate = handle.samplerate
            first = int(round(start * rate))
            frames = (int(round(end * rate)) - first) if end is not None else int(MAX_SECONDS * rate)
            handle.seek(min(first, handle.frames))
            data = handle.read(max(0, frames), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, OSError, ValueError):
        data, rate = _decoded(source, start, end)
    if data.ndim == 2:
        data = data.mean(axis=1)
    out = io.BytesIO()
    sf.write(out, np.asarray(data, dtype=np.float32), rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


def _corrupted_clip(part: MediaPart, corruption: dict[str, Any], start: float, end: float | None) -> bytes:
    """The corrupted clip as sent (16 kHz), cut to the bounds sent: made again from its source and babble's clips."""
    from evalkit.data.audio.corrupted import remake_audio
    from evalkit.data.audio.pcm import SAMPLE_RATE, wav_from_pcm16
    from evalkit.data.sample import Audio

    def audio(ref: dict[str, Any]) -> Audio:
        found = _source(ref, part.dataset, part.roots)
        return Audio(path=found) if isinstance(found, str) else Audio(data=found)

    from evalkit.data.audio.corrupt import BABBLE_TALKERS

    talkers = corruption.get("talkers") or []
    if not isinstance(talkers, list) or len(talkers) > BABBLE_TALKERS:  # read from a run folder: untrusted
        raise MediaMissing(f"the corrupted clip names more than the {BABBLE_TALKERS} other clips babble mixes")
    try:
        whole = remake_audio(audio(part.ref), corruption, [audio(t) for t in talkers if isinstance(t, dict)])
    except OSError as error:
        raise MediaMissing(f"unreadable: {error.strerror}") from None
    except (ValueError, KeyError, TypeError, RuntimeError) as error:
        raise MediaMissing(f"the corrupted clip cannot be made again: {error}") from None
    last = end if end is not None else start + MAX_SECONDS
    pcm = whole[44:]  # remake_audio's WAV: a 44-byte header, then 16-bit mono PCM
    return wav_from_pcm16(pcm[2 * round(start * SAMPLE_RATE) : 2 * round(min(last, start + MAX_SECONDS) * SAMPLE_RATE)])


def _decoded(source: str | bytes, start: float, end: float | None) -> tuple[Any, int]:
    """A format soundfile cannot open (mp3 on an old libsndfile): evalkit's own decoder, at 16 kHz."""
    from evalkit.data.audio.decode import TARGET_SR, Audio, AudioDecodeError, load_16k_mono

    try:
        samples = load_16k_mono(Audio(path=source) if isinstance(source, str) else Audio(data=source))
    except AudioDecodeError:  # its message may quote the file's first bytes: say only that it is not audio
        raise MediaMissing("unreadable: the file is not audio evalkit can decode") from None
    first = int(start * TARGET_SR)
    last = int(end * TARGET_SR) if end is not None else first + int(MAX_SECONDS * TARGET_SR)
    return samples[first:last], TARGET_SR


def image_file(part: MediaPart) -> tuple[bytes, str]:
    """The image's bytes and media type (blocking); a robustness variant's image is the corrupted one it sent."""
    source = _source(part.ref, part.dataset, part.roots)
    corruption = part.ref.get("corruption")
    if isinstance(corruption, dict):
        return _corrupted(source, corruption), IMAGE_TYPES.get(str(corruption.get("format")), "image/png")
    name = source if isinstance(source, str) else ""
    fmt = str(part.ref.get("format") or os.path.splitext(name)[1].lstrip(".")).lower()
    mime = IMAGE_TYPES.get(fmt)
    if mime is None:
        raise MediaMissing(f"{where(part.ref)}: a {fmt or 'unknown'} image, which a browser does not show")
    if isinstance(source, bytes):
        return source, mime
    try:
        return read_capped(source, MAX_IMAGE_BYTES), mime
    except OSError as error:
        raise MediaMissing(f"unreadable: {where(part.ref)}: {error.strerror}") from None
    except ValueError as error:
        raise MediaMissing(f"not shown: {where(part.ref)} is {error}") from None


def _corrupted(source: str | bytes, corruption: dict[str, Any]) -> bytes:
    """The corrupted image, made again from its source and checked against the sha256 of what was sent."""
    from evalkit.data.image.corrupt import remake

    try:
        if isinstance(source, str):
            source = read_capped(source, MAX_IMAGE_BYTES)
        return remake(source, corruption)
    except OSError as error:
        raise MediaMissing(f"unreadable: {error.strerror}") from None
    except (ValueError, KeyError, TypeError) as error:
        raise MediaMissing(f"the corrupted image cannot be made again: {error}") from None


def parse_part(text: str) -> tuple[int, int | None]:
    """``"2"`` -> (2, None), ``"2-1"`` -> (2, 1): part 2, chunk 1. ValueError for anything else."""
    head, sep, tail = text.partition("-")
    if not head.isdigit() or (sep and not tail.isdigit()):
        raise ValueError(text)
    return int(head), (int(tail) if sep else None)

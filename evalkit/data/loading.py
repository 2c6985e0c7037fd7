"""Stream samples from a dataset described by a runspec.

Rows are read one at a time (``datasets`` streaming for hub ids, pyarrow
record batches for local parquet, line by line for jsonl/csv), so memory does
not grow with the dataset. Local files skip ``datasets`` entirely: importing
it costs seconds, and start-up time is part of what users wait for.

Audio and images stay encoded (bytes or a path) until an engine needs them;
``datasets`` is told not to decode audio columns, because its decoder needs
torchcodec, which is not installable everywhere (e.g. CPU-only machines
here), nor image columns, which it would turn into Pillow objects.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.catalog import DatasetSpec
from evalkit.data.conversation import ConversationError, conversation_from_cell
from evalkit.data.files import (
    delimited_rows,
    document_rows,
    first_line_is_json,
    local_files,
    require_local_source,
    rows_folder,
)
from evalkit.data.hubcache import HubRowCache
from evalkit.data.image.values import ImageDecodeError, images_from_cell
from evalkit.data.sample import Audio, Image, Sample, Turn
from evalkit.errors import RunspecError

log = logging.getLogger("evalkit")


def iter_rows(spec: DatasetSpec, source_override: str | None = None) -> Iterator[dict[str, Any]]:
    """Raw rows (dicts) of the dataset, streamed."""
    source = source_override or spec.source
    if source_override is not None or spec.path is not None:
        local = require_local_source(spec, source)
        files = local_files(local, spec.data_files)
        if files:
            for file in files:
                yield from iter_local_file(file)
            return
    if spec.hf_repo is not None and source_override is None:
        yield from HubRowCache(spec).rows(lambda: iter_with_datasets(spec, source))
        return
    yield from iter_with_datasets(spec, source)


def iter_local_file(path: Path) -> Iterator[dict[str, Any]]:
    if path.suffix == ".parquet":
        yield from _iter_parquet(path)
    elif path.suffix == ".arrow":
        yield from _iter_arrow(path)
    elif path.suffix in {".jsonl", ".json"}:
        with path.open(encoding="utf-8") as handle:
            first = handle.read(1)
            handle.seek(0)
            if path.suffix == ".json" and first == "[":
                yield from json.load(handle)
                return
            if path.suffix == ".json" and first == "{" and not first_line_is_json(handle):
                # one JSON object over many lines (ChEF's Ch3Ef meta files): its rows are under one key
                handle.seek(0)
                yield from document_rows(json.load(handle), path)
                return
            handle.seek(0)
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as error:
                        raise RunspecError(f"{path}: line {number}: not valid JSON: {error.msg}") from None
    else:
        with path.open(encoding="utf-8", newline="") as handle:
            yield from delimited_rows(handle, path.suffix)


#: rows turned into Python objects at a time: 16 ten-second clips are a few MB
_PARQUET_BATCH = 16
#: a row group bigger than this is worth a warning: pyarrow reads a row group's columns whole
_BIG_ROW_GROUP = 512 * 1024 * 1024


def _iter_parquet(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a local parquet file, a small batch at a time.

    The file is memory-mapped: pyarrow then reads column chunks without
    copying them (measured: first rows of a 215 MB one-row-group file in
    0.5 s instead of 5 s). Memory is still bounded by the largest row group,
    since pyarrow decodes a row group's column whole; files written by
    ``datasets`` keep audio row groups small, other writers may not, so a
    huge row group is reported once.
    """
    import pyarrow.parquet as pq

    # no memory map: mapped pages of a file read front to back stay resident (RSS grew ~2 KiB per
    # row of a 44 MB file, 31 MB over 15,000 rows); buffered reads free each row group after use
    with pq.ParquetFile(path, memory_map=False, pre_buffer=False) as handle:
        meta = handle.metadata
        biggest = max((meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)), default=0)
        if biggest > _BIG_ROW_GROUP:
            log.warning(
                "%s: a row group holds %.0f MB; reading it needs that much memory at once. "
                "Rewrite the file with smaller row groups (e.g. pyarrow.parquet.write_table(..., row_group_size=100)).",
                path,
                biggest / 2**20,
            )
        for batch in handle.iter_batches(batch_size=_PARQUET_BATCH):
            yield from batch.to_pylist()


def _iter_arrow(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of an arrow file as ``datasets`` writes them (``save_to_disk``, the hub's arrow files), a batch at a time.

    ``datasets`` writes the IPC stream format; the IPC file format is read too. Audio and image columns hold
    their ``{bytes, path}`` structs as in parquet, so they stay encoded here as well.
    """
    import pyarrow as pa

    try:
        with pa.OSFile(str(path)) as source:
            try:
                reader: Any = pa.ipc.open_stream(source)
            except pa.ArrowInvalid:
                source.seek(0)
                reader = pa.ipc.open_file(source)
            batches = reader if isinstance(reader, pa.ipc.RecordBatchStreamReader) else _file_batches(reader)
            for batch in batches:
                for start in range(0, batch.num_rows, _PARQUET_BATCH):
                    yield from batch.slice(start, _PARQUET_BATCH).to_pylist()
    except pa.ArrowInvalid as error:
        raise RunspecError(f"{path}: not an arrow file evalkit can read: {error}") from None


def _file_batches(reader: Any) -> Iterator[Any]:
    for index in range(reader.num_record_batches):
        yield reader.get_batch(index)


def iter_with_datasets(spec: DatasetSpec, source: str) -> Iterator[dict[str, Any]]:
    import datasets

    from evalkit.data.hubprobe import quiet_hub_retries

    quiet_hub_retries()  # the hub library's retry notices repeat what the final error says once
    kwargs: dict[str, Any] = {"split": spec.split, "streaming": True}
    if spec.revision is not None:
        kwargs["revision"] = spec.revision
    if spec.data_files is not None:
        kwargs["data_files"] = spec.data_files
    try:
        if spec.path is not None and Path(source).is_dir():
            dataset = datasets.load_dataset("audiofolder", data_dir=source, **kwargs)
        else:
            try:
                dataset = datasets.load_dataset(source, spec.subset, **kwargs)
            except RuntimeError as error:
                if "scripts are no longer supported" not in str(error) or spec.revision is not None:
                    raise
                # a script-based dataset (e.g. google/fleurs): the hub's parquet conversion
                # has the same configs and columns
                dataset = datasets.load_dataset(source, spec.subset, revision="refs/convert/parquet", **kwargs)
    except Exception as error:
        raise RunspecError(
            f"{spec.file}: {spec.name}: could not load {source!r} ({spec.subset=}, {spec.split=}, {spec.revision=}): "
            f"{error}"
        ) from None
    features = getattr(dataset, "features", None) or {}
    for column, feature in list(features.items()):
        if isinstance(feature, datasets.Audio):
            dataset = dataset.cast_column(column, datasets.Audio(decode=False))
        elif isinstance(feature, datasets.Image):
            dataset = dataset.cast_column(column, datasets.Image(decode=False))
        elif isinstance(feature, (list, datasets.Sequence)) and _holds(feature, datasets.Image):
            inner = datasets.Image(decode=False)
            dataset = dataset.cast_column(
                column, [inner] if isinstance(feature, list) else datasets.Sequence(inner, length=feature.length)
            )
        elif isinstance(feature, (list, datasets.Sequence)) and _holds(feature, datasets.Audio):
            # a list of recordings (MT-Bench's audio turns): kept encoded like a single one
            sound = datasets.Audio(decode=False)
            dataset = dataset.cast_column(
                column, [sound] if isinstance(feature, list) else datasets.Sequence(sound, length=feature.length)
            )
    yield from dataset


def _holds(feature: Any, kind: type) -> bool:
    """A list feature of images or of recordings (multi-image columns, one recording per turn)."""
    inner = feature[0] if isinstance(feature, list) and feature else getattr(feature, "feature", None)
    return isinstance(inner, kind)


def _image_values(value: Any, base_dir: Path, meta: dict[str, Any], where: str) -> list[Image] | None:
    """The row's images (still encoded), or None; a cell that holds no image goes to ``meta["image_error"]``."""
    try:
        return images_from_cell(value, base_dir)
    except ImageDecodeError as error:
        meta.setdefault("image_error", f"{where}: {error}")
        return None


def _audio_value(value: Any, base_dir: Path, meta: dict[str, Any], where: str) -> Audio | None:
    """The row's audio as an :class:`Audio` (still encoded), or None when the row has none.

    A value that is not audio at all (e.g. a struct with neither bytes nor a
    path) must not stop the stream: the reason goes to ``meta["audio_error"]``
    and the engine records that one sample as failed.
    """
    if value is None:
        return None
    from evalkit.data.audio.values import AudioDecodeError, audio_from_value

    try:
        return audio_from_value(value, base_dir)
    except AudioDecodeError as error:
        meta.setdefault("audio_error", f"{where}: {error}")
        return None


def _turn(value: Any, base_dir: Path, meta: dict[str, Any], where: str) -> Turn:
    """One user turn of a ``turns_column`` list: a {"text", "audio"} object, a text, or an audio value.

    MT-Bench's audio release keeps its turns as two parallel lists (the texts in one column, the recordings in
    another), so a list of texts or of recordings is a conversation too, of text-only or audio-only turns.
    """
    if isinstance(value, str):
        return Turn(text=value)
    if isinstance(value, dict) and ("text" in value or "audio" in value):
        column = f"{where}.audio"
        return Turn(
            text=value.get("text"), audio=_audio_value(value.get("audio"), base_dir, meta, column), audio_column=column
        )
    return Turn(audio=_audio_value(value, base_dir, meta, where), audio_column=where)


def _column(row: dict[str, Any], column: str | None, spec: DatasetSpec, key: str) -> Any:
    if column is None:
        return None
    if column not in row:
        found, value = _nested_value(row, column)
        if found:
            return value
        known = ", ".join(sorted(row)) or "none"
        raise RunspecError(f"{spec.file}: {spec.name}.{key}: column {column!r} is not in the data (columns: {known})")
    return row[column]


def _nested_value(row: dict[str, Any], column: str) -> tuple[bool, Any]:
    """``data.Question`` or ``prompt.0.content``: a field inside a struct column, an item of a list column.

    Hub datasets nest what a prompt needs (openlifescienceai's MedQA and MMLU
    sets keep question, options and answer in one ``data`` struct); a dotted
    path reaches it without a per-dataset loader. A name with a dot that is a
    column itself always wins, so no existing mapping changes meaning.
    """
    value: Any = row
    for part in column.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return "." in column, value


def id_or_position(value: Any, index: int, spec: DatasetSpec) -> str:
    """A sample's id: its id column's value, or (none) the dataset's name and the row's position.

    A robustness variant (<name>@<corruption>) keeps the clean dataset's ids, so its samples pair with them.
    Shards read this without building the sample, so both must agree (evalkit.data.share).
    """
    return str(value) if value is not None else f"{(spec.corruption or {}).get('clean', spec.name)}-{index}"


def row_id(row: dict[str, Any], index: int, spec: DatasetSpec) -> str:
    """The id :func:`row_to_sample` gives ``row``, without reading its other columns."""
    return id_or_position(_column(row, spec.id_column, spec, "id_column"), index, spec)


def row_to_sample(row: dict[str, Any], index: int, spec: DatasetSpec, base_dir: Path) -> Sample:
    """Map one raw row to a Sample using the runspec's column names."""
    sample_id = _column(row, spec.id_column, spec, "id_column")
    meta: dict[str, Any] = {"language": spec.language, "index": index}
    for key in ("accent", "accented", "gender", "speaker", "duration", "choices"):
        column = getattr(spec, f"{key}_column")
        if column is not None:
            meta[key] = _column(row, column, spec, f"{key}_column")
    for key, column in spec.extra_columns.items():
        meta[key] = _column(row, column, spec, f"extra_columns.{key}")
    audio = _audio_value(_column(row, spec.audio_column, spec, "audio_column"), base_dir, meta, str(spec.audio_column))
    images = None
    if spec.image_column is not None:
        cell = _column(row, spec.image_column, spec, "image_column")
        images = _image_values(cell, base_dir, meta, spec.image_column)
    turns = None
    if spec.turns_column is not None:
        raw_turns = _column(row, spec.turns_column, spec, "turns_column") or []
        if not isinstance(raw_turns, list) or any(t is None for t in raw_turns):
            raise RunspecError(
                f'{spec.file}: {spec.name}.turns_column: {spec.turns_column!r} must hold a list of {{"text", '
                f'"audio"}} objects, texts or audio values'
            )
        turns = [_turn(t, base_dir, meta, f"{spec.turns_column}[{i}]") for i, t in enumerate(raw_turns)]
    messages = None
    if spec.messages_column is not None:
        try:
            messages = conversation_from_cell(_column(row, spec.messages_column, spec, "messages_column"))
        except ConversationError as error:
            meta.setdefault("conversation_error", f"{spec.messages_column}: {error}")
    return Sample(
        id=id_or_position(sample_id, index, spec),
        reference=_column(row, spec.target_column, spec, "target_column"),
        text=_column(row, spec.textual_input_column, spec, "textual_input_column"),
        instruction=_column(row, spec.instruction_column, spec, "instruction_column") or spec.instruction,
        audio=audio,
        images=images,
        turns=turns,
        messages=messages,
        meta=meta,
    )


def iter_samples(spec: DatasetSpec, *, source_override: str | None = None) -> Iterator[Sample]:
    """Samples of a dataset in file order, streamed."""
    base_dir = rows_folder(Path(source_override or spec.source), spec.data_files)
    if spec.media_dir is not None:
        base_dir = base_dir / spec.media_dir  # where the rows' relative media paths point (Common Voice: clips/)
    for index, row in enumerate(iter_rows(spec, source_override)):
        yield row_to_sample(row, index, spec, base_dir)

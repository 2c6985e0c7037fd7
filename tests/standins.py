"""Stand-in hub rows for catalogue entries, stored where ``evalkit fetch`` stores the real ones.

A test that runs a config naming real catalogue entries (AU-Harness's shipped configs, say) cannot read the
hub; it writes a few rows shaped by each entry's own column mapping into evalkit's hub row store, and a run
with ``HF_HUB_OFFLINE=1`` reads them as it would read a fetched copy. The rows carry a short tone, a tiny
PNG, a question, two choices and a reference: enough for every preprocessor to build a request.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from helpers import tone_wav
from PIL import Image

from evalkit.catalog import DatasetSpec
from evalkit.data.hubcache import HubRowCache


def _png(shade: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (shade, 40, 120)).save(buffer, format="PNG")
    return buffer.getvalue()


def _put(row: dict[str, Any], column: str, value: Any) -> None:
    """Set ``column`` in ``row``; a dotted name (``data.Question``) is a nested value, as the loader reads it."""
    *outer, last = column.split(".")
    for key in outer:
        row = row.setdefault(key, {})
    row[last] = value


def standin_rows(spec: DatasetSpec, n: int) -> list[dict[str, Any]]:
    """``n`` rows with every column ``spec`` maps, in the shapes the loader accepts."""
    rows = []
    for i in range(n):
        row: dict[str, Any] = {}
        audio = {"bytes": tone_wav(300.0 + 110.0 * i, 1.0), "path": f"{i}.wav"}
        if spec.id_column:
            _put(row, spec.id_column, f"{spec.name}-{i}")
        if spec.audio_column:
            _put(row, spec.audio_column, audio)
        if spec.image_column:
            _put(row, spec.image_column, {"bytes": _png(40 * i), "path": f"{i}.png"})
        if spec.textual_input_column:
            _put(row, spec.textual_input_column, f"What is shown in example {i}?")
        if spec.instruction_column:
            _put(row, spec.instruction_column, "Answer briefly.")
        if spec.choices_column:
            _put(row, spec.choices_column, ["alpha", "beta"])
        if spec.target_column:
            _put(row, spec.target_column, "A" if spec.choices_column else f"hello world {i}")
        if spec.turns_column:
            _put(row, spec.turns_column, [{"text": "First question.", "audio": audio}, {"text": "And then?"}])
        if spec.messages_column:
            _put(row, spec.messages_column, [{"role": "user", "content": f"Question {i}?"}])
        for key, value in (
            (spec.accent_column, "scottish"),
            (spec.accented_column, True),
            (spec.gender_column, "female"),
            (spec.speaker_column, f"speaker-{i}"),
            (spec.duration_column, 1.0),
        ):
            if key:
                _put(row, key, value)
        for column in spec.extra_columns.values():
            if column.split(".")[0] not in row:  # a column mapped twice (MT-Bench's turns) keeps its own shape
                _put(row, column, f"value {i}")
        shaped = SHAPED.get(spec.preprocessor)
        if shaped is not None:
            shaped(row, spec, i)
        rows.append(row)
    return rows


def _bfcl(row: dict[str, Any], spec: DatasetSpec, i: int) -> None:
    """BFCL's cells are JSON text: the functions, the question's turns and the possible answer."""
    tools = [
        {
            "name": "math.factorial",
            "description": "Compute the factorial of a number.",
            "parameters": {"type": "dict", "properties": {"number": {"type": "integer"}}, "required": ["number"]},
        }
    ]
    _put(row, spec.extra_columns["functions"], json.dumps(tools))
    _put(row, spec.extra_columns["question_cell"], json.dumps([f"What is {i + 3} factorial?"]))
    assert spec.target_column is not None
    _put(row, spec.target_column, json.dumps([{"math.factorial": {"number": [i + 3]}}]))


#: preprocessors that read cells of a shape of their own (JSON text), by name
SHAPED = {"BfclPreprocessor": _bfcl}


def _generic(value: Any) -> bool:
    """A stand-in cell that says nothing of its column's shape (an extra column's "value <row>")."""
    return isinstance(value, str) and value.startswith("value ")


def store_standins(specs: list[DatasetSpec], n: int) -> None:
    """Store ``n`` stand-in rows as the complete copy of each hub split the ``specs`` read (EVALKIT_CACHE_DIR set).

    Entries reading the same split (Big Bench Audio's audio and text queries) share one stored copy, so its
    rows carry the columns of all of them.
    """
    by_folder: dict[Path, list[DatasetSpec]] = {}
    for spec in specs:
        assert spec.hf_repo is not None, f"{spec.name} is not a hub entry"
        by_folder.setdefault(HubRowCache(spec).folder, []).append(spec)
    for sharing in by_folder.values():
        rows = [dict[str, Any]() for _ in range(n)]
        for spec in sharing:
            for row, own in zip(rows, standin_rows(spec, n)):
                # a shaped cell (MT-Bench's turns) wins over another entry's generic stand-in for the same column
                row.update({k: v for k, v in own.items() if k not in row or (_generic(row[k]) and not _generic(v))})
        for _ in HubRowCache(sharing[0]).extend(lambda rows=rows: iter(rows)):
            pass

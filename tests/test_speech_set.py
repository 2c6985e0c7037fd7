"""The shipped espeak_en speech set: readable without espeak-ng or datasets' audio decoding."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalkit.data.audio.decode import audio_from_value, decode, duration_seconds

SET_DIR = Path(__file__).resolve().parent.parent / "evalkit" / "assets" / "speech" / "espeak_en"
PARQUET = SET_DIR / "data.parquet"

EXPECTED_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("audio", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        ("text", pa.string()),
        ("language", pa.string()),
        ("accent", pa.string()),
        ("accented", pa.bool_()),
        ("gender", pa.string()),
        ("voice", pa.string()),
        ("speaker", pa.string()),
        ("duration", pa.float64()),
    ]
)


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return pq.read_table(PARQUET)


@pytest.fixture(scope="module")
def rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.to_pylist()


def test_schema_matches_the_format_and_has_no_hf_features(table: pa.Table) -> None:
    assert table.schema.remove_metadata().equals(EXPECTED_SCHEMA), table.schema
    metadata = table.schema.metadata or {}
    assert b"huggingface" not in metadata  # datasets would otherwise try to decode the audio
    assert 50 <= table.num_rows <= 80
    assert PARQUET.stat().st_size < 8_000_000


def test_rows_are_well_formed(rows: list[dict[str, Any]]) -> None:
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids)
    for r in rows:
        assert re.fullmatch(r"espeak_en_\d{4}", r["id"])
        assert r["audio"]["path"] == f"{r['id']}.flac"
        assert r["audio"]["bytes"][:4] == b"fLaC"
        assert r["text"].strip() and r["text"] == r["text"].strip()
        assert not re.search(r"\d", r["text"]), "numbers are spelled out so WER compares words"
        assert r["language"] == "en"
        assert r["gender"] in {"female", "male"}
        assert r["speaker"].startswith(r["voice"] + "+")
        assert r["duration"] > 0.5


def test_coverage_of_genders_accents_and_long_clips(rows: list[dict[str, Any]]) -> None:
    genders = Counter(r["gender"] for r in rows)
    assert genders["female"] >= 10 and genders["male"] >= 10
    accents = {r["accent"] for r in rows}
    assert len(accents) >= 4
    assert {r["accented"] for r in rows} == {True, False}
    assert "us" in accents
    # one accent label means one accented flag
    flags = {(r["accent"], r["accented"]) for r in rows}
    assert len(flags) == len(accents)
    assert sum(r["duration"] > 30.0 for r in rows) >= 3
    assert sum(r["text"].endswith("?") for r in rows) >= 5


def test_audio_decodes_to_16k_mono_with_the_stated_duration(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        audio = audio_from_value(r["audio"])
        array, sr = decode(audio)
        assert sr == 16000 and array.ndim == 1, r["id"]
        assert abs(len(array) / sr - r["duration"]) < 0.05, r["id"]
        assert abs(duration_seconds(audio) - r["duration"]) < 0.05, r["id"]
        peak = float(abs(array).max())
        assert 0.05 < peak < 1.0, f"{r['id']}: peak {peak} (silent or clipped)"


def test_datasets_streaming_keeps_audio_as_raw_bytes(rows: list[dict[str, Any]]) -> None:
    datasets = pytest.importorskip("datasets")
    stream = datasets.load_dataset("parquet", data_files=str(PARQUET), split="train", streaming=True)
    seen = 0
    for row, expected in zip(stream, rows):
        assert row["id"] == expected["id"]
        assert isinstance(row["audio"], dict) and set(row["audio"]) == {"bytes", "path"}
        assert isinstance(row["audio"]["bytes"], bytes)
        assert row["audio"]["bytes"] == expected["audio"]["bytes"]
        assert row["accented"] is expected["accented"]
        seen += 1
        if seen == 5:
            break
    assert seen == 5
    features = stream.features
    if features is not None:  # inferred from the arrow schema, never an Audio feature
        assert type(features["audio"]).__name__ != "Audio"


def test_readme_agrees_with_the_data(rows: list[dict[str, Any]]) -> None:
    readme = (SET_DIR / "README.md").read_text(encoding="utf-8")
    assert f"{len(rows)} English utterances" in readme
    for accent in {r["accent"] for r in rows}:
        assert f"| {accent} |" in readme
    assert "Licence" in readme

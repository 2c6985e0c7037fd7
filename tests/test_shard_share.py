"""A shard reads its share of a local file: the same samples as taking its share of all, without the others' rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalkit.catalog import DatasetSpec
from evalkit.config import Filters
from evalkit.data.loading import iter_samples
from evalkit.data.share import share_samples
from evalkit.errors import RunspecError
from evalkit.prompts.preprocessors import PREPROCESSORS
from evalkit.run.shard import Shard, read_share

N_ROWS = 103


def _rows(with_ids: bool) -> list[dict[str, Any]]:
    rows = []
    for i in range(N_ROWS):
        row: dict[str, Any] = {"question": f"q{i}", "answer": f"a{i}"}
        if with_ids:
            row["uid"] = None if i % 17 == 5 else f"item-{i * 7 % 101}-{i}"  # some rows fall back to their position
        rows.append(row)
    return rows


def _spec(path: Path, *, ids: bool, **extra: Any) -> DatasetSpec:
    return DatasetSpec(
        name="share_set",
        task="t",
        category="c",
        file=str(path.parent / "runspec.json"),
        path=str(path),
        language="en",
        id_column="uid" if ids else None,
        textual_input_column="question",
        target_column="answer",
        **extra,
    )


def _write(folder: Path, fmt: str, rows: list[dict[str, Any]], name: str = "data") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        path = folder / f"{name}.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=10)
    else:
        path = folder / f"{name}.jsonl"
        # blank lines do not count as rows, in either reader
        path.write_text("".join(json.dumps(r) + ("\n\n" if i % 9 == 0 else "\n") for i, r in enumerate(rows)))
    return path


def _seen(samples: Any) -> list[tuple[Any, ...]]:
    return [(s.id, s.meta["index"], s.text, s.reference, s.instruction) for s in samples]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
@pytest.mark.parametrize("ids", [True, False])
def test_each_shard_reads_the_samples_it_took_before_and_together_they_are_the_dataset(
    tmp_path: Path, fmt: str, ids: bool
) -> None:
    spec = _spec(_write(tmp_path, fmt, _rows(ids)), ids=ids)
    everything = list(iter_samples(spec))
    together: list[tuple[Any, ...]] = []
    for index in range(3):
        shard = Shard(index, 3)
        share = share_samples(spec, shard.owns)
        assert share is not None
        got = _seen(share)
        assert got == _seen(shard.select(everything))  # the same samples, in the same order, at the same positions
        assert got  # each shard has some
        together += got
    assert sorted(together) == sorted(_seen(everything))


def test_positions_run_on_across_the_files_of_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    _write(folder, "jsonl", _rows(False)[:40], "part-0")
    _write(folder, "parquet", _rows(False)[40:], "part-1")
    spec = _spec(folder, ids=False, data_files=["*.jsonl", "*.parquet"])
    everything = list(iter_samples(spec))
    assert len(everything) == N_ROWS
    for index in range(4):
        shard = Shard(index, 4)
        share = share_samples(spec, shard.owns)
        assert share is not None
        assert _seen(share) == _seen(shard.select(everything))


def test_a_shard_does_not_parse_the_lines_of_other_shards(tmp_path: Path) -> None:
    shard = Shard(1, 3)
    spec = _spec(tmp_path / "data.jsonl", ids=False)
    lines = []
    for i, row in enumerate(_rows(False)):
        # the other shards' lines are not JSON at all: reading them would fail
        lines.append(json.dumps(row) if shard.owns(f"share_set-{i}") else "{not json")
    Path(spec.source).write_text("\n".join(lines) + "\n")
    with pytest.raises(RunspecError, match="not valid JSON"):
        list(iter_samples(spec))  # the full reader parses every line
    share = share_samples(spec, shard.owns)
    assert share is not None
    got = list(share)
    assert [s.id for s in got] == [f"share_set-{i}" for i in range(N_ROWS) if shard.owns(f"share_set-{i}")]


def test_a_shard_does_not_turn_the_rows_of_other_shards_into_samples(tmp_path: Path) -> None:
    shard = Shard(0, 2)
    rows = _rows(True)
    for row in rows:
        owned = row["uid"] is not None and shard.owns(row["uid"])
        # a turns cell that is not a list is refused when a sample is made of it
        row["turns"] = [{"text": "hi"}] if owned else "not a list"
    rows = [r for r in rows if r["uid"] is not None]
    spec = _spec(_write(tmp_path, "jsonl", rows), ids=True, turns_column="turns")
    with pytest.raises(RunspecError, match="turns_column"):
        list(iter_samples(spec))
    share = share_samples(spec, shard.owns)
    assert share is not None
    assert [s.id for s in share] == [r["uid"] for r in rows if shard.owns(r["uid"])]


def test_a_row_group_of_other_shards_rows_is_not_read(tmp_path: Path) -> None:
    """Row groups whose ids all belong elsewhere are skipped: their other columns may be anything at all."""
    shard = Shard(0, 2)
    ids = [f"id-{i}" for i in range(400)]
    mine = [i for i in ids if shard.owns(i)][:10]
    theirs = [i for i in ids if not shard.owns(i)][:10]
    path = tmp_path / "data.parquet"
    schema = pa.schema([("uid", pa.string()), ("question", pa.string()), ("answer", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        writer.write_table(pa.table({"uid": mine, "question": ["q"] * 10, "answer": ["a"] * 10}, schema=schema))
        writer.write_table(pa.table({"uid": theirs, "question": ["q"] * 10, "answer": ["a"] * 10}, schema=schema))
    # corrupt the second row group's data pages (after its id column chunk): only a reader of its other columns fails
    meta = pq.ParquetFile(path).metadata
    group = meta.row_group(1)
    chunk = group.column(1)  # the question column's chunk: its pages, dictionary first when there is one
    start = min(x for x in (chunk.dictionary_page_offset, chunk.data_page_offset) if x is not None)
    end = start + chunk.total_compressed_size
    data = bytearray(path.read_bytes())
    data[start:end] = b"\xff" * (end - start)
    path.write_bytes(bytes(data))
    spec = _spec(path, ids=True)
    with pytest.raises(Exception):  # noqa: B017 (pyarrow's own error for a damaged page; the point is that it fails)
        list(iter_samples(spec))
    share = share_samples(spec, shard.owns)
    assert share is not None
    assert [s.id for s in share] == mine


def test_read_share_falls_back_where_the_share_would_differ(tmp_path: Path) -> None:
    spec = _spec(_write(tmp_path, "jsonl", _rows(False)), ids=False)
    plain = PREPROCESSORS.get(spec.preprocessor)()
    shard = Shard(0, 2)
    assert read_share(spec, shard, Filters(), plain) is not None
    assert read_share(spec, None, Filters(), plain) is None
    assert read_share(spec, Shard(0, 1), Filters(), plain) is None
    # num_samples counts across samples: it must see them all before a shard is taken
    assert read_share(spec, shard, Filters(num_samples=10), plain) is None
    circular = PREPROCESSORS.get("CircularMultipleChoicePreprocessor")()
    assert read_share(spec, shard, Filters(), circular) is None
    hub = DatasetSpec(name="h", task="t", category="c", file="x.json", hf_repo="org/set", language="en")
    assert read_share(hub, shard, Filters(), plain) is None


def test_filters_that_judge_each_sample_alone_give_the_same_share(tmp_path: Path) -> None:
    rows = _rows(True)
    for i, row in enumerate(rows):
        row["lang"] = "en" if i % 3 else "fr"
    spec = _spec(_write(tmp_path, "jsonl", rows), ids=True, extra_columns={"language": "lang"})
    filters = Filters(language="en")
    plain = PREPROCESSORS.get(spec.preprocessor)()
    from evalkit.data.filters import apply_filters

    for index in range(3):
        shard = Shard(index, 3)
        share = read_share(spec, shard, filters, plain)
        assert share is not None
        assert _seen(share) == _seen(shard.select(apply_filters(iter_samples(spec), filters, spec.name)))

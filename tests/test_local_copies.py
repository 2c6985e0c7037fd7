"""``dataset_paths`` reads a lab's local copy of a public catalogue entry in the hub's usual layouts (issue 41).

The copies are built here with the libraries that make them (``datasets``' save_to_disk and to_parquet,
pyarrow's IPC writer, a hub cache snapshot laid out as ``huggingface_hub`` leaves it) and read with no hub:
the entry's subset, split and column mapping apply as they do to the hub, its audio is carried as bytes and
decoded with soundfile, and a run against the test server scores it.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pytest
import soundfile as sf
from helpers import model_entry, run, write_config

from evalkit.cli.main import main
from evalkit.config import load_config, parse_config
from evalkit.data.audio.decode import decode
from evalkit.data.counts import local_row_count
from evalkit.data.loading import iter_samples
from evalkit.errors import ConfigError
from evalkit.plan import build_plan
from evalkit.testing import audio_fingerprint

#: a public audio entry (AudioBench's LibriSpeech upload, the copy AU-Harness reads): columns context, answer
ENTRY = "librispeech_test_clean_audiollms"
#: a public entry with a subset: openslr/librispeech_asr, subset clean, split test; columns audio, text, id
SUBSET_ENTRY = "librispeech_test_clean"
REFERENCES = ["hello there", "good morning", "wait for me"]
ANSWERS = ["hello there", "good evening", "wait for me"]  # one substitution in 7 reference words


def _wav(index: int) -> bytes:
    buffer = io.BytesIO()
    tone = np.sin(np.arange(8000) * (index + 1) / 40).astype("float32")
    sf.write(buffer, tone, 16_000, format="WAV")
    return buffer.getvalue()


def _dataset(audio: str = "context", text: str = "answer", rows: int = 3, start: int = 0) -> datasets.Dataset:
    """Rows as the hub upload holds them: an Audio column of encoded bytes (no decoder needed to write them)."""
    data: dict[str, list[Any]] = {
        audio: [{"bytes": _wav(i), "path": f"{i}.wav"} for i in range(start, start + rows)],
        text: REFERENCES[start : start + rows],
        "id": [f"utt-{i}" for i in range(start, start + rows)],
        "speaker_id": [100 + i for i in range(start, start + rows)],
        # the AudioLLMs uploads' instruction column, which AU-Harness's prompt appends
        "instruction": ["" for _ in range(start, start + rows)],
    }
    return datasets.Dataset.from_dict(data).cast_column(audio, datasets.Audio(decode=False))


def _train() -> datasets.Dataset:
    """Another split beside the test split, whose rows must never be read."""
    return datasets.Dataset.from_dict({"context": [{"bytes": _wav(9), "path": "t.wav"}], "answer": ["x"], "id": ["t"]})


def save_to_disk_dataset(root: Path) -> Path:
    _dataset().save_to_disk(root / "copy")
    return root / "copy"


def save_to_disk_dict(root: Path) -> Path:
    datasets.DatasetDict({"train": _train(), "test": _dataset()}).save_to_disk(root / "copy")
    return root / "copy"


def parquet_file(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _dataset().to_parquet(root / "test.parquet")
    return root / "test.parquet"


def arrow_file(root: Path) -> Path:
    """An arrow file in the IPC file format (save_to_disk writes the stream format: both are read)."""
    root.mkdir(parents=True, exist_ok=True)
    table = _dataset().data.table
    with pa.OSFile(str(root / "rows.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return root / "rows.arrow"


def hub_parquet_shards(root: Path) -> Path:
    """The hub's own layout: data/<split>-0000N-of-0000M.parquet, the test split in two shards."""
    data = root / "repo" / "data"
    data.mkdir(parents=True)
    _dataset(rows=2).to_parquet(data / "test-00000-of-00002.parquet")
    _dataset(rows=1, start=2).to_parquet(data / "test-00001-of-00002.parquet")
    _train().to_parquet(data / "train-00000-of-00001.parquet")
    (root / "repo" / ".gitattributes").write_text("*.parquet filter=lfs\n")
    return root / "repo"


def hub_cache_snapshot(root: Path) -> Path:
    """A snapshot in the hub's cache: snapshots/<rev>/data/... are symlinks into the repository's blobs folder."""
    repo = root / "hub" / "datasets--AudioLLMs--librispeech_test_clean"
    blobs, snapshot = repo / "blobs", repo / "snapshots" / "0123abcd"
    blobs.mkdir(parents=True)
    (snapshot / "data").mkdir(parents=True)
    _dataset().to_parquet(blobs / "a1b2")
    _train().to_parquet(blobs / "c3d4")
    os.symlink("../../../blobs/a1b2", snapshot / "data" / "test-00000-of-00001.parquet")
    os.symlink("../../../blobs/c3d4", snapshot / "data" / "train-00000-of-00001.parquet")
    return snapshot


LAYOUTS: dict[str, Callable[[Path], Path]] = {
    "save_to_disk Dataset": save_to_disk_dataset,
    "save_to_disk DatasetDict": save_to_disk_dict,
    "parquet file": parquet_file,
    "arrow file": arrow_file,
    "hub parquet shards": hub_parquet_shards,
    "hub cache snapshot": hub_cache_snapshot,
}


def _config(tmp_path: Path, path: Path, entry: str = ENTRY, url: str = "http://127.0.0.1:9/v1") -> Path:
    return write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[entry, "word_error_rate"]],
            "models": [model_entry("m", url)],
            "dataset_paths": {entry: str(path)},
            "output_dir": str(tmp_path / "runs"),
        },
    )


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_layout_is_read_as_the_entry_without_the_hub(
    layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the hub may not be asked: nothing is stored for this entry either
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "empty-cache"))
    path = LAYOUTS[layout](tmp_path / "data")
    config = _config(tmp_path, path)
    (engine,) = build_plan(load_config(config), source=str(config)).engines
    spec = engine.dataset
    assert spec.hf_repo is None and spec.name == ENTRY
    samples = list(iter_samples(spec))
    assert [s.reference for s in samples] == REFERENCES  # the test split only, in the copy's order
    assert local_row_count(spec) == 3
    for index, sample in enumerate(samples):
        assert sample.audio is not None and sample.audio.data == _wav(index)  # carried encoded
        array, rate = decode(sample.audio)  # and decoded with soundfile, as hub rows are
        assert rate == 16_000 and len(array) == 8000


@pytest.mark.parametrize("layout", ["save_to_disk DatasetDict", "hub parquet shards", "arrow file"])
def test_a_local_copy_runs_end_to_end(layout: str, tmp_path: Path, make_server: Any) -> None:
    path = LAYOUTS[layout](tmp_path / "data")
    answers = [{"audio_fingerprint": audio_fingerprint(_wav(i)), "answer": a} for i, a in enumerate(ANSWERS)]
    server = make_server({"answers": answers, "default_answer": "no rule matched this audio"})
    outcome = run(_config(tmp_path, path, url=server.base_url))
    (row,) = outcome.rows
    assert (row.dataset, row.n, row.n_failed) == (ENTRY, 3, 0)
    assert row.score == pytest.approx(1 / 7)
    (records,) = (tmp_path / "runs").rglob(f"{ENTRY}__word_error_rate.jsonl")
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert sorted(r["sample_id"] for r in lines) == [f"{ENTRY}-{i}" for i in range(3)]  # as the hub's rows are named


def _snapshot_with_card(root: Path) -> Path:
    """openslr/librispeech_asr as snapshot_download leaves it: README configs naming each subset's files."""
    repo = root / "librispeech_asr"
    for subset in ("clean", "other"):
        (repo / subset).mkdir(parents=True)
    _dataset(audio="audio", text="text").to_parquet(repo / "clean" / "test-00000-of-00001.parquet")
    _train().to_parquet(repo / "other" / "test-00000-of-00001.parquet")
    _train().to_parquet(repo / "clean" / "validation-00000-of-00001.parquet")
    card = {
        "configs": [
            {"config_name": "clean", "data_files": [
                {"split": "test", "path": "clean/test-*"}, {"split": "validation", "path": "clean/validation-*"}]},
            {"config_name": "other", "data_files": [{"split": "test", "path": "other/test-*"}]},
        ]
    }  # fmt: skip
    import yaml

    (repo / "README.md").write_text(f"---\n{yaml.safe_dump(card)}---\n# LibriSpeech\n", encoding="utf-8")
    return repo


def _subset_folders(root: Path) -> Path:
    """A copy without a card: one folder per subset, the hub's <split>-* files in each."""
    repo = root / "librispeech_asr"
    (repo / "clean").mkdir(parents=True)
    (repo / "other").mkdir()
    _dataset(audio="audio", text="text").to_parquet(repo / "clean" / "test-00000-of-00001.parquet")
    _train().to_parquet(repo / "other" / "test-00000-of-00001.parquet")
    return repo


@pytest.mark.parametrize("build", [_snapshot_with_card, _subset_folders])
def test_the_entrys_subset_picks_the_files(build: Callable[[Path], Path], tmp_path: Path) -> None:
    path = build(tmp_path)
    config = _config(tmp_path, path, entry=SUBSET_ENTRY)
    (engine,) = build_plan(load_config(config), source=str(config)).engines
    samples = list(iter_samples(engine.dataset))
    assert [s.reference for s in samples] == REFERENCES  # subset clean, split test; the entry's columns
    assert [s.id for s in samples] == ["utt-0", "utt-1", "utt-2"]
    assert [s.meta["speaker"] for s in samples] == [100, 101, 102]


def test_an_auharness_config_names_its_copy_by_auharness_name(tmp_path: Path, make_server: Any) -> None:
    """A lab's AU-Harness config points its own librispeech_test_clean at the copy on its disk."""
    path = save_to_disk_dict(tmp_path / "data")
    answers = [{"audio_fingerprint": audio_fingerprint(_wav(i)), "answer": a} for i, a in enumerate(ANSWERS)]
    server = make_server({"answers": answers, "default_answer": "no rule matched this audio"})
    config = write_config(
        tmp_path / "config.yaml",
        {
            "task_metric": [["librispeech_test_clean", "word_error_rate"]],
            "models": [{"name": "m", "model": "m", "url": server.base_url, "inference_type": "openai"}],
            "dataset_paths": {"librispeech_test_clean": str(path)},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    (row,) = run(config).rows
    assert (row.n, row.n_failed, row.score) == (3, 0, pytest.approx(1 / 7))


def test_errors_name_the_key_the_path_and_the_layouts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no data here")
    other_split = tmp_path / "train_only"
    datasets.DatasetDict({"train": _train()}).save_to_disk(other_split)
    for path, why in (
        (tmp_path / "absent", "does not exist"),
        (empty, "holds no data files"),
        (other_split, "without split 'test'"),
    ):
        config = _config(tmp_path, path)
        with pytest.raises(ConfigError) as error:
            build_plan(load_config(config), source=str(config))
        message = str(error.value)
        assert f"dataset_paths.{ENTRY}" in message and str(path) in message and why in message
        assert "save_to_disk" in message and "snapshot" in message  # the layouts expected
    assert main(["run", str(_config(tmp_path, empty)), "--quiet"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_symlink_out_of_the_copy_is_refused(tmp_path: Path) -> None:
    """The copy is untrusted input: a file linked from elsewhere on the disk is not read through it."""
    outside = tmp_path / "secret"
    outside.mkdir()
    _dataset().to_parquet(outside / "rows.parquet")
    copy = tmp_path / "copy" / "data"
    copy.mkdir(parents=True)
    os.symlink(outside / "rows.parquet", copy / "test-00000-of-00001.parquet")
    config = _config(tmp_path, tmp_path / "copy")
    with pytest.raises(ConfigError, match=r"outside the copy"):
        build_plan(load_config(config), source=str(config))


def test_a_key_naming_no_entry_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"dataset_paths.nope: names no catalogue dataset"):
        build_plan(
            parse_config(
                {
                    "dataset_metric": [[ENTRY, "word_error_rate"]],
                    "models": [model_entry("m", "http://127.0.0.1:9/v1")],
                    "dataset_paths": {"nope": "/data"},
                }
            )
        )

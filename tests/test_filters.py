"""Filters, checked by counts on the shipped espeak_en speech set and on what a real server received.

Expected counts come from the parquet columns read directly with pyarrow,
not from evalkit's loader.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from helpers import ROOT, model_entry, write_config

from evalkit.catalog import load_catalog
from evalkit.config import Filters, load_config
from evalkit.data.filters import apply_filters, is_accented
from evalkit.data.loading import iter_samples
from evalkit.data.sample import Audio, Sample
from evalkit.plan import build_plan
from evalkit.run.runner import RunOptions, execute

PARQUET = ROOT / "evalkit" / "assets" / "speech" / "espeak_en" / "data.parquet"


@pytest.fixture(scope="module")
def table() -> dict[str, list[Any]]:
    return pq.read_table(PARQUET, columns=["id", "duration", "accented", "accent"]).to_pydict()


@pytest.fixture(scope="module")
def spec():  # type: ignore[no-untyped-def]
    return load_catalog().datasets["espeak_en_asr"]


def kept(spec, **filters: Any) -> list[str]:  # type: ignore[no-untyped-def]
    return [s.id for s in apply_filters(iter_samples(spec), Filters(**filters), spec.name)]


def test_num_samples_first_takes_the_first_rows(spec, table) -> None:
    assert kept(spec, num_samples=7) == table["id"][:7]
    assert kept(spec, num_samples=7, sampling="first") == table["id"][:7]
    assert kept(spec) == table["id"]  # no filter: everything, the long clips included
    assert kept(spec, num_samples=1000) == table["id"]


def test_num_samples_random_is_seeded_uniform_and_in_dataset_order(spec, table) -> None:
    first = kept(spec, num_samples=7, sampling="random", seed=5)
    assert len(first) == len(set(first)) == 7
    assert first == kept(spec, num_samples=7, sampling="random", seed=5)  # reproducible
    assert first == sorted(first, key=table["id"].index)  # yielded in dataset order
    assert first != table["id"][:7]
    draws = {tuple(kept(spec, num_samples=7, sampling="random", seed=seed)) for seed in range(6)}
    assert len(draws) == 6  # another seed, another sample
    # uniform: over many seeds every row is drawn, about 7/60 of the time
    samples = list(iter_samples(spec))
    counts = {cid: 0 for cid in table["id"]}
    for seed in range(150):
        for sample in apply_filters(iter(samples), Filters(num_samples=7, sampling="random", seed=seed), spec.name):
            counts[sample.id] += 1
    assert min(counts.values()) > 0
    assert max(counts.values()) < 150 * 7 / 60 * 2.5
    assert kept(spec, num_samples=100, sampling="random") == table["id"]


def test_length_filter_counts_and_no_hidden_cap(spec, table) -> None:
    durations = dict(zip(table["id"], table["duration"]))
    assert kept(spec, length_filter=(3.0, 5.0)) == [c for c, d in durations.items() if 3.0 <= d <= 5.0]
    long = kept(spec, length_filter=(30.0, 60.0))
    assert long == [c for c, d in durations.items() if d >= 30.0] and len(long) == 3


def test_accented_from_the_flag_and_from_the_label(spec, table) -> None:
    flags = dict(zip(table["id"], table["accented"]))
    accented = [c for c, f in flags.items() if f]
    assert kept(spec, accented=True) == accented
    assert kept(spec, accented=False) == [c for c, f in flags.items() if not f]
    assert 0 < len(accented) < 60
    # without the accented column the label decides: us / british / received_pronunciation are standard
    by_label = spec.model_copy(update={"accented_column": None})
    assert kept(by_label, accented=True) == accented
    assert is_accented(Sample(id="x", meta={"accent": "Received-Pronunciation"})) is False
    assert is_accented(Sample(id="x", meta={"accent": "scottish"})) is True


def test_accented_filter_keeps_and_reports_samples_it_cannot_judge(spec, caplog) -> None:
    no_info = spec.model_copy(update={"accented_column": None, "accent_column": None})
    with caplog.at_level(logging.WARNING, logger="evalkit"):
        assert len(kept(no_info, accented=True)) == 60
    assert "without accent information" in caplog.text


def test_num_samples_counts_samples_the_other_filters_kept(spec, table) -> None:
    wanted = [c for c, d, a in zip(table["id"], table["duration"], table["accented"]) if a and 3.0 <= d <= 5.0]
    assert kept(spec, accented=True, length_filter=(3.0, 5.0), num_samples=4) == wanted[:4]
    drawn = kept(spec, accented=True, length_filter=(3.0, 5.0), num_samples=4, sampling="random", seed=1)
    assert len(drawn) == 4 and set(drawn) <= set(wanted)


def test_language_codes_and_names_are_the_same_filter(spec) -> None:
    for value in ("en", "EN", "english", "English", "eng", "en_US"):
        assert len(kept(spec, language=value)) == 60, value
    assert kept(spec, language="german") == kept(spec, language="de") == []
    samples = [
        Sample(id=str(i), meta={"language": lang})
        for i, lang in enumerate(["en", "English", "de", "German", "en-de", "fr"])
    ]
    ids = lambda value: [s.id for s in apply_filters(iter(samples), Filters(language=value), "mixed")]  # noqa: E731
    assert ids("english") == ids("en") == ["0", "1", "4"]
    assert ids("de") == ids("german") == ["2", "3", "4"]
    assert ids("en-de") == ["4"]


def test_a_filter_that_keeps_nothing_warns_and_never_raises(spec, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="evalkit"):
        assert kept(spec, length_filter=(1000.0, 2000.0)) == []
        assert kept(spec, num_samples=0) == []
    assert caplog.text.count("left no samples") == 2
    assert "length_filter: 60" in caplog.text


def test_unreadable_audio_is_kept_for_the_engine_to_fail(tmp_path: Path) -> None:
    broken = Sample(id="b", audio=Audio(data=b"not audio at all"))
    assert [s.id for s in apply_filters(iter([broken]), Filters(length_filter=(0.0, 1.0)), "x")] == ["b"]


def _run(tmp_path: Path, filters: dict[str, Any], url: str) -> tuple[Any, list[dict[str, Any]]]:
    path = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
            "models": [model_entry("m", url)],
            "filters": filters,
            "output_dir": str(tmp_path / "runs"),
        },
    )
    outcome = asyncio.run(
        execute(build_plan(load_config(path), source=str(path)), RunOptions(no_cache=True, quiet=True))
    )
    lines = (outcome.run_dir / "records" / "espeak_en_asr__word_error_rate.jsonl").read_text().splitlines()
    return outcome, [json.loads(line) for line in lines]


def test_filters_decide_what_the_server_is_asked(tmp_path: Path, make_server, spec) -> None:
    server = make_server(request_log=True)
    filters = {
        "accented": True,
        "length_filter": [3.0, 5.0],
        "num_samples": 4,
        "sampling": "random",
        "seed": 11,
        "language": "English",
    }
    outcome, records = _run(tmp_path, filters, server.base_url)
    expected = kept(spec, **{**filters, "length_filter": (3.0, 5.0)})
    assert sorted(r["sample_id"] for r in records) == sorted(expected) and len(expected) == 4
    assert len(server.log_events("completed")) == 4
    (row,) = outcome.rows
    assert row.n == 4 and row.n_failed == 0


def test_an_empty_selection_is_a_results_row_with_n_0(tmp_path: Path, make_server) -> None:
    """End to end through the CLI: a warning, a row with n=0, exit 0, no request sent."""
    server = make_server(request_log=True)
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"], ["espeak_en_asr", "cer"]],
            "models": [model_entry("m", server.base_url)],
            "filters": {"length_filter": [100, 200]},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "left no samples" in proc.stderr
    (run_dir,) = (tmp_path / "runs").glob("*_*")
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    assert {(r["metric"], r["n"], r["n_failed"], r["score"]) for r in rows} == {
        ("word_error_rate", 0, 0, None),
        ("cer", 0, 0, None),
    }
    assert (run_dir / "records" / "espeak_en_asr__word_error_rate.jsonl").read_text() == ""
    assert server.log_events() == []

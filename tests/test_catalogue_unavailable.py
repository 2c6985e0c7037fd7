"""Catalogue entries whose data cannot be had, and private corpora inside larger selections.

A name another tool's users type must resolve even when its data is gone
(withdrawn from the hub, never public): the entry says so and why when it is
used. Within a task or a group such an entry, or a private corpus the config
gives no path for, is left out with a warning, so that the rest still runs.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, write_config

from evalkit.catalog import DatasetSpec, load_catalog
from evalkit.cli.main import main
from evalkit.config import load_config
from evalkit.errors import ConfigError
from evalkit.plan import build_plan

WHY = "the publisher withdrew it from the hub in 2025 and no public copy has the same test split"


def _runspecs(root: Path) -> Path:
    folder = root / "specs" / "speech"
    folder.mkdir(parents=True)
    (root / "specs" / "rows.jsonl").write_text(json.dumps({"id": "a", "text": "hello", "answer": "hello"}) + "\n")
    entries: dict[str, Any] = {
        "_task": {"description": "Toy task.", "metrics": ["exact_match"], "default_metric": "exact_match"},
        "toy_local": {
            "path": "../rows.jsonl",
            "language": "en",
            "modality": "text",
            "textual_input_column": "text",
            "target_column": "answer",
            "id_column": "id",
            "instruction": "Repeat.",
        },
        "toy_gone": {
            "unavailable": WHY,
            "language": "en",
            "modality": "text",
            "description": "A withdrawn benchmark.",
            "url": "https://example.org/gone",
        },
        "toy_licensed": {
            "private": True,
            "language": "en",
            "modality": "text",
            "textual_input_column": "text",
            "target_column": "answer",
            "instruction": "Repeat.",
            "description": "A licensed corpus.",
        },
    }
    (folder / "toy.json").write_text(json.dumps(entries))
    return root / "specs"


def _config(tmp_path: Path, name: str, **extra: Any) -> Path:
    specs = _runspecs(tmp_path)
    data = {
        "dataset_metric": [[name, "exact_match"]],
        "models": [model_entry("m", "http://127.0.0.1:9/v1")],
        "runspecs_dir": [str(specs)],
        **extra,
    }
    return write_config(tmp_path / "config.yaml", data)


def test_an_unavailable_dataset_named_alone_is_an_error_quoting_why(tmp_path: Path) -> None:
    config = _config(tmp_path, "toy_gone")
    with pytest.raises(ConfigError, match=r"dataset 'toy_gone' cannot be evaluated: the publisher withdrew it"):
        build_plan(load_config(config), source=str(config))
    assert main(["validate", str(config)]) == 2


def test_a_task_leaves_out_what_cannot_be_read_and_says_so(tmp_path: Path, caplog) -> None:
    config = _config(tmp_path, "toy")
    with caplog.at_level(logging.WARNING):
        plan = build_plan(load_config(config), source=str(config))
    assert [engine.dataset.name for engine in plan.engines] == ["toy_local"]
    warned = " ".join(record.getMessage() for record in caplog.records)
    assert "2 of 'toy'" in warned and "toy_gone (unavailable: the publisher" in warned
    assert "toy_licensed (private: give its path in `dataset_paths`)" in warned


def test_a_private_corpus_with_its_path_joins_the_task(tmp_path: Path) -> None:
    config = _config(tmp_path, "toy", dataset_paths={"toy_licensed": "specs/rows.jsonl"})
    plan = build_plan(load_config(config), source=str(config))
    assert sorted(engine.dataset.name for engine in plan.engines) == ["toy_licensed", "toy_local"]


def test_a_selection_with_nothing_readable_names_every_reason(tmp_path: Path) -> None:
    specs = _runspecs(tmp_path)
    (specs / "speech" / "gone.json").write_text(
        json.dumps(
            {
                "_task": {"description": "Only gone.", "metrics": ["exact_match"], "default_metric": "exact_match"},
                "gone_a": {"unavailable": WHY, "language": "en", "modality": "text"},
                "gone_b": {"unavailable": "never public", "language": "en", "modality": "text"},
            }
        )
    )
    data = {
        "dataset_metric": [["gone", "exact_match"]],
        "models": [model_entry("m", "http://127.0.0.1:9/v1")],
        "runspecs_dir": [str(specs)],
    }
    config = write_config(tmp_path / "config.yaml", data)
    with pytest.raises(ConfigError, match=r"no dataset of 'gone' can be read: gone_a \(unavailable: .*gone_b"):
        build_plan(load_config(config), source=str(config))


def test_listings_and_info_show_an_unavailable_entry_for_what_it_is(tmp_path: Path, capsys) -> None:
    specs = _runspecs(tmp_path)
    catalog = load_catalog([specs])
    assert catalog.datasets["toy_gone"].source_label == "unavailable"
    assert catalog.datasets["toy_gone"].source == "unavailable"
    assert catalog.datasets["toy_licensed"].source == "private"
    assert main(["list", "datasets", "--runspecs-dir", str(specs), "--format", "json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["toy_gone"]["source"] == "unavailable" and rows["toy_licensed"]["source"] == "private"
    assert main(["info", "dataset", "toy_gone", "--runspecs-dir", str(specs)]) == 0
    shown = capsys.readouterr().out
    assert "unavailable" in shown and "withdrew" in shown
    assert "cannot be evaluated" in shown and "example config" not in shown


@pytest.mark.parametrize("source", [{"hf_repo": "a/b"}, {"path": "x.jsonl"}, {"private": True}])
def test_an_unavailable_entry_names_no_source(source: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="unavailable"):
        DatasetSpec.model_validate({"unavailable": WHY, "language": "en", **source})


def test_dataset_paths_takes_any_name_of_an_entry_and_refuses_others(tmp_path: Path) -> None:
    """AU-Harness users write its names (common_voice_15_zh-CN); a key naming no entry is a mistake."""
    config = _config(tmp_path, "toy_licensed", dataset_paths={"TOY_LICENSED": "specs/rows.jsonl"})
    (engine,) = build_plan(load_config(config), source=str(config)).engines
    assert engine.dataset.name == "toy_licensed" and Path(engine.dataset.source) == tmp_path / "specs" / "rows.jsonl"
    (tmp_path / "copy.jsonl").write_text(json.dumps({"id": "b", "text": "bye", "answer": "bye"}) + "\n")
    for key, message in (("toy_local", None), ("nope", "no catalogue dataset"), ("toy_gone", "cannot be evaluated")):
        config = write_config(
            tmp_path / "config.yaml",
            {
                "dataset_metric": [["toy_local", "exact_match"]],
                "models": [model_entry("m", "http://127.0.0.1:9/v1")],
                "runspecs_dir": [str(tmp_path / "specs")],
                "dataset_paths": {key: "copy.jsonl"},
            },
        )
        if message is None:  # a local entry's data is read from the copy given instead
            (engine,) = build_plan(load_config(config), source=str(config)).engines
            assert Path(engine.dataset.source) == tmp_path / "copy.jsonl"
            continue
        with pytest.raises(ConfigError, match=rf"dataset_paths.{key}: .*{message}"):
            build_plan(load_config(config), source=str(config))


def test_the_auharness_name_of_a_common_voice_locale_gives_its_path() -> None:
    from evalkit.catalog import load_catalog
    from evalkit.config import parse_config
    from evalkit.plan import private_paths

    config = parse_config(
        {
            "dataset_metric": [["common_voice_15_zh_cn", "word_error_rate"]],
            "models": [model_entry("m", "http://127.0.0.1:9/v1")],
            "dataset_paths": {"common_voice_15_zh-CN": "/data/cv15/zh-CN"},
        },
        "x.yaml",
    )
    assert private_paths(config, load_catalog(), "x.yaml") == {"common_voice_15_zh_cn": "/data/cv15/zh-CN"}

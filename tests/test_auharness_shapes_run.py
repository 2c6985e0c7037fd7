"""Every config shape AU-Harness ships runs end to end: its own names, evalkit's real catalogue entries.

The shapes (tests/test_auharness_config.py, written from AU-Harness's documentation) name AU-Harness's
datasets, groups and metrics. Here each is run as its user would run it, with only the endpoints pointed at the
project's test server (models and judge): the real catalogue entries read two stand-in rows each from evalkit's
hub row store (tests/standins.py; the hub is offline), the licensed CallHome sets read stand-in files where
AU-Harness keeps them (private_datasets/ under the folder it runs in). A shape passes when every engine it plans
asks every model about every row and writes a
result: no engine error, and no sample failed for its data (audio, image, conversation) or its request shape.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from standins import standin_rows, store_standins
from test_auharness_config import JUDGE, SHAPES, _config

from evalkit.catalog import load_catalog
from evalkit.config import load_config
from evalkit.plan import build_plan
from evalkit.run.runner import RunOptions, execute

ROWS = 2
#: failures that say an entry or its request is broken, whatever the model answers
BROKEN = {"audio", "image", "conversation", "error", "http_error", "bad_request", "preprocess"}


def _pointed(shape: str, url: str) -> dict[str, Any]:
    """The shape with every endpoint at the test server and two rows a dataset, as a user fills in a config."""
    data = _config(shape)
    for model in data["models"]:
        model["url"] = url
        model.pop("api_version", None)  # an Azure deployment's path: the test server answers the plain one
        model.update(retry_attempts=1, timeout=20, delay=0)
        if model.get("inference_type") == "gemini":
            model["inference_type"] = "vllm"  # Google's endpoint stands in as a plain OpenAI-compatible one
    if "judge_settings" in data or any(
        metric.startswith(("llm_judge", "mt_bench")) for _, metric in data["task_metric"]
    ):
        judge = {**JUDGE, **data.get("judge_settings", {})}
        judge.update(judge_api_endpoint=url, judge_type="vllm")
        judge.pop("judge_api_version", None)
        data["judge_settings"] = judge
    data["filter"] = {**data.get("filter", {}), "num_samples": ROWS}
    data["filter"].pop("length_filter", None)  # a stand-in clip is one second: kept anyway, but not the point here
    return data


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_shipped_shape_runs_end_to_end(
    shape: str, tmp_path: Path, make_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SPIDER_DATA_DIR", str(_spider_folder(tmp_path / "spider")))
    # the judge rates every answer 1 ("yes" to binary judges, 1 on the 0-5 and 1-10 scales) so samples score
    server = make_server({"default_answer": "A", "answers": [{"model": "judge-model", "answer": "1"}]})
    data = _pointed(shape, server.base_url)
    data["output_dir"] = str(tmp_path / "runs")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    # what the config selects, stored before the plan looks (the hub is offline): stand-in rows for hub entries,
    # stand-in files in dataset_paths for the licensed sets, as their user writes them
    catalog = load_catalog()
    # by the entry whose data each reads (AU-Harness's names select AU-Harness's variants of entries)
    selected = {
        spec.variant_of or spec.name: spec for name, _, _ in load_config(path).pairs for spec in catalog.resolve(name)
    }
    # the licensed CallHome sets lie where AU-Harness keeps them (its prepare script's parquet under
    # private_datasets/<corpus>/hf_dataset in the folder it runs in): the config names no dataset_paths
    monkeypatch.chdir(tmp_path)
    table = catalog.foreign["auharness"]
    for entry in table.datasets.values():
        spec = selected.get(str(entry.evalkit))
        if spec is not None and spec.private and (entry.hub or "").startswith("private_datasets/"):
            target = tmp_path / entry.hub.rsplit("/", 1)[0] / "dataset.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(standin_rows(spec, ROWS)), target)
    store_standins([spec for spec in selected.values() if spec.hf_repo is not None], ROWS)
    plan = build_plan(load_config(path), source=str(path))
    outcome = asyncio.run(execute(plan, RunOptions(quiet=True)))
    assert plan.engines
    for engine in outcome.engines:
        assert engine.error is None, f"{engine.spec.dataset.name} x {engine.spec.metric}: {engine.error}"
    rows = [row for row in outcome.rows if row.kind == "dataset"]
    assert {(r.dataset, r.metric, r.model) for r in rows} == {
        (e.dataset.name, e.metric, m) for e in plan.engines for m in e.models
    }
    for row in rows:
        assert row.n + row.n_failed == ROWS, (row.dataset, row.metric, row.model, row.n, row.n_failed)
        transcription = plan.models[row.model].info.inference_type == "transcription"
        broken = set(row.failure_reasons) & (BROKEN | (set() if transcription else {"unsupported"}))
        assert not broken, (row.dataset, row.metric, row.model, row.failure_examples)
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert results["results"]


def _spider_folder(folder: Path) -> Path:
    """Spider's layout for the stand-in rows' databases (their db_id is "value <row>"): tables.json, database/."""
    tables = []
    for i in range(ROWS):
        db_id = f"value {i}"
        tables.append(
            {
                "db_id": db_id,
                "table_names_original": ["singer"],
                "column_names_original": [[-1, "*"], [0, "name"]],
                "column_types": ["text", "text"],
                "primary_keys": [1],
                "foreign_keys": [],
            }
        )
        database = folder / "database" / db_id
        database.mkdir(parents=True)
        with sqlite3.connect(database / f"{db_id}.sqlite") as connection:
            connection.execute("CREATE TABLE singer (name TEXT)")
    (folder / "tables.json").write_text(json.dumps(tables))
    return folder

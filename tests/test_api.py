"""evalkit.evaluate(): a real run from Python, in plain code, inside a running event loop, and async."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, model_entry, write_config

import evalkit
from evalkit.config import parse_config
from evalkit.errors import ConfigError
from evalkit.testing import start_test_server

QA = {"capital of France": "Paris", "spider": "eight", "sky": "blue", "red planet": "Mars", "opposite of hot": "warm"}


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    srv = start_test_server({"answers": [{"match": q, "answer": a} for q, a in QA.items()]}, request_log=True)
    yield srv
    srv.stop()


def _config(server: Any, tmp_path: Path) -> dict[str, Any]:
    return {
        "dataset_metric": [["tiny_qa", "exact_match"], ["tiny_qa", "f1"]],
        "models": [
            model_entry("model-a", server.base_url),
            model_entry("model-b", server.base_url, inference_type="openai"),
        ],
        "runspecs_dir": [str(FIXTURES / "runspecs")],
        "output_dir": str(tmp_path / "runs"),
    }


def test_evaluate_a_dict_with_overrides(server, tmp_path: Path) -> None:
    results = evalkit.evaluate(_config(server, tmp_path), model="model-a", num_samples=4, quiet=True)
    assert isinstance(results, evalkit.Results)
    assert results.run_dir.parent == tmp_path / "runs" and (results.run_dir / "report.html").is_file()
    assert results.models == ["model-a"] and results.metrics == ["exact_match", "f1"] and len(results) == 2
    row = results.get("tiny_qa", "em")  # an alias; the only model may be left out
    assert row.metric == "exact_match" and row.n == 4 and row.score == 1.0
    assert results.score("tiny_qa", "f1", "model-a") == 1.0
    assert results.requests_sent == 4
    with pytest.raises(KeyError, match='did you mean "tiny_qa"'):
        results.get("tiny_q", "exact_match")
    assert "| tiny_qa | exact_match | model-a | 1.0000" in results.to_markdown()
    loaded = evalkit.Results.load(results.run_dir)
    assert [(r.dataset, r.metric, r.model, r.score, r.n) for r in loaded] == [
        (r.dataset, r.metric, r.model, r.score, r.n) for r in results
    ]


def test_evaluate_inside_a_running_event_loop(server, tmp_path: Path) -> None:
    """What a notebook cell does: call evaluate() while a loop runs in this thread."""
    path = write_config(tmp_path / "config.yaml", _config(server, tmp_path))

    async def cell() -> evalkit.Results:
        assert asyncio.get_running_loop() is not None
        return evalkit.evaluate(path, quiet=True)

    results = asyncio.run(cell())
    assert results.score("tiny_qa", "exact_match", "model-b") == 0.8  # "warm" is not "cold"
    assert len(results) == 4


def test_evaluate_async_on_the_callers_loop_with_a_progress_hook(server, tmp_path: Path) -> None:
    seen: list[tuple[str, str, bool]] = []
    config = parse_config(_config(server, tmp_path))

    async def go() -> evalkit.Results:
        return await evalkit.evaluate_async(
            config, dataset="tiny_qa", metric="exact_match", progress=lambda e, m, ok: seen.append((e, m, ok))
        )

    results = asyncio.run(go())
    assert len(seen) == 10 and all(ok for _, _, ok in seen) and {e for e, _, _ in seen} == {"tiny_qa__exact_match"}
    assert [r.metric for r in results] == ["exact_match", "exact_match"]
    assert config.dataset_metric == [
        ("tiny_qa", "exact_match"),
        ("tiny_qa", "f1"),
    ]  # the caller's Config is not changed


def test_config_fields_as_overrides_and_mistakes(server, tmp_path: Path) -> None:
    results = evalkit.evaluate(
        _config(server, tmp_path), max_failure_rate=0.0, metric="f1", model="model-b", quiet=True
    )
    assert [(r.metric, r.model) for r in results] == [("f1", "model-b")]
    with pytest.raises(TypeError, match='did you mean "num_samples"'):
        evalkit.evaluate(_config(server, tmp_path), num_sample=3)
    with pytest.raises(ConfigError, match="max_failure_rate"):
        evalkit.evaluate(_config(server, tmp_path), max_failure_rate=2)
    with pytest.raises(ConfigError, match="'model-x' is not a model of the config"):
        evalkit.evaluate(_config(server, tmp_path), model="model-x")

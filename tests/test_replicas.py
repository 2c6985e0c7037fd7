"""Replica routing: one shared queue per model, so a dead replica answers nothing and a slow one less.

Real test servers on loopback, a real text dataset on disk, the real runner;
nothing here is timed. Both ways of declaring replicas are covered: ``url``
as a list, and several ``models`` entries sharing one name (each with its own
``batch_size``).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter
from pathlib import Path
from typing import Any

from helpers import model_entry, write_config

from evalkit.config import load_config
from evalkit.plan import build_plan
from evalkit.run.runner import RunOptions, RunOutcome, execute

N_SAMPLES = 40
#: generous: both runs take a few seconds; only a stuck run reaches it
RUN_LIMIT_S = 60


def _qa_runspecs(root: Path, n: int) -> Path:
    """A text set of ``n`` distinct questions (distinct, so no request is de-duplicated)."""
    data = root / "data" / "replica_qa.jsonl"
    data.parent.mkdir(parents=True)
    with data.open("w", encoding="utf-8") as handle:
        for i in range(n):
            handle.write(
                json.dumps({"qid": f"q{i}", "question": f"question number {i}?", "answer": f"question number {i}?"})
                + "\n"
            )
    folder = root / "runspecs" / "text"
    folder.mkdir(parents=True)
    spec = {
        "_task": {"description": "distinct questions for replica routing", "metrics": ["exact_match"]},
        "replica_qa": {
            "path": "../../data/replica_qa.jsonl",
            "language": "en",
            "modality": "text",
            "id_column": "qid",
            "textual_input_column": "question",
            "target_column": "answer",
        },
    }
    (folder / "replica_qa.json").write_text(json.dumps(spec))
    return root / "runspecs"


def _closed_port_url() -> str:
    """A loopback URL nobody listens on: bind an ephemeral port, then release it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _run(tmp_path: Path, models: list[dict[str, Any]]) -> tuple[RunOutcome, list[dict[str, Any]]]:
    config_path = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["replica_qa", "exact_match"]],
            "models": models,
            "runspecs_dir": str(_qa_runspecs(tmp_path, N_SAMPLES)),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    plan = build_plan(load_config(config_path), source=str(config_path))
    # a routing bug tends to strand samples on a dead replica: that must fail here, not hang
    outcome = asyncio.run(asyncio.wait_for(execute(plan, RunOptions(no_cache=True, quiet=True)), RUN_LIMIT_S))
    records_file = outcome.run_dir / "records" / "replica_qa__exact_match.jsonl"
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    return outcome, records


def test_dead_replica_gets_nothing_and_the_others_answer_everything(tmp_path: Path, make_server) -> None:
    alive_a = make_server(latency_ms=20)
    alive_b = make_server(latency_ms=20)
    dead = _closed_port_url()
    # Enough retries that a sample re-queued after hitting the dead replica (before its
    # circuit opens) always reaches a live one: the breaker opens after 5 failures and
    # declares the replica dead after 3 failed probes, so no sample can fail there more
    # than 8 times.
    entry = model_entry("m", [alive_a.base_url, dead, alive_b.base_url], batch_size=2, retry_attempts=8)
    outcome, records = _run(tmp_path, [entry])

    assert len(records) == N_SAMPLES
    failures = [r for r in records if r.get("failure")]
    assert failures == []
    assert all(r["score"] == 1.0 for r in records)  # the echo answer is the reference
    by_replica = Counter(r["replica"] for r in records)
    assert set(by_replica) <= {alive_a.base_url, alive_b.base_url}
    assert sum(by_replica.values()) == N_SAMPLES

    counts = outcome.meta["requests"]["m"]["replicas"]
    assert counts[dead] == 0
    assert counts[alive_a.base_url] + counts[alive_b.base_url] == N_SAMPLES
    # the live servers saw exactly the answered requests, each once (no retries on them)
    assert sum(s.stats()["by_status"].get("200", 0) for s in (alive_a, alive_b)) == N_SAMPLES
    assert alive_a.stats()["by_status"].get("200", 0) == counts[alive_a.base_url]


def test_slow_replica_answers_fewer_samples(tmp_path: Path, make_server) -> None:
    fast = make_server(latency_ms=5, request_log=True)
    slow = make_server(latency_ms=300, request_log=True)
    # two entries sharing one name: replicas of one model, each with its own batch_size
    models = [model_entry("m", fast.base_url, batch_size=2), model_entry("m", slow.base_url, batch_size=2)]
    outcome, records = _run(tmp_path, models)

    assert len(records) == N_SAMPLES
    assert not [r for r in records if r.get("failure")]
    by_replica = Counter(r["replica"] for r in records)
    assert by_replica[fast.base_url] + by_replica[slow.base_url] == N_SAMPLES
    assert by_replica[slow.base_url] < by_replica[fast.base_url]
    assert by_replica[slow.base_url] < N_SAMPLES // 4  # far from an even split: work is stolen, not sharded
    assert outcome.meta["requests"]["m"]["replicas"] == {
        fast.base_url: by_replica[fast.base_url],
        slow.base_url: by_replica[slow.base_url],
    }
    # the servers agree with the records
    assert len(slow.log_events("completed")) == by_replica[slow.base_url]
    assert len(fast.log_events("completed")) == by_replica[fast.base_url]

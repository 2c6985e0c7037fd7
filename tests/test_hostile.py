"""Hostile and broken answers: each is a failure with its own reason, never a score, and memory stays bounded.

One real ``python -m evalkit run`` subprocess against the test server on
loopback, whose script pins one hostile answer (evalkit/testing/hostile.py) to
each of seven samples and answers the rest normally. Its peak RSS (from
``wait4``) is compared with a clean run of the same set: the 20 MB answer is
cut off at ``max_response_bytes`` instead of being read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, model_entry, run_measured, text_set

N = 12
HOSTILE = {
    1: ("empty_choices", "no_choices", "empty `choices`"),
    2: ("null_content", "null_content", "content is null"),
    3: ("wrong_content_type", "content_type", "Content-Type text/html"),
    4: ("huge", "too_large", "over max_response_bytes (1048576)"),
    5: ("trickle", "timeout", "trickling"),
    6: ("cut", "connection", "closed mid-body"),
    7: ("sse", "unexpected_stream", "event stream"),
}


def _records(config: Path) -> dict[str, dict[str, Any]]:
    run_dir = next(p for p in (config.parent / "runs").iterdir() if p.is_dir())
    lines = (run_dir / "records" / "synth_qa__exact_match.jsonl").read_text().splitlines()
    return {record["sample_id"]: record for record in map(json.loads, lines)}


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_each_hostile_answer_fails_with_its_reason_and_memory_stays_bounded(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, N)
    model = {"batch_size": 4, "timeout": 2, "retry_attempts": 1, "max_response_bytes": 1024 * 1024}
    clean_server = make_server()
    clean = config_for(tmp_path / "clean", runspecs, [model_entry("m", clean_server.base_url, **model)])
    rules = [{"match": f"question {i} w0", "answer": "-", "fault": kind} for i, (kind, _, _) in HOSTILE.items()]
    server = make_server({"answers": rules})
    hostile = config_for(tmp_path / "hostile", runspecs, [model_entry("m", server.base_url, **model)])

    code, stderr, clean_rss = run_measured(clean)
    assert code == 0, stderr
    code, stderr, hostile_rss = run_measured(hostile)
    assert code == 0, stderr  # the run never crashes
    assert "Traceback" not in stderr

    records, clean_records = _records(hostile), _records(clean)
    for i, (kind, reason, words) in HOSTILE.items():
        record = records[f"s{i:05d}"]
        assert record["failure"] == reason, (kind, record)
        assert words in record["error"], (kind, record["error"])
        assert record["score"] is None and record["prediction"] is None and record["response"] is None
    assert records["s00004"]["attempts"] == 1  # too_large is not asked again
    assert records["s00001"]["attempts"] == 2  # the others are, once (retry_attempts: 1)
    for sample_id, record in records.items():
        if int(sample_id[1:]) not in HOSTILE:
            assert record.get("failure") is None and record["score"] == clean_records[sample_id]["score"]

    run_dir = next(p for p in (hostile.parent / "runs").iterdir() if p.is_dir())
    row = json.loads((run_dir / "results.json").read_text())["results"][0]
    assert row["n"] == N - len(HOSTILE) and row["n_failed"] == len(HOSTILE)
    assert row["failure_reasons"] == {reason: 1 for _, reason, _ in HOSTILE.values()}
    # a 20 MB answer read whole would add at least 20 MB (twice that joined); the cap keeps it to noise
    print(f"peak RSS: clean {clean_rss / 1024:.0f} MiB, hostile {hostile_rss / 1024:.0f} MiB")
    assert hostile_rss - clean_rss < 12 * 1024

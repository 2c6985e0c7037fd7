"""(g') One shard's samples from a local file: its share read alone against every row read and one in N kept.

Both readers are evalkit's own (the second is what a shard did before, and
still does where the format does not allow less): ``evalkit.data.share`` and
``Shard.select`` over ``iter_samples``. Each round times both, alternated, in
this process; the figures are medians. The files: ``--rows`` text rows with
an id column, as JSON lines and as parquet (row groups of 1,000), made in a
scratch folder.

    python -m benchmarks.shard_read --rows 200000 --shards 4 --rounds 3 --results 2026-11-29-shard-read.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import summary
from benchmarks.common import machine


def _write(folder: Path, rows: int) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = [
        {"id": f"s{i:07d}", "question": f"question {i}: what is {i} plus {i}?", "answer": str(2 * i)}
        for i in range(rows)
    ]
    jsonl = folder / "set.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    parquet = folder / "set.parquet"
    pq.write_table(pa.Table.from_pylist(data), parquet, row_group_size=1000)
    return {"jsonl": jsonl, "parquet": parquet}


def _spec(path: Path) -> Any:
    from evalkit.catalog import DatasetSpec

    return DatasetSpec(
        name="bench_share",
        task="t",
        category="c",
        file=str(path.parent / "runspec.json"),
        path=str(path),
        language="en",
        id_column="id",
        textual_input_column="question",
        target_column="answer",
    )


def measure(rows: int, shards: int, rounds: int) -> dict[str, Any]:
    from evalkit.data.loading import iter_samples
    from evalkit.data.share import share_samples
    from evalkit.run.shard import Shard

    shard = Shard(0, shards)
    out: dict[str, Any] = {"rows": rows, "shards": shards, "rounds": rounds}
    with tempfile.TemporaryDirectory(prefix="evalkit-shard-read-") as scratch:
        files = _write(Path(scratch), rows)
        for fmt, path in files.items():
            spec = _spec(path)
            times: dict[str, list[float]] = {"all": [], "share": []}
            counts: dict[str, int] = {}
            for _ in range(rounds):
                for how in ("all", "share"):
                    t0 = time.perf_counter()
                    if how == "all":
                        got = sum(1 for _ in shard.select(iter_samples(spec)))
                    else:
                        share = share_samples(spec, shard.owns)
                        assert share is not None
                        got = sum(1 for _ in share)
                    times[how].append(time.perf_counter() - t0)
                    counts[how] = got
            if counts["all"] != counts["share"]:
                raise RuntimeError(f"{fmt}: the share read {counts['share']} samples, reading all kept {counts['all']}")
            out[fmt] = {
                "samples": counts["share"],
                "all_s": statistics.median(times["all"]),
                "share_s": statistics.median(times["share"]),
                "runs_all_s": times["all"],
                "runs_share_s": times["share"],
            }
    return out


def summary_entry(result: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for fmt in ("parquet", "jsonl"):
        f = result[fmt]
        rows.append(
            {
                "figure": f"(g') shard 0/{result['shards']} reads its share of a local {fmt} file "
                f"({result['rows']:,} rows with an id column)",
                "measured": f"**{f['share_s']:.2f} s** vs {f['all_s']:.2f} s reading every row and keeping its share "
                f"= **{f['all_s'] / f['share_s']:.1f}x** faster ({f['samples']:,} samples, the same)",
                "target": "reads only its share where the format allows",
                "met": None,
            }
        )
    return {
        **summary.entry(result, rows),
        "figures": {k: result[k] for k in ("rows", "shards", "rounds", "parquet", "jsonl")},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.shard_read", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--results", default=None, help="keep the summary rows as benchmarks/results/NAME")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "command": "python -m benchmarks.shard_read " + shlex.join(sys.argv[1:] if argv is None else argv),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
    }
    result.update(measure(args.rows, args.shards, args.rounds))
    result["loadavg_after"] = os.getloadavg()
    for fmt in ("parquet", "jsonl"):
        f = result[fmt]
        print(f"{fmt}: share {f['share_s']:.2f} s, all {f['all_s']:.2f} s ({f['samples']:,} samples)")
    if args.results:
        summary.write_entry(args.results, summary_entry(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

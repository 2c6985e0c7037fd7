"""A/B of two evalkit checkouts on (a): the same harness, runs alternated, one fresh server each.

On a shared 2-CPU machine two separate benchmark runs differ by more than a
change is worth, so a change is judged here: both checkouts run in the same
process's rounds, alternated, against the same prompts; the figures are the
request phase (server log) and the client's CPU per request (wait4).

    python -m benchmarks.ab --a /work/main --b . --concurrency 32 --rounds 4
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from benchmarks import common, overhead


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=Path, required=True, help="checkout A (its root goes first on PYTHONPATH)")
    parser.add_argument("--b", type=Path, required=True, help="checkout B")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="evalkit-ab-"))
    runspecs, _ = overhead.prepare(work)
    runs: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
    for _ in range(args.rounds):
        for name, root in (("a", args.a), ("b", args.b)):
            common.ROOT = root.resolve()  # child_env puts ROOT first on the child's PYTHONPATH
            r = overhead.measure_evalkit(work, runspecs, args.concurrency)
            runs[name].append((r["rps_phase"], r["cpu_s"] / overhead.N_REQUESTS * 1e6))
    for name, root in (("a", args.a), ("b", args.b)):
        rps = [x[0] for x in runs[name]]
        cpu = [x[1] for x in runs[name]]
        print(
            f"{name} ({root}): request phase median {statistics.median(rps):,.0f} req/s "
            f"(rounds {', '.join(f'{x:,.0f}' for x in rps)}); CPU per request median {statistics.median(cpu):,.0f} µs"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

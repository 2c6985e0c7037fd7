"""Run the whole benchmark suite and write BENCHMARKS.md.

    python -m benchmarks                 # everything (about 10 minutes on 2 CPUs), writes BENCHMARKS.md
    python -m benchmarks --only a,b      # some sections; prints, writes only with --out
    python -m benchmarks --json out.json # also keep the raw figures
    python -m benchmarks --peers         # also lm-eval in the (a) rounds (installed into its own venv on first use)
    python -m benchmarks.ab --a /work/main --b . --concurrency 32   # A/B of two checkouts on (a)
    python -m benchmarks.serve_throughput  # evalkit serve vs generate and transformers serve (torch; not in the suite)

Sections: a (overhead and start-up), profile (py-spy of a), b (latency-bound,
with loop lag), c (replica scaling), d (memory, with loop lag), f (audio
requests: 10 s clips, 32 in flight, vs a raw loop of the same bodies), fc (audio
corruptions: client CPU per request with and without them), g (shards:
(f)'s work as 2 `--shard` processes vs 1), s (soak: a
fault mix, SIGTERM and a resume; EVALKIT_SOAK_SAMPLES sets its size), i
(5,000 local images against the same run with text only), v (`evalkit view` on a
run of 1,000,000 records: first page, a filter over 100,000 samples, peak RSS).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import (
    audio_corruptions,
    audio_requests,
    images,
    latency,
    memory,
    overhead,
    peers,
    profile,
    replicas,
    report,
    shards,
    soak,
    viewer,
)
from benchmarks.common import ROOT, machine

SECTIONS = {
    "a": ("overhead", overhead.run),
    "profile": ("profile", profile.run),
    "b": ("latency", latency.run),
    "c": ("replicas", replicas.run),
    "d": ("memory", memory.run),
    "f": ("audio_requests", audio_requests.run),
    "fc": ("audio_corruptions", audio_corruptions.run),
    "g": ("shards", shards.run),
    "s": ("soak", soak.run),
    "i": ("images", images.run),
    "v": ("viewer", viewer.run),
}


def _bytecode_setup() -> str:
    """Let the children use cached bytecode, as an installed evalkit does.

    pip compiles a package's modules at install time; a checkout run with
    PYTHONDONTWRITEBYTECODE (as on some shared machines) compiles every
    evalkit module from source at each start, which is not what users see.
    The cache goes to a private prefix, so nothing is written into the tree.
    """
    if not sys.dont_write_bytecode and not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return "the interpreter's normal __pycache__"
    prefix = memory.cache_dir() / "pycache"
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "evalkit"), str(ROOT / "benchmarks")],
        check=False,
        env=dict(os.environ),
    )
    return (
        f"compiled once into PYTHONPYCACHEPREFIX={prefix} (this environment sets PYTHONDONTWRITEBYTECODE; an "
        "install compiles at install time)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None, help=f"comma-separated sections out of {', '.join(SECTIONS)}")
    parser.add_argument(
        "--out", type=Path, default=None, help="markdown report (default BENCHMARKS.md when running everything)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    parser.add_argument(
        "--results", default=None, help="keep the summary rows as benchmarks/results/NAME (the default report does)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (configs, records, server logs)")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also run lm-eval (installed into its own venv on first use) in the (a) rounds",
    )
    args = parser.parse_args(argv)
    if args.peers:
        os.environ[peers.ENV_FLAG] = "1"
    chosen = list(SECTIONS) if args.only is None else [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    out = args.out if args.out is not None else (ROOT / "BENCHMARKS.md" if args.only is None else None)

    started = time.perf_counter()
    results: dict[str, Any] = {
        "command": "python -m benchmarks"
        + ("" if argv is None and len(sys.argv) == 1 else " " + shlex.join(sys.argv[1:] if argv is None else argv)),
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine(),
        "bytecode": _bytecode_setup(),
        "errors": {},
    }
    work = Path(tempfile.mkdtemp(prefix="evalkit-bench-"))
    print(
        f"evalkit benchmarks: {results['machine']['cpu_count']} CPUs, load {results['machine']['loadavg'][0]:.2f}; "
        f"scratch {work}",
        flush=True,
    )
    try:
        for section in chosen:
            key, fn = SECTIONS[section]
            t0 = time.perf_counter()
            try:
                results[key] = fn(work)
            except Exception as error:
                results["errors"][key] = f"{type(error).__name__}: {error}"
                print(f"  {key}: FAILED: {error}", file=sys.stderr, flush=True)
            print(f"  [{key}: {time.perf_counter() - t0:.0f} s]", flush=True)
    finally:
        if args.keep:
            print(f"scratch kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    results["suite_s"] = time.perf_counter() - started
    results["loadavg_after"] = os.getloadavg()
    for fig, val, target, ok in report.summary_rows(results):
        print(
            f"{'OK  ' if ok else 'MISS' if ok is not None else '    '} {fig}: {val.replace('**', '')} (target {target})"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    if out is not None:
        # the default report (BENCHMARKS.md) keeps this run's rows as a result file, so its summary stays generated
        keep = args.results or (
            f"{results['date'][:16].replace(':', '')}-suite.json" if out == ROOT / "BENCHMARKS.md" else None
        )
        report.write(out, results, keep)
        print(f"wrote {out}")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())

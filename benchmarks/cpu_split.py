"""Client CPU split into what a run costs once and what each request adds: evalkit checkouts vs the raw loop.

(a) and (f) compare whole processes, so evalkit's start-up and end count
against it as much as its requests do. This runs every client over 1 prompt
and over all of them (5,000 text prompts, or (f)'s 512 audio clips), rounds
alternated, a fresh test server each, and prints the median CPU of each
(wait4; with audio, the reaped worker processes too): the 1-prompt run is the
fixed cost, (all - one) / (n - 1) the cost a request adds.

    python -m benchmarks.cpu_split --rounds 4 /work/base .
    python -m benchmarks.cpu_split --audio --rounds 3 /work/base .
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks import audio_requests, common, memory, overhead, raw_loop
from benchmarks.common import evalkit_argv, model_entry, run_child, servers, write_config, write_text_dataset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cpu_split", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="+", type=Path, help="evalkit checkouts (each goes first on PYTHONPATH)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--audio", action="store_true", help="(f)'s 10 s clips instead of (a)'s text prompts")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="evalkit-cpu-split-"))
    if args.audio:
        n, concurrency = audio_requests.N_REQUESTS, audio_requests.CONCURRENCY
        parquet, _ = memory.audio_parquet(n)
        runspecs = work / "runspecs_audio"
        memory.write_runspec(runspecs, parquet)
        bodies = audio_requests._capture_bodies(work, runspecs)
        one = work / "one.bin"
        raw_loop.write_bodies(one, raw_loop.read_bodies(bodies)[:1])
        raw_inputs = {1: (one, "--bodies"), n: (bodies, "--bodies")}
        pair, server_settings = ("bench_audio", "word_error_rate"), {"default_answer": "ok"}
    else:
        n, concurrency = overhead.N_REQUESTS, 32
        runspecs = work / "runspecs"
        raw_inputs = {
            1: (write_text_dataset(runspecs, "bench_one", 1), "--prompts"),
            n: (write_text_dataset(runspecs, "bench_overhead", n), "--prompts"),
        }
        server_settings = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        for size in (1, n):
            data, source = raw_inputs[size]
            raw = overhead.measure_raw(work, data, concurrency, source=source, **server_settings)
            cpu.setdefault(("raw loop", size), []).append(raw["cpu_s"])
            for checkout in args.checkouts:
                common.ROOT = checkout.resolve()  # child_env puts ROOT first on the child's PYTHONPATH
                with servers(1, **server_settings) as (server,):
                    if args.audio:
                        models = [model_entry("audio", server.base_url, concurrency)]
                        config = write_config(work / "c.yaml", [pair], models, runspecs, work / "runs", size)
                    else:
                        name = "bench_one" if size == 1 else "bench_overhead"
                        models = [model_entry("bench", server.base_url, concurrency)]
                        config = write_config(work / "c.yaml", [(name, "exact_match")], models, runspecs, work / "runs")
                    child = run_child(evalkit_argv("run", str(config), "--no-cache", "--quiet"), work).check()
                    workers, _ = audio_requests._reap_orphans({server.pid}, 0.3) if args.audio else (0.0, 0)
                cpu.setdefault((str(checkout), size), []).append(child.cpu_s + workers)
    print(f"client CPU, medians of {args.rounds} alternated rounds ({n} {'clips' if args.audio else 'prompts'}):")
    for who in ["raw loop", *(str(c) for c in args.checkouts)]:
        once, whole = statistics.median(cpu[(who, 1)]), statistics.median(cpu[(who, n)])
        print(
            f"  {who}: 1 request {once:.3f} s, {n} requests {whole:.3f} s = {whole / n * 1e6:,.0f} µs a request; "
            f"each request adds {(whole - once) / (n - 1) * 1e6:,.0f} µs"
        )
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""evalkit's own CPU per request in (a), with the HTTP exchange taken out.

(a) compares evalkit with a raw aiohttp loop that runs the same HTTP code;
what evalkit adds is its own per-request work (prompt, request and key,
submit path, parse, metric, record, progress). This runs ``evalkit run
--no-cache`` in this process on (a)'s prompts with the endpoint's attempt
replaced by an instant, already-encoded chat answer (the request body is still
built and encoded, the answer still decoded and parsed), once over 1 prompt and
once over N, and prints (CPU at N - CPU at 1) / (N - 1): start-up and the
report's fixed costs cancel out. A tool for profiling, not a timed figure of
the suite (the HTTP stack it leaves out is most of a real request's cost).

    python -m benchmarks.own_cost [--rounds 3] [--profile out.prof]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import overhead
from benchmarks.common import model_entry, write_config, write_text_dataset

_ANSWER = {
    "id": "bench",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}


def _instant_attempts() -> None:
    """Replace the HTTP exchange with an instant answer; everything around it runs as in a real run."""
    from evalkit.clients import endpoint
    from evalkit.clients.protocol import WIRE_FORMATS
    from evalkit.util import jsonutil

    body = jsonutil.dumps_bytes(_ANSWER)

    async def attempt(self: Any, request: Any, limit: float) -> Any:
        wire = WIRE_FORMATS[request.kind]
        wire.post_arguments(request)  # the body is built and encoded, as for a real request
        payload = endpoint._decode(body)
        text, usage = wire.parse(payload)
        await asyncio.sleep(0)  # one trip through the loop, as an answer would take
        return endpoint.Attempt(text=text, raw=payload, usage=usage, status=200)

    endpoint.EndpointPool._attempt = attempt  # type: ignore[method-assign]


def _run(config: Path, profile: cProfile.Profile | None = None) -> float:
    from evalkit.cli.main import main

    started = time.process_time()
    if profile is not None:
        profile.enable()
    try:
        main(["run", str(config), "--no-cache", "--quiet"])
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
    finally:
        if profile is not None:
            profile.disable()
    return time.process_time() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.own_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="write a cProfile of one N-prompt run here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="evalkit-own-cost-"))
    runspecs, _ = overhead.prepare(work)
    write_text_dataset(runspecs, "bench_one", 1)
    url = "http://127.0.0.1:9/v1"  # never contacted
    configs = {
        name: write_config(
            work / f"{name}.yaml", [(name, "exact_match")], [model_entry("bench", url, 32)], runspecs, work / "runs"
        )
        for name in ("bench_one", "bench_overhead")
    }
    _instant_attempts()
    _run(configs["bench_one"])  # imports and first-use costs, outside the figures
    per_request = []
    for _ in range(args.rounds):
        one = _run(configs["bench_one"])
        many = _run(configs["bench_overhead"])
        per_request.append((many - one) / (overhead.N_REQUESTS - 1) * 1e6)
    print(
        f"evalkit own CPU per request (HTTP taken out): median {statistics.median(per_request):.1f} µs "
        f"(rounds {', '.join(f'{x:.1f}' for x in per_request)})"
    )
    if args.profile is not None:
        profile = cProfile.Profile()
        _run(configs["bench_overhead"], profile)
        profile.dump_stats(str(args.profile))
        print(f"profile of one {overhead.N_REQUESTS}-prompt run: {args.profile}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The yardstick for (a): the least a Python client can do to send N chat requests.

One ``aiohttp.ClientSession``, one semaphore, one task per request, the answer
parsed out of the JSON and nothing else (no records, no metric, no retries).
It runs in its own process, like evalkit, on the same event loop evalkit
would pick (uvloop when installed), and prints one JSON line with its timings.

    python -m benchmarks.raw_loop --url http://127.0.0.1:PORT/v1 --prompts prompts.jsonl --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import aiohttp


async def _drive(url: str, model: str, prompts: list[str], concurrency: int) -> dict[str, Any]:
    sem = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    ok = 0
    first_sent: float | None = None
    last_done = 0.0
    cpu_started = time.process_time()
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(prompt: str) -> None:
            nonlocal ok, first_sent, last_done
            async with sem:
                if first_sent is None:
                    first_sent = time.time()
                body = {"model": model, "messages": [{"role": "user", "content": prompt}], "temperature": 0.0}
                async with session.post(url + "/chat/completions", json=body) as response:
                    payload = await response.json()
                if payload["choices"][0]["message"]["content"] is not None:
                    ok += 1
                last_done = time.time()

        await asyncio.gather(*(one(p) for p in prompts))
    assert first_sent is not None
    cpu = time.process_time() - cpu_started
    return {
        "ok": ok,
        "first_sent": first_sent,
        "last_done": last_done,
        "request_phase_s": last_done - first_sent,
        "drive_cpu_s": cpu,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.raw_loop", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="base URL ending in /v1")
    parser.add_argument("--prompts", required=True, help="jsonl file with a `question` per line")
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--model", default="test-model")
    args = parser.parse_args(argv)
    with open(args.prompts, encoding="utf-8") as handle:
        prompts = [json.loads(line)["question"] for line in handle if line.strip()]
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(_drive(args.url, args.model, prompts, args.concurrency))
        result["loop"] = "asyncio"
    else:
        result = uvloop.run(_drive(args.url, args.model, prompts, args.concurrency))
        result["loop"] = "uvloop"
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if result["ok"] == len(prompts) else 1


if __name__ == "__main__":
    raise SystemExit(main())

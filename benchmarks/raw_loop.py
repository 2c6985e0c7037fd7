"""The yardstick for (a): the least a Python client can do to send N chat requests.

One ``aiohttp.ClientSession``, one semaphore, one task per request, the answer
parsed out of the JSON and nothing else (no records, no metric, no retries).
It runs in its own process, like evalkit, on the same event loop evalkit
would pick (uvloop when installed), and prints one JSON line with its timings.

With ``--bodies`` it sends request bodies made beforehand, byte for byte
(the audio benchmark's: evalkit's own chat bodies with base64 WAV, captured
from an evalkit run), so no encoding is counted against it.

    python -m benchmarks.raw_loop --url http://127.0.0.1:PORT/v1 --prompts prompts.jsonl --concurrency 32
    python -m benchmarks.raw_loop --url http://127.0.0.1:PORT/v1 --bodies bodies.bin --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp


def write_bodies(path: Path, bodies: list[bytes]) -> None:
    """Bodies as one file: each a 4-byte little-endian length, then the bytes."""
    with path.open("wb") as handle:
        for body in bodies:
            handle.write(struct.pack("<I", len(body)))
            handle.write(body)


def read_bodies(path: Path) -> list[bytes]:
    data = Path(path).read_bytes()
    bodies, at = [], 0
    while at < len(data):
        (size,) = struct.unpack_from("<I", data, at)
        bodies.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return bodies


async def _drive(url: str, model: str, prompts: list[str] | list[bytes], concurrency: int) -> dict[str, Any]:
    sem = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    ok = 0
    first_sent: float | None = None
    last_done = 0.0
    cpu_started = time.process_time()
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(prompt: str | bytes) -> None:
            nonlocal ok, first_sent, last_done
            async with sem:
                if first_sent is None:
                    first_sent = time.time()
                if isinstance(prompt, bytes):  # a body made beforehand: sent as it is
                    post = session.post(
                        url + "/chat/completions", data=prompt, headers={"Content-Type": "application/json"}
                    )
                else:
                    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "temperature": 0.0}
                    post = session.post(url + "/chat/completions", json=body)
                async with post as response:
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
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompts", help="jsonl file with a `question` per line")
    source.add_argument("--bodies", type=Path, help="request bodies made beforehand (see write_bodies)")
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--model", default="test-model")
    args = parser.parse_args(argv)
    prompts: list[str] | list[bytes]
    if args.bodies is not None:
        prompts = read_bodies(args.bodies)
    else:
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

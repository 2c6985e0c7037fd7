"""A batching chat server with no model: the ceiling any server reaches with the serve benchmark's client.

    python -m benchmarks.ideal_server --port PORT --max-batch 8

It answers ``/v1/chat/completions`` in batches exactly as a perfect batching
server would: a batch starts as soon as ``max_batch`` requests wait and the
"model" is free, and the model's work is ``asyncio.sleep`` of the seconds a
batch took ``generate`` in one process (set per measurement by ``POST
/_batch_seconds``). It reads the body and writes a small JSON answer, nothing
else: no templating, no tokenizing, no second process, and a model that
costs no CPU, so the client and the HTTP stack have both cores while it
"generates". What it measures at as many requests in flight as the batch
holds is the cost of the HTTP round trip between batches alone: with
``g`` seconds of ``generate`` a batch and ``r`` of round trip, no server can
exceed ``g / (g + r)`` of batched ``generate`` there, and this one comes
closest. Its answers are not the model's; the benchmark leaves them out of
its equality check.

Only full batches run (the benchmark uses it at in-flight counts that are
multiples of ``max_batch``); a partial batch waits ``--window-ms`` for more.
Its few lines of batching are its own, not evalkit's ``DynamicBatcher``, so
the ceiling does not inherit the costs it is there to expose.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from typing import Any

from aiohttp import web


class _Model:
    """One batch at a time, each taking ``batch_seconds``; requests join the next batch."""

    def __init__(self, max_batch: int, window: float) -> None:
        self.max_batch = max_batch
        self.window = window
        self.batch_seconds = 0.0
        self.batch_sizes: Counter[int] = Counter()
        self._waiting: list[asyncio.Future[None]] = []
        self._arrived = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def answer(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop())
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(done)
        self._arrived.set()
        await done

    async def _loop(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            if len(self._waiting) < self.max_batch:
                deadline = time.monotonic() + self.window
                while len(self._waiting) < self.max_batch and (left := deadline - time.monotonic()) > 0:
                    try:
                        await asyncio.wait_for(self._arrived.wait(), left)
                    except asyncio.TimeoutError:  # not the builtin TimeoutError on Python 3.10
                        break
                    self._arrived.clear()
            batch, self._waiting = self._waiting[: self.max_batch], self._waiting[self.max_batch :]
            if not batch:
                continue
            self.batch_sizes[len(batch)] += 1
            await asyncio.sleep(self.batch_seconds)
            for done in batch:
                done.set_result(None)
            if self._waiting:
                self._arrived.set()


def make_app(max_batch: int, window: float) -> web.Application:
    model = _Model(max_batch, window)

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        await model.answer()
        tokens = int(body.get("max_tokens") or 16)
        payload: dict[str, Any] = {
            "id": "ideal",
            "object": "chat.completion",
            "model": body.get("model", "ideal"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ideal"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": tokens, "total_tokens": tokens},
        }
        return web.json_response(payload)

    async def batch_seconds(request: web.Request) -> web.Response:
        model.batch_seconds = float((await request.json())["seconds"])
        return web.json_response({"seconds": model.batch_seconds})

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response({"batch_sizes": model.batch_sizes, "batch_seconds": model.batch_seconds})

    app = web.Application(client_max_size=256 * 1024 * 1024)  # audio requests carry whole clips
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/_batch_seconds", batch_seconds)
    app.router.add_get("/health", health)
    app.router.add_get("/_stats", stats)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ideal_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--window-ms", type=float, default=5.0, help="how long a partial batch waits (default 5)")
    args = parser.parse_args(argv)
    web.run_app(make_app(args.max_batch, args.window_ms / 1000), host="127.0.0.1", port=args.port, print=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""evalkit serve's per-request work on the event loop (issue 22): the same answers and headers, less loop work.

Response bodies are serialized once to bytes; a request's own preparation is
waited for on the preparation thread, not through an asyncio future.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from evalkit.serve.app import json_response
from evalkit.serve.batcher import BatchStats, DynamicBatcher


def test_json_response_is_the_same_json_with_the_same_headers() -> None:
    body = {"id": "chatcmpl-1", "choices": [{"message": {"content": "héllo \u2014 \U0001f600"}}], "usage": None}
    response = json_response(body, status=201, headers={"Retry-After": "1"})
    assert response.status == 201
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    assert response.headers["Retry-After"] == "1"
    assert isinstance(response.body, bytes)
    assert json.loads(response.body) == body


def test_json_response_writes_what_orjson_refuses_as_json_dumps_did() -> None:
    body = {"text": "half a pair: \ud800", "n": 2**70, 3: "int key"}
    response = json_response(body)
    assert isinstance(response.body, bytes)
    assert response.body == json.dumps(body).encode()


def test_batch_preparation_waits_for_its_requests_own_preparation_off_the_loop() -> None:
    """Each request is prepared on its own thread as it arrives; the batch's ``prepare`` (on the preparation
    thread) starts only once its requests' preparation ended, and a request whose own preparation failed is
    still answered (the batch's ``prepare`` redoes it)."""
    events: list[tuple[str, Any, str, float]] = []
    lock = threading.Lock()

    def note(stage: str, what: Any) -> None:
        with lock:
            events.append((stage, what, threading.current_thread().name, time.monotonic()))

    def prepare_item(item: int) -> None:
        time.sleep(0.02)  # slow enough that the batch is taken before the last items are ready
        note("item", item)
        if item == 3:
            raise ValueError("cannot prepare 3 alone")

    def prepare(items: list[int]) -> list[int]:
        note("prepare", list(items))
        return list(items)

    def generate(prepared: list[int]) -> list[int]:
        return [x * 10 for x in prepared]

    def finish(items: list[int], outputs: list[int]) -> list[int]:
        return outputs

    async def go() -> list[int]:
        with (
            ThreadPoolExecutor(1, thread_name_prefix="model") as model,
            ThreadPoolExecutor(1, thread_name_prefix="prep") as prep,
            ThreadPoolExecutor(1, thread_name_prefix="item") as item,
        ):
            batcher: DynamicBatcher[int, int] = DynamicBatcher(
                generate,
                executor=model,
                prepare=prepare,
                finish=finish,
                prepare_executor=prep,
                prepare_item=prepare_item,
                prepare_item_executor=item,
                max_batch_size=4,
                batch_wait_s=0.0,
                stats=BatchStats(),
            )
            batcher.start()
            results = await asyncio.gather(*(batcher.submit(i) for i in range(8)))
            await batcher.close()
            return list(results)

    assert asyncio.run(go()) == [i * 10 for i in range(8)]
    items = {what: (thread, at) for stage, what, thread, at in events if stage == "item"}
    batches = [(what, thread, at) for stage, what, thread, at in events if stage == "prepare"]
    assert sorted(items) == list(range(8)) and all(thread == "item_0" for thread, _ in items.values())
    assert sorted(x for what, _, _ in batches for x in what) == list(range(8))
    for what, thread, at in batches:
        assert thread == "prep_0"
        assert all(items[x][1] <= at for x in what), events  # every request of the batch was prepared first


@pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("torch", "transformers", "tokenizers")),
    reason="needs torch, transformers and tokenizers",
)
def test_finish_stage_cuts_each_answer_at_its_end_and_its_max_tokens(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The finish stage works on plain lists now: an answer ends at its first end-of-sequence id (counted), a
    shorter max_tokens cuts it, and prompt tokens leave out the batch's left padding."""
    import torch

    from evalkit.serve.backends.base import ChatInput, GenerationParams
    from evalkit.serve.backends.transformers_backend import TransformersBackend
    from evalkit.testing.tiny_model import build_tiny_llama

    backend = TransformersBackend(build_tiny_llama(tmp_path_factory.getbasetemp() / "tiny-llama-seed0", seed=0))
    try:
        chats = [
            ChatInput([{"role": "user", "content": "Hello there"}], GenerationParams(max_tokens=8)),
            ChatInput([{"role": "user", "content": "A longer prompt, padded less."}], GenerationParams(max_tokens=2)),
            ChatInput([{"role": "user", "content": "x"}], GenerationParams(max_tokens=8)),
        ]
        prepared = backend.prepare_chat(chats)
        (chunk,) = prepared.chunks
        eos, pad = backend.tokenizer.eos_token_id, backend.tokenizer.pad_token_id
        answers = [[40, 41, eos, pad, pad], [42, 43, 44, 45, 46], [47, 48, 49, 50, eos]]
        chunk.output = torch.cat([chunk.encoded["input_ids"], torch.tensor(answers)], dim=1)
        got = backend.finish_chat(prepared)
        decode = backend.tokenizer.decode
    finally:
        backend.close()
    expected_ids = [[40, 41, eos], [42, 43], [47, 48, 49, 50, eos]]
    assert [str(g) for g in got] == [
        decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False) for ids in expected_ids
    ]
    assert [g.completion_tokens for g in got] == [3, 2, 5]
    assert [g.prompt_tokens for g in got] == [int(m.sum()) for m in chunk.encoded["attention_mask"]]
    assert len({g.prompt_tokens for g in got}) == 3  # three prompt lengths: the padding is not counted

"""A real vision-language model served locally: a tiny Idefics3 on evalkit serve and on vLLM's CPU build.

Both servers are started by evalkit's own ``launch:`` code (the path ``evalkit
run`` takes: vLLM with ``--limit-mm-per-prompt`` for images, ``evalkit serve
--backend transformers``). Requests are OpenAI chat bodies with ``image_url``
parts holding ``data:image/<fmt>;base64`` URIs, images before the question, sent
all at once so evalkit serve batches them. The witness is transformers'
``generate`` run in this process on the same decoded image and the same
rendered prompt: every answer of both servers must equal it, and the answers
to one question must differ from image to image (the pixels reach the model).

Slow (vLLM starts in 30-110 s here); marked ``vllm``; needs
``bash .ci/install_vllm.sh``.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import vllm_group_marks

pytestmark = vllm_group_marks()

from evalkit.testing.tiny_vlm import build_tiny_idefics3  # noqa: E402

START_TIMEOUT = float(os.environ.get("EVALKIT_VLLM_START_TIMEOUT", "300"))
MAX_TOKENS = 10
MODEL_ID = "tiny-vlm"
QUESTIONS = ["What is in the picture?", "Which colour is the largest area?", "Describe the image in one line."]


def _images() -> list[tuple[str, bytes]]:
    """(format, encoded bytes): noise, gradients and flat colours, PNG and JPEG, several sizes."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    arrays = [
        rng.integers(0, 256, (48, 64, 3), dtype=np.uint8),
        rng.integers(0, 256, (120, 90, 3), dtype=np.uint8),
        np.broadcast_to(np.linspace(0, 255, 200, dtype=np.uint8)[None, :, None], (100, 200, 3)).copy(),
        np.full((64, 64, 3), (220, 30, 30), dtype=np.uint8),
        np.full((33, 77, 3), (20, 40, 230), dtype=np.uint8),
        rng.integers(0, 256, (300, 200, 3), dtype=np.uint8),
    ]
    images = []
    for index, array in enumerate(arrays):
        fmt = "png" if index % 2 == 0 else "jpeg"
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format=fmt.upper())
        images.append((fmt, buffer.getvalue()))
    return images


def _image_part(fmt: str, data: bytes) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:image/{fmt};base64,{base64.b64encode(data).decode()}"}}


def _requests() -> list[list[dict[str, Any]]]:
    """Message lists: each image with each question, two images in one turn, and text only."""
    images = _images()
    conversations = []
    for fmt, data in images:
        for question in QUESTIONS[:2]:
            conversations.append(
                [{"role": "user", "content": [_image_part(fmt, data), {"type": "text", "text": question}]}]
            )
    conversations.append(
        [
            {
                "role": "user",
                "content": [_image_part(*images[0]), _image_part(*images[3]), {"type": "text", "text": QUESTIONS[2]}],
            }
        ]
    )
    conversations.append([{"role": "user", "content": [{"type": "text", "text": QUESTIONS[0]}]}])
    conversations.append([{"role": "user", "content": QUESTIONS[1]}])
    return conversations


class Reference:
    """transformers' processor and ``generate`` in this process, one request at a time, greedy."""

    def __init__(self, model_dir: Path) -> None:
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.processor = AutoProcessor.from_pretrained(model_dir)
        self.model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32).eval()

    def answer(self, conversation: list[dict[str, Any]]) -> str:
        import torch
        from PIL import Image

        messages, images = [], []
        for message in conversation:
            content = message["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            parts = []
            for part in content:
                if part["type"] == "image_url":
                    data = base64.b64decode(part["image_url"]["url"].split(";base64,", 1)[1])
                    images.append(Image.open(io.BytesIO(data)).convert("RGB"))
                    parts.append({"type": "image"})
                else:
                    parts.append(part)
            messages.append({"role": message["role"], "content": parts})
        text = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        kwargs: dict[str, Any] = {"text": [text], "return_tensors": "pt"}
        if images:
            kwargs["images"] = [images]
        inputs = self.processor(**kwargs)
        with torch.no_grad():
            out = self.model.generate(**inputs, do_sample=False, max_new_tokens=MAX_TOKENS)
        return self.processor.batch_decode(out[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)[0]


async def _post(session: Any, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with session.post(url + "/chat/completions", json=body) as response:
        return response.status, await response.json(content_type=None)


async def _ask_all(url: str, conversations: list[list[dict[str, Any]]]) -> list[str]:
    """Every conversation at once (so evalkit serve batches them); the answers in order."""
    import aiohttp

    body = {"model": MODEL_ID, "temperature": 0, "max_tokens": MAX_TOKENS}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        replies = await asyncio.gather(*(_post(session, url, {**body, "messages": c}) for c in conversations))
    for status, reply in replies:
        assert status == 200, reply
    return [reply["choices"][0]["message"]["content"] for _, reply in replies]


async def _stats(url: str) -> dict[str, Any]:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(url.removesuffix("/v1") + "/_stats") as response:
        result: dict[str, Any] = await response.json()
        return result


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_idefics3(tmp_path_factory.mktemp("models") / "tiny-idefics3")


def _launch_entries(tiny_vlm: Path) -> dict[str, dict[str, Any]]:
    """The config ``models`` entries of both servers: vLLM and evalkit serve, started by evalkit's launch code."""
    return {
        "vllm": {
            "name": "vlm-vllm",
            "inference_type": "vllm",
            "model": MODEL_ID,
            "launch": {
                "backend": "vllm",
                "model_path": str(tiny_vlm),
                "args": [
                    "--max-model-len",
                    "512",
                    "--dtype",
                    "float32",
                    "--enforce-eager",
                    "--limit-mm-per-prompt",
                    '{"image": 2}',
                ],
                "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
                "startup_timeout": START_TIMEOUT,
            },
        },
        "serve": {
            "name": "vlm-evalkit-serve",
            "inference_type": "local",
            "model": MODEL_ID,
            "launch": {
                "backend": "transformers",
                "model_path": str(tiny_vlm),
                "args": ["--dtype", "float32", "--max-batch-size", "4"],
                "env": {"HF_HUB_OFFLINE": "1"},
                "startup_timeout": START_TIMEOUT,
            },
        },
    }


@pytest.fixture(scope="module")
def reference(tiny_vlm: Path) -> Reference:
    return Reference(tiny_vlm)


def _image_set(root: Path) -> list[dict[str, Any]]:
    """The module's images as files (PNG and JPEG, five sizes), one question each, and one two-image row."""
    rows = []
    names = []
    for index, (fmt, data) in enumerate(_images()):
        name = f"images/img{index}.{'jpg' if fmt == 'jpeg' else fmt}"
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
        names.append(name)
        rows.append({"id": f"s{index}", "image": name, "question": QUESTIONS[index % 2]})
    rows.append({"id": "two", "image": [names[0], names[3]], "question": QUESTIONS[2]})
    return rows


def _conversation(root: Path, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat request evalkit sends for ``row``: its images (the files' bytes, as they are), then the question."""
    files = row["image"] if isinstance(row["image"], list) else [row["image"]]
    parts = [_image_part("jpeg" if f.endswith(".jpg") else "png", (root / f).read_bytes()) for f in files]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": row["question"]}]}]


def test_evalkit_run_launches_both_servers_and_its_answers_equal_transformers_generate(
    tiny_vlm: Path, reference: Reference, tmp_path: Path
) -> None:
    """One ``evalkit run`` over an image_column runspec starts vLLM and evalkit serve itself (``launch:``).

    Placed before the tests that use the module's ``servers`` so two vLLM servers never run at once. The
    references are ``generate``'s answers, written as the targets, so exact match is 1.0 only if every answer
    of both models equals transformers'.
    """
    import json
    import subprocess
    import sys

    import yaml
    from helpers import ROOT

    rows = _image_set(tmp_path)
    answers = {row["id"]: reference.answer(_conversation(tmp_path, row)) for row in rows}
    assert all(answers.values()) and len(set(answers.values())) > 1, answers
    with (tmp_path / "vqa.jsonl").open("w") as handle:
        for row in rows:
            handle.write(json.dumps({**row, "answer": answers[row["id"]]}) + "\n")
    specs = tmp_path / "runspecs" / "vision"
    specs.mkdir(parents=True)
    entry = {
        "path": "../../vqa.jsonl",
        "language": "en",
        "modality": "image+text",
        "id_column": "id",
        "image_column": "image",
        "textual_input_column": "question",
        "target_column": "answer",
    }
    (specs / "tiny_vqa.json").write_text(json.dumps({"_task": {"metrics": ["exact_match"]}, "tiny_vqa": entry}))
    models = [
        {"info": {**info, "temperature": 0.0, "max_tokens": MAX_TOKENS, "batch_size": 4, "timeout": 300}}
        for info in _launch_entries(tiny_vlm).values()
    ]
    config = {
        "dataset_metric": [["tiny_vqa", "exact_match"]],
        "models": models,
        "runspecs_dir": str(tmp_path / "runspecs"),
        "output_dir": str(tmp_path / "runs"),
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(tmp_path / "config.yaml"), "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=2 * START_TIMEOUT + 300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    run_dir = next(p.parent for p in (tmp_path / "runs").glob("*/results.json"))
    records = [
        json.loads(line) for path in (run_dir / "records").glob("*.jsonl") for line in path.read_text().splitlines()
    ]
    got = {(r["model"], r["sample_id"]): r["response"] for r in records}
    expected = {(model, key): answer for model in ("vlm-vllm", "vlm-evalkit-serve") for key, answer in answers.items()}
    assert got == expected
    results = json.loads((run_dir / "results.json").read_text())["results"]
    assert {(r["model"], r["score"], r["n"], r["n_failed"]) for r in results} == {
        ("vlm-vllm", 1.0, len(rows), 0),
        ("vlm-evalkit-serve", 1.0, len(rows), 0),
    }
    # both servers evalkit started were stopped when the run ended (their info files say so)
    infos = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/server-logs/*.json")]
    launched = [info for info in infos if isinstance(info, dict) and {"backend", "pid", "stopped"} <= set(info)]
    assert sorted(info["backend"] for info in launched) == ["transformers", "vllm"], infos
    assert all(info["stopped"] for info in launched), launched


@pytest.fixture(scope="module")
def servers(tiny_vlm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """vLLM and evalkit serve on the tiny model, started and stopped by evalkit's launch code."""
    from evalkit.config import ModelInfo
    from evalkit.serve.launch import LaunchedServer, _check_args, _start_ready, stop_servers

    infos = {key: ModelInfo.model_validate(entry) for key, entry in _launch_entries(tiny_vlm).items()}
    log_dir = tmp_path_factory.mktemp("server-logs")
    started: list[LaunchedServer] = []

    async def start_all() -> list[LaunchedServer]:
        for info in infos.values():
            _check_args(info)
        return list(await asyncio.gather(*(_start_ready(info, log_dir, started) for info in infos.values())))

    try:
        ready = asyncio.run(start_all())
        yield {key: server.url for key, server in zip(infos, ready)}
    finally:
        stop_servers(started)


@pytest.fixture(scope="module")
def reference_answers(reference: Reference) -> list[str]:
    return [reference.answer(conversation) for conversation in _requests()]


def test_evalkit_serve_answers_equal_transformers_generate(
    servers: dict[str, str], reference_answers: list[str]
) -> None:
    """Batched image chat in evalkit serve = one-at-a-time ``generate`` on the same image and question."""
    answers = asyncio.run(_ask_all(servers["serve"], _requests()))
    assert answers == reference_answers
    # the answers to one question differ by image: the pixels reached the model
    per_image = reference_answers[: 2 * len(_images()) : 2]
    assert len(set(per_image)) == len(per_image), per_image
    assert all(reference_answers), reference_answers
    # they were answered in batches, images and text-only requests side by side
    stats = asyncio.run(_stats(servers["serve"]))
    assert stats["max_batch_size_seen"] > 1, stats


def test_vllm_answers_equal_transformers_generate(servers: dict[str, str], reference_answers: list[str]) -> None:
    """The same model on vLLM's CPU build, launched as ``evalkit run`` launches it, answers the same."""
    answers = asyncio.run(_ask_all(servers["vllm"], _requests()))
    assert answers == reference_answers


def _truncated_png() -> bytes:
    return _images()[0][1][:200]


@pytest.mark.parametrize(
    ("url", "status", "expected"),
    [
        ("https://example.com/cat.png", 400, "https URLs are not fetched"),
        ("data:image/png;base64,!!!not base64!!!", 400, "not valid base64"),
        ("data:image/png;base64," + base64.b64encode(b"plain text, not a picture").decode(), 400, "not an image"),
        ("data:image/png;base64," + base64.b64encode(_truncated_png()).decode(), 400, "cannot be decoded"),
        ("data:audio/wav;base64,UklGRg==", 400, "unsupported media type 'audio/wav'"),
    ],
)
def test_evalkit_serve_refuses_bad_images_with_their_reason(
    servers: dict[str, str], url: str, status: int, expected: str
) -> None:
    """A bad image is the client's error (400 naming the part and why), not a server error; the server goes on."""
    import aiohttp

    async def ask() -> tuple[tuple[int, dict[str, Any]], tuple[int, dict[str, Any]]]:
        bad = [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "What?"}],
            }
        ]
        async with aiohttp.ClientSession() as session:
            base = {"model": MODEL_ID, "temperature": 0, "max_tokens": 3}
            return (
                await _post(session, servers["serve"], {**base, "messages": bad}),
                await _post(session, servers["serve"], {**base, "messages": _requests()[0]}),
            )

    (code, reply), (good_code, _) = asyncio.run(ask())
    assert code == status, reply
    message = reply["error"]["message"]
    assert expected in message and "messages[0].content[0].image_url.url" in message, message
    assert reply["error"]["code"] == "invalid_image"
    assert good_code == 200


def test_a_text_only_model_refuses_an_image_with_its_reason(tmp_path: Path) -> None:
    """The tiny Llama on the transformers backend: an image is the client's error, found before any batch."""
    from PIL import Image

    from evalkit.serve.backends.base import ChatInput, InputError
    from evalkit.serve.backends.transformers_backend import KIND_CAUSAL_LM, TransformersBackend
    from evalkit.testing.tiny_model import build_tiny_llama

    backend = TransformersBackend(build_tiny_llama(tmp_path / "tiny-llama"), model_id="tiny-llama", dtype="float32")
    try:
        assert backend.kind == KIND_CAUSAL_LM
        image = {"type": "image", "image": Image.new("RGB", (8, 8))}
        with pytest.raises(InputError, match="'tiny-llama' does not take images"):
            backend.check_chat(ChatInput([{"role": "user", "content": [image, {"type": "text", "text": "Hi"}]}]))
        backend.check_chat(ChatInput([{"role": "user", "content": "Hi"}]))  # text is fine
    finally:
        backend.close()

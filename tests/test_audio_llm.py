"""A real audio LLM end to end: a tiny Qwen2-Audio on vLLM's CPU build and on evalkit serve.

The path a LALMEval user takes: ``evalkit run`` starts vLLM itself (``launch:``
with ``--limit-mm-per-prompt``), sends clips of the shipped speech set as
``input_audio`` parts, and scores the answers. The witness is transformers'
``generate`` run in this process on exactly what evalkit sent: a loopback
server in the test decodes each request's WAV and messages, renders them with
the model's own processor and chat template, and answers greedily. Every
answer of vLLM and of evalkit serve's transformers backend must equal it: the
audio bytes, the sample rate, the chat template and the prompt reach the model
unchanged on every path.

Slow (vLLM starts in 30-110 s here); marked ``vllm``; needs
``bash .ci/install_vllm.sh``.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import vllm_group_marks

pytestmark = vllm_group_marks("psutil", "accelerate", "librosa")

from evalkit.testing.tiny_audio_llm import build_tiny_qwen2_audio  # noqa: E402
from evalkit.testing.tiny_model import build_tiny_whisper_tied  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = float(os.environ.get("EVALKIT_VLLM_START_TIMEOUT", "300"))
MAX_TOKENS = 12
N_SAMPLES = 5
#: 512, not the 1024 a 30 s clip needs (~795 prompt tokens): the bad-input set's 28 s clip must not fit
VLLM_ARGS = [
    "--max-model-len",
    "512",
    "--dtype",
    "float32",
    "--enforce-eager",
    "--limit-mm-per-prompt",
    '{"audio": 2}',
]


def _decode_wav(wav: bytes) -> Any:
    import soundfile as sf

    array, rate = sf.read(io.BytesIO(wav), dtype="float32")
    assert rate == 16000 and array.ndim == 1, (rate, array.shape)
    return array


class ReferenceServer:
    """transformers behind OpenAI chat and transcription endpoints, in this process.

    It is the reference, not a server under test: greedy, one request at a
    time, on the exact bytes evalkit sent (WAV decoded with soundfile, no
    resampling: evalkit sends 16 kHz). Chat runs the tiny Qwen2-Audio's
    ``generate``; transcription runs the tiny Whisper's forward pass greedily
    from vLLM's decoder prompt (``<|startoftranscript|><|en|><|transcribe|><|notimestamps|>``)
    up to the decoder's context (vLLM's default length for a transcription,
    which carries no token limit): Whisper's own ``generate`` adds logits
    processors of its own (suppressed tokens) that vLLM does not apply.
    """

    def __init__(self, chat_dir: Path, whisper_dir: Path) -> None:
        import torch
        from transformers import (
            AutoProcessor,
            Qwen2AudioForConditionalGeneration,
            WhisperForConditionalGeneration,
            WhisperProcessor,
        )

        torch.manual_seed(0)
        self.processor = AutoProcessor.from_pretrained(chat_dir)
        self.model = Qwen2AudioForConditionalGeneration.from_pretrained(chat_dir, dtype=torch.float32).eval()
        self.whisper_processor = WhisperProcessor.from_pretrained(whisper_dir)
        self.whisper = WhisperForConditionalGeneration.from_pretrained(whisper_dir, dtype=torch.float32).eval()
        self.url = ""
        self.requests: list[dict[str, Any]] = []
        self.transcriptions: list[dict[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._lock = threading.Lock()

    def generate(self, body: dict[str, Any]) -> str:
        import numpy as np
        import torch

        messages: list[dict[str, Any]] = []
        audios: list[np.ndarray] = []
        for message in body["messages"]:
            content = message["content"]
            if isinstance(content, list):
                parts = []
                for part in content:
                    if part["type"] == "input_audio":
                        audios.append(_decode_wav(base64.b64decode(part["input_audio"]["data"])))
                        parts.append({"type": "audio", "audio_url": f"clip-{len(audios)}"})
                    else:
                        parts.append(part)
                content = parts
            messages.append({"role": message["role"], "content": content})
        text = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        kwargs: dict[str, Any] = {"text": [text], "return_tensors": "pt"}
        if audios:
            kwargs.update(audio=audios, sampling_rate=16000)
        inputs = self.processor(**kwargs)
        with self._lock, torch.no_grad():
            out = self.model.generate(**inputs, do_sample=False, max_new_tokens=int(body["max_tokens"]))
        return self.processor.batch_decode(out[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)[0]

    def transcribe(self, wav: bytes, language: str) -> str:
        import torch

        tokenizer = self.whisper_processor.tokenizer
        prompt = ["<|startoftranscript|>", f"<|{language}|>", "<|transcribe|>", "<|notimestamps|>"]
        ids = tokenizer.convert_tokens_to_ids(prompt)
        features = self.whisper_processor.feature_extractor(
            _decode_wav(wav), sampling_rate=16000, return_tensors="pt"
        ).input_features
        eos = self.whisper.generation_config.eos_token_id
        with self._lock, torch.no_grad():
            while len(ids) < self.whisper.config.max_target_positions:
                logits = self.whisper(input_features=features, decoder_input_ids=torch.tensor([ids])).logits
                ids.append(int(logits[0, -1].argmax()))
                if ids[-1] == eos:
                    break
        return tokenizer.decode(ids[len(prompt) :], skip_special_tokens=True)

    def start(self) -> None:
        from aiohttp import web

        async def transcription(request: web.Request) -> web.Response:
            form = await request.post()
            upload = form["file"]
            assert isinstance(upload, web.FileField), upload
            wav = upload.file.read()
            self.transcriptions.append({k: v for k, v in form.items() if k != "file"})
            text = await asyncio.get_running_loop().run_in_executor(None, self.transcribe, wav, str(form["language"]))
            return web.json_response({"text": text})

        async def chat(request: web.Request) -> web.Response:
            body = await request.json()
            self.requests.append(body)
            answer = await asyncio.get_running_loop().run_in_executor(None, self.generate, body)
            return web.json_response(
                {
                    "id": f"ref-{len(self.requests)}",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
                    ],
                }
            )

        async def setup() -> int:
            app = web.Application(client_max_size=64 * 2**20)
            app.router.add_post("/v1/chat/completions", chat)
            app.router.add_post("/v1/audio/transcriptions", transcription)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            return runner.addresses[0][1]

        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(setup(), self._loop).result(30)
        self.url = f"http://127.0.0.1:{port}/v1"

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture(scope="session")
def tiny_qwen2_audio(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen2_audio(tmp_path_factory.mktemp("models") / "tiny-qwen2-audio")


@pytest.fixture(scope="session")
def tiny_whisper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_whisper_tied(tmp_path_factory.mktemp("models") / "tiny-whisper-tied")


@pytest.fixture(scope="module")
def reference(tiny_qwen2_audio: Path, tiny_whisper: Path) -> Iterator[ReferenceServer]:
    server = ReferenceServer(tiny_qwen2_audio, tiny_whisper)
    server.start()
    yield server
    server.stop()


BAD_INPUT = "bad_clips"


def _bad_input_set(folder: Path) -> Path:
    """Clips a user's data can hold: speech, silence, an empty and a corrupt file, one too long for the model."""
    import numpy as np
    import pyarrow.parquet as pq
    import soundfile as sf

    from evalkit.data.audio.decode import TARGET_SR

    audio = folder / "audio"
    audio.mkdir(parents=True)
    rows = pq.read_table(REPO_ROOT / "evalkit/assets/speech/espeak_en/data.parquet").to_pylist()
    speech = [sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="float32") for row in rows[:12]]
    rate = speech[0][1]
    long_clip = np.concatenate([array for array, _ in speech])[: 28 * rate]
    sf.write(audio / "speech.wav", speech[0][0], rate, subtype="PCM_16")
    sf.write(audio / "silence.wav", np.zeros(3 * TARGET_SR, dtype=np.float32), TARGET_SR, subtype="PCM_16")
    sf.write(audio / "empty.wav", np.zeros(0, dtype=np.float32), TARGET_SR, subtype="PCM_16")
    (audio / "corrupt.wav").write_bytes(b"RIFF\x10\x00\x00\x00WAVEfmt " + bytes(range(40)))
    sf.write(audio / "long.wav", long_clip, rate, subtype="PCM_16")
    with (folder / "clips.jsonl").open("w") as handle:
        for name in ("speech", "silence", "empty", "corrupt", "long"):
            handle.write(json.dumps({"id": name, "audio": f"audio/{name}.wav", "text": "hello"}) + "\n")
    specs = folder / "runspecs" / "speech"
    specs.mkdir(parents=True)
    spec = {
        "_task": {"description": "asr", "metrics": ["word_error_rate"]},
        BAD_INPUT: {
            "path": str(folder / "clips.jsonl"),
            "language": "en",
            "modality": "audio",
            "id_column": "id",
            "audio_column": "audio",
            "target_column": "text",
            "instruction": "Transcribe the audio.",
        },
    }
    (specs / "bad_asr.json").write_text(json.dumps(spec))
    return folder / "runspecs"


def _config(folder: Path, model_dir: Path, whisper_dir: Path, reference_url: str) -> Path:
    import yaml

    greedy = {"temperature": 0, "max_tokens": MAX_TOKENS, "timeout": 300, "model": "tiny-audio"}
    config = {
        "dataset_metric": [
            ["espeak_en_asr", "word_error_rate"],
            ["espeak_en_gender", "exact_match"],
            [BAD_INPUT, "word_error_rate"],
        ],
        "runspecs_dir": str(_bad_input_set(folder / "bad")),
        # the bad clips fail on purpose; the espeak pairs are checked for no failure below
        "max_failure_rate": 1.0,
        "models": [
            {
                "info": {
                    "name": "audio-vllm",
                    "inference_type": "vllm",
                    "batch_size": 4,
                    **greedy,
                    "launch": {
                        "backend": "vllm",
                        "model_path": str(model_dir),
                        "args": VLLM_ARGS,
                        "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
                        "startup_timeout": START_TIMEOUT + 300,
                    },
                }
            },
            {
                "info": {
                    "name": "audio-evalkit-serve",
                    "inference_type": "local",
                    "batch_size": 4,
                    **greedy,
                    "launch": {
                        "backend": "transformers",
                        "model_path": str(model_dir),
                        "args": ["--dtype", "float32", "--max-batch-size", "4"],
                        "env": {"HF_HUB_OFFLINE": "1"},
                    },
                }
            },
            {
                "info": {
                    "name": "audio-transformers-serve",
                    "inference_type": "vllm",
                    "batch_size": 4,
                    **greedy,
                    "launch": {
                        "backend": "transformers-serve",
                        "model_path": str(model_dir),
                        "args": ["--device", "cpu", "--dtype", "float32"],
                        "env": {"HF_HUB_OFFLINE": "1"},
                    },
                }
            },
            # one request at a time: the reference is slow only in wall time, never in agreement
            {"info": {"name": "audio-reference", "inference_type": "vllm", "url": reference_url, **greedy}},
            # Whisper through vLLM's own /v1/audio/transcriptions
            {
                "info": {
                    "name": "whisper-vllm",
                    "inference_type": "transcription",
                    "model": "tiny-whisper",
                    "batch_size": 4,
                    "temperature": 0,
                    "timeout": 300,
                    "launch": {
                        "backend": "vllm",
                        "model_path": str(whisper_dir),
                        "args": ["--dtype", "float32", "--enforce-eager"],
                        "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
                        "startup_timeout": START_TIMEOUT + 300,
                    },
                }
            },
            {
                "info": {
                    "name": "whisper-reference",
                    "inference_type": "transcription",
                    "model": "tiny-whisper",
                    "url": reference_url,
                    "temperature": 0,
                    "timeout": 300,
                }
            },
        ],
        "filters": {"num_samples": N_SAMPLES},
        "output_dir": str(folder / "runs"),
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _run(config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(config), "--no-cache", "-q"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT + 900,
    )


@pytest.fixture(scope="module")
def launched_run(
    tiny_qwen2_audio: Path, tiny_whisper: Path, reference: ReferenceServer, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    folder = tmp_path_factory.mktemp("audio-llm-run")
    proc = _run(_config(folder, tiny_qwen2_audio, tiny_whisper, reference.url), folder)
    assert proc.returncode == 0, proc.stderr[-6000:]
    (run_dir,) = [p for p in (folder / "runs").iterdir() if (p / "results.json").is_file()]
    return run_dir


def _answers(run_dir: Path) -> dict[str, dict[tuple[str, str], str]]:
    """model -> (dataset, sample id) -> the model's raw answer (espeak sets only)."""
    out: dict[str, dict[tuple[str, str], str]] = {}
    for record in _records(run_dir):
        if record["dataset"] != BAD_INPUT:
            out.setdefault(record["model"], {})[(record["dataset"], record["sample_id"])] = record["response"]
    return out


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted((run_dir / "records").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def test_every_answer_equals_transformers_generate(launched_run: Path, reference: ReferenceServer) -> None:
    """vLLM, evalkit serve and transformers serve answer what transformers generate answers on the same input."""
    results = json.loads((launched_run / "results.json").read_text())
    for row in results["results"]:
        if row["dataset"] != BAD_INPUT:
            assert row["n"] == N_SAMPLES and row["n_failed"] == 0, row
    answers = _answers(launched_run)
    ref = answers["audio-reference"]
    assert len(ref) == 2 * N_SAMPLES
    assert answers["audio-vllm"] == ref
    assert answers["audio-evalkit-serve"] == ref
    assert answers["audio-transformers-serve"] == ref
    # the answers depend on the clip: the audio reached the model
    assert len(set(ref.values())) > N_SAMPLES
    # evalkit sent each clip as one 16 kHz WAV part beside the instruction
    for body in reference.requests:
        parts = body["messages"][-1]["content"]
        kinds = [part["type"] for part in parts]
        assert kinds.count("input_audio") == 1 and "text" in kinds, kinds
        assert parts[kinds.index("input_audio")]["input_audio"]["format"] == "wav"


def test_whisper_on_vllm_transcriptions_equals_transformers(launched_run: Path, reference: ReferenceServer) -> None:
    """``inference_type: transcription`` against vLLM's own endpoint: transcripts equal transformers' greedy ones."""
    answers = _answers(launched_run)
    ref = answers["whisper-reference"]
    assert len(ref) == 2 * N_SAMPLES
    assert answers["whisper-vllm"] == ref
    assert len(set(ref.values())) > 2 and all(ref.values())
    # vLLM needs the language: evalkit sends the dataset's
    assert reference.transcriptions and all(form["language"] == "en" for form in reference.transcriptions)


def test_bad_clips_fail_alone_with_the_clip_and_the_reason(launched_run: Path) -> None:
    """A corrupt or empty file fails before any request; a clip too long for vLLM's context fails with vLLM's reason.

    Each names its sample and why; the other clips of the same set are answered and scored.
    """
    records = {(r["model"], r["sample_id"]): r for r in _records(launched_run) if r["dataset"] == BAD_INPUT}
    for model in ("audio-vllm", "audio-evalkit-serve", "audio-reference", "whisper-vllm", "whisper-reference"):
        for clip in ("speech", "silence"):
            assert records[(model, clip)].get("error") is None, records[(model, clip)]
            assert records[(model, clip)]["score"] is not None
        for clip, why in (("empty", "holds no audio: 0 samples"), ("corrupt", "Malformed 'fmt ' chunk")):
            record = records[(model, clip)]
            assert record["failure"] == "audio" and record["score"] is None and record["attempts"] == 0, record
            assert f"{clip}.wav" in record["error"] and why in record["error"], record
    # the answers to the clips that are fine agree with the reference
    for clip in ("speech", "silence"):
        assert records[("audio-vllm", clip)]["response"] == records[("audio-reference", clip)]["response"]
    # 28 s of speech is ~700 audio tokens: over the launched vLLM's --max-model-len 512, not over evalkit serve's
    too_long = records[("audio-vllm", "long")]
    assert too_long["failure"] == "http_400" and too_long["score"] is None, too_long
    assert "maximum context length (512)" in too_long["error"], too_long
    assert records[("audio-evalkit-serve", "long")]["response"] == records[("audio-reference", "long")]["response"]

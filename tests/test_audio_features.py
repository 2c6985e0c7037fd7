"""Audio on the wire, checked on what a real loopback server received.

The shipped espeak_en speech set (real FLAC speech, three clips longer than
30 s) goes through the real runner. Expected audio is computed here
independently: the clip's FLAC decoded straight to int16 with soundfile, cut
at ``chunk_size`` seconds, written as a WAV and fingerprinted with
``evalkit.testing.audio_fingerprint``; the server logs the fingerprint of
every audio part it received. Nothing here is timed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import signal
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf
from aiohttp import web
from helpers import ROOT, model_entry, processes_mentioning, serve_app, write_config

from evalkit.config import load_config
from evalkit.plan import build_plan
from evalkit.run.runner import RunOptions, RunOutcome, execute
from evalkit.testing import audio_fingerprint, build_app

PARQUET = ROOT / "evalkit" / "assets" / "speech" / "espeak_en" / "data.parquet"
SR = 16000


class _Clip(dict):  # type: ignore[type-arg]
    """A row of the shipped set; ``clip["pcm"]`` is its int16 audio, decoded here (without evalkit) on first use."""

    def __missing__(self, key: str) -> Any:
        if key != "pcm":
            raise KeyError(key)
        pcm, sr = sf.read(io.BytesIO(self["audio"]["bytes"]), dtype="int16")
        assert sr == SR
        self["pcm"] = pcm
        return pcm


@pytest.fixture(scope="module")
def clips() -> dict[str, dict[str, Any]]:
    """id -> row of the shipped set."""
    return {row["id"]: _Clip(row) for row in pq.read_table(PARQUET).to_pylist()}


def wav_fingerprint(pcm: np.ndarray) -> str:
    buffer = io.BytesIO()
    sf.write(buffer, pcm, SR, format="WAV", subtype="PCM_16")
    return audio_fingerprint(buffer.getvalue())


_FINGERPRINTS: dict[tuple[int, int, float], list[str]] = {}


def chunk_fingerprints(pcm: np.ndarray, seconds: float) -> list[str]:
    """Fingerprints of ``pcm`` cut every ``seconds`` (memoised: tests ask again and again)."""
    key = (id(pcm), len(pcm), seconds)
    if key not in _FINGERPRINTS:
        step = int(seconds * SR)
        _FINGERPRINTS[key] = [wav_fingerprint(pcm[i : i + step]) for i in range(0, len(pcm), step)]
    return _FINGERPRINTS[key]


def long_ids(clips: dict[str, dict[str, Any]]) -> list[str]:
    return [cid for cid, row in clips.items() if row["duration"] > 30]


def truncated_runspec(tmp_path: Path, instruction: str) -> Path:
    """A copy of espeak_en_asr that truncates long audio (and asks differently, so no request is shared)."""
    shipped = json.loads((ROOT / "runspecs" / "speech_recognition" / "asr.json").read_text())["espeak_en_asr"]
    entry = {**shipped, "path": str(PARQUET), "long_audio": "truncate", "instruction": instruction}
    folder = tmp_path / "runspecs" / "speech_truncated"
    folder.mkdir(parents=True)
    spec = {
        "_task": {"description": "espeak_en_asr, truncated", "metrics": ["word_error_rate"]},
        "espeak_en_asr_truncated": entry,
    }
    (folder / "asr_truncated.json").write_text(json.dumps(spec))
    return tmp_path / "runspecs"


def run(tmp_path: Path, config: dict[str, Any]) -> tuple[RunOutcome, dict[str, list[dict[str, Any]]]]:
    config.setdefault("output_dir", str(tmp_path / "runs"))
    path = write_config(tmp_path / "config.yaml", config)
    plan = build_plan(load_config(path), source=str(path))
    outcome = asyncio.run(execute(plan, RunOptions(no_cache=True, quiet=True)))
    return outcome, read_records(outcome)


def read_records(outcome: RunOutcome) -> dict[str, list[dict[str, Any]]]:
    records = {}
    for file in sorted((outcome.run_dir / "records").glob("*.jsonl")):
        records[file.stem] = [json.loads(line) for line in file.read_text().splitlines()]
    return records


def audio_rules(clips: dict[str, dict[str, Any]], ids: list[str], seconds: float) -> list[dict[str, str]]:
    """Each chunk answers "<id> partK", so the joined answer shows the order."""
    rules = []
    for cid in ids:
        for k, fp in enumerate(chunk_fingerprints(clips[cid]["pcm"], seconds)):
            rules.append({"audio_fingerprint": fp, "answer": f"{cid} part{k}"})
    return rules


def test_chunked_and_truncated_audio_is_what_the_server_received(tmp_path: Path, make_server, clips) -> None:
    ids = long_ids(clips)
    assert len(ids) == 3
    rules = audio_rules(clips, ids, 10) + audio_rules(clips, ids, 15)
    answer: dict[str, str] = {}  # first rule wins (the last 10 s and 15 s pieces of a 36 s clip are the same audio)
    for rule in rules:
        answer.setdefault(rule["audio_fingerprint"], rule["answer"])
    # a latency range makes chunks of one sample finish out of order
    chat = make_server({"answers": rules, "latency_ms": [0, 40], "seed": 3}, request_log=True)
    asr = make_server({"answers": rules}, request_log=True)
    outcome, records = run(
        tmp_path,
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"], ["espeak_en_asr_truncated", "word_error_rate"]],
            "models": [
                model_entry("chat10", chat.base_url, chunk_size=10),
                model_entry("chat15", chat.base_url, chunk_size=15, inference_type="openai"),
                model_entry("asr10", asr.base_url, chunk_size=10, inference_type="transcription"),
            ],
            "filters": {"length_filter": [30, 60]},
            "runspecs_dir": str(truncated_runspec(tmp_path, "Transcribe the beginning of the audio.")),
        },
    )

    # what the chat server received: one audio part per request, exactly the expected PCM
    received: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for event in chat.log_events("completed"):
        user = event["messages"][-1]
        assert user["role"] == "user" and user["n_audio"] == 1
        mode = "truncate" if user["text"].startswith("Transcribe the beginning") else "chunk"
        received[(event["model"], mode)].update(user["audio_fingerprints"])
    for model, seconds in (("chat10", 10), ("chat15", 15)):
        chunks = Counter(fp for cid in ids for fp in chunk_fingerprints(clips[cid]["pcm"], seconds))
        firsts = Counter(chunk_fingerprints(clips[cid]["pcm"], seconds)[0] for cid in ids)
        assert received[(model, "chunk")] == chunks
        assert received[(model, "truncate")] == firsts
    assert sum(received[("chat10", "chunk")].values()) == sum(int(np.ceil(clips[c]["duration"] / 10)) for c in ids)

    # the transcription endpoint got the same cuts as file uploads
    uploaded = {e["audio_fingerprint"] for e in asr.log_events("completed")}
    assert uploaded == {fp for cid in ids for fp in chunk_fingerprints(clips[cid]["pcm"], 10)}

    # chunk answers joined with one space, in chunk order; truncation asks once
    by_key = {(r["model"], r["sample_id"]): r for r in records["espeak_en_asr__word_error_rate"]}
    truncated = {(r["model"], r["sample_id"]): r for r in records["espeak_en_asr_truncated__word_error_rate"]}
    for cid in ids:
        for model, seconds in (("chat10", 10), ("chat15", 15), ("asr10", 10)):
            fps = chunk_fingerprints(clips[cid]["pcm"], seconds)
            assert by_key[(model, cid)]["response"] == " ".join(answer[fp] for fp in fps)
            assert truncated[(model, cid)]["response"] == answer[fps[0]] == f"{cid} part0"
            assert by_key[(model, cid)]["duration"] == pytest.approx(clips[cid]["duration"], abs=0.01)
    rows = {(r.dataset, r.model): r for r in outcome.rows}
    assert all(row.n == 3 and row.n_failed == 0 for row in rows.values())


def _fingerprints_in(body: dict[str, Any]) -> list[str]:
    found = []
    for message in body.get("messages", []):
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "input_audio":
                found.append(audio_fingerprint(base64.b64decode(part["input_audio"]["data"])))
    return found


def test_a_failing_chunk_fails_the_whole_sample(tmp_path: Path, clips) -> None:
    """The test server fails by seeded draws, not by rule, so a real in-process server refuses one chunk with a 500."""
    ids = long_ids(clips)
    victim, chunk = ids[1], 2
    bad = chunk_fingerprints(clips[victim]["pcm"], 10)[chunk]
    refused: list[str] = []

    @web.middleware
    async def refuse(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.endswith("/chat/completions") and bad in _fingerprints_in(await request.json()):
            refused.append(bad)
            return web.json_response({"error": {"message": "refusing this chunk", "type": "server_error"}}, status=500)
        return await handler(request)

    app = build_app({"answers": audio_rules(clips, ids, 10)})
    app.middlewares.append(refuse)
    path = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
            "models": [model_entry("chat10", "http://placeholder/v1", chunk_size=10)],
            "filters": {"length_filter": [30, 60]},
            "output_dir": str(tmp_path / "runs"),
        },
    )

    async def main() -> RunOutcome:
        runner, root = await serve_app(app)
        url = root + "/v1"
        try:
            plan = build_plan(load_config(path), source=str(path))
            plan.models["chat10"].replicas[0].url = url
            return await execute(plan, RunOptions(no_cache=True, quiet=True))
        finally:
            await runner.cleanup()

    outcome = asyncio.run(main())
    records = {r["sample_id"]: r for r in read_records(outcome)["espeak_en_asr__word_error_rate"]}
    failed = records[victim]
    assert failed["failure"] == "http_500" and failed["response"] is None and failed["score"] is None
    n = len(chunk_fingerprints(clips[victim]["pcm"], 10))
    assert f"chunk {chunk + 1}/{n}" in failed["error"] and "refusing this chunk" in failed["error"]
    assert len(refused) == 2  # the first attempt and the one retry (retry_attempts: 1)
    for cid in ids:
        if cid != victim:
            assert "failure" not in records[cid]
            assert records[cid]["response"].startswith(f"{cid} part0 {cid} part1")
    (row,) = outcome.rows
    assert row.n == 2 and row.n_failed == 1 and row.failure_reasons == {"http_500": 1}


def test_generation_parameters_and_temperature_overrides_reach_the_server(tmp_path: Path, make_server) -> None:
    server = make_server(request_log=True)
    models = [
        model_entry("m-a", server.base_url, max_tokens=77, top_p=0.9, seed=1234),
        model_entry("m-b", server.base_url, temperature=0.2),
    ]
    run(
        tmp_path,
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"], ["espeak_en_gender", "exact_match"]],
            "models": models,
            "filters": {"num_samples": 2},
            "temperature_overrides": [
                {"model": "m-a", "task": "gender_recognition", "temperature": 0.5},
                {"model": "m-a", "temperature": 0.7},
                {"task": "asr", "temperature": 0.3},
            ],
        },
    )
    seen: dict[tuple[str, str], set[tuple[Any, ...]]] = defaultdict(set)
    for event in server.log_events("completed"):
        task = "asr" if event["messages"][-1]["text"].startswith("Transcribe") else "gender"
        p = event["params"]
        seen[(event["model"], task)].add((p["temperature"], p["max_tokens"], p["top_p"], p["seed"]))
    assert dict(seen) == {
        ("m-a", "gender"): {(0.5, 77, 0.9, 1234)},  # model+task
        ("m-a", "asr"): {(0.7, 77, 0.9, 1234)},  # model over task
        ("m-b", "asr"): {(0.3, None, None, None)},  # task over the model's default
        ("m-b", "gender"): {(0.2, None, None, None)},  # the model's default
    }


def test_audio_is_decoded_once_per_sample_not_per_model(tmp_path: Path, make_server, monkeypatch) -> None:
    import evalkit.data.audio.direct as direct
    import evalkit.data.audio.pcm as rb

    calls: Counter[int] = Counter()
    original, original_direct = rb.pcm16_of, direct.direct_wav16

    def counting(audio):  # type: ignore[no-untyped-def]
        calls[len(audio.data or b"")] += 1
        return original(audio)

    def counting_direct(audio):  # type: ignore[no-untyped-def]
        found = original_direct(audio)  # the shipped 16 kHz 16-bit FLAC is read straight to a WAV, not decoded
        if found is not None:
            calls[len(audio.data or b"")] += 1
        return found

    monkeypatch.setattr(rb, "pcm16_of", counting)
    monkeypatch.setattr(direct, "direct_wav16", counting_direct)
    monkeypatch.setenv("EVALKIT_AUDIO_WORKERS", "0")  # threads, so the counter sees every decode
    server = make_server()
    _, records = run(
        tmp_path,
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
            "models": [model_entry(f"m{i}", server.base_url, chunk_size=c) for i, c in enumerate((None, 2, 3))],
            "filters": {"num_samples": 4},
        },
    )
    assert len(records["espeak_en_asr__word_error_rate"]) == 12
    assert sum(calls.values()) == 4 and set(calls.values()) == {1}


class LoopLagSampler:
    """Measures how late the event loop wakes a task that sleeps ``interval`` seconds, over and over.

    Anything that blocks the loop (decoding audio on it, say) shows up as lag;
    the benchmark figure in the report is this sampler's p99 during a run.
    """

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(self.interval)
            self.lags.append(max(0.0, loop.time() - start - self.interval))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._sample())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def quantile(self, q: float) -> float:
        ordered = sorted(self.lags)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def test_loop_lag_sampler_sees_a_blocked_loop() -> None:
    """Not a timing test: a loop blocked for 0.1 s must show at least that much lag."""

    async def main() -> LoopLagSampler:
        sampler = LoopLagSampler()
        sampler.start()
        for _ in range(5):
            await asyncio.sleep(0.01)
        time.sleep(0.1)  # block the loop on purpose
        await asyncio.sleep(0.02)
        await sampler.stop()
        return sampler

    sampler = asyncio.run(main())
    assert len(sampler.lags) >= 3
    assert max(sampler.lags) >= 0.09
    assert sampler.quantile(1.0) == max(sampler.lags)
    assert statistics.median(sampler.lags) <= max(sampler.lags)


def _die_in_a_worker_process() -> str:
    """Kill the audio worker process that runs this; in a thread (the fallback) just answer."""
    import multiprocessing
    import os
    import signal

    if multiprocessing.parent_process() is not None:
        os.kill(os.getpid(), signal.SIGKILL)
    return "thread"


def test_audio_work_runs_in_worker_processes_and_survives_a_dead_worker(monkeypatch) -> None:
    import os

    import evalkit.data.audio.workers as rb

    monkeypatch.setenv("EVALKIT_AUDIO_WORKERS", "2")
    monkeypatch.setattr(rb, "_pool", None)  # a pool of its own, restored (and the shared one kept) afterwards
    monkeypatch.setattr(rb, "_pool_failed", False)

    async def main() -> tuple[int, str, int]:
        worker_pid = await rb.run_audio_job(os.getpid)
        fallback = await rb.run_audio_job(_die_in_a_worker_process)
        after = await rb.run_audio_job(os.getpid)
        return worker_pid, fallback, after

    worker_pid, fallback, after = asyncio.run(main())
    assert worker_pid != os.getpid()  # decoded in another process, not on the loop's interpreter
    assert fallback == "thread" and rb._pool_failed  # the job was retried in a thread
    assert after == os.getpid()  # and later jobs stay in threads


@pytest.mark.skipif(not hasattr(signal, "sigwaitinfo"), reason="tells the sender with sigwaitinfo (Linux)")
def test_an_audio_worker_ends_on_its_owners_sigterm_and_ignores_anyone_elses(monkeypatch) -> None:
    """Python 3.12+ terminates a broken pool's other workers with SIGTERM and joins them: a worker ignoring it hung
    the run. A SIGTERM sent to the whole process group (``kill -TERM -PGID``) must still leave the pool intact."""
    import os
    import subprocess

    import evalkit.data.audio.workers as rb

    monkeypatch.setenv("EVALKIT_AUDIO_WORKERS", "1")
    monkeypatch.setattr(rb, "_pool", None)
    monkeypatch.setattr(rb, "_pool_failed", False)
    worker = asyncio.run(rb.run_audio_job(os.getpid))
    pool = rb._pool
    assert pool is not None and worker != os.getpid()
    try:
        subprocess.run(["kill", "-TERM", str(worker)], check=True)  # sent by another process: ignored
        time.sleep(0.5)
        assert rb._alive(worker) and asyncio.run(rb.run_audio_job(os.getpid)) == worker
        os.kill(worker, signal.SIGTERM)  # sent by the owner (this process), as the pool's clean-up does
        deadline = time.monotonic() + 5
        while rb._alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not rb._alive(worker)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def test_pieces_cover_the_audio_once_and_shapes_share_equal_pieces() -> None:
    from evalkit.data.audio.pcm import PreparedAudio, piece_bounds

    n = 2 * int(36.5 * SR)
    assert piece_bounds(n, 10, "chunk") == [(0, 320000), (320000, 640000), (640000, 960000), (960000, n)]
    assert piece_bounds(n, 10, "truncate") == [(0, 320000)]
    assert piece_bounds(n, None, "chunk") == piece_bounds(n, 40, "chunk") == [(0, n)]
    assert piece_bounds(10, 1e-9, "chunk") == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]  # never an empty step
    short = PreparedAudio({0: bytes(2 * SR)}).build([(None, "chunk"), (30.0, "chunk"), (30.0, "truncate")])
    whole = short.parts(0, None, "chunk")
    assert whole[0] is short.parts(0, 30.0, "chunk")[0] is short.parts(0, 30.0, "truncate")[0]
    assert short.pcm_by_turn == {} and short.seconds == {0: 1.0}
    with pytest.raises(KeyError):
        short.parts(0, 0.5, "chunk")  # not a shape it was built for, and its PCM is gone


def test_unreadable_audio_fails_its_own_sample_only(tmp_path: Path, make_server) -> None:
    import pyarrow as pa

    good = io.BytesIO()
    sf.write(good, np.zeros(SR, dtype=np.int16), SR, format="WAV", subtype="PCM_16")
    rows = [
        {"id": "good", "audio": {"bytes": good.getvalue(), "path": None}, "text": "x"},
        {"id": "empty", "audio": {"bytes": None, "path": None}, "text": "x"},
        {"id": "garbage", "audio": {"bytes": b"this is not audio", "path": None}, "text": "x"},
        {"id": "missing", "audio": {"bytes": None, "path": "nowhere.flac"}, "text": "x"},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "mixed.parquet")
    folder = tmp_path / "runspecs" / "mixed"
    folder.mkdir(parents=True)
    entry = {
        "path": "../../mixed.parquet",
        "language": "en",
        "audio_column": "audio",
        "target_column": "text",
        "id_column": "id",
    }
    (folder / "mixed.json").write_text(
        json.dumps({"_task": {"description": "bad audio", "metrics": ["word_error_rate"]}, "mixed": entry})
    )
    server = make_server(request_log=True, default_answer="x")
    outcome, records = run(
        tmp_path,
        {
            "dataset_metric": [["mixed", "word_error_rate"]],
            "models": [model_entry("m", server.base_url)],
            "runspecs_dir": str(tmp_path / "runspecs"),
        },
    )
    by_id = {r["sample_id"]: r for r in records["mixed__word_error_rate"]}
    assert by_id["good"]["score"] == 0.0 and "failure" not in by_id["good"]
    assert {k: by_id[k]["failure"] for k in ("empty", "garbage", "missing")} == {
        "empty": "audio",
        "garbage": "audio",
        "missing": "audio",
    }
    assert "neither bytes, array nor path" in by_id["empty"]["error"]
    assert "format unknown" in by_id["garbage"]["error"] and "nowhere.flac" in by_id["missing"]["error"]
    assert len(server.log_events("completed")) == 1  # nothing was sent for the unreadable ones
    (row,) = outcome.rows
    assert row.n == 1 and row.n_failed == 3 and row.error is None


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_audio_workers_end_when_evalkit_is_killed(tmp_path: Path, make_server) -> None:
    """kill -9 of evalkit must not leave its audio worker processes (or their forkserver) behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    server = make_server(latency_ms=300)
    workdir = tmp_path / "killed-run-workdir"
    workdir.mkdir()
    config = workdir / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
                "models": [model_entry("m", server.base_url, batch_size=2)],
                "output_dir": str(workdir / "runs"),
            }
        )
    )
    # the shipped FLAC is already 16 kHz mono 16-bit, read in threads: make the run decode it in its workers
    env = {**os.environ, "EVALKIT_AUDIO_WORKERS": "2", "EVALKIT_MEDIA_DIRECT": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not [p for p in processes_mentioning(str(workdir)) if p != proc.pid]:
            time.sleep(0.2)
        workers = [p for p in processes_mentioning(str(workdir)) if p != proc.pid]
        assert workers, "the run never started its audio worker processes"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and processes_mentioning(str(workdir)):
        time.sleep(0.2)
    left = processes_mentioning(str(workdir))
    for pid in left:  # do not leak them into the rest of the suite even when the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"audio worker processes outlived the killed run: {left}"

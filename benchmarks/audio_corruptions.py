"""(fc) what audio corruptions cost the client: CPU per request with and without them, on (f)'s 10 s clips.

Two figures:

- end to end: ``evalkit run`` on ``N_SAMPLES`` of (f)'s clips, clean (N requests) and with
  ``corruptions: CORRUPTIONS`` at level 3 (the clean pair plus one variant per corruption: N x (1 + k)
  requests), alternating rounds, each against a fresh test server. The client's CPU includes its audio
  worker processes (reaped as in (f)). A corrupted request's CPU is (corrupted run - clean run) / (N x k):
  what a variant's request costs beyond the clean pair's.
- per corruption: the CPU time of the corruption step alone (:func:`evalkit.data.audio.corrupt.corrupt_pcm`)
  on one 10 s clip, in this process (``time.process_time``, median of ``REPEATS``), for every corruption:
  where the end-to-end figure's cost comes from, and what the others would add.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks import memory
from benchmarks.audio_requests import ORPHAN_WAIT_S, _reap_orphans, _subreaper
from benchmarks.common import evalkit_argv, model_entry, run_child, servers, write_config

N_SAMPLES = 128
CONCURRENCY = 32
ROUNDS = 3
LEVEL = 3
#: the end-to-end corruptions: the cheapest kind (additive noise) and a codec, the dearest common one
CORRUPTIONS = ("white_noise", "mp3")
REPEATS = 5


def _config(work: Path, runspecs: Path, url: str, corrupted: bool) -> Path:
    path = write_config(
        work / f"audio_corruptions_{'on' if corrupted else 'off'}.yaml",
        [("bench_audio", "word_error_rate")],
        [model_entry("audio", url, CONCURRENCY)],
        runspecs,
        work / "runs",
        num_samples=N_SAMPLES,
    )
    if corrupted:
        import yaml

        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        options = {"corruptions": list(CORRUPTIONS), "corruption_severity": LEVEL}
        config["dataset_metric"] = [["bench_audio", "word_error_rate", options]]
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _measure(work: Path, runspecs: Path, corrupted: bool) -> dict[str, float]:
    with servers(1, default_answer="ok") as (server,):
        config = _config(work, runspecs, server.base_url, corrupted)
        child = run_child(evalkit_argv("run", str(config), "--no-cache", "--quiet"), work, timeout=900).check()
        workers_cpu, _ = _reap_orphans({server.pid}, ORPHAN_WAIT_S)
    return {"main_cpu_s": child.cpu_s, "workers_cpu_s": workers_cpu, "cpu_s": child.cpu_s + workers_cpu}


def _step_cpu(parquet: Path) -> dict[str, float]:
    """Median CPU µs of the corruption step alone on one 10 s clip, per corruption."""
    import pyarrow.parquet as pq

    from evalkit.data.audio.corrupt import AUDIO_CORRUPTIONS, AudioCorruption, Talker
    from evalkit.data.audio.corrupted import corrupted_pcm
    from evalkit.data.sample import Audio

    rows = pq.read_table(parquet, columns=["audio"]).slice(0, 5).to_pylist()
    clips = [Audio(data=row["audio"]["bytes"]) for row in rows]
    talkers = tuple(Talker(str(i), clip) for i, clip in enumerate(clips[1:]))
    out = {}
    for name in AUDIO_CORRUPTIONS:
        corruption = AudioCorruption(name, LEVEL, 1, talkers if name == "babble" else ())
        base = []
        spent = []
        for _ in range(REPEATS):
            start = time.process_time()
            corrupted_pcm(clips[0], AudioCorruption("clipping", 1, 1), 0)  # decoding and a trivial corruption
            base.append(time.process_time() - start)
            start = time.process_time()
            corrupted_pcm(clips[0], corruption, 0)
            spent.append(time.process_time() - start)
        out[name] = statistics.median(spent) * 1e6
        out["_decode_and_clip"] = statistics.median(base) * 1e6
    return out


def run(work: Path) -> dict[str, Any]:
    work = work / "audio_corruptions"
    work.mkdir(parents=True, exist_ok=True)
    parquet, _ = memory.audio_parquet(N_SAMPLES)
    runspecs = work / "runspecs_audio"
    memory.write_runspec(runspecs, parquet)
    subreaper = _subreaper()
    clean: list[dict[str, float]] = []
    corrupted: list[dict[str, float]] = []
    for _ in range(ROUNDS):  # alternated, so a burst of load on the machine hits both alike
        clean.append(_measure(work, runspecs, False))
        corrupted.append(_measure(work, runspecs, True))
    k = len(CORRUPTIONS)
    clean_us = [r["cpu_s"] / N_SAMPLES * 1e6 for r in clean]
    extra_us = [(c["cpu_s"] - r["cpu_s"]) / (N_SAMPLES * k) * 1e6 for r, c in zip(clean, corrupted)]
    steps = _step_cpu(parquet)
    result = {
        "n_samples": N_SAMPLES,
        "concurrency": CONCURRENCY,
        "rounds": ROUNDS,
        "level": LEVEL,
        "corruptions": list(CORRUPTIONS),
        "clip_seconds": memory.SECONDS,
        "subreaper": subreaper,
        "cpu_us_per_request_clean": statistics.median(clean_us),
        "cpu_us_per_request_corrupted": statistics.median(extra_us),
        "runs_clean_us": clean_us,
        "runs_corrupted_us": extra_us,
        "workers_cpu_s_clean": statistics.median(r["workers_cpu_s"] for r in clean),
        "workers_cpu_s_corrupted": statistics.median(r["workers_cpu_s"] for r in corrupted),
        "step_cpu_us": steps,
    }
    print(
        f"  (fc) audio corruptions ({memory.SECONDS} s clips, level {LEVEL}, {', '.join(CORRUPTIONS)}): client CPU "
        f"per request clean {result['cpu_us_per_request_clean']:,.0f} µs, corrupted "
        f"{result['cpu_us_per_request_corrupted']:,.0f} µs (medians of {ROUNDS}); the corruption step alone: "
        + ", ".join(f"{name} {us:,.0f} µs" for name, us in steps.items()),
        flush=True,
    )
    return result

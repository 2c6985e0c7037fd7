"""(d) memory with (e) loop lag: 5,000 vs 20,000 ten-second audio samples streamed from parquet.

The dataset is synthetic and local: 20,000 rows, each a 10 s, 16 kHz mono
FLAC (16-bit) holding a quiet tone whose pitch differs per row for its first
half second, then digital silence. Every row decodes to distinct audio, so no
request is de-duplicated, while the file stays small (FLAC stores silence in
a few bytes per frame). It is written in row groups of 250 rows, so a reader
that streams sees 80 row groups. Client work per sample does not depend on
the content: decode, 160,000 samples of PCM, a 320 KB WAV, 427 KB of base64.

The 5,000-sample run reads the first 5,000 rows of the same file. The server
answers "ok" at once and decodes nothing (no rules, no request log). The
parquet file is cached between runs (generation costs a minute or more).
"""

from __future__ import annotations

import io
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.common import (
    harness_argv,
    mib,
    model_entry,
    run_child,
    servers,
    write_config,
)

N_SMALL = 5000
N_LARGE = 20000
SECONDS = 10
SAMPLE_RATE = 16000
TONE_SECONDS = 0.5
ROW_GROUP = 250
BATCH_SIZE = 32
DATA_VERSION = 1  # bump when the generator changes, so a stale cache is not reused


def cache_dir() -> Path:
    root = os.environ.get("EVALKIT_BENCH_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "evalkit-benchmarks"
    )
    return Path(root)


def _clip(index: int) -> bytes:
    import numpy as np
    import soundfile as sf

    n = SECONDS * SAMPLE_RATE
    tone = int(TONE_SECONDS * SAMPLE_RATE)
    pcm = np.zeros(n, dtype=np.int16)
    freq = 200.0 + (index % 20000) * 0.05  # 200..1200 Hz, distinct per row
    pcm[:tone] = np.rint(300 * np.sin(2 * np.pi * freq * np.arange(tone) / SAMPLE_RATE)).astype(np.int16)
    buffer = io.BytesIO()
    sf.write(buffer, pcm, SAMPLE_RATE, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


def _clips(start: int, stop: int) -> list[bytes]:
    return [_clip(i) for i in range(start, stop)]


def audio_parquet(n: int = N_LARGE) -> tuple[Path, float]:
    """The cached parquet file (generated on first use); returns it and the seconds spent generating."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = cache_dir() / f"tone_flac_{n}_{SECONDS}s_v{DATA_VERSION}.parquet"
    if path.exists():
        return path, 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("audio", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            ("text", pa.string()),
            ("duration", pa.float64()),
        ]
    )
    chunks = [(i, min(n, i + ROW_GROUP)) for i in range(0, n, ROW_GROUP)]
    with (
        pq.ParquetWriter(tmp, schema) as writer,
        ProcessPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool,
    ):
        for (start, stop), clips in zip(chunks, pool.map(_clips, *zip(*chunks))):
            rows = [
                {
                    "id": f"tone-{i}",
                    "audio": {"bytes": clip, "path": f"tone-{i}.flac"},
                    "text": f"tone {i}",
                    "duration": float(SECONDS),
                }
                for i, clip in zip(range(start, stop), clips)
            ]
            writer.write_table(pa.Table.from_pylist(rows, schema=schema), row_group_size=ROW_GROUP)
    os.replace(tmp, path)
    return path, time.perf_counter() - started


def write_runspec(runspecs: Path, parquet: Path) -> None:
    folder = runspecs / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "_task": {"description": "synthetic 10 s FLAC tones for the memory benchmark", "metrics": ["word_error_rate"]},
        "bench_audio": {
            "path": str(parquet),
            "language": "en",
            "modality": "audio",
            "id_column": "id",
            "audio_column": "audio",
            "target_column": "text",
            "duration_column": "duration",
            "instruction": "Transcribe the audio.",
        },
    }
    (folder / "bench_audio.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")


def _measure(work: Path, runspecs: Path, url: str, n: int) -> dict[str, Any]:
    config = write_config(
        work / f"memory_{n}.yaml",
        [("bench_audio", "word_error_rate")],
        [model_entry("audio", url, BATCH_SIZE)],
        runspecs,
        work / "runs",
        num_samples=n,
    )
    child = run_child(harness_argv(config), work, timeout=900).check()
    probe = child.json()
    if probe["requests_sent"] != n or probe["failed"]:
        raise RuntimeError(
            f"(d) {n}: expected {n} answered requests, got {probe['requests_sent']} sent, {probe['failed']} failed"
        )
    timeline = probe["rss_timeline"]
    return {
        "samples": n,
        "peak_rss_bytes": probe["peak_rss_bytes"],
        "rss_quartiles_bytes": [timeline[int(q * (len(timeline) - 1))][1] for q in (0.25, 0.5, 0.75, 1.0)]
        if timeline
        else [],
        "execute_s": probe["execute_s"],
        "samples_per_s": n / probe["execute_s"],
        "lag_p50_ms": probe["lag_p50_ms"],
        "lag_p99_ms": probe["lag_p99_ms"],
        "lag_max_ms": probe["lag_max_ms"],
        "busy_lag_p99_ms": probe["busy_lag_p99_ms"],
        "cpu_s": child.cpu_s,
        "execute_cpu_s": probe["execute_cpu_s"],
        "gc_s": probe["gc_s"],
        "gc_longest_ms": probe["gc_longest_ms"],
    }


def run(work: Path) -> dict[str, Any]:
    parquet, generated_s = audio_parquet()
    runspecs = work / "runspecs"
    write_runspec(runspecs, parquet)
    results: dict[str, Any] = {
        "parquet": str(parquet),
        "parquet_bytes": parquet.stat().st_size,
        "generated_s": generated_s,
    }
    if generated_s:
        print(f"  (d) generated {parquet} ({mib(parquet.stat().st_size)}) in {generated_s:.0f} s", flush=True)
    with servers(1, default_answer="ok") as (server,):
        for n in (N_SMALL, N_LARGE):
            results[n] = _measure(work, runspecs, server.base_url, n)
            r = results[n]
            print(
                f"  (d) {n} samples: peak RSS {mib(r['peak_rss_bytes'])}, {r['samples_per_s']:.0f} samples/s; "
                f"(e) lag p99 {r['lag_p99_ms']:.1f} ms (loop busy {r['busy_lag_p99_ms']:.1f} ms)",
                flush=True,
            )
    results["growth"] = results[N_LARGE]["peak_rss_bytes"] / results[N_SMALL]["peak_rss_bytes"] - 1
    print(f"  (d) peak RSS growth 5k -> 20k: {results['growth']:+.1%}", flush=True)
    return results

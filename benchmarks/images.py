"""(i) images: 5,000 local JPEG files of about 200 KB each through the test server, against the same run with text only.

    python -m benchmarks --only i        # as a section of the suite
    python -m benchmarks.images          # on its own, printing the figures as JSON

The set is synthetic and local: 5,000 files of 560x420 RGB noise (noise
does not compress, so each JPEG is ~200 KB at quality 88), each with an
index-coloured block so every file, hence every request, is distinct (no
de-duplication). They are generated once into the benchmark cache
(``EVALKIT_BENCH_CACHE``, default ``~/.cache/evalkit-benchmarks``; ~1 GB).
One jsonl file asks one question per image; the text-only run reads the same
file through a runspec without ``image_column``, so both runs ask the same
questions and differ only by the image.

Per image the client reads the file, checks its header and end marker,
hashes it, writes a ~280 KB base64 data URI (in evalkit's media threads:
these images need no resize, so no worker process is involved) and
sends it in the JSON body; the server parses the body and answers "ok" (it
decodes no image, logs nothing). Two settings:

* *latency-bound*: the server answers after 100 ms, batch_size 64 (ideal 640
  req/s), as a model server is; the target applies here;
* *zero-latency*: the server answers at once, batch_size 32: pure client and
  server CPU, so the cost of moving 1 GB of images shows in full.

Memory: peak RSS of the image run at 1,000 and at 5,000 images, in both
settings (the latency-bound one keeps the engine's window of 256 samples
full, each holding its data URI while it waits).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.common import harness_argv, mib, model_entry, run_child, server_cpu_s, servers, write_config
from benchmarks.memory import cache_dir

N = 5000
N_SMALL = 1000
SIZE = (560, 420)
QUALITY = 88
DATA_VERSION = 2
LATENCY_MS = 100
BATCH_LATENCY = 64
BATCH_ZERO = 32
RUNS = ("latency_text", "latency_images", "latency_images_small", "zero_text", "zero_images", "zero_images_small")
#: the throughput target: the image run within 20% of the text run (latency-bound)
TARGET = 0.8


def _write_images(start: int, stop: int, folder: str) -> int:
    import numpy as np
    from PIL import Image

    for i in range(start, stop):
        # noise of its own per file: a coloured corner on shared noise was not enough (JPEG quantisation made
        # neighbouring files byte-identical, so the run sent fewer distinct images than it said)
        pixels = np.random.default_rng(i).integers(0, 256, (SIZE[1], SIZE[0], 3), dtype=np.uint8)
        Image.fromarray(pixels).save(os.path.join(folder, f"{i:05d}.jpg"), quality=QUALITY)
    return stop - start


def image_set(n: int = N) -> tuple[Path, float]:
    """The cached folder of ``n`` JPEG files with its questions.jsonl (made on first use), and the seconds spent."""
    folder = cache_dir() / f"images_{n}_{SIZE[0]}x{SIZE[1]}_q{QUALITY}_v{DATA_VERSION}"
    questions = folder / "questions.jsonl"
    if questions.exists():
        return folder, 0.0
    started = time.perf_counter()
    (folder / "img").mkdir(parents=True, exist_ok=True)
    chunks = [(i, min(n, i + 250)) for i in range(0, n, 250)]
    with ProcessPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        list(pool.map(_write_images, *zip(*chunks), [str(folder / "img")] * len(chunks)))
    tmp = questions.with_suffix(f".{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for i in range(n):
            row = {
                "id": f"img-{i}",
                "image": f"img/{i:05d}.jpg",
                "question": f"What is in picture {i}?",
                "answer": "ok",
            }
            handle.write(json.dumps(row) + "\n")
    os.replace(tmp, questions)
    return folder, time.perf_counter() - started


def write_runspecs(runspecs: Path, folder: Path) -> None:
    """bench_images (with the image column) and bench_images_text (the same rows, text only)."""
    base = {
        "path": str(folder / "questions.jsonl"),
        "language": "en",
        "id_column": "id",
        "textual_input_column": "question",
        "target_column": "answer",
    }
    specs = {
        "bench_images": {**base, "modality": "image+text", "image_column": "image"},
        "bench_images_text": {**base, "modality": "text"},
    }
    target = runspecs / "bench"
    target.mkdir(parents=True, exist_ok=True)
    for name, spec in specs.items():
        doc = {"_task": {"description": f"benchmark {name}", "metrics": ["exact_match"]}, name: spec}
        (target / f"{name}.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")


def _measure(work: Path, runspecs: Path, server: Any, dataset: str, n: int, batch: int, label: str) -> dict[str, Any]:
    url = server.base_url
    server_cpu = server_cpu_s(server)
    config = write_config(
        work / f"images_{label}.yaml",
        [(dataset, "exact_match")],
        [model_entry("vlm", url, batch)],
        runspecs,
        work / f"runs-{label}",
        num_samples=n,
    )
    child = run_child(harness_argv(config), work, timeout=1200).check()
    server_cpu = server_cpu_s(server) - server_cpu
    probe = child.json()
    if probe["requests_sent"] != n or probe["failed"]:
        raise RuntimeError(
            f"(i) {label}: expected {n} answered, got {probe['requests_sent']} sent, {probe['failed']} failed"
        )
    return {
        "dataset": dataset,
        "samples": n,
        "batch_size": batch,
        "execute_s": round(probe["execute_s"], 2),
        "throughput": round(n / probe["execute_s"], 1),
        "peak_rss_bytes": probe["peak_rss_bytes"],
        "cpu_s": round(child.cpu_s, 2),
        "server_cpu_s": round(server_cpu, 2),
        "lag_p99_ms": round(probe["lag_p99_ms"], 1),
    }


def run(work: Path) -> dict[str, Any]:
    folder, generated_s = image_set()
    runspecs = work / "runspecs"
    write_runspecs(runspecs, folder)
    files = list((folder / "img").glob("*.jpg"))
    results: dict[str, Any] = {
        "folder": str(folder),
        "images": len(files),
        "mean_bytes": sum(f.stat().st_size for f in files) / max(1, len(files)),
        "generated_s": round(generated_s, 1),
    }
    if generated_s:
        print(f"  (i) generated {len(files):,} images in {folder} in {generated_s:.0f} s", flush=True)
    with servers(1, {"latency_ms": LATENCY_MS, "default_answer": "ok"}) as (server,):
        for dataset in ("bench_images_text", "bench_images"):
            key = f"latency_{'text' if dataset.endswith('text') else 'images'}"
            results[key] = _measure(work, runspecs, server, dataset, N, BATCH_LATENCY, key)
        results["latency_images_small"] = _measure(
            work, runspecs, server, "bench_images", N_SMALL, BATCH_LATENCY, "latency_images_small"
        )
    with servers(1, {"default_answer": "ok"}) as (server,):
        for dataset in ("bench_images_text", "bench_images"):
            key = f"zero_{'text' if dataset.endswith('text') else 'images'}"
            results[key] = _measure(work, runspecs, server, dataset, N, BATCH_ZERO, key)
        results["zero_images_small"] = _measure(
            work, runspecs, server, "bench_images", N_SMALL, BATCH_ZERO, "zero_images_small"
        )
    for setting in ("latency", "zero"):
        results[f"{setting}_ratio"] = (
            results[f"{setting}_images"]["throughput"] / results[f"{setting}_text"]["throughput"]
        )
    for setting in ("latency", "zero"):
        results[f"{setting}_rss_growth"] = (
            results[f"{setting}_images"]["peak_rss_bytes"] / results[f"{setting}_images_small"]["peak_rss_bytes"] - 1
        )
    for key in RUNS:
        r = results[key]
        print(
            f"  (i) {key}: {r['samples']:,} in {r['execute_s']:.2f} s = {r['throughput']:,.0f} req/s, "
            f"peak RSS {mib(r['peak_rss_bytes'])}, CPU {r['cpu_s']:.1f} s (server {r['server_cpu_s']:.1f} s)",
            flush=True,
        )
    return results


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The (i) rows of the figures table."""
    i = results.get("images")
    if not i:
        return []
    lt, li, zt, zi = i["latency_text"], i["latency_images"], i["zero_text"], i["zero_images"]
    growth = max(i["latency_rss_growth"], i["zero_rss_growth"])
    sizes = [
        f"{mib(i[f'{setting}_images_small']['peak_rss_bytes'])} -> {mib(i[f'{setting}_images']['peak_rss_bytes'])}"
        for setting in ("latency", "zero")
    ]
    return [
        (
            f"(i) 5,000 images (~{i['mean_bytes'] / 1000:.0f} KB JPEG) vs text only, server 100 ms, 64 in flight",
            f"{li['throughput']:,.0f} vs {lt['throughput']:,.0f} req/s = **{i['latency_ratio']:.2f}x**",
            f">= {TARGET}x",
            i["latency_ratio"] >= TARGET,
        ),
        (
            "(i) the same at zero latency, 32 in flight (CPU-bound)",
            f"{zi['throughput']:,.0f} vs {zt['throughput']:,.0f} req/s = **{i['zero_ratio']:.2f}x**",
            f">= {TARGET}x",
            i["zero_ratio"] >= TARGET,
        ),
        (
            "(i) peak RSS 1,000 -> 5,000 images",
            f"{sizes[0]} (100 ms) and {sizes[1]} (zero latency): worst **{growth:+.1%}**",
            "< +20%",
            growth < 0.20,
        ),
    ]


def details(results: dict[str, Any]) -> list[str]:
    """The (i) table of the details section."""
    i = results.get("images")
    if not i:
        return []
    out = [
        "### (i) images",
        "",
        f"{i['images']:,} local JPEG files of 560x420 noise, mean {i['mean_bytes'] / 1000:.0f} KB (`{i['folder']}`); "
        "one question per image; the text run reads the same rows without the image column. The server answers "
        '"ok" and decodes nothing. Peak RSS = ru_maxrss of the evalkit process.',
        "",
        "| run | server latency | in flight | samples | wall | req/s | peak RSS | evalkit CPU | server CPU | lag p99 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in RUNS:
        r = i[key]
        latency = f"{LATENCY_MS} ms" if key.startswith("latency") else "0"
        out.append(
            f"| {key} | {latency} | {r['batch_size']} | {r['samples']:,} | {r['execute_s']:.2f} s | "
            f"{r['throughput']:,.0f} | {mib(r['peak_rss_bytes'])} | {r['cpu_s']:.1f} s | {r['server_cpu_s']:.1f} s | "
            f"{r['lag_p99_ms']:.1f} ms |"
        )
    out.append("")
    return out


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="evalkit-bench-images-"))
    results = {"images": run(work)}
    for figure, value, target, ok in summary_rows(results):
        print(f"{'OK  ' if ok else 'MISS'} {figure}: {value.replace('**', '')} (target {target})")
    sys.stdout.write(json.dumps(results["images"], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""(v) `evalkit view` on a run of 1,000,000 records: first page, a filter over 100,000 samples, memory.

    python -m benchmarks --only v        # as a section of the suite
    python -m benchmarks.viewer          # on its own, printing the figures as JSON

The run is synthetic and follows the record format (row, groups, stats, sent
keys, sent files): 3 models x 10 dataset-metric pairs. One ASR pair has
100,000 samples (300,000 records, WER stats, accent/gender/length groups,
1% failures with their messages); nine more pairs share 233,333 samples
(exact_match on text sets, WER on speech sets); one extra record of a
duplicate sample id makes exactly 1,000,000. It is generated once into the
benchmark cache (``EVALKIT_BENCH_CACHE``, default
``~/.cache/evalkit-benchmarks``; ~0.5 GB) and reused while its version holds.

`evalkit view RUN_PARENT --port 0 --no-browser` is started as users start it,
with a fresh ``EVALKIT_CACHE_DIR`` so no index exists. Measured, each in
wall-clock from this process (an HTTP client on the same machine):

* spawn -> the URL printed, spawn -> the runs list served, and the runs list
  request alone; then the run's results page (HTML and its /api JSON);
* a filtered samples query over the 100,000-sample pair (model, score range,
  failure=none, group, sorted by -score): first open (it builds the index of
  the pair's 300,000 records), the same query again, another filter with a
  text search (index built, new query), and the HTML page of the first filter;
* the same filter and search again once the viewer and its children used under
  5% of a CPU for a second (background work done), reported separately;
* the viewer's peak RSS: the kernel's high-water mark (VmHWM) of the process at
  the end, and the largest RSS of the process and its children sampled every
  10 ms by psutil (the viewer may index in child processes).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.common import child_env, evalkit_argv, mib
from benchmarks.memory import cache_dir

DATA_VERSION = 1  # bump when the generator changes, so a stale cache is not reused
MODELS = ("model-a", "model-b", "model-c")
BIG = ("bench_asr_big", "word_error_rate", 100_000)
#: the other nine pairs: (dataset, metric, samples); 8 x 25,926 + 25,925 = 233,333 samples
SMALL = tuple(
    (f"bench_text_{i}" if i % 2 else f"bench_asr_{i}", "exact_match" if i % 2 else "word_error_rate", n)
    for i, n in enumerate([25_926] * 8 + [25_925], start=1)
)
RUN_ID = "20261126-000000_bench0"
TARGET_PAGE_S = 1.0
TARGET_FILTER_S = 1.0
TARGET_RSS_BYTES = 300 * 1024 * 1024
ACCENTS = ("american", "british", "scottish", "irish", "indian", "australian", "canadian", "nigerian")
_TEXT = (
    "the quick brown fox jumps over a lazy dog while rain falls softly on old roofs near the river bank "
    "seven bright stars shine above quiet hills and children read books about ships trains and distant cities"
)
WORDS = tuple(_TEXT.split(" "))
FILTER = {"model": "model-b", "min": "0.2", "max": "1", "failure": "none", "group": "accent:scottish", "sort": "-score"}
SEARCH = {"model": "model-c", "q": "distant cities", "sort": "-score"}


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _key(dataset: str, sample_id: str) -> str:
    return hashlib.sha256(f"{dataset}\0{sample_id}".encode()).hexdigest()[:16]


def _dumps(value: Any) -> bytes:
    from evalkit.util import jsonutil

    return jsonutil.dumps_bytes(value) + b"\n"


def _write_pair(records_dir: Path, dataset: str, metric: str, n: int, seed: int) -> tuple[int, dict[str, Any]]:
    """The records of one pair (3 models) and its dataset's sent file; (records written, score sums per model)."""
    from evalkit.util.safe_names import safe_name

    rng = random.Random(seed)
    asr = metric == "word_error_rate"
    written = 0
    sums: dict[str, list[float]] = {m: [0.0, 0.0, 0, 0] for m in MODELS}
    sent_path = records_dir / "sent" / safe_name(dataset, suffix=".jsonl")
    with (records_dir / safe_name(dataset, metric, suffix=".jsonl")).open("wb") as out, sent_path.open("wb") as sent:
        for row in range(n):
            sample_id = f"{dataset}-{row:06d}"
            key = _key(dataset, sample_id)
            reference = _sentence(rng, rng.randint(6, 16))
            duration = round(rng.uniform(1.0, 25.0), 2)
            groups: dict[str, str] = {"language": "en"}
            if asr:
                bucket = (
                    "0-5s" if duration < 5 else "5-10s" if duration < 10 else "10-20s" if duration < 20 else "20-30s"
                )
                groups.update(audio_length=bucket, accent=rng.choice(ACCENTS), gender=rng.choice(("female", "male")))
                part: dict[str, Any] = {
                    "type": "audio",
                    "audio": {"path": f"/data/{dataset}/{sample_id}.flac", "sha256": key * 4, "start": 0.0,
                              "end": duration, "duration": duration, "sample_rate": 16000},
                }  # fmt: skip
            else:
                part = {"type": "text", "text": f"Question {row}: {reference}?"}
            entry = {"key": key, "dataset": dataset, "sample_id": sample_id, "kind": "chat", "requests": 1}
            entry["messages"] = [{"role": "user", "content": [part]}]
            sent.write(_dumps(entry))
            words = reference.split()
            for m, model in enumerate(MODELS):
                record: dict[str, Any] = {"sample_id": sample_id, "model": model, "dataset": dataset, "metric": metric}
                record.update(row=row, groups=groups, reference=reference)
                if rng.random() < 0.01:
                    record.update(
                        response=None, prediction=None, score=None, failure="timeout",
                        error=f"no answer within 120 s (attempt 3 of 3) from http://127.0.0.1:8000/v1 for {sample_id}",
                        latency=120.0, attempts=3,
                    )  # fmt: skip
                    sums[model][3] += 1
                else:
                    keep = [w for w in words if rng.random() > 0.05 * (m + 1)]
                    answer = " ".join(keep)
                    if asr:
                        edits = len(words) - len(keep)
                        score = edits / len(words)
                        stats = [float(edits), float(len(words))]
                        details = {"substitutions": 0, "deletions": edits, "insertions": 0}
                    else:
                        score = float(answer == reference)
                        stats = [score, 1.0]
                        details = {"normalized_prediction": answer.lower()}
                    record.update(response=answer, prediction=answer, score=score, details=details, stats=stats)
                    record.update(latency=round(rng.uniform(0.05, 2.0), 3), attempts=1)
                    sums[model][0] += stats[0]
                    sums[model][1] += stats[1]
                    sums[model][2] += 1
                record.update(cached=False, replica=None, duration=duration, sent=key)
                out.write(_dumps(record))
                written += 1
    return written, sums


def make_run(parent: Path, pairs: tuple[tuple[str, str, int], ...] = (BIG, *SMALL)) -> Path:
    """The synthetic run folder under ``parent`` (generated once per DATA_VERSION, then reused).

    ``pairs`` (dataset, metric, samples) default to the benchmark's 1,000,000 records; tests pass small ones.
    """
    run_dir = parent / RUN_ID
    marker = run_dir / ".complete"
    if marker.is_file() and marker.read_text() == str(DATA_VERSION):
        return run_dir
    shutil.rmtree(run_dir, ignore_errors=True)
    records_dir = run_dir / "records"
    (records_dir / "sent").mkdir(parents=True)
    total = 0
    rows = []
    for seed, (dataset, metric, n) in enumerate(pairs):
        written, sums = _write_pair(records_dir, dataset, metric, n, seed)
        total += written
        for model, (num, den, scored, failed) in sums.items():
            score = num / den if den else None
            rows.append(
                {"dataset": dataset, "task": "asr" if metric == "word_error_rate" else "text_qa", "category": "bench",
                 "metric": metric, "model": model, "score": score, "ci_low": score, "ci_high": score, "n": scored,
                 "n_failed": failed, "failure_rate": failed / n, "unreliable": False, "seconds": 1.0,
                 "failure_reasons": {"timeout": failed} if failed else {}, "details": {}}
            )  # fmt: skip
    # a duplicate sample id: a record of its own, failed before any request (as the engine writes it)
    dataset, metric, _ = pairs[min(1, len(pairs) - 1)]  # the first small pair in the default set
    from evalkit.util.safe_names import safe_name

    with (records_dir / safe_name(dataset, metric, suffix=".jsonl")).open("ab") as out:
        duplicate = {"sample_id": f"{dataset}-000000", "model": MODELS[0], "dataset": dataset, "metric": metric}
        duplicate.update(row=None, groups={}, reference="", score=None, failure="duplicate_id")
        duplicate.update(error="sample id seen before in this dataset; this row is not scored", latency=0.0, attempts=0)
        out.write(_dumps(duplicate))
    total += 1
    config = {
        "dataset_metric": [[d, m] for d, m, _ in (BIG, *SMALL)],
        "models": [{"info": {"name": m}} for m in MODELS],
    }
    meta = {"format": 1, "run_id": RUN_ID, "status": "finished", "started": "2026-11-26T00:00:00", "config": config}
    (run_dir / "run.json").write_text(json.dumps(meta, indent=1))
    results = {"run_id": RUN_ID, "finished": "2026-11-26T01:00:00", "seconds": 3600.0, "config": config}
    results.update(results=rows, aggregate=[])
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    assert total == len(MODELS) * sum(n for _, _, n in pairs) + 1, total
    marker.write_text(str(DATA_VERSION))
    return run_dir


class _Viewer:
    """`evalkit view` in a child process: its URL, and its memory sampled while it runs."""

    def __init__(self, roots: list[Path], cache: Path) -> None:
        env = child_env()
        env["EVALKIT_CACHE_DIR"] = str(cache)
        argv = evalkit_argv("view", *map(str, roots), "--port", "0", "--no-browser")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.peak_sampled = 0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.ready_s = time.perf_counter() - self.started
        if "http://" not in line:
            self.stop()
            raise RuntimeError(f"evalkit view printed {line!r}; stderr: {self._stderr()[-2000:]}")
        self.url = line[line.index("http://") :].strip().rstrip("/")

    def _sample(self) -> None:
        import psutil

        try:
            proc = psutil.Process(self.proc.pid)
            while not self._stop.is_set():
                rss = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
                self.peak_sampled = max(self.peak_sampled, rss)
                time.sleep(0.01)
        except psutil.Error:
            pass

    def cpu_s(self) -> float:
        """CPU seconds used so far by the viewer and its children."""
        import psutil

        proc = psutil.Process(self.proc.pid)
        total = 0.0
        for p in (proc, *proc.children(recursive=True)):
            try:
                times = p.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass
        return total

    def wait_quiet(self, idle_s: float = 1.0, limit_s: float = 300.0) -> float:
        """Seconds until the viewer had no child process and used under 5% of a CPU for ``idle_s`` (at most
        ``limit_s``). (The children's CPU time leaves the sum when one ends, so CPU alone would read "quiet" between
        two background builds.)"""
        import psutil

        t0 = time.perf_counter()
        last = self.cpu_s()
        while time.perf_counter() - t0 < limit_s:
            time.sleep(idle_s)
            now = self.cpu_s()
            alive = [c for c in psutil.Process(self.proc.pid).children(recursive=True) if _alive(c)]
            if now - last < 0.05 * idle_s and not alive:
                break
            last = now
        return time.perf_counter() - t0

    def high_water_mark(self) -> int:
        """VmHWM: the kernel's own peak RSS of the viewer process (bytes)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0

    def get(self, path: str, query: dict[str, str] | None = None) -> tuple[float, bytes]:
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=600) as response:
            body = response.read()
        return time.perf_counter() - t0, body

    def _stderr(self) -> str:
        return self.proc.stderr.read() if self.proc.stderr and self.proc.poll() is not None else ""

    def stop(self) -> None:
        self._stop.set()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _alive(proc: Any) -> bool:
    """A child still at work (a finished one not yet reaped by the viewer is a zombie, not work)."""
    import psutil

    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def run(work: Path) -> dict[str, Any]:
    started = time.perf_counter()
    parent = cache_dir() / f"viewer-run-v{DATA_VERSION}"
    parent.mkdir(parents=True, exist_ok=True)
    run_dir = make_run(parent)
    generate_s = time.perf_counter() - started
    records_bytes = sum(p.stat().st_size for p in (run_dir / "records").rglob("*.jsonl"))
    cache = Path(tempfile.mkdtemp(prefix="viewer-cache-", dir=work))
    viewer = _Viewer([parent], cache)
    out: dict[str, Any] = {
        "records": 1_000_000,
        "models": len(MODELS),
        "pairs": 1 + len(SMALL),
        "big_pair_samples": BIG[2],
        "records_bytes": records_bytes,
        "generate_or_reuse_s": generate_s,
        "command": f"EVALKIT_CACHE_DIR=<fresh> python -m evalkit view {parent} --port 0 --no-browser",
        "filter": FILTER,
        "search": SEARCH,
        "loadavg_before": os.getloadavg(),
    }
    try:
        out["ready_s"] = viewer.ready_s
        out["runs_page_request_s"], body = viewer.get("/")
        out["runs_page_since_start_s"] = time.perf_counter() - viewer.started
        if RUN_ID.encode() not in body:
            raise RuntimeError("the runs list does not show the benchmark run")
        out["run_page_request_s"], body = viewer.get(f"/run/{RUN_ID}/")
        out["run_page_since_start_s"] = time.perf_counter() - viewer.started
        out["run_api_request_s"], _ = viewer.get(f"/api/run/{RUN_ID}/")
        pair = f"/run/{RUN_ID}/pair/{BIG[0]}/{BIG[1]}/"
        out["filter_first_s"], body = viewer.get("/api" + pair, FILTER)
        out["filter_answer"] = _summary(body)
        out["filter_first_indexed"] = bool(json.loads(body).get("indexed"))
        out["filter_again_s"], _ = viewer.get("/api" + pair, FILTER)
        out["search_s"], body = viewer.get("/api" + pair, SEARCH)
        out["search_answer"] = _summary(body)
        out["filter_html_s"], _ = viewer.get(pair, FILTER)
        # the same questions once the viewer has gone quiet (background indexing of the other pairs done)
        out["settle_s"] = viewer.wait_quiet()
        out["filter_settled_s"], body = viewer.get("/api" + pair, FILTER)
        out["filter_settled_indexed"] = bool(json.loads(body).get("indexed"))
        out["search_settled_s"], _ = viewer.get("/api" + pair, SEARCH)
        out["peak_rss_bytes"] = viewer.high_water_mark()
        out["peak_rss_sampled_bytes"] = viewer.peak_sampled
        out["loadavg_after"] = os.getloadavg()
    finally:
        viewer.stop()
        shutil.rmtree(cache, ignore_errors=True)
    out.update(_after_a_pause(parent, work, PAUSE_S))
    return out


#: seconds a user spends on the run's page before the first click, in the added measurement
PAUSE_S = 5.0


def _after_a_pause(parent: Path, work: Path, pause_s: float) -> dict[str, Any]:
    """A second viewer (fresh index cache): the runs list, the run's page, ``pause_s`` of reading, then the filter.

    Added to the measurements above (which click at once): what a user who looks at the results table first
    gets, while the viewer indexes in the background from its start.
    """
    cache = Path(tempfile.mkdtemp(prefix="viewer-cache-", dir=work))
    viewer = _Viewer([parent], cache)
    pair = f"/api/run/{RUN_ID}/pair/{BIG[0]}/{BIG[1]}/"
    try:
        viewer.get("/")
        viewer.get(f"/run/{RUN_ID}/")
        time.sleep(pause_s)
        loadavg = os.getloadavg()
        seconds, body = viewer.get(pair, FILTER)
        search_s, search_body = viewer.get(pair, SEARCH)
    finally:
        viewer.stop()
        shutil.rmtree(cache, ignore_errors=True)
    return {
        "pause_s": pause_s,
        "filter_after_pause_s": seconds,
        "filter_after_pause_indexed": bool(json.loads(body).get("indexed")),
        "search_after_pause_s": search_s,
        "search_after_pause_indexed": bool(json.loads(search_body).get("indexed")),
        "loadavg_pause": loadavg,
    }


def _summary(body: bytes) -> dict[str, Any]:
    """What the answer said it matched (so a query that matched nothing is not timed as a success)."""
    data = json.loads(body)
    found = {k: data[k] for k in ("total", "matched", "count", "n") if k in data}
    samples = data.get("samples") or data.get("rows") or []
    found["on_page"] = len(samples)
    return found


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The (v) rows of the figures table."""
    v = results.get("viewer")
    if not v:
        return []
    first = max(v["runs_page_since_start_s"], v["run_page_since_start_s"])
    return [
        (
            "(v) `evalkit view`, 1,000,000 records: spawn -> runs list, then the run's results page",
            f"**{v['runs_page_since_start_s']:.2f} s** / **{v['run_page_since_start_s']:.2f} s** (URL printed at "
            f"{v['ready_s']:.2f} s; requests {_ms(v['runs_page_request_s'])} / {_ms(v['run_page_request_s'])})",
            f"< {TARGET_PAGE_S:.0f} s",
            first < TARGET_PAGE_S,
        ),
        (
            "(v) filter over the 100,000-sample pair, first open (no index of its 300,000 records at start)",
            f"**{v['filter_first_s']:.2f} s**",
            f"< {TARGET_FILTER_S:.0f} s",
            v["filter_first_s"] < TARGET_FILTER_S,
        ),
        (
            f"(v) the first filter / the first search {v['pause_s']:.0f} s after the run's page opened (a fresh "
            "viewer)",
            f"**{v['filter_after_pause_s']:.2f} s** / {v['search_after_pause_s']:.2f} s (answered from "
            + ("the index" if v["filter_after_pause_indexed"] else "the file")
            + ")",
            f"< {TARGET_FILTER_S:.0f} s",
            max(v["filter_after_pause_s"], v["search_after_pause_s"]) < TARGET_FILTER_S,
        ),
        (
            "(v) the same filter again / another filter with text search / the filter's HTML page",
            f"**{_ms(v['filter_again_s'])}** / {_ms(v['search_s'])} / {_ms(v['filter_html_s'])}",
            f"< {TARGET_FILTER_S:.0f} s",
            max(v["filter_again_s"], v["search_s"], v["filter_html_s"]) < TARGET_FILTER_S,
        ),
        (
            "(v) the same filter / the search once the viewer is quiet (background work done)",
            f"**{_ms(v['filter_settled_s'])}** / {_ms(v['search_settled_s'])} (quiet {v['settle_s']:.0f} s after the "
            "last request)",
            f"< {TARGET_FILTER_S:.0f} s",
            max(v["filter_settled_s"], v["search_settled_s"]) < TARGET_FILTER_S,
        ),
        (
            "(v) viewer peak RSS",
            f"**{mib(max(v['peak_rss_bytes'], v['peak_rss_sampled_bytes']))}** (process + children, sampled; the "
            f"process alone {mib(v['peak_rss_bytes'])} VmHWM)",
            f"< {mib(TARGET_RSS_BYTES)}",
            max(v["peak_rss_bytes"], v["peak_rss_sampled_bytes"]) < TARGET_RSS_BYTES,
        ),
    ]


def details(results: dict[str, Any]) -> list[str]:
    """The (v) paragraph of the details section."""
    v = results.get("viewer")
    if not v:
        return []
    return [
        "### (v) the sample viewer",
        "",
        f"A synthetic run of {v['records']:,} records ({v['models']} models x {v['pairs']} pairs, one with "
        f"{v['big_pair_samples']:,} samples; {v['records_bytes'] / 1e6:,.0f} MB of records), `{v['command']}`, a "
        "fresh index cache. Filter: `" + urllib.parse.urlencode(v["filter"]) + f"` -> {v['filter_answer']}; "
        "search: `" + urllib.parse.urlencode(v["search"]) + f"` -> {v['search_answer']}. Right after the first "
        f"pages: filter {_ms(v['filter_first_s'])}, again {_ms(v['filter_again_s'])}, search {_ms(v['search_s'])}, "
        f"HTML page {_ms(v['filter_html_s'])}; the viewer was quiet {v['settle_s']:.0f} s later: filter "
        f"{_ms(v['filter_settled_s'])}, search {_ms(v['search_settled_s'])}. Peak RSS {mib(v['peak_rss_bytes'])} "
        f"(process), {mib(v['peak_rss_sampled_bytes'])} (with children). Load average (1 min) "
        f"{v['loadavg_before'][0]:.2f} before, {v['loadavg_after'][0]:.2f} after.",
        "",
    ]


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="evalkit-bench-viewer-"))
    try:
        results = {"viewer": run(work)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for figure, value, target, ok in summary_rows(results):
        print(f"{'OK  ' if ok else 'MISS'} {figure}: {value.replace('**', '')} (target {target})")
    sys.stdout.write(json.dumps(results["viewer"], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The viewer at 1,000,000 records in ONE pair (issue 45): first page, filters, text search, index, export.

    python -m benchmarks.viewer_1m make [DIR]    # write the fixture run (reused while its version holds)
    python -m benchmarks.viewer_1m [--a A] [--b B] [--rounds N]    # measure (A/B rounds when --a is given)

The fixture is what a merged run of a 1,000,000-record ASR pair looks like
(333,333 samples x 3 models, groups, 1% failures, a sent file with each
sample's audio part, one duplicate-id record): generated with the record
writer of :mod:`benchmarks.viewer` into the benchmark cache
(``EVALKIT_BENCH_CACHE``, default ``~/.cache/evalkit-benchmarks``; ~0.6 GB).

Measured per checkout (``--a``/``--b``: two checkouts of evalkit, run in turn
each round, so a ratio is taken between figures of one round on one loaded
machine), each in its own process with a fresh ``EVALKIT_CACHE_DIR``:

* ``index_s``, ``index_bytes``, ``index_peak_rss``: building the pair's index the
  way the checkout does it (at the end of the run when it can, else on first view);
* ``first_page_s``: the samples page of the pair with no filter, in a fresh
  viewer (a checkout that indexes at the end of the run: with that index);
* ``filter_s`` / ``search_s`` / ``search_prompt_s``: a filter over all records, a
  text search of the answers, a text search of the prompts;
* ``unindexed_first_page_s``: the first page of the same run folder without its
  index (an old run folder), while the viewer indexes it in the background.

``python -m benchmarks.viewer_1m unindexed [--a A] [--b B] [--rounds N]`` measures
the run folder without its index alone (a hard-linked copy of the fixture with no
``index/``, so the fixture's own index stays put): per checkout, a fresh viewer
with an empty cache serves ``first_page_s`` (the samples page, HTML),
``first_api_s`` (its JSON), ``filter_s``, ``search_s``, ``page2_s`` (the second
page), each with what the answer says of itself (``total``, ``indexed``, and
``partial`` where the checkout has it), ``sample_s`` (one sample's page, 90% into
the file), ``filter_whole_s`` (the filter asked again until its answer is whole,
as the page reloads itself: seconds and requests, from after the requests above)
and ``viewer_peak_rss``.

The export is measured by ``python -m benchmarks.viewer_1m export [DIR]``
(one checkout: the one on PYTHONPATH).

``python -m benchmarks.viewer_1m compare [--a A] [--b B] [--rounds N]`` measures
one comparison of two models of the pair (333,333 samples a side), as the
comparison page and ``view --export`` make it: per checkout, in its own process
over the run folder's index (built once, before the rounds), ``compare_s`` and
``compare_peak_rss`` (the process's high-water mark; ``rss_before`` is the
process after its imports), then ``compare_again_s`` (the same comparison again:
a page of the changed samples further on, a reload). The paired test's figures
of every checkout are compared: they must be the same.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import summary
from benchmarks.memory import cache_dir
from benchmarks.viewer import MODELS, _dumps, _write_pair

DATA_VERSION = 1
RUN_ID = "20261201-000000_bench1m"
PAIR = ("bench_asr_1m", "word_error_rate", 333_333)
FILTER = {"model": "model-b", "min": "0.2", "max": "1", "failure": "none", "group": "accent:scottish", "sort": "-score"}
SEARCH = {"q": "distant cities", "sort": "-score"}
SEARCH_PROMPT = {"q": "bench_asr_1m-012345"}


def make_run(parent: Path, samples: int = PAIR[2]) -> Path:
    """The fixture run folder under ``parent``: one pair of ``3 * samples + 1`` records (generated once)."""
    run_dir = parent / RUN_ID
    marker = run_dir / ".complete"
    if marker.is_file() and marker.read_text() == f"{DATA_VERSION}:{samples}":
        return run_dir
    shutil.rmtree(run_dir, ignore_errors=True)
    records_dir = run_dir / "records"
    (records_dir / "sent").mkdir(parents=True)
    dataset, metric, _ = PAIR
    written, sums = _write_pair(records_dir, dataset, metric, samples, seed=1)
    from evalkit.util.safe_names import safe_name

    with (records_dir / safe_name(dataset, metric, suffix=".jsonl")).open("ab") as out:
        duplicate = {"sample_id": f"{dataset}-000000", "model": MODELS[0], "dataset": dataset, "metric": metric}
        duplicate.update(row=None, groups={}, reference="", score=None, failure="duplicate_id")
        duplicate.update(error="sample id seen before in this dataset; this row is not scored", latency=0.0, attempts=0)
        out.write(_dumps(duplicate))
    rows = []
    for model, (num, den, scored, failed) in sums.items():
        score = num / den if den else None
        rows.append(
            {"dataset": dataset, "task": "asr", "category": "bench", "metric": metric, "model": model, "score": score,
             "ci_low": score, "ci_high": score, "n": scored, "n_failed": failed, "failure_rate": failed / samples,
             "unreliable": False, "seconds": 1.0, "failure_reasons": {"timeout": failed} if failed else {},
             "details": {}}
        )  # fmt: skip
    config = {"dataset_metric": [[dataset, metric]], "models": [{"info": {"name": m}} for m in MODELS]}
    meta = {"format": 1, "run_id": RUN_ID, "status": "finished", "started": "2026-12-01T00:00:00", "config": config}
    (run_dir / "run.json").write_text(json.dumps(meta, indent=1))
    results = {"run_id": RUN_ID, "finished": "2026-12-01T01:00:00", "seconds": 3600.0, "config": config}
    results.update(results=rows, aggregate=[])
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    assert written + 1 == 3 * samples + 1
    marker.write_text(f"{DATA_VERSION}:{samples}")
    return run_dir


def fixture() -> Path:
    parent = cache_dir() / f"viewer-1m-v{DATA_VERSION}"
    parent.mkdir(parents=True, exist_ok=True)
    return make_run(parent)


#: what a checkout runs to index the fixture as it would: at the end of the run (run folder), else on first view
_INDEX = """
import json, os, resource, sys, time
from pathlib import Path
run = Path(sys.argv[1])
records = run / "records" / "bench_asr_1m__word_error_rate.jsonl"
sent = run / "records" / "sent" / "bench_asr_1m.jsonl"
t0 = time.perf_counter()
try:
    from evalkit.view.runindex import index_run
except ImportError:  # an evalkit that indexes on first view, in its cache folder
    from evalkit.view import index
    states = [index.refresh(records, "records"), index.refresh(sent, "sent")]
    where = "cache, first view"
else:
    index_run(run, min_bytes=0)
    from evalkit.view import index
    states = [index.refresh(records, "records"), index.refresh(sent, "sent")]
    where = "run folder, end of run"
took = time.perf_counter() - t0
size = sum(os.path.getsize(s.db) for s in states)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"index_s": took, "index_bytes": size, "index_peak_rss": peak, "index_where": where}))
"""


#: one comparison of two models of the fixture's pair, in a fresh process (the checkout on PYTHONPATH)
_COMPARE = """
import json, resource, sys, time
from pathlib import Path
from evalkit.view.viewer import Viewer
def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
viewer = Viewer([Path(sys.argv[1])])
a, b, pair = sys.argv[2:5]
before = rss()
t0 = time.perf_counter()
found = viewer.compare(a, b, pair)
took = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
again = viewer.compare(a, b, pair, offset=200)
took_again = time.perf_counter() - t0
print(json.dumps({"compare_s": took, "compare_again_s": took_again, "compare_peak_rss": peak, "rss_before": before,
                  "changed": found["changed"], "rows": len(found["rows"]), "rows_again": len(again["rows"]),
                  "statistics": found["statistics"]}))
"""


def compare(checkouts: dict[str, Path], rounds: int) -> dict[str, Any]:
    """Each round: every checkout in turn makes one comparison of model-a and model-b over the run's index."""
    from benchmarks.common import child_env

    run_dir = fixture()
    home = Path.cwd()
    side = [f"{RUN_ID}:{MODELS[0]}", f"{RUN_ID}:{MODELS[1]}", f"{PAIR[0]}/{PAIR[1]}"]
    work = Path(tempfile.mkdtemp(prefix="viewer-1m-compare-"))
    try:
        os.chdir(work)
        if not (run_dir / "index").is_dir():  # the index the run writes at its end (the same for every checkout)
            env = {**child_env(), "PYTHONPATH": str(list(checkouts.values())[-1].resolve())}
            env["EVALKIT_CACHE_DIR"] = str(work / "c")
            subprocess.run([sys.executable, "-c", _INDEX, str(run_dir)], env=env, check=True, capture_output=True)
        out: dict[str, Any] = {"loadavg_before": os.getloadavg(), "comparison": side}
        out["date"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        found: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
        for _ in range(rounds):
            for name, checkout in checkouts.items():
                env = {**child_env(), "PYTHONPATH": str(checkout.resolve()), "EVALKIT_CACHE_DIR": str(work / name)}
                done = subprocess.run(
                    [sys.executable, "-c", _COMPARE, str(run_dir.parent), *side],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                found[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
        out["loadavg_after"] = os.getloadavg()
    finally:
        os.chdir(home)
        shutil.rmtree(work, ignore_errors=True)
    figures = [f["statistics"] for rows in found.values() for f in rows]
    out["same_statistics"] = all(f == figures[0] for f in figures)
    out["statistics"] = figures[0]
    for rows in found.values():
        for f in rows:
            del f["statistics"]
    out["rounds"] = found
    if len(checkouts) == 2:
        a, b = found
        out["ratios_b_over_a"] = [
            {key: fb[key] / fa[key] for key in ("compare_s", "compare_again_s", "compare_peak_rss") if fa[key]}
            for fa, fb in zip(found[a], found[b])
        ]
    return out


def compare_entry(result: dict[str, Any], command: str) -> dict[str, Any]:
    """The summary's rows of a ``compare`` run of two checkouts (A the last stop, B this one): medians of the rounds."""
    import statistics

    from benchmarks.common import machine

    m = machine()
    a, b = (result["rounds"][k] for k in ("a", "b"))

    def median(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    ratios = {k: statistics.median(r[k] for r in result["ratios_b_over_a"]) for k in result["ratios_b_over_a"][0]}
    mib = 2**20
    pairs = result["statistics"]["n_paired"]
    same = "the same figures" if result["same_statistics"] else "FIGURES DIFFER"
    took_b, took_a = median(b, "compare_s"), median(a, "compare_s")
    peak_b, peak_a = median(b, "compare_peak_rss") / mib, median(a, "compare_peak_rss") / mib
    again_b, again_a = median(b, "compare_again_s"), median(a, "compare_again_s")
    rows = [
        {
            "figure": "(v) viewer, 1,000,000 records: one model-vs-model comparison (333,333 samples a side)",
            "measured": f"**{took_b:.1f} s**, peak RSS **{peak_b:.0f} MiB** vs the last stop {took_a:.1f} s, "
            f"{peak_a:.0f} MiB in the same rounds = **{ratios['compare_s']:.2f}x** time, "
            f"**{ratios['compare_peak_rss']:.2f}x** memory (paired test on {pairs:,} samples: {same})",
            "target": "memory bounded (issue 45)",
            "met": None,
        },
        {
            "figure": "(v) viewer, 1,000,000 records: the same comparison again (another page of changes, a reload)",
            "measured": f"**{again_b:.2f} s** vs the last stop {again_a:.1f} s = **{ratios['compare_again_s']:.2f}x**",
            "target": "-",
            "met": None,
        },
    ]
    return {
        **summary.entry(result, rows, before=result["loadavg_before"], command=command, machine=m),
        "figures": result,
    }


def unindexed_entry(result: dict[str, Any], command: str) -> dict[str, Any]:
    """The summary's rows of an ``unindexed`` run of two checkouts (A the last stop, B this one): medians of rounds."""
    import statistics

    from benchmarks.common import machine

    a, b = (result["rounds"][k] for k in ("a", "b"))

    def median(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    def read(rows: list[dict[str, Any]], key: str) -> str:
        shares = [r[key]["bytes_read"] / r[key]["bytes"] for r in rows if r.get(key)]
        return f"{min(shares):.0%}-{max(shares):.0%} of the file read, said so" if shares else "whole"

    figure = "(v) viewer, 1,000,000 records, run folder with no index yet"
    rows = [
        {
            "figure": f"{figure}: first samples page",
            "measured": f"**{median(b, 'first_page_s'):.2f} s** ({read(b, 'first_partial')}) vs the last stop "
            f"{median(a, 'first_page_s'):.1f} s (whole file) in the same rounds",
            "target": "< 1 s (issue 45)",
            "met": median(b, "first_page_s") < 1,
        },
        {
            "figure": f"{figure}: a filter, a text search",
            "measured": f"filter **{median(b, 'filter_s'):.2f} s**, search **{median(b, 'search_s'):.2f} s** "
            f"(the matches among the records read so far, said so) vs the last stop {median(a, 'filter_s'):.1f} s, "
            f"{median(a, 'search_s'):.1f} s; the filter whole after {median(b, 'filter_whole_requests'):.0f} "
            f"requests ({median(b, 'filter_whole_s'):.1f} s), {b[0]['filter_whole_total']:,} records as the index",
            "target": "< 1 s (issue 45)",
            "met": max(median(b, "filter_s"), median(b, "search_s")) < 1,
        },
        {
            "figure": f"{figure}: one sample's page",
            "measured": f"**{median(b, 'sample_s'):.2f} s** vs the last stop {median(a, 'sample_s'):.1f} s",
            "target": "-",
            "met": None,
        },
    ]
    return {
        **summary.entry(result, rows, before=result["loadavg_before"], command=command, machine=machine()),
        "figures": result,
    }


def _served(checkout: Path, parent: Path, cache: Path) -> dict[str, Any]:
    """A fresh `evalkit view` of ``checkout``: the pair's first page, a filter, a search of answers and prompts."""
    from benchmarks import common
    from benchmarks.viewer import _Viewer

    common.ROOT = checkout.resolve()
    viewer = _Viewer([parent], cache)
    pair = f"/run/{RUN_ID}/pair/{PAIR[0]}/{PAIR[1]}/"
    out: dict[str, Any] = {}
    try:
        out["first_page_s"], body = viewer.get(pair)
        out["filter_s"], body = viewer.get("/api" + pair, FILTER)
        answer = json.loads(body)
        out["filter_total"], out["filter_indexed"] = answer["total"], answer.get("indexed")
        out["search_s"], body = viewer.get("/api" + pair, SEARCH)
        out["search_total"] = json.loads(body)["total"]
        out["search_prompt_s"], body = viewer.get("/api" + pair, SEARCH_PROMPT)
        out["search_prompt_total"] = json.loads(body)["total"]
        out["viewer_peak_rss"] = max(viewer.high_water_mark(), viewer.peak_sampled)
    finally:
        viewer.stop()
    return out


def _unindexed(checkout: Path, parent: Path, cache: Path) -> dict[str, Any]:
    """A run folder without its index (an old one): the first page and the filter while the viewer indexes."""
    from benchmarks import common
    from benchmarks.viewer import _Viewer

    common.ROOT = checkout.resolve()
    viewer = _Viewer([parent], cache)
    pair = f"/run/{RUN_ID}/pair/{PAIR[0]}/{PAIR[1]}/"
    try:
        first, _ = viewer.get(pair)
        filtered, body = viewer.get("/api" + pair, FILTER)
        indexed = json.loads(body).get("indexed")
    finally:
        viewer.stop()
    return {"unindexed_first_page_s": first, "unindexed_filter_s": filtered, "unindexed_filter_indexed": indexed}


def _linked_copy(run_dir: Path, parent: Path) -> Path:
    """The fixture run under ``parent`` without its index: run.json and results.json copied, records hard-linked."""
    copy = parent / run_dir.name
    (copy / "records" / "sent").mkdir(parents=True)
    for name in ("run.json", "results.json"):
        shutil.copy2(run_dir / name, copy / name)
    for path in (run_dir / "records").rglob("*.jsonl"):
        target = copy / path.relative_to(run_dir)
        try:
            os.link(path, target)
        except OSError:  # another file system: a copy
            shutil.copy2(path, target)
    return copy


def _unindexed_only(checkout: Path, parent: Path, cache: Path) -> dict[str, Any]:
    """A fresh viewer of a run folder with no index: the first page, its JSON, a filter, a search, page 2."""
    from benchmarks import common
    from benchmarks.viewer import _Viewer

    common.ROOT = checkout.resolve()
    viewer = _Viewer([parent], cache)
    pair = f"/run/{RUN_ID}/pair/{PAIR[0]}/{PAIR[1]}/"
    out: dict[str, Any] = {}

    def said(name: str, body: bytes) -> None:
        answer = json.loads(body)
        out[f"{name}_total"], out[f"{name}_indexed"] = answer.get("total"), answer.get("indexed")
        if "partial" in answer:
            out[f"{name}_partial"] = answer["partial"]

    try:
        out["first_page_s"], _ = viewer.get(pair)
        out["first_api_s"], body = viewer.get("/api" + pair)
        said("first", body)
        out["filter_s"], body = viewer.get("/api" + pair, FILTER)
        said("filter", body)
        out["search_s"], body = viewer.get("/api" + pair, SEARCH)
        said("search", body)
        out["page2_s"], body = viewer.get("/api" + pair, {"page": "2"})
        said("page2", body)
        out["sample_s"], _ = viewer.get(f"/run/{RUN_ID}/sample/{PAIR[0]}/{PAIR[1]}/{PAIR[0]}-300000")
        # the filter asked again and again (as the page reloads itself) until its answer is whole
        t0, asked = time.perf_counter(), 0
        while asked < 200:
            asked += 1
            answer = json.loads(viewer.get("/api" + pair, FILTER)[1])
            if not answer.get("partial"):
                break
        out["filter_whole_s"], out["filter_whole_requests"] = time.perf_counter() - t0, asked
        out["filter_whole_total"], out["filter_whole_indexed"] = answer["total"], answer.get("indexed")
        out["viewer_peak_rss"] = max(viewer.high_water_mark(), viewer.peak_sampled)
    finally:
        viewer.stop()
    return out


def unindexed(checkouts: dict[str, Path], rounds: int) -> dict[str, Any]:
    """Each round: every checkout in turn serves the fixture's run folder without an index, in a fresh viewer."""
    run_dir = fixture()
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
    out: dict[str, Any] = {"loadavg_before": os.getloadavg()}
    out["date"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    home = Path.cwd()
    links = Path(tempfile.mkdtemp(prefix="viewer-1m-unindexed-", dir=run_dir.parent.parent))
    try:
        parent = links / "runs"
        _linked_copy(run_dir, parent)
        for _ in range(rounds):
            for name, checkout in checkouts.items():
                work = Path(tempfile.mkdtemp(prefix=f"viewer-1m-{name}-"))
                try:
                    os.chdir(work)
                    found[name].append(_unindexed_only(checkout, parent, work / "c"))
                finally:
                    os.chdir(home)
                    shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(links, ignore_errors=True)
    out["loadavg_after"] = os.getloadavg()
    out["rounds"] = found
    return out


def measure(checkouts: dict[str, Path], rounds: int) -> dict[str, Any]:
    """Each round: every checkout in turn indexes the fixture, serves it, and serves it without an index."""
    from benchmarks.common import child_env

    run_dir = fixture()
    parent = run_dir.parent
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
    out: dict[str, Any] = {"loadavg_before": os.getloadavg()}
    aside = run_dir / "index.aside"
    home = Path.cwd()
    for _ in range(rounds):
        for name, checkout in checkouts.items():
            work = Path(tempfile.mkdtemp(prefix=f"viewer-1m-{name}-"))
            try:
                shutil.rmtree(run_dir / "index", ignore_errors=True)
                env = {**child_env(), "PYTHONPATH": str(checkout.resolve()), "EVALKIT_CACHE_DIR": str(work / "c")}
                # every child starts in an empty folder: `python -c`/`-m` put the current folder before PYTHONPATH
                os.chdir(work)
                done = subprocess.run(
                    [sys.executable, "-c", _INDEX, str(run_dir)], env=env, capture_output=True, text=True, check=True
                )
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                figures.update(_served(checkout, parent, work / "c"))
                if (run_dir / "index").exists():
                    (run_dir / "index").rename(aside)
                try:
                    figures.update(_unindexed(checkout, parent, work / "fresh"))
                finally:
                    if aside.exists():
                        shutil.rmtree(run_dir / "index", ignore_errors=True)
                        aside.rename(run_dir / "index")
                found[name].append(figures)
            finally:
                os.chdir(home)
                shutil.rmtree(work, ignore_errors=True)
    out["loadavg_after"] = os.getloadavg()
    out["rounds"] = found
    return out


def export(out_dir: Path | None, extra: list[str]) -> dict[str, Any]:
    """`evalkit view --export` of the fixture (the checkout on PYTHONPATH): time, files, bytes, peak RSS."""
    from benchmarks.common import child_env, evalkit_argv

    run_dir = fixture()
    target = out_dir or Path(tempfile.mkdtemp(prefix="viewer-1m-export-"))
    shutil.rmtree(target, ignore_errors=True)
    load = os.getloadavg()
    t0 = time.perf_counter()
    argv = ["/usr/bin/time", "-f", "%M", *evalkit_argv("view", str(run_dir.parent), "--export", str(target), *extra)]
    done = subprocess.run(argv, env=child_env(), capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    took = time.perf_counter() - t0
    files = [p for p in target.rglob("*") if p.is_file()]
    figures = {
        "command": "evalkit view " + str(run_dir.parent) + " --export DIR " + " ".join(extra),
        "export_s": took,
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "peak_rss_kib": int(done.stderr.strip().splitlines()[-1]),
        "said": [line for line in done.stderr.splitlines() if line.startswith("evalkit view")],
        "loadavg_before": load,
        "loadavg_after": os.getloadavg(),
    }
    if out_dir is None:
        shutil.rmtree(target, ignore_errors=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.viewer_1m")
    parser.add_argument(
        "what", nargs="?", default="measure", choices=["make", "measure", "export", "compare", "unindexed"]
    )
    parser.add_argument("--a", type=Path, help="checkout A (e.g. the last stop); measured in turn with B")
    parser.add_argument("--b", type=Path, default=Path(__file__).resolve().parent.parent, help="checkout B")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, help="export: keep the site here")
    parser.add_argument(
        "--results", help="compare or unindexed with --a: keep the summary rows as benchmarks/results/NAME"
    )
    args, extra = parser.parse_known_args(argv)
    if args.what == "make":
        t0 = time.perf_counter()
        run_dir = fixture()
        size = sum(p.stat().st_size for p in (run_dir / "records").rglob("*.jsonl"))
        print(json.dumps({"run": str(run_dir), "bytes": size, "seconds": round(time.perf_counter() - t0, 1)}))
    elif args.what in ("compare", "unindexed"):
        timed, entry = (compare, compare_entry) if args.what == "compare" else (unindexed, unindexed_entry)
        result = timed({"a": args.a, "b": args.b} if args.a else {"b": args.b}, args.rounds)
        print(json.dumps(result, indent=1))
        if args.results and args.a:
            command = "python -m benchmarks.viewer_1m " + shlex.join(sys.argv[1:] if argv is None else argv)
            summary.write_entry(args.results, entry(result, command))
    elif args.what == "export":
        print(json.dumps(export(args.out, extra), indent=1))
    else:
        checkouts = {"a": args.a, "b": args.b} if args.a else {"b": args.b}
        print(json.dumps(measure(checkouts, args.rounds), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

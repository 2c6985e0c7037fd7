"""Figures -> BENCHMARKS.md: every figure beside its target or ideal, and the machine it came from.

The measured part of the file is rewritten on every run; the hand-written
analysis between the ``analysis`` markers is kept, so the explanation of a
gap survives a re-run that refreshes the numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks import images, shards, summary, viewer
from benchmarks.common import mib

ANALYSIS_START = "<!-- analysis:start -->"
ANALYSIS_END = "<!-- analysis:end -->"
DEFAULT_ANALYSIS = f"{ANALYSIS_START}\n## Analysis\n\n(not written yet)\n{ANALYSIS_END}\n"


def _mark(ok: bool | None) -> str:
    return "—" if ok is None else ("yes" if ok else "**no**")


def _point(key: object) -> str:
    """(a)'s point: a label ("128 in flight, 100 ms latency"), or a bare concurrency from an older run's JSON."""
    return str(key) if "in flight" in str(key) else f"{key} in flight"


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """(figure, measured, target, met) for the table at the top."""
    rows: list[tuple[str, str, str, bool | None]] = []
    a = results.get("overhead")
    if a:
        for c, r in a["by_concurrency"].items():
            raw, ek = r["raw"], r["evalkit"]
            rows.append(
                (
                    f"(a) request phase, {_point(c)}",
                    f"{ek['rps_phase']:,.0f} req/s vs raw {raw['rps_phase']:,.0f} = **{r['ratio_phase']:.2f}x**",
                    ">= 0.85x",
                    r["ratio_phase"] >= 0.85,
                )
            )
            peer = r.get("lm_eval")
            if peer:
                rows.append(
                    (
                        f"(a) request phase, {_point(c)}, vs lm-eval {a.get('lm_eval_version', '')} (same run)",
                        f"evalkit {ek['rps_phase']:,.0f} vs lm-eval {peer['rps_phase']:,.0f} req/s "
                        f"(lm-eval {r['ratio_phase_lm_eval']:.2f}x raw)",
                        "ahead of lm-eval",
                        ek["rps_phase"] > peer["rps_phase"],
                    )
                )
            rows.append(
                (
                    f"(a) whole process, {_point(c)}",
                    f"{ek['rps_process']:,.0f} req/s vs raw {raw['rps_process']:,.0f} = **{r['ratio_process']:.2f}x**",
                    ">= 0.8x",
                    r["ratio_process"] >= 0.8,
                )
            )
        rows.append(
            (
                "(a') `evalkit run` spawn -> first request",
                f"**{a['startup_s']:.2f} s** (median, worst of the points)",
                "< 0.4 s",
                a["startup_s"] < 0.4,
            )
        )
        rows.append(
            (
                "(a') `evalkit list datasets`",
                f"**{a['list']['median_s']:.2f} s** (median of {len(a['list']['runs_s'])})",
                "< 1 s",
                a["list"]["median_s"] < 1.0,
            )
        )
    b = results.get("latency")
    if b:
        rows.append(
            (
                "(b) 3 models x 2 datasets, 100 ms, batch 64",
                f"{b['phase_s']:.2f} s vs ideal {b['ideal_s']:.2f} s = **{b['ratio_phase']:.2f}x** (runner "
                f"{b['ratio_execute']:.2f}x)",
                "<= 1.10x",
                b["ratio_phase"] <= 1.10,
            )
        )
    c = results.get("replicas")
    if c:
        four = c["scaling"][4]
        rows.append(
            (
                "(c) throughput at 4 replicas vs 1",
                f"**{four['speedup']:.2f}x** ({four['throughput']:,.0f} vs {c['scaling'][1]['throughput']:,.0f} req/s)",
                ">= 3.6x",
                four["speedup"] >= 3.6,
            )
        )
        s = c["slow"]
        rows.append(
            (
                "(c) one of 4 replicas 3x slower",
                f"{s['phase_s']:.2f} s vs ideal {s['ideal_s']:.2f} s = **{s['ratio_to_ideal']:.2f}x**",
                "<= 1.1x",
                s["ratio_to_ideal"] <= 1.1,
            )
        )
    d = results.get("memory")
    if d:
        small, large = d[5000], d[20000]
        rows.append(
            (
                "(d) peak RSS 5,000 -> 20,000 audio samples",
                f"{mib(small['peak_rss_bytes'])} -> {mib(large['peak_rss_bytes'])} = **{d['growth']:+.1%}**",
                "< +20%",
                d["growth"] < 0.20,
            )
        )
        rows.append(
            (
                "(d) peak RSS at 20,000",
                f"**{mib(large['peak_rss_bytes'])}**",
                "< 1 GiB",
                large["peak_rss_bytes"] < 2**30,
            )
        )
    if b:
        rows.append(
            (
                "(e) loop lag p99 during (b)",
                f"**{b['lag_p99_ms']:.1f} ms** (loop busy {b['busy_lag_p99_ms']:.1f} ms)",
                "< 50 ms",
                b["lag_p99_ms"] < 50,
            )
        )
    if d:
        worst = max(d[5000]["lag_p99_ms"], d[20000]["lag_p99_ms"])
        busy = max(d[5000]["busy_lag_p99_ms"], d[20000]["busy_lag_p99_ms"])
        rows.append(
            (
                "(e) loop lag p99 during (d)",
                f"**{worst:.1f} ms** (worst of 5k/20k; loop busy {busy:.1f} ms)",
                "< 50 ms",
                worst < 50,
            )
        )
    f = results.get("audio_requests")
    if f:
        rows.append(
            (
                f"(f) audio requests, {f['clip_seconds']} s clips, {f['concurrency']} in flight",
                f"{f['evalkit']['rps_phase']:,.0f} req/s vs raw loop of the same bodies "
                f"{f['raw']['rps_phase']:,.0f} = **{f['ratio_phase']:.2f}x**",
                ">= 0.8x",
                f["ratio_phase"] >= 0.8,
            )
        )
        rows.append(
            (
                "(f) audio requests, client CPU per request",
                f"evalkit **{f['cpu_us_per_request_evalkit']:,.0f} µs** (main process "
                f"{f['cpu_us_per_request_evalkit_main']:,.0f} µs, the rest its audio workers) vs raw "
                f"{f['cpu_us_per_request_raw']:,.0f} µs",
                "—",
                None,
            )
        )
    s = results.get("soak")
    if s:
        rows += _soak_rows(s)
    rows += images.summary_rows(results)
    rows += shards.summary_rows(results)
    rows += viewer.summary_rows(results)
    return rows


def _soak_rows(s: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    n, r, c = s["samples"], s["resumed"], s["clean"]
    size = f"{n:,} x {len(s['metrics'])} metrics"
    complete = all(count == n for count in s["records"].values()) and s["failed"] == 0
    leaked_fds = r["fds_after_second_run"] - r["fds_after"]
    sockets = [t for t in r["fds_new"] if t.startswith("socket:") or t.endswith((".sqlite", "-wal", "-shm"))]
    return [
        (
            f"(s) soak {size}: nothing lost",
            f"**{min(s['records'].values()):,}** records per metric, **{s['failed']}** failed",
            f"{n:,}, 0 failed",
            complete,
        ),
        (
            "(s) requests re-sent after SIGTERM at 30% + resume",
            f"**{s['resent']}** (answered before the SIGTERM, asked again)",
            f"<= batch_size ({s['batch_size']})",
            s["resent"] <= s["batch_size"],
        ),
        ("(s) scores equal a clean run's", f"**{'yes' if s['scores_equal'] else 'no'}**", "equal", s["scores_equal"]),
        (
            f"(s) RSS at {n // 4:,} -> {n:,} samples (clean run)",
            f"{mib(c['rss_quarter_bytes'])} -> {mib(c['rss_last_record_bytes'])} = **{s['rss_growth']:+.1%}** "
            f"(peak {mib(c['peak_rss_bytes'])}; resume peak {mib(r['peak_rss_bytes'])})",
            "within 10%",
            abs(s["rss_growth"]) <= 0.10,
        ),
        (
            "(s) descriptors and tasks left after the resume",
            f"fds {r['fds_before']} -> {r['fds_after']} ({', '.join(r['fds_new']) or 'none new'}), then "
            f"**{leaked_fds:+d}** over one more run; sockets/store files open: **{len(sockets)}**; tasks "
            f"{r['tasks_before']} -> {r['tasks_after']} (**{r['tasks_after'] - r['tasks_before']:+d}**)",
            "no growth per run, 0 sockets, +0 tasks",
            leaked_fds <= 0 and not sockets and r["tasks_after"] <= r["tasks_before"],
        ),
    ]


def _details(results: dict[str, Any]) -> list[str]:
    out: list[str] = []
    a = results.get("overhead")
    if a:
        out += [
            "### (a) overhead and (a') start-up",
            "",
            (
                f"{a['n_requests']:,} distinct chat prompts, a zero-latency test server (100 ms at the last point; own "
                "process, request log on "
                "for both clients), "
                "`evalkit run --no-cache --quiet` vs `python -m benchmarks.raw_loop` (one aiohttp session + "
                "semaphore). "
                "Request phase = first request received -> last response completed, from the server's log, for both. "
                "Whole process = spawn -> exit, for both (the whole-process ratio compares like with like). "
                "CPU = the client process' user+sys time (wait4), start-up included. "
                f"Each figure is the median of {a.get('rounds', 1)} alternating raw/evalkit rounds, each against a "
                "fresh server."
                + (
                    f" With `--peers`, lm-eval {a['lm_eval_version']} (`local-chat-completions`, its own venv, an "
                    "lm-eval task over the same jsonl, `num_concurrent` = in flight) runs in the same rounds."
                    if a.get("lm_eval_version")
                    else ""
                )
            ),
            "",
            "| point | client | request phase | req/s (phase) | whole process | req/s (process) | client CPU | "
            "CPU per request | server CPU |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c, r in a["by_concurrency"].items():
            for who in ("raw", "evalkit", "lm_eval"):
                if who not in r:
                    continue
                x = r[who]
                out.append(
                    f"| {c} | {who} | {x['phase_s']:.2f} s | {x['rps_phase']:,.0f} | {x['process_s']:.2f} s | "
                    f"{x['rps_process']:,.0f} | "
                    f"{x['cpu_s']:.2f} s | {x['cpu_s'] / a['n_requests'] * 1e6:,.0f} µs | {x['server_cpu_s']:.2f} s |"
                )
        out.append("")
        for c, r in a["by_concurrency"].items():
            for who in ("raw", "evalkit", "lm_eval"):
                runs = r.get(who, {}).get("runs_rps_phase")
                if runs:
                    out.append(
                        f"- {_point(c)}, {who}: request-phase req/s per round {', '.join(f'{x:,.0f}' for x in runs)}"
                    )
        for c, r in a["by_concurrency"].items():
            ek = r["evalkit"]
            out.append(
                f"- {_point(c)}: evalkit spawn -> first request {ek['startup_s']:.2f} s; last response -> exit "
                f"{ek['after_last_s']:.2f} s."
            )
        lst = a["list"]
        out.append(
            f"- `evalkit list datasets`: {', '.join(f'{s:.2f}' for s in lst['runs_s'])} s (median "
            f"{lst['median_s']:.2f} s)."
        )
        if a.get("list_cold_s") is not None:
            out.append(
                "- `evalkit list datasets` with PYTHONDONTWRITEBYTECODE=1 and no bytecode prefix (as this machine's "
                f"shell runs it): {a['list_cold_s']:.2f} s."
            )
        out.append("")
    b = results.get("latency")
    if b:
        out += [
            "### (b) latency-bound efficiency, (e) lag",
            "",
            (
                f"{b['requests']:,} requests (3 models, each its own server, x 2 datasets of 2,000 distinct "
                "prompts), batch_size 64 each = "
                f"{b['concurrency']} in flight, {b['latency_ms']} ms per answer. Ideal = requests x latency / "
                f"concurrency = {b['ideal_s']:.2f} s."
            ),
            "",
            f"- request phase (servers' logs): {b['phase_s']:.2f} s = {b['ratio_phase']:.3f}x ideal; runner "
            f"(`execute`) {b['execute_s']:.2f} s = {b['ratio_execute']:.3f}x; process {b['process_s']:.2f} s",
            f"- peak in flight per server (/_stats): {b['server_peak_in_flight']} (64 = batch_size reached)",
            (
                f"- evalkit CPU during the run {b['execute_cpu_s']:.2f} s = "
                f"{b['execute_cpu_s'] / b['requests'] * 1e6:,.0f} µs per request "
                f"(whole process {b['cpu_s']:.2f} s); the ideal needs {b['requests'] / b['ideal_s']:,.0f} req/s, "
                f"i.e. at most {b['ideal_s'] / b['requests'] * 1e6:,.0f} µs of client CPU per request on one core"
            ),
            f"- cyclic garbage collector: {b['gc_s']:.2f} s in {sum(b['gc_collections'])} collections (gen 0/1/2: "
            f"{b['gc_collections']}), longest pause {b['gc_longest_ms']:.0f} ms",
            f"- loop lag: p50 {b['lag_p50_ms']:.1f} ms, p99 {b['lag_p99_ms']:.1f} ms, max {b['lag_max_ms']:.1f} ms; "
            f"loop-busy part p99 {b['busy_lag_p99_ms']:.1f} ms",
            "",
        ]
    c = results.get("replicas")
    if c:
        out += [
            "### (c) replica scaling",
            "",
            (
                f"One model, `url` listing the replicas, batch_size {c['server_limit']} each; every replica its own "
                "server with "
                f"`max_concurrency: {c['server_limit']}` and {c['latency_ms']} ms latency (160 req/s each at most); "
                f"{c['n_requests']:,} distinct prompts "
                f"({c['n_slow']:,} for the run with a slow replica)."
            ),
            "",
            "| replicas | latencies (ms) | request phase | throughput | ideal time | vs ideal | speed-up | served "
            "per replica | lag p99 |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in [*c["scaling"].values(), c["slow"]]:
            speed = f"{r['speedup']:.2f}x" if "speedup" in r else "—"
            out.append(
                f"| {r['replicas']} | {', '.join(str(int(x)) for x in r['latencies_ms'])} | {r['phase_s']:.2f} s | "
                f"{r['throughput']:,.0f} req/s | "
                f"{r['ideal_s']:.2f} s | {r['ratio_to_ideal']:.3f}x | {speed} | {r['served']} | "
                f"{r['lag_p99_ms']:.1f} ms |"
            )
        s = c["slow"]
        out += [
            "",
            f"- the slow replica served {s['slow_share']:.1%} of the requests (its share of the capacity: "
            f"{s['ideal_slow_share']:.1%}).",
            "",
        ]
    d = results.get("memory")
    if d:
        out += [
            "### (d) memory, (e) lag",
            "",
            (
                f"Local parquet, {d[20000]['samples']:,} rows in row groups of 250 ({mib(d['parquet_bytes'])}): 10 "
                "s, 16 kHz mono 16-bit FLAC, a quiet tone "
                "(pitch distinct per row) for 0.5 s then digital silence; each decodes to 320 KB of PCM and is sent "
                "as 427 KB of base64 WAV. "
                'Zero-latency server answering "ok" (decodes nothing); batch_size 32; window 256 samples; metric '
                "word_error_rate. "
                "Peak RSS = ru_maxrss of the evalkit process (the harness running the runner in-process)."
            ),
            "",
            "| samples | peak RSS | RSS at 25/50/75/100% of the run | wall | samples/s | CPU per sample | GC time "
            "(longest) | lag p50 | lag p99 | lag max | loop-busy p99 |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for n in (5000, 20000):
            r = d[n]
            quart = " / ".join(mib(x) for x in r["rss_quartiles_bytes"])
            out.append(
                f"| {n:,} | {mib(r['peak_rss_bytes'])} | {quart} | {r['execute_s']:.1f} s | {r['samples_per_s']:.0f} "
                f"| {r['execute_cpu_s'] / n * 1e3:.1f} ms | "
                f"{r['gc_s']:.2f} s ({r['gc_longest_ms']:.0f} ms) | "
                f"{r['lag_p50_ms']:.1f} ms | {r['lag_p99_ms']:.1f} ms | {r['lag_max_ms']:.1f} ms | "
                f"{r['busy_lag_p99_ms']:.1f} ms |"
            )
        if d.get("generated_s"):
            out.append(
                f"\n(the parquet file was generated in this run: {d['generated_s']:.0f} s, not counted in any figure)"
            )
        out.append("")
    f = results.get("audio_requests")
    if f:
        out += [
            "### (f) audio requests",
            "",
            (
                f"{f['n_requests']:,} chat requests, each carrying one {f['clip_seconds']} s clip of (d)'s parquet "
                f"(FLAC, decoded and sent as base64 WAV: {f['body_bytes_mean'] / 1024:,.0f} KiB bodies on average), "
                f"batch_size {f['concurrency']}, metric word_error_rate, `evalkit run --no-cache --quiet`; the raw "
                "loop sends the bodies evalkit sent, captured byte for byte from one evalkit run beforehand, so it "
                'decodes and encodes nothing. Fresh zero-latency test server per client answering "ok" (request '
                f"log on); medians of {f['rounds']} alternating rounds. evalkit's CPU = its process plus its audio "
                "worker processes (reaped by the benchmark as child subreaper"
                + ("" if f.get("subreaper") else "; NOT available on this machine: workers uncounted")
                + ")."
            ),
            "",
            "| client | request phase | req/s (phase) | whole process | CPU | CPU per request | server CPU |",
            "|---|---|---|---|---|---|---|",
        ]
        for name in ("raw", "evalkit"):
            r = f[name]
            cpu = f"{r['cpu_s']:.2f} s" + (
                f" (main {r['main_cpu_s']:.2f} s + workers {r['workers_cpu_s']:.2f} s)" if name == "evalkit" else ""
            )
            out.append(
                f"| {name} | {r['phase_s']:.2f} s | {r['rps_phase']:,.0f} | {r['process_s']:.2f} s | {cpu} | "
                f"{r['cpu_s'] / f['n_requests'] * 1e6:,.0f} µs | {r['server_cpu_s']:.2f} s |"
            )
        out += [
            "",
            f"- request-phase req/s per round: raw {', '.join(f'{x:,.0f}' for x in f['raw']['runs_rps_phase'])}; "
            f"evalkit {', '.join(f'{x:,.0f}' for x in f['evalkit']['runs_rps_phase'])}",
            f"- evalkit spawn -> first request {f['evalkit']['startup_s']:.2f} s (median)",
            "",
        ]
    s = results.get("soak")
    if s:
        r, c = s["resumed"], s["clean"]
        out += [
            "### (s) soak",
            "",
            (
                f"{s['samples']:,} distinct text samples x {len(s['metrics'])} metrics ({', '.join(s['metrics'])}; "
                f"one request per sample), batch_size {s['batch_size']}, timeout 2 s, 8 retries, against the test "
                f"server with faults {', '.join(f'{k} {v:.0%}' for k, v in s['faults'].items())} (429 with "
                "Retry-After: 1; hang 30 s; drop = connection reset). A clean run (no faults, no store) first; then "
                f"`evalkit run` got SIGTERM after {s['sigterm_after_s']:.1f} s, when the server had answered "
                f"{s['answered_before_sigterm']:,} samples; then `--resume` in a probe process."
            ),
            "",
            "| run | wall | requests sent | store hits | peak RSS | RSS at 25% / last record / end | fds before/after "
            "| tasks before/after |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, p in (("clean", c), ("resume", r)):
            quarter = mib(p["rss_quarter_bytes"]) if p.get("rss_quarter_bytes") else "—"
            quarter += " / " + (mib(p["rss_last_record_bytes"]) if p.get("rss_last_record_bytes") else "—")
            out.append(
                f"| {name} | {p['seconds']:.1f} s | {p['requests_sent']:,} | {p['store_hits']:,} | "
                f"{mib(p['peak_rss_bytes'])} | {quarter} / {mib(p['rss_end_bytes'])} | {p['fds_before']} / "
                f"{p['fds_after']} | {p['tasks_before']} / {p['tasks_after']} |"
            )
        out += [
            "",
            f"- faults the server drew (all attempts of both faulty runs): {s['faults_drawn']}",
            f"- records per metric after the resume: {s['records']}; failed samples: {s['failed']}",
            f"- re-sent after the resume: {s['resent']}; scores equal the clean run's: {s['scores_equal']}",
            "",
        ]
    p = results.get("profile")
    if p and not p.get("skipped"):
        out += [
            "### Profile of (a)",
            "",
            (
                f"`py-spy record --gil --rate {p['rate_hz']}` of `evalkit run` at {p['concurrency']} in flight (a "
                "separate run from the timed one): "
                f"{p['samples']:,} samples while holding the GIL; {p['share_imports']:.0%} in imports (start-up), "
                f"{p['share_in_loop']:.0%} inside the event loop."
            ),
            "",
            (
                "Where the request phase's CPU goes (samples inside the event loop, imports excluded, grouped by the "
                "deepest evalkit "
                "frame; the garbage collector has no frame of its own and is counted where it was triggered):"
            ),
            "",
            "| share | part |",
            "|---|---|",
        ]
        out += [f"| {share:.1%} | {name} |" for name, share in p["buckets"]]
        out += [
            "",
            "Top functions by own time inside the event loop (share of all samples):",
            "",
            "| share | function |",
            "|---|---|",
        ]
        out += [f"| {share:.1%} | `{fn}` |" for fn, share in p["top_loop_self"][:20]]
        out += ["", "evalkit functions by inclusive time:", "", "| share | function |", "|---|---|"]
        out += [f"| {share:.1%} | `{fn}` |" for fn, share in p["evalkit_inclusive"][:20]]
        out.append("")
    out += images.details(results)
    out += shards.details(results)
    out += viewer.details(results)
    return out


def suite_entry(results: dict[str, Any]) -> dict[str, Any]:
    """This run's summary rows as a result file of benchmarks/results/ (see benchmarks/summary.py)."""
    rows = [
        {"figure": fig, "measured": val, "target": target, "met": ok} for fig, val, target, ok in summary_rows(results)
    ]
    return summary.entry(results, rows)


def render(results: dict[str, Any], analysis: str, entries: list[tuple[str, dict[str, Any]]] | None = None) -> str:
    """The whole file; its summary is generated from ``entries`` (default: benchmarks/results/ and this run)."""
    m = results["machine"]
    lines = [
        "# evalkit benchmarks",
        "",
        "Produced by one command from the repository root:",
        "",
        "```",
        results["command"],
        "```",
        "",
        f"- date of this run (the details below; each summary figure gives its own): {results['date']}; suite wall "
        f"time {results['suite_s']:.0f} s",
        f"- machine: {m['cpu_count']} CPUs ({m['cpus_usable']} usable), {m['cpu_model'] or 'unknown CPU'}; Python "
        f"{m['python']}; {m['platform']}",
        f"- load average (1/5/15 min) before: {' / '.join(f'{x:.2f}' for x in m['loadavg'])}; after: "
        f"{' / '.join(f'{x:.2f}' for x in results['loadavg_after'])}",
        "- every client and server is its own process on 127.0.0.1 (test server: `python -m "
        "evalkit.testing.server`); uvloop in evalkit and in the raw loop",
        f"- bytecode: {results['bytecode']}",
        "",
        (
            "**Noise.** This machine is shared: other engineers run test suites, model servers and vLLM on the same "
            "2 CPUs while this runs. "
            "A load average above the CPU count means every process here, clients and servers alike, got only part "
            "of a core, so wall-time "
            "figures (req/s, seconds, lag) are pessimistic and vary run to run; CPU-time figures (CPU per request) "
            "are the steadier comparison."
        ),
        "",
        "## Figures",
        "",
        summary.render(
            entries if entries is not None else [*summary.load_entries(), ("(this run)", suite_entry(results))]
        ),
    ]
    if results.get("errors"):
        lines += ["", "Sections that failed in this run:", ""]
        lines += [f"- {key}: `{error}`" for key, error in results["errors"].items()]
    lines += ["", "## Details", ""]
    lines += _details(results)
    lines += [analysis.rstrip(), ""]
    return "\n".join(lines)


def keep_analysis(path: Path) -> str:
    """The hand-written analysis of an existing BENCHMARKS.md, or a placeholder."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return DEFAULT_ANALYSIS
    start, end = text.find(ANALYSIS_START), text.find(ANALYSIS_END)
    if start == -1 or end == -1 or end < start:
        return DEFAULT_ANALYSIS
    return text[start : end + len(ANALYSIS_END)] + "\n"


def write(path: Path, results: dict[str, Any], keep: str | None = None) -> None:
    """Write the report; with ``keep``, this run's rows are first kept as benchmarks/results/``keep``."""
    if keep:
        summary.write_entry(keep, suite_entry(results))
        path.write_text(render(results, keep_analysis(path), summary.load_entries()), encoding="utf-8")
    else:
        path.write_text(render(results, keep_analysis(path)), encoding="utf-8")

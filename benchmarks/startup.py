"""(a') start-up: spawn -> first request of `evalkit run` against the bare aiohttp loop, and `evalkit list datasets`.

One round starts, each against a fresh test server (request log on), the raw
loop (``benchmarks.raw_loop``) and `evalkit run --no-cache --quiet` of every
checkout given (``--a``/``--b``: an A/B of two checkouts in the same rounds),
and times `evalkit list datasets` for each checkout. Start-up is the child's
spawn -> the server receiving its first request (the server's log and this
driver read the same clock). Rounds alternate the clients, and figures are
medians, so a noisy neighbour costs every client alike.

Two bytecode conditions, each in every round:

- ``compiled``: the checkouts' modules compiled beforehand into a private
  ``PYTHONPYCACHEPREFIX`` (what an installed wheel has: pip compiles at install);
- ``source``: ``PYTHONDONTWRITEBYTECODE=1`` and no prefix, so every module of
  the checkout (evalkit's, and the raw loop's own) is compiled from source at
  each start. Libraries keep the bytecode their installer wrote in both.

    python -m benchmarks.startup --a /work/base --b . --rounds 5 --json /tmp/startup.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import common, summary
from benchmarks.common import machine, model_entry, request_phase, run_child, servers, write_config, write_text_dataset

N_REQUESTS = 64
CONCURRENCY = 32
MODES = ("compiled", "source")


def _env(root: Path, mode: str, prefix: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if mode == "compiled":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(prefix)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    return env


def _compile(roots: list[Path], prefix: Path) -> None:
    env = _env(roots[0], "compiled", prefix)
    for root in roots:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(root / "evalkit"), str(root / "benchmarks")],
            check=False,
            env=env,
            stdout=subprocess.DEVNULL,
        )


def _first_request(argv: list[str], work: Path, env: dict[str, str], config_for: Any = None) -> tuple[float, float]:
    """Seconds from spawn to the server's first received request, and the child's CPU seconds over its whole run.

    The run is short (a few dozen requests), so its CPU is mostly start-up: a figure a loaded machine disturbs
    less than wall time, since a process waiting for a core uses none.
    """
    with servers(1, request_log=True) as (server,):
        args = config_for(server.base_url) if config_for else [*argv, "--url", server.base_url]
        child = run_child(args, work, env=env).check()
        return request_phase([server]).first_received - child.started, child.cpu_s


def measure(roots: dict[str, Path], rounds: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="evalkit-startup-"))
    runspecs = work / "runspecs"
    data = write_text_dataset(runspecs, "bench_startup", N_REQUESTS)
    prefix = work / "pycache"
    _compile(list(roots.values()), prefix)
    raw_argv = [sys.executable, "-m", "benchmarks.raw_loop", "--prompts", str(data), "--concurrency", str(CONCURRENCY)]

    def evalkit_for(url: str) -> list[str]:
        config = write_config(
            work / "startup.yaml",
            [("bench_startup", "exact_match")],
            [model_entry("bench", url, CONCURRENCY)],
            runspecs,
            work / "runs",
        )
        return [sys.executable, "-m", "evalkit", "run", str(config), "--no-cache", "--quiet"]

    first = next(iter(roots.values()))
    runs: dict[str, dict[str, list[float]]] = {mode: {} for mode in MODES}
    cpus: dict[str, dict[str, list[float]]] = {mode: {} for mode in MODES}
    lists: dict[str, list[float]] = {name: [] for name in roots}
    for _ in range(rounds):
        for mode in MODES:
            # the raw loop runs from the first checkout's benchmarks/ (the same file in both)
            wall, cpu = _first_request(raw_argv, work, _env(first, mode, prefix))
            runs[mode].setdefault("raw", []).append(wall)
            cpus[mode].setdefault("raw", []).append(cpu)
            for name, root in roots.items():
                wall, cpu = _first_request([], work, _env(root, mode, prefix), evalkit_for)
                runs[mode].setdefault(name, []).append(wall)
                cpus[mode].setdefault(name, []).append(cpu)
        for name, root in roots.items():
            child = run_child(
                [sys.executable, "-m", "evalkit", "list", "datasets"], work, env=_env(root, "compiled", prefix)
            )
            lists[name].append(child.check().wall_s)
    out: dict[str, Any] = {"rounds": rounds, "requests": N_REQUESTS, "concurrency": CONCURRENCY, "modes": {}}
    for mode in MODES:
        raw = statistics.median(runs[mode]["raw"])
        out["modes"][mode] = {
            "raw_s": raw,
            "raw_runs_s": runs[mode]["raw"],
            "raw_cpu_s": statistics.median(cpus[mode]["raw"]),
            **{
                name: {
                    "median_s": statistics.median(runs[mode][name]),
                    "runs_s": runs[mode][name],
                    "ratio_to_raw": statistics.median(runs[mode][name]) / raw,
                    "cpu_s": statistics.median(cpus[mode][name]),
                    "cpu_runs_s": cpus[mode][name],
                    "cpu_ratio_to_raw": statistics.median(cpus[mode][name]) / statistics.median(cpus[mode]["raw"]),
                }
                for name in roots
            },
        }
    out["list_datasets"] = {name: {"median_s": statistics.median(v), "runs_s": v} for name, v in lists.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=Path, default=None, help="a checkout to compare with (e.g. the last stop)")
    parser.add_argument("--b", type=Path, default=common.ROOT, help="the checkout measured (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--results", default=None, help="also keep the summary rows as benchmarks/results/NAME (then run summary)"
    )
    args = parser.parse_args(argv)
    roots = {"b": args.b.resolve()} if args.a is None else {"a": args.a.resolve(), "b": args.b.resolve()}
    before = os.getloadavg()
    result = {
        "command": "python -m benchmarks.startup " + shlex.join(sys.argv[1:] if argv is None else argv),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "checkouts": {name: str(root) for name, root in roots.items()},
        **measure(roots, args.rounds),
        "loadavg_after": os.getloadavg(),
    }
    result["machine"]["loadavg"] = before
    for mode, figures in result["modes"].items():
        line = f"{mode}: raw {figures['raw_s']:.3f} s"
        for name in roots:
            line += f"; {name} {figures[name]['median_s']:.3f} s = {figures[name]['ratio_to_raw']:.2f}x raw"
            line += f" (CPU of the {N_REQUESTS}-request run {figures[name]['cpu_ratio_to_raw']:.2f}x raw's)"
        print(line)
    for name, figures in result["list_datasets"].items():
        print(
            f"list datasets {name}: {figures['median_s']:.3f} s "
            f"(runs {', '.join(f'{x:.2f}' for x in figures['runs_s'])})"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    if args.results:
        summary.write_entry(args.results, summary_entry(result))
    return 0


def summary_entry(result: dict[str, Any]) -> dict[str, Any]:
    """The rows this run gives BENCHMARKS.md's summary (checkout ``b``, against ``a`` when there is one)."""
    rows = []
    labels = {"compiled": "compiled bytecode", "source": "compiled at start (PYTHONDONTWRITEBYTECODE)"}
    for mode, figures in result["modes"].items():
        b = figures["b"]
        before = f"; last stop {figures['a']['ratio_to_raw']:.2f}x, same rounds" if "a" in figures else ""
        rows.append(
            {
                "figure": f"(a') `evalkit run` spawn -> first request, {labels[mode]}",
                "measured": f"**{b['median_s']:.2f} s** vs the bare aiohttp loop {figures['raw_s']:.2f} s = "
                f"**{b['ratio_to_raw']:.2f}x**{before}; CPU of the {result['requests']}-request run "
                f"{b['cpu_ratio_to_raw']:.2f}x the loop's"
                + (f" (last stop {figures['a']['cpu_ratio_to_raw']:.2f}x)" if "a" in figures else ""),
                "target": "<= 1.2x the loop",
                "met": b["ratio_to_raw"] <= 1.2,
                "replaces": ["(a') `evalkit run` spawn -> first request"],
            }
        )
    lst = result["list_datasets"]
    before = f"; last stop {lst['a']['median_s']:.2f} s, same rounds" if "a" in lst else ""
    rows.append(
        {
            "figure": "(a') `evalkit list datasets`",
            "measured": f"**{lst['b']['median_s']:.2f} s** (median of {len(lst['b']['runs_s'])}{before})",
            "target": "< 0.5 s",
            "met": lst["b"]["median_s"] < 0.5,
        }
    )
    return {
        **summary.entry(result, rows),
        "figures": {k: result[k] for k in ("rounds", "requests", "modes", "list_datasets", "checkouts")},
    }


if __name__ == "__main__":
    raise SystemExit(main())

"""The ``evalkit`` command: run / validate / list / info / report / rescore / merge / serve.

Heavy modules are imported inside the commands that need them, so
``evalkit list``, ``info`` and ``--help`` start fast (no numpy, datasets,
aiohttp or torch). A user mistake (UserError) is printed as one message with
exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shutil
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from evalkit.errors import RunInterrupted, UserError

T = TypeVar("T")

LIST_KINDS = (
    "datasets",
    "tasks",
    "categories",
    "metrics",
    "models",
    "preprocessors",
    "postprocessors",
    "processors",
    "all",
)
FORMATS = ("table", "json", "csv")
#: how relative paths are read, worded as README.md and sample_config.yaml word it (tests/test_documented_defaults.py)
PATH_RULE = (
    "Relative paths in a config file (runspecs_dir, output_dir, prompts_dir, cache.path, dataset_paths, and a "
    "launch.model_path found there) mean the config file's folder; paths on the command line (--output-dir, "
    "--resume) mean the working directory."
)


def _run_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="evaluate every model on every dataset-metric pair of a config",
        description="Evaluate every model on every dataset-metric pair of a config.",
        epilog=PATH_RULE,
    )
    p.add_argument("config_pos", nargs="?", metavar="CONFIG", help="config file (default config.yaml)")
    p.add_argument("--config", "-c", dest="config", help="config file (default config.yaml)")
    p.add_argument(
        "--dataset",
        "--datasets",
        dest="dataset",
        action="append",
        metavar="NAME",
        help="only this dataset/task/category (repeatable, or comma-separated: --datasets a,b); a name not in the "
        "config runs with its task's default metric",
    )
    p.add_argument(
        "--metric",
        action="append",
        metavar="NAME",
        help="only this metric (repeatable); with --dataset: every dataset with every metric",
    )
    p.add_argument(
        "--model",
        action="append",
        metavar="NAME",
        help="only this model of the config (repeatable); without a config: a model folder or hub id that evalkit "
        "serves itself (vLLM when it can, else evalkit serve) and stops after, or a hosted model name "
        "(gemini-2.5-flash, gpt-4o, sarvam-30b)",
    )
    p.add_argument(
        "--model-path",
        metavar="PATH",
        help="without a config: the folder or hub id --model loads (then --model is only its name in results)",
    )
    p.add_argument(
        "--launch-backend",
        choices=["vllm", "transformers"],
        help="without a config: the server that --model's folder or hub id runs on (default: vllm when installed "
        "and able to serve it, else transformers)",
    )
    p.add_argument(
        "--num-samples", "--max-samples", dest="num_samples", type=int, metavar="N", help="override filters.num_samples"
    )
    _karma_run_args(p)
    p.add_argument(
        "--batch-size",
        type=int,
        metavar="N",
        help="requests in flight per endpoint, for every model (overrides batch_size)",
    )
    p.add_argument(
        "--model-url",
        metavar="URL",
        help="run without a config file: an OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1); with "
        "--model-name and --dataset",
    )
    p.add_argument("--model-name", metavar="ID", help="with --model-url: the model id sent in requests")
    p.add_argument(
        "--inference-type",
        choices=["vllm", "openai", "transcription"],
        help="with --model-url: how the endpoint is spoken to (default vllm)",
    )
    p.add_argument(
        "--api-key-env", metavar="VAR", help="with --model-url: the environment variable holding the API key"
    )
    p.add_argument(
        "--output-dir", metavar="DIR", help="override output_dir (a relative DIR means the working directory)"
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan, sample and request counts and what the response store holds; check that local "
        "files exist (exit 2 if not) and that each endpoint serves its model id (GET /models); send no request "
        "to a model",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue an interrupted run in RUN_DIR (answers already stored are not asked again)",
    )
    p.add_argument(
        "--shard",
        metavar="K/N",
        help="run only shard K of N of every dataset-metric pair (samples split by a hash of their id, after the "
        "filters; K counts from 0, e.g. --shard $SLURM_ARRAY_TASK_ID/8 with sbatch --array=0-7); combine the N "
        "run folders with `evalkit merge`",
    )
    p.add_argument(
        "--max-failure-rate",
        type=_failure_rate,
        metavar="RATE",
        help="override max_failure_rate (0-1, default 0.2): a model whose share of failed samples on a "
        "dataset-metric pair exceeds it makes the run exit with code 3, after everything is written",
    )
    p.add_argument(
        "--allow-failures",
        action="store_true",
        help="exit 0 even when results exceed max_failure_rate (they are still marked ! and listed)",
    )
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the response store")
    p.add_argument("--refresh-cache", action="store_true", help="ask every request again and overwrite stored answers")
    p.add_argument(
        "--progress-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds between plain progress lines when not on a terminal (default 10)",
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress, only the final table")
    p.add_argument("--verbose", "-v", action="store_true", help="print the plan first, and debug logging")


def _karma_run_args(p: argparse.ArgumentParser) -> None:
    """KARMA's component arguments and results file, in KARMA's syntax (see evalkit/cli/karma_args.py)."""
    p.add_argument(
        "--dataset-args",
        action="append",
        metavar="SPEC",
        help="dataset arguments, DATASET:key=value,key=value;DATASET2:key=value (repeatable), e.g. "
        "ai4bharat/IN22-Conv:source_language=en,target_language=hi: they pick the catalogue entry for that "
        "language, subset or pair",
    )
    p.add_argument(
        "--metric-args",
        action="append",
        metavar="SPEC",
        help="metric options, METRIC:key=value,...;METRIC2:key=value (repeatable), e.g. "
        "exact_match:normalize=false;bleu:max_ngram_order=2; set on every pair scored with METRIC",
    )
    p.add_argument(
        "--processor-args",
        action="append",
        metavar="SPEC",
        help="text processors, DATASET.PROCESSOR:key=value,...;... (repeatable), e.g. "
        "in22conv.devnagari_transliterator:source_script=en; added to the pair's processors option",
    )
    p.add_argument(
        "--model-args",
        action="append",
        metavar="ARGS",
        help="model parameters for every model of the run: a JSON object as KARMA takes it "
        "('{\"temperature\": 0.7}') or key=value,key=value; a model entry's field (temperature, max_tokens, "
        "top_p, seed, ...) or else a request body key (extra_body)",
    )
    p.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="also write the results to FILE, as JSON (.json), YAML (.yaml/.yml) or CSV (.csv) by its extension; "
        "an existing file is replaced only when it is an earlier evalkit results file, or with --force",
    )
    p.add_argument("--force", action="store_true", help="let --output replace a file that is not evalkit's results")


def _failure_rate(value: str) -> float:
    try:
        rate = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number (a fraction from 0 to 1, e.g. 0.2)") from None
    if not 0 <= rate <= 1:
        raise argparse.ArgumentTypeError(f"{value} is not a fraction from 0 to 1 (e.g. 0.2 for 20%)")
    return rate


def _filter_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--category", help="only this category (folder of runspecs/)")
    p.add_argument("--task", help="only this task (runspec file)")
    p.add_argument("--metric", help="only entries this metric fits")
    p.add_argument("--language", help="only this language (code or name, e.g. en, english, fr-en)")
    p.add_argument(
        "--modality",
        choices=["audio", "text", "audio+text", "image", "image+text", "audio+image"],
        help="only this input modality: audio or image (any input with it, combinations included), text (text only), "
        "or an exact combination (audio+text, image+text, audio+image)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalkit", description="Evaluate audio and text language models on many datasets at once."
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _run_parser(sub)
    v = sub.add_parser("validate", help="check a config (and its runspecs) without sending anything", epilog=PATH_RULE)
    v.add_argument("config", nargs="?", default="config.yaml")
    ls = sub.add_parser("list", help="list datasets, tasks, categories, metrics, models or processors")
    ls.add_argument("what", choices=LIST_KINDS)
    _filter_args(ls)
    ls.add_argument("--format", "-f", choices=FORMATS, default="table")
    ls.add_argument(
        "--runspecs-dir", action="append", default=[], metavar="DIR", help="extra runspec folder (repeatable)"
    )
    ls.add_argument(
        "--config",
        "-c",
        help="config whose models `list models` shows and whose plugins: are listed (default ./config.yaml when "
        "present)",
    )
    info = sub.add_parser(
        "info", help="details of one dataset, metric, task or model (with an example config line), or of the system"
    )
    info.add_argument("kind", choices=["dataset", "metric", "task", "model", "system"])
    info.add_argument("name", nargs="?", help="the dataset, metric, task or model (not for `system`)")
    info.add_argument(
        "--config",
        "-c",
        help="config whose models `info model` looks in and whose plugins: are known (default ./config.yaml)",
    )
    info.add_argument("--format", "-f", choices=["table", "json"], default="table")
    info.add_argument(
        "--runspecs-dir", action="append", default=[], metavar="DIR", help="extra runspec folder (repeatable)"
    )
    info.add_argument(
        "--show-code",
        action="store_true",
        help="info dataset: also the entry as its runspec file writes it and the evalkit functions that load it",
    )
    info.add_argument(
        "--cache-path",
        nargs="?",
        const="",
        metavar="PATH",
        help="info system: print only the cache paths (the response store, then the stored hub rows); with PATH, "
        "whether that store file exists and its size (KARMA's form)",
    )
    init = sub.add_parser("init", help="build a config.yaml by answering questions (datasets, metrics, the model)")
    init.add_argument("--output", "-o", default="config.yaml", help="where to write it (default config.yaml)")
    fetch = sub.add_parser(
        "fetch", help="store hub datasets locally ahead of time, for runs and resumes without network"
    )
    fetch.add_argument("names", nargs="+", metavar="NAME", help="datasets, tasks or categories")
    fetch.add_argument("--num-samples", type=int, metavar="N", help="only the first N rows of each (default: all)")
    fetch.add_argument(
        "--runspecs-dir", action="append", default=[], metavar="DIR", help="extra runspec folder (repeatable)"
    )
    report_help = (
        "re-render a run (one RUN_DIR: print its results, rewrite results.csv/.md and report.html) or compare "
        "two (RUN_A RUN_B, RUN_A:MODEL RUN_B:MODEL, or RUN --models M1 M2): a paired test per dataset-metric pair on "
        "the samples scored in both, the samples that changed, written as HTML/JSON/Markdown to a new folder"
    )
    rep = sub.add_parser("report", help=report_help, description=report_help[0].upper() + report_help[1:] + ".")
    rep.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a run folder; RUN_DIR:MODEL takes one model")
    rep.add_argument("--format", "-f", choices=["table", "json", "csv", "md"], default="table")
    rep.add_argument(
        "--no-write",
        action="store_true",
        help="only print; do not rewrite results.csv/.md and report.html (or write the comparison folder)",
    )
    rep.add_argument(
        "--models",
        nargs=2,
        metavar=("MODEL_A", "MODEL_B"),
        help="compare MODEL_A with MODEL_B (two models of one run, or A's with B's)",
    )
    rep.add_argument(
        "--pair", action="append", metavar="DATASET/METRIC", help="compare only this dataset-metric pair (repeatable)"
    )
    rep.add_argument("--output", metavar="DIR", help="where to write the comparison (default: a new folder beside A)")
    rep.add_argument("--seed", type=int, default=0, help="the paired bootstrap's seed (default 0)")
    rep.add_argument("--resamples", type=int, default=1000, metavar="N", help="bootstrap resamples (default 1000)")
    rs = sub.add_parser("rescore", help="score a finished run's records again with other metrics (no requests)")
    rs.add_argument("run_dir", metavar="RUN_DIR")
    rs.add_argument("--metric", action="append", required=True, metavar="NAME", help="metric to compute (repeatable)")
    rs.add_argument("--output", metavar="DIR", help="where to write the new results (default: inside RUN_DIR)")
    mg = sub.add_parser(
        "merge",
        help="combine the run folders of `evalkit run --shard K/N` (all N shards of one plan) into one run folder "
        "whose scores and CIs equal one unsharded run's",
    )
    mg.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="every shard's run folder, each once")
    mg.add_argument(
        "--output",
        metavar="DIR",
        help="the merged run folder: new, empty or an earlier merge's (default: a new merged_* folder beside the "
        "shards)",
    )
    mg.add_argument(
        "--allow-failures",
        action="store_true",
        help="exit 0 even when results exceed max_failure_rate (as evalkit run)",
    )
    mg.add_argument("--quiet", "-q", action="store_true", help="do not print the results table")
    cv = sub.add_parser(
        "convert",
        help="write an AU-Harness config as evalkit's own config",
        description="Write the evalkit config equivalent to an AU-Harness config (task_metric, filter, judge_settings, "
        "flat model entries, ...); ${VAR}s stay variables. `evalkit run` also reads the AU-Harness file as it is.",
    )
    cv.add_argument("config", metavar="CONFIG", help="the AU-Harness config file")
    cv.add_argument("--output", "-o", metavar="FILE", help="write here instead of printing (never over a file)")
    cv.add_argument("--force", action="store_true", help="let --output replace an existing file")
    sub.add_parser(
        "serve", help="serve a local model over an OpenAI-compatible API (see `evalkit serve --help`)", add_help=False
    )
    _view_parser(sub)
    return parser


def _view_parser(sub: argparse._SubParsersAction) -> None:
    view = sub.add_parser(
        "view",
        help="look at runs in the browser: results, every sample, its prompt, audio and images, and what changed",
        description="A local web viewer of runs (bound to 127.0.0.1 unless --host says otherwise).",
    )
    view.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="run folders or folders of runs (default: ./runs)")
    view.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    view.add_argument("--port", type=int, default=8765, help="port (default 8765, or the next free one; 0: any)")
    view.add_argument("--no-browser", action="store_true", help="print the URL only; do not open a browser")
    view.add_argument(
        "--export", metavar="DIR", help="write the pages as a static site to DIR (opens from file://) and exit"
    )


# ---------------------------------------------------------------- run


def _run_async(coro: Coroutine[Any, Any, T]) -> T:
    import asyncio

    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def _plan(args: argparse.Namespace) -> Any:
    """The plan of `evalkit run`: the config with the command-line overrides, or the recorded one with --resume."""
    from evalkit.api import prepare
    from evalkit.cli import karma_args

    args.dataset = karma_args.split_names(args.dataset)
    args.metric = karma_args.split_names(args.metric)
    overrides: dict[str, Any] = {
        "dataset": args.dataset,
        "metric": args.metric,
        "model": args.model,
        "num_samples": args.num_samples,
        "output_dir": args.output_dir,
        "batch_size": args.batch_size,
        "dataset_args": karma_args.parse_scoped(args.dataset_args, "--dataset-args") or None,
        "metric_args": karma_args.parse_scoped(args.metric_args, "--metric-args") or None,
        "processor_args": karma_args.parse_processor_args(args.processor_args) or None,
        "model_args": karma_args.parse_model_args(args.model_args) or None,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    config = args.config or args.config_pos
    endpoint_flags = [f for f in ("model_url", "model_name", "inference_type", "api_key_env") if getattr(args, f)]
    if endpoint_flags:
        return _endpoint_plan(args, config, endpoint_flags, overrides)
    if config is None and not args.resume and (args.model_path or args.launch_backend or _named_model(args.model)):
        return _named_model_plan(args, overrides)
    if args.resume:
        if not Path(args.resume).is_dir():
            raise UserError(f"--resume: {args.resume} is not a run directory")
        if overrides:
            flags = ", ".join("--" + k.replace("_", "-") for k in overrides)
            raise UserError(f"--resume finishes the run as it was started; drop {flags} (or start a new run)")
        if config is None:
            from evalkit.run.manifest import plan_for_resume

            return plan_for_resume(args.resume)
    plan, _ = prepare(config or "config.yaml", overrides)
    return plan


def _endpoint_plan(args: argparse.Namespace, config: Any, flags: list[str], overrides: dict[str, Any]) -> Any:
    """`evalkit run --model-url URL --model-name ID --dataset X`: one endpoint, no config file."""
    from evalkit.api import endpoint_config, prepare

    named = ", ".join("--" + f.replace("_", "-") for f in flags)
    if config is not None or args.resume:
        raise UserError(f"{named}: these describe a model without a config file; drop the config or {named}")
    if not (args.model_url and args.model_name):
        raise UserError(f"{named}: --model-url and --model-name go together (the endpoint and the model id it serves)")
    if not args.dataset:
        raise UserError("--model-url: name what to evaluate with --dataset (a dataset, task or category)")
    if args.model or args.model_path or args.launch_backend:
        raise UserError("--model selects models of a config; with --model-url the one model is --model-name")
    data = endpoint_config(
        args.model_url, args.model_name, args.dataset, args.metric, args.inference_type or "vllm", args.api_key_env
    )
    rest = {k: v for k, v in overrides.items() if k not in ("dataset", "metric")}
    plan, _ = prepare(data, rest)
    return plan


def _named_model(models: list[str] | None) -> bool:
    """`--model NAME` names a model to start or a hosted one (not a config's) when no ./config.yaml lists it."""
    if not models:
        return False
    if not Path("config.yaml").is_file():
        return True
    from evalkit.clients.providers import karma_model
    from evalkit.config import load_config
    from evalkit.serve.by_name import looks_like_hub_id

    with contextlib.suppress(UserError):
        if set(models) <= {entry.info.name for entry in load_config("config.yaml").models}:
            return False
    # beside a config.yaml, only what cannot be a misspelt model of it (its message suggests the near names)
    return all(Path(m).is_dir() or looks_like_hub_id(m) or karma_model(m) is not None for m in models)


def _named_model_plan(args: argparse.Namespace, overrides: dict[str, Any]) -> Any:
    """`evalkit run --model Qwen/Qwen3-0.6B --datasets X`: a model by folder, hub id or hosted name, no config."""
    from evalkit.api import named_model_config, prepare

    if not args.model or len(args.model) != 1:
        raise UserError("--model: without a config, name one model (a folder, a hub id or a hosted model name)")
    if not args.dataset:
        raise UserError(f"--model {args.model[0]}: name what to evaluate with --datasets (datasets, tasks, categories)")
    data, said = named_model_config(args.model[0], args.dataset, args.metric, args.model_path, args.launch_backend)
    if not args.quiet:
        print(f"evalkit: model {said}", file=sys.stderr)
    rest = {k: v for k, v in overrides.items() if k not in ("dataset", "metric", "model")}
    plan, _ = prepare(data, rest)
    return plan


def _apply_run_flags(plan: Any, args: argparse.Namespace) -> None:
    """Flags that change how results are judged, not what runs (so --resume accepts them too)."""
    if args.max_failure_rate is not None:
        plan.config.max_failure_rate = args.max_failure_rate


def cmd_run(args: argparse.Namespace) -> int:
    shard = _shard(args)
    output = None
    if args.output is not None:
        from evalkit.cli.results_file import check_target

        output = check_target(args.output, args.force)  # before the plan: a bad name costs nothing
    plan = _plan(args)
    _attach_log_file(plan.config.log_file)
    _apply_run_flags(plan, args)
    if args.verbose:
        _print_plan(plan)
    if args.dry_run:
        from evalkit.run.dryrun import dry_run, print_dry_run

        report = _run_async(
            dry_run(plan, output_dir=args.output_dir, no_cache=args.no_cache, refresh_cache=args.refresh_cache)
        )
        print_dry_run(report, plan)
        return int(report.exit_code)
    from evalkit.api import run_options
    from evalkit.data.hubcache import require_hub_or_stored
    from evalkit.report.progress import expected_totals, make_progress
    from evalkit.run.runner import execute

    require_hub_or_stored(spec.dataset for spec in plan.engines)  # said before a progress line (execute checks too)
    # a shard's share of a pair is known only once its ids are read: its lines count without a total
    totals = expected_totals(plan) if not (args.quiet or shard) else {}
    progress = make_progress(quiet=args.quiet, interval=args.progress_interval, totals=totals)
    options = run_options(
        {
            "no_cache": args.no_cache,
            "refresh_cache": args.refresh_cache,
            "quiet": args.quiet,
            "resume": args.resume,
            "shard": shard,
        },
        progress,
    )
    with progress:
        outcome = _run_async(execute(plan, options))
    from evalkit.report.console import print_results  # rich: after the run, not before its first request

    print_results(outcome)
    if output is not None:
        from evalkit.cli.results_file import write_results_file

        write_results_file(output, outcome.rows, outcome.meta)
        print(f"evalkit: wrote {output}", file=sys.stderr)
    return _exit_code(outcome, plan.config.max_failure_rate, args.allow_failures)


def _shard(args: argparse.Namespace) -> Any:
    """``--shard K/N`` checked before anything is read (exit 2 naming the flag); a resumed shard run's; or None."""
    from evalkit.run.shard import Shard

    if args.shard is None:
        if args.resume and (Path(args.resume) / "run.json").is_file():
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError, UserError):
                saved = json.loads((Path(args.resume) / "run.json").read_text(encoding="utf-8"))["shard"]
                return Shard(int(saved["index"]), int(saved["count"]))
        return None
    shard = Shard.parse(args.shard)
    if args.dry_run:
        raise UserError(f"--shard {args.shard} with --dry-run: the dry run describes the whole plan; drop --shard")
    return shard


def _attach_log_file(path: str | None) -> None:
    """The config's log_file (AU-Harness's logging.log_file) receives evalkit's log records beside the console."""
    if not path:
        return
    try:
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError as error:
        raise UserError(f"log_file: cannot write {path}: {error.strerror}") from None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("evalkit").addHandler(handler)


def _exit_code(outcome: Any, max_failure_rate: float, allow_failures: bool) -> int:
    """1: an engine failed; 3: a result failed on more than max_failure_rate of its samples; else 0."""
    from evalkit.report.results import over_failure_limit

    if any(e.error for e in outcome.engines):
        return 1
    over = over_failure_limit(outcome.rows, max_failure_rate)
    if not over:
        return 0
    listed = "; ".join(
        f"{r.model} on {r.dataset} x {r.metric}: {r.n_failed}/{r.n + r.n_failed}{_main_failure(r)}" for r in over[:10]
    )
    more = f" and {len(over) - 10} more" if len(over) > 10 else ""
    verdict = "exit code 0 (--allow-failures)" if allow_failures else "exit code 3 (--allow-failures: exit 0)"
    print(
        f"evalkit: {len(over)} result{'s' * (len(over) != 1)} failed on more than max_failure_rate "
        f"{max_failure_rate:g} of their samples ({listed}{more}); everything was written; {verdict}",
        file=sys.stderr,
    )
    return 0 if allow_failures else 3


def _main_failure(row: Any) -> str:
    """ ", mostly <reason>: <its first message>", so a systematic failure (a text model sent audio) reads at once."""
    if not row.failure_reasons:
        return ""
    reason = max(row.failure_reasons, key=row.failure_reasons.get)
    example = row.failure_examples.get(reason, "")
    return f", mostly {reason}" + (f": {example[:160]}" if example else "")


def _print_plan(plan: Any) -> None:
    print(f"plan from {plan.source}: {len(plan.engines)} engines x {len(plan.models)} models", file=sys.stderr)
    for spec in plan.engines:
        source = spec.dataset.hf_repo or spec.dataset.source
        print(
            f"  engine {spec.id}: {spec.dataset.task}/{spec.dataset.name} ({spec.dataset.language}, {source}) x "
            f"{', '.join(spec.models)}",
            file=sys.stderr,
        )
    for model in plan.models.values():
        urls = [u for info in model.replicas for u in info.urls]
        print(
            f"  model {model.name}: {model.kind}, {len(urls) or len(model.replicas)} endpoint(s), model id "
            f"{model.info.model}",
            file=sys.stderr,
        )


# ---------------------------------------------------------------- validate


def cmd_validate(args: argparse.Namespace) -> int:
    from evalkit.config import load_config
    from evalkit.errors import ConfigError
    from evalkit.plan import build_plan

    config = load_config(args.config)
    plan = build_plan(config, source=args.config)  # also checks that local dataset paths exist
    if not plan.engines:
        raise ConfigError(f"{args.config}: no dataset-metric pair is left after the filters (filters.language?)")
    print(f"{args.config}: OK — {len(plan.engines)} engines x {len(plan.models)} models")
    for spec in plan.engines:
        print(f"  {spec.dataset.name} x {spec.metric}")
    return 0


# ---------------------------------------------------------------- list / info


def _table_width() -> int:
    return shutil.get_terminal_size((160, 24)).columns if sys.stdout.isatty() else 160


def cmd_list(args: argparse.Namespace) -> int:
    from evalkit.cli import listing

    filters = listing.Filters(
        category=args.category, task=args.task, metric=args.metric, language=args.language, modality=args.modality
    )
    kinds = [k for k in LIST_KINDS if k != "all"] if args.what == "all" else [args.what]
    listing.import_config_plugins(args.config)  # the config's plugins: their metrics and processors are listed
    everything: dict[str, list[dict[str, Any]]] = {}
    for kind in kinds:
        if kind == "models":
            everything[kind] = listing.model_rows(filters, args.config)
        else:
            everything[kind] = listing.ROW_FUNCTIONS[kind](filters, args.runspecs_dir)
    if args.what == "all" and args.format == "json":
        sys.stdout.write(json.dumps(everything, indent=2, ensure_ascii=False) + "\n")
    elif args.what == "all" and args.format == "csv":
        raise UserError("list all: csv holds one kind of row; use --format json, or list one kind")
    else:
        sys.stdout.write("\n".join(listing.render(k, everything[k], args.format, width=_table_width()) for k in kinds))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    if args.show_code and args.kind != "dataset":
        raise UserError(f"--show-code: only for `info dataset NAME`, not `info {args.kind}`")
    if args.cache_path is not None and args.kind != "system":
        raise UserError(f"--cache-path: only for `info system`, not `info {args.kind}`")
    if args.kind == "system":
        from evalkit.cli import system

        if args.cache_path is not None:
            system.render_cache_paths(system.cache_paths(args.cache_path or None, args.config), args.format)
            return 0
        system.render(system.system_info(), args.format)
        return 0
    if not args.name:
        raise UserError(f"info {args.kind}: give the {args.kind}'s name (evalkit info {args.kind} NAME)")
    if args.kind == "model":
        from evalkit.cli import system

        system.render(system.model_info(args.name, args.config), args.format)
        return 0
    from evalkit.cli.info import describe, render_info
    from evalkit.cli.listing import import_config_plugins

    import_config_plugins(args.config)  # a metric of the config's plugins: is described like any other
    data = describe(args.kind, args.name, args.runspecs_dir)
    if args.show_code:
        from evalkit.cli.info import dataset_code

        data["code"] = dataset_code(data["name"], args.runspecs_dir)
    render_info(data, args.format)
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from evalkit.cli.init import run_init

    return run_init(args.output)


def cmd_fetch(args: argparse.Namespace) -> int:
    import itertools

    from evalkit.catalog import load_catalog
    from evalkit.data.hubcache import HubRowCache, hub_offline, require_hub_for_fetch
    from evalkit.data.loading import iter_rows

    if args.num_samples is not None and args.num_samples < 1:
        raise UserError("--num-samples: expected a positive number")
    if hub_offline():
        raise UserError("fetch: HF_HUB_OFFLINE is set; fetching needs the hub (unset it, or run where it is reachable)")
    catalog = load_catalog(args.runspecs_dir)
    specs = list({spec.name: spec for name in args.names for spec in catalog.resolve(name, "fetch")}.values())
    require_hub_for_fetch(specs)  # a hub that does not answer is said at once, not after minutes of retries
    for spec in specs:
        if spec.hf_repo is None:
            print(f"{spec.name}: local ({spec.source}), nothing to fetch")
            continue
        splits = [spec]
        in_context = spec.in_context or {}
        if "split" in in_context:  # the example pool's split is read by runs too
            splits.append(spec.model_copy(update={"split": in_context["split"], "in_context": None}))
        for part in splits:
            rows = sum(1 for _ in itertools.islice(iter_rows(part), args.num_samples))
            cache = HubRowCache(part)
            state = "complete" if cache.meta().get("complete") else f"first {cache.meta().get('rows', rows)} rows"
            print(f"{spec.name} ({part.split}): {rows} rows read, {state} stored in {cache.folder}")
    return 0


# ---------------------------------------------------------------- report / rescore


def cmd_report(args: argparse.Namespace) -> int:
    from evalkit.report.files import load_results

    if len(args.run_dirs) > 2:
        raise UserError("report: give one run directory (re-render) or two (compare)")
    if len(args.run_dirs) == 2 or args.models or ":" in args.run_dirs[0] and not Path(args.run_dirs[0]).is_dir():
        return _compare(args)
    run_dir = Path(args.run_dirs[0])
    rows, meta = load_results(run_dir)
    from evalkit.report.files import write_views
    from evalkit.report.tables import results_csv, results_markdown

    if args.format == "table":
        from evalkit.report.console import print_table

        print_table(rows, f"evalkit results — {run_dir}")
    elif args.format == "json":
        sys.stdout.write(json.dumps([r.as_dict() for r in rows], indent=2) + "\n")
    elif args.format == "csv":
        sys.stdout.write(results_csv(rows))
    else:
        sys.stdout.write(results_markdown(rows, meta))
    if not args.no_write and run_dir.is_dir():
        write_views(run_dir, rows, meta)
        print(
            f"rewrote {run_dir / 'results.csv'}, {run_dir / 'results.md'} and {run_dir / 'report.html'}",
            file=sys.stderr,
        )
    return 0


def _compare(args: argparse.Namespace) -> int:
    """`evalkit report A B`: the paired comparison, printed and written to a new folder (unless --no-write)."""
    from evalkit.report.compare import (
        compare_runs,
        parse_side,
        print_comparison,
        render_csv,
        render_json,
        render_markdown,
        write_comparison,
    )

    sides = [parse_side(text) for text in args.run_dirs]
    if len(sides) == 1:
        sides.append(sides[0])
    a, b = sides
    if args.models:
        if a.model is not None or b.model is not None:
            raise UserError("report: name the models either as RUN:MODEL or with --models, not both")
        a, b = type(a)(a.run_dir, args.models[0]), type(b)(b.run_dir, args.models[1])
    if a.run_dir.resolve() == b.run_dir.resolve() and a.model == b.model:
        raise UserError("report: both sides are the same run and model; give two runs, or two models (--models M1 M2)")
    if args.resamples < 1:
        raise UserError(f"--resamples {args.resamples}: expected a positive number of resamples")
    pairs = None
    if args.pair:
        pairs = []
        for text in args.pair:
            dataset, slash, metric = str(text).rpartition("/")
            if not slash or not dataset or not metric:
                raise UserError(f"--pair {text}: expected DATASET/METRIC")
            pairs.append((dataset, metric))
    comparison = compare_runs(a, b, pairs=pairs, seed=args.seed, n_resamples=args.resamples)
    if args.format == "table":
        print_comparison(comparison)
    else:
        render = {"json": render_json, "csv": render_csv, "md": render_markdown}[args.format]
        sys.stdout.write(render(comparison))
    if not args.no_write:
        folder = write_comparison(comparison, Path(args.output) if args.output else None)
        stream = sys.stdout if args.format == "table" else sys.stderr
        print(f"comparison written to {folder}", file=stream)
    return 0


def cmd_rescore(args: argparse.Namespace) -> int:
    from evalkit.run.rescore import rescore_command

    return int(rescore_command(args.run_dir, args.metric, args.output))


def cmd_merge(args: argparse.Namespace) -> int:
    """Exit codes as `evalkit run`'s: 0, 1 (a pair failed), 3 (a result over max_failure_rate); 2 refused."""
    from evalkit.run.merge import merge

    outcome = merge(args.run_dirs, args.output)
    if not args.quiet:
        from evalkit.report.console import print_table

        print_table(outcome.rows, f"evalkit results — {outcome.run_dir} (merged from {len(outcome.shards)} shards)")
    for path, count in outcome.skipped.items():
        print(f"evalkit: {path}: {count} unreadable line(s) left out", file=sys.stderr)
    print(f"merged {len(outcome.shards)} shards into {outcome.run_dir}", file=sys.stderr)
    return _exit_code(outcome, outcome.max_failure_rate, args.allow_failures)


# ---------------------------------------------------------------- main


def _report_interrupt(interrupted: RunInterrupted) -> None:
    """Say what was kept and the exact command that finishes the run."""
    import shlex
    import signal

    name = signal.Signals(interrupted.signum).name if interrupted.signum in signal.valid_signals() else "signal"
    run_dir = interrupted.run_dir
    if run_dir is None:
        print(f"evalkit: interrupted ({name}) before the run folder was made; nothing to resume", file=sys.stderr)
        return
    print(
        f"evalkit: interrupted ({name}); {Path(str(run_dir)) / 'run.json'} has status 'interrupted'. "
        "Resume it with (stored answers are not asked again):\n"
        f"  evalkit run --resume {shlex.quote(str(run_dir))}",
        file=sys.stderr,
    )


# ---------------------------------------------------------------- view


def cmd_view(args: argparse.Namespace) -> int:
    roots = [Path(p) for p in (args.run_dirs or ["runs"])]
    for root in roots:
        if not root.is_dir():
            raise UserError(f"view: {root} is not a folder (give run folders or the output_dir holding them)")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port}: expected 0 to 65535")
    if args.export:
        from evalkit.view.export import export_site

        written = export_site(roots, Path(args.export))
        print(f"evalkit view: wrote {written} pages to {args.export}; open {Path(args.export) / 'index.html'}")
        return 0
    from evalkit.view.server import run_viewer

    try:
        return run_viewer(roots, args.host, args.port, open_browser=not args.no_browser)
    except OSError as error:
        raise UserError(f"view: cannot listen on {args.host}:{args.port}: {error.strerror or error}") from None


# ---------------------------------------------------------------- convert


def cmd_convert(args: argparse.Namespace) -> int:
    from evalkit.compat.auharness import convert_text, is_auharness
    from evalkit.config import Config, parse_config
    from evalkit.errors import ConfigError
    from evalkit.util.yaml_safe import load_yaml_file

    source = Path(args.config)
    if not source.is_file():
        raise ConfigError(f"{source}: config file not found")
    data = load_yaml_file(source)
    if not isinstance(data, dict) or not is_auharness(data):
        raise ConfigError(f"{source}: not an AU-Harness config (no task_metric, filter, ... or flat model entries)")
    text = convert_text(data, str(source), Config.model_fields, base_dir=source.parent)
    # the result must validate as evalkit's own format; unset ${VAR}s only stand in for their values here
    parse_config(_yaml_tree(text), f"{source} (converted)", env=_PlaceholderEnv(), base_dir=source.parent)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    if out.exists() and not args.force:
        raise UserError(f"--output: {out} exists; pass --force to replace it")
    out.write_text(text, encoding="utf-8")
    print(f"evalkit: wrote {out}", file=sys.stderr)
    return 0


def _yaml_tree(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


class _PlaceholderEnv(dict[str, str]):
    """The environment, where an unset variable reads as "0": enough to check a converted config's shape."""

    def __init__(self) -> None:
        import os

        super().__init__(os.environ)

    def __missing__(self, key: str) -> str:
        return "0"

    def __contains__(self, key: object) -> bool:
        return True


COMMANDS = {
    "fetch": cmd_fetch,
    "init": cmd_init,
    "run": cmd_run,
    "validate": cmd_validate,
    "list": cmd_list,
    "info": cmd_info,
    "report": cmd_report,
    "rescore": cmd_rescore,
    "merge": cmd_merge,
    "convert": cmd_convert,
    "view": cmd_view,
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        from evalkit.serve.cli import main as serve_main

        return serve_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from evalkit import __version__

        print(__version__)
        return 0
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if verbose:
        logging.getLogger("evalkit").setLevel(logging.DEBUG)
    if args.command not in COMMANDS:
        parser.print_help()
        return 2
    try:
        return COMMANDS[args.command](args)
    except UserError as error:
        print(f"evalkit: error: {error}", file=sys.stderr)
        return error.exit_code
    except BrokenPipeError:  # `evalkit list datasets | head`: the reader left; exit quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except RunInterrupted as interrupted:
        _report_interrupt(interrupted)
        return interrupted.exit_code
    except KeyboardInterrupt:
        print("evalkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

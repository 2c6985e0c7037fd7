"""The ``evalkit`` commands: run / validate / list / info / fetch / catalogue / report / rescore / merge / view /
convert / serve.

What a user may type is :mod:`evalkit.cli.parser`'s; this module does what each command says.

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
import os
import shlex
import shutil
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from evalkit.cli.parser import LIST_KINDS, build_parser
from evalkit.cli.parser import PATH_RULE as PATH_RULE  # where README tests and older imports read it
from evalkit.errors import RunInterrupted, UserError

T = TypeVar("T")

#: what messages and results.json name as the source of a config made from `evalkit run`'s flags
COMMAND_LINE = "command line"


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
    from evalkit.config.foreign import karma_args

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
    from evalkit.api import prepare, registries
    from evalkit.config.pairs import endpoint_config

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
        args.model_url,
        args.model_name,
        args.dataset,
        args.metric,
        registries().metrics,
        args.inference_type or "vllm",
        args.api_key_env,
    )
    rest = {k: v for k, v in overrides.items() if k not in ("dataset", "metric")}
    plan, _ = prepare(data, rest, label=COMMAND_LINE)
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
    plan, _ = prepare(data, rest, label=COMMAND_LINE)
    return plan


def _apply_run_flags(plan: Any, args: argparse.Namespace) -> None:
    """Flags that change how results are judged, not what runs (so --resume accepts them too)."""
    if args.max_failure_rate is not None:
        plan.config.max_failure_rate = args.max_failure_rate
    if getattr(args, "budget_tokens", None) is not None or getattr(args, "budget_usd", None) is not None:
        from evalkit.run.cost.budget import apply_budget_flags

        apply_budget_flags(plan.config, args.budget_tokens, args.budget_usd)


def cmd_run(args: argparse.Namespace) -> int:
    from evalkit.util.pydantic_plugins import pydantic_plugins_skipped

    with pydantic_plugins_skipped():  # the plan's models need no pydantic plugin, and the scan is slow
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
    # a shard's share of a pair is known only once its ids are read: its lines show the expected share, ~total/N
    shards = shard.count if shard is not None else 1
    totals = expected_totals(plan, shards) if not args.quiet else {}
    progress = make_progress(quiet=args.quiet, interval=args.progress_interval, totals=totals, estimated=shards > 1)
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
    _index_for_viewer(outcome.run_dir, args.quiet)
    from evalkit.report.console import print_results  # rich: after the run, not before its first request

    print_results(outcome)
    if output is not None:
        from evalkit.cli.results_file import write_results_file

        write_results_file(output, outcome.rows, outcome.meta)
        print(f"evalkit: wrote {output}", file=sys.stderr)
    return _exit_code(outcome, plan.config.max_failure_rate, args.allow_failures)


def _index_for_viewer(run_dir: Path, quiet: bool) -> None:
    """The indexes `evalkit view` reads, written into the finished run folder (see evalkit.view.runindex)."""
    from evalkit.view.runindex import index_run

    index_run(run_dir, say=(lambda _: None) if quiet else None)


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
    """1: an engine failed; 6: the budget was spent (resumable with a larger one); 5: samples whose endpoint was not
    there (resumable); 3: a result failed on more than max_failure_rate of its samples; else 0."""
    from evalkit.report.results import over_failure_limit
    from evalkit.run.unanswered import EXIT_INCOMPLETE

    if any(e.error for e in outcome.engines):
        return 1
    if getattr(outcome, "partial", None) == "budget":
        from evalkit.run.cost.budget import EXIT_BUDGET

        print(
            f"evalkit: the run's budget was spent ({outcome.meta.get('budget', {}).get('spent_tokens', 0):,} tokens"
            f"{_usd_spent(outcome.meta)}): no new request was sent, what was answered is written and the results "
            "are partial (run.json says 'partial'). Go on with a larger budget: evalkit run --resume "
            f"{shlex.quote(str(outcome.run_dir))} --budget-tokens N (or --budget-usd X); exit code {EXIT_BUDGET}",
            file=sys.stderr,
        )
        return EXIT_BUDGET
    unanswered = getattr(outcome, "unanswered", None) or {}  # a merge takes finished shards only: never any
    if unanswered:
        counts = ", ".join(f"{count} x {reason}" for reason, count in unanswered.items())
        print(
            f"evalkit: {sum(unanswered.values())} answers could not be had because their endpoint was not "
            f"there ({counts}); everything else was written and run.json says 'incomplete'. Once the server "
            f"answers (at the URL the config names then), ask them again with: evalkit run --resume "
            f"{shlex.quote(str(outcome.run_dir))}; exit code {EXIT_INCOMPLETE}",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE
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


def _usd_spent(meta: dict[str, Any]) -> str:
    usd = (meta.get("budget") or {}).get("spent_usd")
    return f", ${usd:,.4f}" if isinstance(usd, (int, float)) and (meta.get("budget") or {}).get("usd") else ""


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
    # also checks that local dataset paths exist, and every entry of the catalogue the config reads
    plan = build_plan(config, source=args.config, check_catalog=True)
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
    from evalkit.util.pydantic_plugins import pydantic_plugins_skipped

    with pydantic_plugins_skipped():  # the catalogue's models need no pydantic plugin, and the scan is slow
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
        if spec.unavailable is not None:
            print(f"{spec.name}: unavailable ({spec.unavailable}), nothing to fetch")
            continue
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


def cmd_catalogue(args: argparse.Namespace) -> int:
    from evalkit.cli.catalogue import run_check

    return run_check(args)


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
        from evalkit.report.console import print_table, print_usage

        print_table(rows, f"evalkit results — {run_dir}")
        print_usage(meta)
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
    """Exit codes as `evalkit run`'s: 0, 1 (a pair failed), 2 refused (a shard unverified, damaged or over
    max_failure_rate without --allow-failures), 3 (a result over max_failure_rate, merged with --allow-failures)."""
    from evalkit.run.merge import merge

    outcome = merge(
        args.run_dirs, args.output, allow_failures=args.allow_failures, trust_unverified=args.trust_unverified
    )
    _index_for_viewer(outcome.run_dir, args.quiet)
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


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _export_selection(args: argparse.Namespace) -> Any:
    """--samples, --filter and --media-samples checked (exit 2 naming the flag and the value)."""
    from urllib.parse import parse_qsl

    from evalkit.view.export import MEDIA_SAMPLES, Selection
    from evalkit.view.queries import BadQuery, PairFilter

    for flag, value in (("--samples", args.samples), ("--media-samples", args.media_samples)):
        if value is not None and value < (1 if flag == "--samples" else 0):
            raise UserError(f"view: {flag} {value}: expected a whole number of at least {int(flag == '--samples')}")
    query = None
    if args.filter is not None:
        query = dict(parse_qsl(args.filter.lstrip("?"), keep_blank_values=True))
        known = {"model", "min", "max", "failure", "group", "q"}
        unknown = sorted(set(query) - known)
        if unknown:
            raise UserError(
                f"view: --filter {args.filter!r}: unknown key {unknown[0]!r} (expected {', '.join(sorted(known))})"
            )
        try:
            PairFilter.parse(query)
        except BadQuery as error:
            raise UserError(f"view: --filter: {error}") from None
    media = MEDIA_SAMPLES if args.media_samples is None else args.media_samples
    return Selection(query=query, samples=args.samples, media_samples=media)


def cmd_view(args: argparse.Namespace) -> int:
    roots = [Path(p) for p in (args.run_dirs or ["runs"])]
    for root in roots:
        if not root.is_dir():
            raise UserError(f"view: {root} is not a folder (give run folders or the output_dir holding them)")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port}: expected 0 to 65535")
    media_roots = [Path(p) for p in args.media_root]
    for folder in media_roots:
        if not folder.is_dir():
            raise UserError(f"view: --media-root {folder} is not a folder")
    if args.export:
        from evalkit.view.export import export_site

        written = export_site(roots, Path(args.export), media_roots, _export_selection(args), say=_stderr)
        print(f"evalkit view: wrote {written} files to {args.export}; open {Path(args.export) / 'index.html'}")
        return 0
    for flag, value in (
        ("--samples", args.samples),
        ("--filter", args.filter),
        ("--media-samples", args.media_samples),
    ):
        if value is not None:
            raise UserError(f"view: {flag} chooses what --export writes; give --export DIR with it")
    from evalkit.view.access import API_KEY_ENV, check_key
    from evalkit.view.server import run_viewer

    where = "--api-key" if args.api_key is not None else API_KEY_ENV
    try:
        key = check_key(args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV), where)
    except ValueError as error:
        raise UserError(str(error)) from None
    try:
        return run_viewer(
            roots,
            args.host,
            args.port,
            open_browser=not args.no_browser,
            media_roots=media_roots,
            key=key,
            show_paths=args.show_paths,
        )
    except OSError as error:
        raise UserError(f"view: cannot listen on {args.host}:{args.port}: {error.strerror or error}") from None


# ---------------------------------------------------------------- convert


def cmd_convert(args: argparse.Namespace) -> int:
    from evalkit.config.convert import convert_file

    text = convert_file(Path(args.config))
    if args.output is None:
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    if out.exists() and not args.force:
        raise UserError(f"--output: {out} exists; pass --force to replace it")
    out.write_text(text, encoding="utf-8")
    print(f"evalkit: wrote {out}", file=sys.stderr)
    return 0


COMMANDS = {
    "fetch": cmd_fetch,
    "catalogue": cmd_catalogue,
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
    parser = build_parser(only_run=argv[:1] == ["run"])
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

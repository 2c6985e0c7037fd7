"""The ``evalkit`` command: run / validate / list / serve.

Heavy modules are imported inside the commands that need them, so
``evalkit list`` and ``--help`` start fast. A user mistake (UserError) is
printed as one message with exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from evalkit.errors import UserError


def _run_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="evaluate every model on every dataset-metric pair of a config")
    p.add_argument("config_pos", nargs="?", metavar="CONFIG", help="config file (default config.yaml)")
    p.add_argument("--config", "-c", dest="config", help="config file (default config.yaml)")
    p.add_argument("--dataset", action="append", help="only this dataset/task/category (repeatable); pairs with --metric")
    p.add_argument("--metric", action="append", help="only this metric (repeatable)")
    p.add_argument("--model", action="append", help="only this model name (repeatable)")
    p.add_argument("--num-samples", type=int, help="override filters.num_samples")
    p.add_argument("--output-dir", help="override output_dir")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the response store")
    p.add_argument("--refresh-cache", action="store_true", help="ask every request again and overwrite stored answers")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines, only the final table")
    p.add_argument("--verbose", "-v", action="store_true", help="debug logging")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalkit", description="Evaluate audio and text language models on many datasets at once.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    _run_parser(sub)
    v = sub.add_parser("validate", help="check a config (and its runspecs) without sending anything")
    v.add_argument("config", nargs="?", default="config.yaml")
    ls = sub.add_parser("list", help="list datasets, tasks, categories or metrics")
    ls.add_argument("what", choices=["datasets", "tasks", "categories", "metrics", "preprocessors", "postprocessors"])
    ls.add_argument("--runspecs-dir", action="append", default=[], help="extra runspec folder")
    sub.add_parser("serve", help="serve a local model over an OpenAI-compatible API (see `evalkit serve --help`)", add_help=False)
    return parser


def _apply_overrides(config, args):  # type: ignore[no-untyped-def]
    from evalkit.errors import ConfigError

    if args.num_samples is not None:
        config.filters.num_samples = args.num_samples
    if args.output_dir:
        config.output_dir = args.output_dir
    if args.model:
        names = {e.info.name for e in config.models}
        unknown = [m for m in args.model if m not in names]
        if unknown:
            from evalkit.errors import did_you_mean

            raise ConfigError(f"--model: {unknown[0]!r} is not a model of the config{did_you_mean(unknown[0], names)}")
        config.models = [e for e in config.models if e.info.name in args.model]
    if args.dataset or args.metric:
        pairs = config.dataset_metric
        if args.dataset and args.metric:
            pairs = [(d, m) for d in args.dataset for m in args.metric]
        elif args.dataset:
            metrics = list(dict.fromkeys(m for _, m in pairs))
            pairs = [(d, m) for d in args.dataset for m in metrics]
        else:
            pairs = [(d, m) for d, m in pairs if m in args.metric]
            if not pairs:
                raise ConfigError(f"--metric: no dataset_metric pair of the config uses {', '.join(args.metric)}")
        config.dataset_metric = pairs
    return config


def cmd_run(args: argparse.Namespace) -> int:
    from evalkit.config import load_config
    from evalkit.plan import build_plan
    from evalkit.report.console import print_results
    from evalkit.runner import RunOptions, execute

    path = args.config or args.config_pos or "config.yaml"
    config = _apply_overrides(load_config(path), args)
    plan = build_plan(config, source=str(path))
    options = RunOptions(no_cache=args.no_cache, refresh_cache=args.refresh_cache, quiet=args.quiet)
    outcome = _run_async(execute(plan, options))
    print_results(outcome)
    return 1 if any(e.error for e in outcome.engines) else 0


def _run_async(coro):  # type: ignore[no-untyped-def]
    try:
        import uvloop  # type: ignore[import-not-found]
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def cmd_validate(args: argparse.Namespace) -> int:
    from evalkit.config import load_config
    from evalkit.plan import build_plan

    config = load_config(args.config)
    plan = build_plan(config, source=args.config)
    print(f"{args.config}: OK — {len(plan.engines)} engines x {len(plan.models)} models")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from evalkit.catalog import load_catalog

    if args.what in ("metrics", "preprocessors", "postprocessors"):
        if args.what == "metrics":
            from evalkit.metrics import METRICS as registry
        elif args.what == "preprocessors":
            from evalkit.prompts.preprocessors import PREPROCESSORS as registry  # type: ignore[assignment]
        else:
            from evalkit.processing.postprocessors import POSTPROCESSORS as registry  # type: ignore[assignment]
        for name, _ in registry.items():
            print(name)
        return 0
    catalog = load_catalog(args.runspecs_dir)
    if args.what == "datasets":
        for name, spec in sorted(catalog.datasets.items()):
            print(f"{name}\t{spec.category}/{spec.task}\t{spec.language}\t{spec.modality}")
    elif args.what == "tasks":
        for name, task in sorted(catalog.tasks.items()):
            print(f"{name}\t{task.category}\t{len(task.datasets)} datasets\t{', '.join(task.metrics)}")
    else:
        for name, tasks in sorted(catalog.categories.items()):
            print(f"{name}\t{len(tasks)} tasks")
    return 0


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
    logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    commands = {"run": cmd_run, "validate": cmd_validate, "list": cmd_list}
    if args.command not in commands:
        parser.print_help()
        return 2
    try:
        return commands[args.command](args)
    except UserError as error:
        print(f"evalkit: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("evalkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

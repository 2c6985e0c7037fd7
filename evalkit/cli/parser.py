"""The ``evalkit`` command line's grammar: every subcommand, flag, default and help text.

Kept apart from the commands (:mod:`evalkit.cli.main`), so what a user may type and what each
command then does are read, and reviewed, one at a time; building the parser imports nothing
heavy, so ``evalkit --help`` stays fast.
"""

from __future__ import annotations

import argparse

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
        help="continue an interrupted or incomplete run in RUN_DIR (answers already stored are not asked again; the "
        "models' URLs, tokens and replicas are the config file's as it is now)",
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
    p.add_argument(
        "--budget-tokens",
        type=_positive_int,
        metavar="N",
        help="replace budget.tokens: once the run has spent N tokens (prompt + completion, as the servers report "
        "them) no new request is sent and it exits with code 6; with --resume, a larger N goes on",
    )
    p.add_argument(
        "--budget-usd",
        type=_positive_number,
        metavar="USD",
        help="replace budget.usd: likewise in US dollars, from the models' `price` (every model needs one)",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the response store (with --resume: finish the run asking every sample again)",
    )
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
        "ai4bharat/IN22-Conv.devnagari_transliterator:source_script=en,target_script=hi; added to the pair's "
        "processors option",
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


def _positive_int(value: str) -> int:
    try:
        number = int(value.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of tokens (e.g. 200000)") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number of tokens")
    return number


def _positive_number(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an amount in US dollars (e.g. 12.50)") from None
    if not 0 < number < float("inf"):
        raise argparse.ArgumentTypeError(f"{value} is not a positive amount in US dollars")
    return number


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


def build_parser(only_run: bool = False) -> argparse.ArgumentParser:
    """The whole grammar; ``only_run``: the top level and the run command alone, which parse `evalkit run ...` alike.

    The run command's parser is the first one added, so its usage line and messages read the same either way; the
    other commands' hundred-odd flags are not built before a run's first request.
    """
    parser = argparse.ArgumentParser(
        prog="evalkit", description="Evaluate audio and text language models on many datasets at once."
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _run_parser(sub)
    if only_run:
        return parser
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
    _catalogue_parser(sub)
    report_help = (
        "re-render a run (one RUN_DIR: print its results, rewrite results.csv/.md and report.html) or compare "
        "two (RUN_A RUN_B, RUN_A:MODEL RUN_B:MODEL, or RUN --models M1 M2): a paired test per dataset-metric pair on "
        "the samples scored in both, the samples that changed, written as HTML/JSON/Markdown to a new folder. "
        "Models pair by name; two runs that share no model name and hold one model each compare those two, "
        "and with more models the pair is named (RUN_A:MODEL RUN_B:MODEL)"
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
        help="merge shards whose results exceed max_failure_rate (refused otherwise), and exit 0 then",
    )
    mg.add_argument(
        "--trust-unverified",
        action="store_true",
        help="merge shards without checksums (made by an evalkit from before merges were verified) and datasets "
        "not readable here, unverified; a shard whose checksums do not match is refused all the same",
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


def _catalogue_parser(sub: argparse._SubParsersAction) -> None:
    cat = sub.add_parser("catalogue", help="the dataset catalogue against its sources (`evalkit catalogue check`)")
    actions = cat.add_subparsers(dest="catalogue_command", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check",
        help="ask the Hugging Face hub whether hub entries still match it",
        description="For each hub entry (or the datasets, tasks or categories named): whether its repo exists and "
        "where it lives now (moved or redirected), whether it is gated, whether its subset, split and mapped columns "
        "are there, and the split's row count, from the hub API and the dataset viewer (/info). Exit 0: all match; "
        "1: something changed (--strict: or could not be checked); 2: the hub cannot be reached. HF_ENDPOINT and "
        "EVALKIT_DATASETS_SERVER name other endpoints; a saved token or HF_TOKEN is sent, so gated repos read as "
        "you are allowed to read them.",
    )
    check.add_argument("names", nargs="*", metavar="NAME", help="datasets, tasks or categories (default: every one)")
    check.add_argument("--format", "-f", choices=["table", "json"], default="table")
    check.add_argument("--strict", action="store_true", help="exit 1 also when an entry could not be checked")
    check.add_argument(
        "--runspecs-dir", action="append", default=[], metavar="DIR", help="extra runspec folder (repeatable)"
    )


def _view_parser(sub: argparse._SubParsersAction) -> None:
    view = sub.add_parser(
        "view",
        help="look at runs in the browser: results, every sample, its prompt, audio and images, and what changed",
        description="A local web viewer of runs (bound to 127.0.0.1 unless --host says otherwise).",
    )
    view.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="run folders or folders of runs (default: ./runs)")
    view.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; any other warns unless a key is set)",
    )
    view.add_argument("--port", type=int, default=8765, help="port (default 8765, or the next free one; 0: any)")
    view.add_argument("--no-browser", action="store_true", help="print the URL only; do not open a browser")
    view.add_argument(
        "--export", metavar="DIR", help="write the pages as a static site to DIR (opens from file://) and exit"
    )
    view.add_argument(
        "--samples",
        type=int,
        metavar="N",
        help="with --export: only the first N samples of each pair (in dataset order; after --filter)",
    )
    view.add_argument(
        "--filter",
        metavar="QUERY",
        help="with --export: only the samples with a record matching QUERY, the samples page's own query "
        "(keys model, min, max, failure, group, q; e.g. 'failure=any' or 'model=gpt-4o&max=0.5')",
    )
    view.add_argument(
        "--media-samples",
        type=int,
        metavar="N",
        help="with --export: write the audio and images of the first N samples of each pair (default 1000; "
        "each is a file or more); the others' pages say their media are not in the export",
    )
    view.add_argument(
        "--media-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder whose audio and images the runs may show (repeatable), e.g. a local dataset's folder. "
        "A run folder may name any file: only files inside the run folder, these folders and evalkit's own "
        "datasets are read",
    )
    view.add_argument(
        "--api-key",
        metavar="KEY",
        help="require KEY on every request: 'Authorization: Bearer KEY', or the password a browser asks for. "
        "Prefer the environment variable EVALKIT_VIEW_API_KEY (a command line shows in `ps`). Never logged",
    )
    view.add_argument(
        "--show-paths",
        action="store_true",
        help="put the run folders' absolute paths in the pages and the /api/ answers (left out by default)",
    )

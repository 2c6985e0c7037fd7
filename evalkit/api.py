"""The Python API: ``evalkit.evaluate(config, **overrides) -> Results``.

The same path as ``evalkit run``: config and overrides, resolved in one pass by
:func:`evalkit.config.resolve` -> plan -> runner -> results on disk.
``evaluate`` is a plain function that also works where an
event loop is already running (Jupyter, IPython, an async web app): there it
runs the evaluation on a worker thread with its own loop and blocks until it
is done. Async code should ``await evaluate_async(...)`` instead, which runs
on the caller's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.errors import ConfigError, did_you_mean

if TYPE_CHECKING:
    from evalkit.config import Registries
    from evalkit.plan import Plan
    from evalkit.report.results import ResultRow


#: overrides that change what runs (the same as `evalkit run` flags)
SELECTION_OVERRIDES = (
    "dataset",
    "metric",
    "model",
    "num_samples",
    "output_dir",
    "batch_size",
    "dataset_args",
    "metric_args",
    "processor_args",
    "model_args",
)
#: overrides that change how it runs
RUN_OVERRIDES = ("no_cache", "refresh_cache", "quiet", "progress", "run_dir", "resume", "window", "shard")


@dataclass
class Results:
    """The outcome of one evaluation: every result row, where the run was written, and how it went.

    ``rows`` holds one :class:`~evalkit.report.results.ResultRow` per dataset x
    metric x model (``kind == "dataset"``) followed by the aggregate rows.
    Look a row up with :meth:`get` (metric aliases such as ``wer`` work).
    """

    rows: list[ResultRow]
    run_dir: Path
    meta: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    requests_sent: int = 0
    store_hits: int = 0

    @classmethod
    def load(cls, run_dir: str | Path) -> Results:
        """Results of a finished run, read back from its results.json."""
        from evalkit.report.files import load_results

        rows, meta = load_results(run_dir)
        sent = sum(int(v.get("sent", 0)) for v in (meta.get("requests") or {}).values())
        hits = sum(int(v.get("store_hits", 0)) for v in (meta.get("requests") or {}).values())
        return cls(
            rows=rows,
            run_dir=Path(run_dir),
            meta=meta,
            seconds=float(meta.get("seconds") or 0.0),
            requests_sent=sent,
            store_hits=hits,
        )

    def __iter__(self) -> Iterator[ResultRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def models(self) -> list[str]:
        """Model names in the order they appear in the results."""
        return list(dict.fromkeys(r.model for r in self.rows))

    @property
    def datasets(self) -> list[str]:
        """Dataset names (and aggregate labels) in the order they appear."""
        return list(dict.fromkeys(r.dataset for r in self.rows))

    @property
    def metrics(self) -> list[str]:
        """Canonical metric names in the order they appear."""
        return list(dict.fromkeys(r.metric for r in self.rows))

    @property
    def errors(self) -> dict[tuple[str, str], str]:
        """(dataset, metric) -> engine error, for engines that failed."""
        return {(r.dataset, r.metric): r.error for r in self.rows if r.error}

    def get(self, dataset: str, metric: str, model: str | None = None) -> ResultRow:
        """The row for (dataset, metric, model); ``model`` may be left out when the run had one model."""
        from evalkit.metrics import METRICS

        metric = METRICS.canonical(metric)
        if model is None:
            if len(self.models) != 1:
                raise KeyError(f"model is required: this run has {len(self.models)} models ({', '.join(self.models)})")
            model = self.models[0]
        for row in self.rows:
            if (row.dataset, row.metric, row.model) == (dataset, metric, model):
                return row
        for value, known, what in (
            (dataset, self.datasets, "dataset"),
            (metric, self.metrics, "metric"),
            (model, self.models, "model"),
        ):
            if value not in known:
                raise KeyError(f"no {what} {value!r} in these results{did_you_mean(value, known)}")
        raise KeyError(f"no result for ({dataset!r}, {metric!r}, {model!r})")

    def score(self, dataset: str, metric: str, model: str | None = None) -> float | None:
        """The score of :meth:`get`'s row; None when nothing was scored."""
        return self.get(dataset, metric, model).score

    def to_dicts(self) -> list[dict[str, Any]]:
        """One plain dict per row (e.g. ``pandas.DataFrame(results.to_dicts())``)."""
        return [r.as_dict() for r in self.rows]

    def to_markdown(self) -> str:
        """The results as the Markdown table results.md carries."""
        from evalkit.report.tables import markdown_table

        return markdown_table(self.rows)

    def _repr_markdown_(self) -> str:  # Jupyter
        return f"evalkit results — `{self.run_dir}`\n\n" + self.to_markdown()

    def __repr__(self) -> str:
        return f"Results(run_dir={str(self.run_dir)!r}, rows={len(self.rows)}, models={self.models})"


def named_model_config(
    model: str,
    names: Sequence[str],
    metrics: Sequence[str] | None = None,
    model_path: str | None = None,
    backend: str | None = None,
) -> tuple[dict[str, Any], str]:
    """A config for `evalkit run --model NAME --dataset X` without a config file, and a line saying what it runs.

    NAME is a KARMA hosted model name (Gemini, OpenAI, Sarvam: their OpenAI-compatible endpoint with the key
    from the provider's environment variable; the others refused, saying why), or a hub id or model folder,
    which evalkit serves itself behind ``launch:`` (vLLM when it can, else evalkit serve) and stops after.
    """
    from evalkit.clients.providers import karma_model
    from evalkit.config.pairs import model_config

    hosted = None if model_path else karma_model(model)
    if isinstance(hosted, str):
        raise ConfigError(f"--model {model}: {hosted}; evalkit speaks only OpenAI-compatible APIs")
    if hosted is not None:
        info = hosted.entry(model)
        said = f"{model}: {hosted.provider} at {hosted.url}, key from ${hosted.key_env}"
    else:
        from evalkit.serve.by_name import check_can_serve, choose_local_model

        local = choose_local_model(model_path or model, backend=backend, name=model if model_path else None)
        check_can_serve(local)
        info = local.entry()
        said = f"{local.name}: {local.model_path} served by {local.backend} ({local.reason}), stopped after the run"
    return model_config(info, names, metrics, registries().metrics), said


def registries() -> Registries:
    """The metric and processor registries the config's overrides check names against."""
    from evalkit.config import Registries
    from evalkit.metrics import METRICS
    from evalkit.processing.processors import PROCESSORS

    return Registries(metrics=METRICS, processors=PROCESSORS)


def prepare(config: Any, overrides: dict[str, Any], label: str | None = None) -> tuple[Plan, dict[str, Any]]:
    """Config source + overrides -> (plan, run options); unknown override names are errors.

    ``label`` names a dict source in messages and results.json (see :func:`evalkit.config.resolve`).
    """
    from evalkit.config import Config, Overrides, resolve
    from evalkit.plan import build_plan

    selection = {k: overrides.pop(k) for k in SELECTION_OVERRIDES if k in overrides}
    run = {k: overrides.pop(k) for k in RUN_OVERRIDES if k in overrides}
    config_fields = {k: overrides.pop(k) for k in list(overrides) if k in Config.model_fields}
    if overrides:
        known = [*SELECTION_OVERRIDES, *RUN_OVERRIDES, *Config.model_fields]
        name = next(iter(overrides))
        raise TypeError(f"evaluate() got an unexpected override {name!r}{did_you_mean(name, known)}")
    cfg, source = resolve(config, Overrides(**selection, fields=config_fields), registries=registries(), label=label)
    from evalkit.clients.providers import check_models

    # a provider whose API is not OpenAI's would fail every request: said now, before the first
    check_models([(e.info.name, e.info.inference_type, e.info.urls) for e in cfg.models])
    return build_plan(cfg, source=source), run


def run_options(run: dict[str, Any], progress: Callable[[str, str, bool], None] | None = None) -> Any:
    """RunOptions from override values; an unknown option is a ConfigError naming it."""
    from evalkit.run.runner import RunOptions

    names = {f.name for f in dataclasses.fields(RunOptions)}
    values = {k: v for k, v in run.items() if v is not None}
    if progress is not None and "progress" not in values:
        values["progress"] = progress
    unknown = [k for k in values if k not in names]
    if unknown:
        raise ConfigError(f"run option {unknown[0]!r} is not supported by this runner")
    return RunOptions(**values)


async def evaluate_async(config: Any, **overrides: Any) -> Results:
    """Run an evaluation on the current event loop; see :func:`evaluate`."""
    from evalkit.report.progress import Progress, expected_totals
    from evalkit.run.runner import execute
    from evalkit.run.shard import Shard

    plan, run = prepare(config, dict(overrides))
    progress = None
    if run.get("progress") is None:
        shard = run.get("shard")
        shards = (Shard.parse(shard) if isinstance(shard, str) else shard).count if shard is not None else 1
        progress = Progress(quiet=bool(run.get("quiet")), totals=expected_totals(plan, shards), estimated=shards > 1)
    try:
        outcome = await execute(plan, run_options(run, progress))
    finally:
        if progress is not None:
            progress.close()
    from evalkit.view.runindex import index_run  # the viewer's indexes, written once the run has ended

    await asyncio.to_thread(index_run, outcome.run_dir, (lambda _: None) if run.get("quiet") else None)
    return Results(
        rows=outcome.rows,
        run_dir=outcome.run_dir,
        meta=outcome.meta,
        seconds=outcome.seconds,
        requests_sent=outcome.requests_sent,
        store_hits=outcome.store_hits,
    )


def evaluate(config: Any, **overrides: Any) -> Results:
    """Evaluate every model of ``config`` on every dataset-metric pair and return the results.

    ``config`` is a :class:`~evalkit.config.Config`, a dict with the keys of
    config.yaml, or the path of a config file. ``overrides`` are the
    ``evalkit run`` flags (``dataset``, ``metric``, ``model``, ``num_samples``,
    ``output_dir``, ``no_cache``, ``refresh_cache``, ``quiet``), run options
    (``progress`` callable, ``run_dir``, ``resume``, ``shard="K/N"``) or top-level config keys
    (e.g. ``max_failure_rate=0.1``). Results, records and report.html are
    written to a new run directory, as with ``evalkit run``.

    Safe to call from a notebook: when an event loop is already running in
    this thread, the evaluation runs on a worker thread with its own loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(evaluate_async(config, **overrides))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalkit-evaluate") as pool:
        return pool.submit(asyncio.run, evaluate_async(config, **overrides)).result()

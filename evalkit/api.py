"""The Python API: ``evalkit.evaluate(config, **overrides) -> Results``.

The same path as ``evalkit run``: config -> overrides -> plan -> runner ->
results on disk. ``evaluate`` is a plain function that also works where an
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
    from evalkit.config import Config
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


def _as_list(value: str | Sequence[str] | None) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def load_any_config(config: Any) -> tuple[Config, str]:
    """A Config and a source label from a Config, a dict of config keys, or a path."""
    from evalkit.config import Config, load_config, parse_config

    if isinstance(config, Config):
        return config.model_copy(deep=True), "Config"
    if isinstance(config, dict):
        return parse_config(config, "<dict>"), "<dict>"
    if isinstance(config, (str, Path)):
        return load_config(config), str(config)
    raise TypeError(f"config must be a Config, a dict or a path, not {type(config).__name__}")


def apply_overrides(
    config: Config,
    *,
    dataset: str | Sequence[str] | None = None,
    metric: str | Sequence[str] | None = None,
    model: str | Sequence[str] | None = None,
    num_samples: int | None = None,
    output_dir: str | Path | None = None,
    batch_size: int | None = None,
    dataset_args: dict[str, dict[str, Any]] | None = None,
    metric_args: dict[str, dict[str, Any]] | None = None,
    processor_args: dict[str, dict[str, dict[str, Any]]] | None = None,
    model_args: dict[str, Any] | None = None,
) -> Config:
    """Narrow or redirect a config without editing its file (the `evalkit run` flags).

    ``dataset`` keeps the config's pairs for those datasets/tasks/categories; a
    name the config does not mention is paired with its task's default metric.
    ``metric`` keeps the pairs with those metrics; both together evaluate every
    dataset with every metric (the plan then checks each pair fits).
    """
    datasets, metrics, models = _as_list(dataset), _as_list(metric), _as_list(model)
    from evalkit.config import MAX_IN_FLIGHT, MAX_SAMPLES

    if num_samples is not None:
        if not 0 <= num_samples <= MAX_SAMPLES:
            raise ConfigError(f"--num-samples: must be 0 to {MAX_SAMPLES} (got {num_samples})")
        config.filters.num_samples = num_samples
    if output_dir:
        config.output_dir = str(output_dir)
    if batch_size is not None:
        if not 1 <= batch_size <= MAX_IN_FLIGHT:
            raise ConfigError(f"--batch-size: must be 1 to {MAX_IN_FLIGHT} (got {batch_size})")
        for entry in config.models:  # every replica: the number is per endpoint, as batch_size in the config
            entry.info.batch_size = batch_size
    if models:
        names = list(dict.fromkeys(e.info.name for e in config.models))
        for name in models:
            if name not in names:
                raise ConfigError(
                    f"--model: {name!r} is not a model of the config{did_you_mean(name, names)}. Models: "
                    f"{', '.join(names)}"
                )
        config.models = [e for e in config.models if e.info.name in models]
    if datasets or metrics:
        before = set(config.dataset_metric)
        config.dataset_metric = _select_pairs(config, datasets, metrics)
        config._pair_labels = [
            None
            if pair in before
            else f"--dataset {pair[0]} --metric {pair[1]}"
            if metrics
            else f"--dataset {pair[0]} (its task's default metric {pair[1]})"
            for pair in config.dataset_metric
        ]
    if dataset_args or metric_args or processor_args or model_args:
        from evalkit.run.component_args import apply_component_args

        apply_component_args(config, dataset_args or {}, metric_args or {}, processor_args or {}, model_args or {})
    return config


def default_pairs(names: Sequence[str], metrics: Sequence[str] | None = None) -> list[list[str]]:
    """Each name with the given metrics, or with its task's default metric (as KARMA needs no metric either)."""
    from evalkit.catalog import load_catalog

    catalog = load_catalog()
    pairs: list[list[str]] = []
    for name in names:
        if metrics:
            pairs += [[name, metric] for metric in metrics]
            continue
        pairs += [[name, metric] for metric in _default_metrics(catalog, name)]
    return pairs


def _default_metrics(catalog: Any, name: str) -> list[str]:
    """What a dataset name runs with no metric given: a KARMA id KARMA's metrics, else its task's default metric."""
    from evalkit.compat.karma import default_metrics
    from evalkit.metrics import METRICS

    specs = catalog.resolve(name, "--dataset")
    karma = [m for m in default_metrics(catalog, name) or [] if m in METRICS]
    if karma:
        return karma
    task = catalog.tasks[specs[0].task]
    fitting = list(catalog.fitting_metrics(specs[0]))
    # an entry that lists its own metrics names its default first (ChEF's LAMM sets, AU-Harness's); else the task's
    own = specs[0].metrics
    metric = own[0] if own else task.default_metric if task.default_metric in fitting or not fitting else fitting[0]
    if metric is None:
        raise ConfigError(f"--dataset: {name!r} has no default metric; add --metric")
    return [metric]


def endpoint_config(
    url: str,
    model: str,
    names: Sequence[str],
    metrics: Sequence[str] | None = None,
    inference_type: str = "vllm",
    auth_env: str | None = None,
) -> dict[str, Any]:
    """A config for one endpoint and some datasets, for `evalkit run --model-url URL --model-name ID --dataset X`.

    Each name runs with the given metrics, or with its task's default metric (KARMA's
    `karma eval --model M --datasets X` needs no config file either).
    """
    info: dict[str, Any] = {"name": model, "inference_type": inference_type, "url": url, "model": model}
    if auth_env:
        info["auth_token"] = f"${{{auth_env}}}"
    return {"dataset_metric": default_pairs(names, metrics), "models": [{"info": info}]}


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

    hosted = None if model_path else karma_model(model)
    if isinstance(hosted, str):
        raise ConfigError(f"--model {model}: {hosted}; evalkit speaks only OpenAI-compatible APIs")
    if hosted is not None:
        info = hosted.entry(model)
        said = f"{model}: {hosted.provider} at {hosted.url}, key from ${hosted.key_env}"
    else:
        from evalkit.serve.by_name import choose_local_model

        local = choose_local_model(model_path or model, backend=backend, name=model if model_path else None)
        info = local.entry()
        said = f"{local.name}: {local.model_path} served by {local.backend} ({local.reason}), stopped after the run"
    return {"dataset_metric": default_pairs(names, metrics), "models": [{"info": info}]}, said


def _select_pairs(config: Config, datasets: list[str] | None, metrics: list[str] | None) -> list[Any]:
    from evalkit.compat.karma import karma_metric
    from evalkit.metrics import METRICS

    if metrics:
        for name in metrics:
            if name not in METRICS and karma_metric(name) not in METRICS:
                raise ConfigError(
                    f"--metric: {name!r} is not a metric{did_you_mean(name, METRICS.names())}. "
                    "Run `evalkit list metrics`."
                )
    wanted_metrics = {METRICS.canonical(m) for m in metrics or []}
    pairs = list(config.dataset_metric)  # [name, metric] or [name, metric, options]: options stay with their pair
    if datasets and metrics:
        return [(d, m) for d in datasets for m in metrics]
    if metrics:
        chosen: list[Any] = [p for p in pairs if METRICS.canonical(p[1]) in wanted_metrics]
        if not chosen:
            used = ", ".join(dict.fromkeys(p[1] for p in pairs))
            raise ConfigError(
                f"--metric: no dataset_metric pair of the config uses {', '.join(metrics)} (the config uses {used}); "
                "add --dataset to pair it"
            )
        return chosen
    assert datasets is not None
    chosen = [p for p in pairs if p[0] in datasets]
    missing = [d for d in datasets if d not in {p[0] for p in chosen}]
    if missing:
        from evalkit.catalog import load_catalog

        catalog = load_catalog(config.runspec_dirs, cwd=config.base_dir)
        for name in missing:
            chosen += [(name, metric) for metric in _default_metrics(catalog, name)]
    return chosen


def _set_config_fields(config: Config, fields: dict[str, Any]) -> Config:
    from pydantic import ValidationError

    from evalkit.config import Config, format_validation_error

    data = config.model_dump(mode="python")
    data.update(fields)
    try:
        updated = Config.model_validate(data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, "evaluate() overrides")) from None
    return updated.anchor(config.base_dir) if config._base_dir is not None else updated


def prepare(config: Any, overrides: dict[str, Any]) -> tuple[Plan, dict[str, Any]]:
    """Config source + overrides -> (plan, run options); unknown override names are errors."""
    from evalkit.config import Config
    from evalkit.plan import build_plan

    cfg, source = load_any_config(config)
    selection = {k: overrides.pop(k) for k in SELECTION_OVERRIDES if k in overrides}
    run = {k: overrides.pop(k) for k in RUN_OVERRIDES if k in overrides}
    config_fields = {k: overrides.pop(k) for k in list(overrides) if k in Config.model_fields}
    if overrides:
        known = [*SELECTION_OVERRIDES, *RUN_OVERRIDES, *Config.model_fields]
        name = next(iter(overrides))
        raise TypeError(f"evaluate() got an unexpected override {name!r}{did_you_mean(name, known)}")
    if config_fields:
        cfg = _set_config_fields(cfg, config_fields)
    cfg = apply_overrides(cfg, **selection)
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

    plan, run = prepare(config, dict(overrides))
    progress = None
    if run.get("progress") is None:
        progress = Progress(quiet=bool(run.get("quiet")), totals=expected_totals(plan))
    try:
        outcome = await execute(plan, run_options(run, progress))
    finally:
        if progress is not None:
            progress.close()
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

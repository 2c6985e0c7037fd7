"""What `evalkit list` and `evalkit info` show: rows about datasets, tasks, categories, metrics, models, processors.

Listing must start in well under a second, so nothing here imports numpy,
datasets, aiohttp or torch. Metrics come from the static table in
:mod:`evalkit.metrics.table` (their modules import numpy and sacrebleu);
when plugins are installed, their metrics can only be known by importing,
so the registry is read then.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import UserError, did_you_mean
from evalkit.metrics.table import METRICS, MetricInfo, metric_infos

# ---------------------------------------------------------------- catalog rows


def _catalog(runspecs_dirs: Iterable[str] = ()) -> Any:
    from evalkit.catalog import load_catalog

    return load_catalog(list(runspecs_dirs))


def _language_set(language: str) -> set[str]:
    """The languages a dataset's ``language`` answers to: itself, and each side of a pair (``fr-en``: fr-en, fr, en)."""
    from evalkit.languages import split_pair

    try:
        source, target = split_pair(language)
    except ValueError:
        return {language}
    return {source} if target is None else {language, source, target}


def _wanted_language(language: str | None) -> str | None:
    if not language:
        return None
    from evalkit.errors import ConfigError
    from evalkit.languages import normalize_language

    try:
        return normalize_language(language)
    except ValueError as error:
        raise ConfigError(f"--language: {error}") from None


def _modality_matches(modality: str, wanted: str | None) -> bool:
    """``audio`` (``image``) selects every dataset with that input, alone or combined; ``text`` only text-only ones."""
    if not wanted:
        return True
    return wanted == modality or (wanted in ("audio", "image") and wanted in modality.split("+"))


@dataclass
class Filters:
    """The `evalkit list` filters; each narrows the rows, unknown names are errors with suggestions."""

    category: str | None = None
    task: str | None = None
    metric: str | None = None
    language: str | None = None
    modality: str | None = None


def _check_filter(value: str | None, known: Iterable[str], flag: str) -> None:
    known = sorted(set(known))
    if value is not None and value not in known:
        raise UserError(f"{flag}: {value!r} is unknown{did_you_mean(value, known)}. Known: {', '.join(known)}")


def _dataset_metrics(catalog: Any, spec: Any) -> list[str]:
    return [METRICS.canonical(m) for m in catalog.fitting_metrics(spec)]


def _selection(
    filters: Filters, runspecs_dirs: Iterable[str]
) -> tuple[Any, dict[str, MetricInfo], str | None, str | None]:
    """The catalogue, the metric infos, and the checked --metric / --language of a listing."""
    catalog = _catalog(runspecs_dirs)
    infos = metric_infos()
    _check_filter(filters.category, catalog.categories, "--category")
    _check_filter(filters.task, catalog.tasks, "--task")
    return catalog, infos, _check_metric(filters.metric, infos), _wanted_language(filters.language)


def dataset_rows(filters: Filters, runspecs_dirs: Iterable[str] = ()) -> list[dict[str, Any]]:
    catalog, infos, metric, language = _selection(filters, runspecs_dirs)
    rows = []
    for name, spec in sorted(catalog.entries().items()):
        metrics = _dataset_metrics(catalog, spec)
        if filters.category and spec.category != filters.category:
            continue
        if filters.task and spec.task != filters.task:
            continue
        if metric and metric not in metrics:
            continue
        if language and language not in _language_set(spec.language):
            continue
        if not _modality_matches(spec.modality, filters.modality):
            continue
        rows.append(
            {
                "name": name,
                "task": spec.task,
                "category": spec.category,
                "language": spec.language,
                "modality": spec.modality,
                "source": spec.source_label,
                "checked": spec.checked.date if spec.checked else "",
                "checked_url": spec.checked.url if spec.checked else "",
                "metrics": metrics,
                "description": spec.description or "",
            }
        )
    return rows


def _check_metric(metric: str | None, infos: dict[str, MetricInfo]) -> str | None:
    if metric is None:
        return None
    canonical = METRICS.canonical(metric)
    if canonical not in infos:
        raise UserError(
            f"--metric: {metric!r} is not a metric{did_you_mean(metric, METRICS.names())}. Run `evalkit list metrics`."
        )
    return canonical


def task_rows(filters: Filters, runspecs_dirs: Iterable[str] = ()) -> list[dict[str, Any]]:
    catalog, infos, metric, language = _selection(filters, runspecs_dirs)
    rows = []
    for name, task in sorted(catalog.tasks.items()):
        if filters.category and task.category != filters.category:
            continue
        if filters.task and name != filters.task:
            continue
        metrics = [METRICS.canonical(m) for m in task.metrics]
        if metric and metric not in metrics:
            continue
        specs = [catalog.datasets[d] for d in task.datasets]
        specs = [
            s
            for s in specs
            if (not language or language in _language_set(s.language))
            and _modality_matches(s.modality, filters.modality)
        ]
        if (language or filters.modality) and not specs:
            continue
        rows.append(
            {
                "name": name,
                "category": task.category,
                "datasets": len(specs),
                "metrics": metrics,
                "default_metric": task.default_metric or (metrics[0] if metrics else ""),
                "languages": sorted({s.language for s in specs}),
                "description": task.description,
            }
        )
    return rows


def category_rows(filters: Filters, runspecs_dirs: Iterable[str] = ()) -> list[dict[str, Any]]:
    catalog = _catalog(runspecs_dirs)
    _check_filter(filters.category, catalog.categories, "--category")
    language = _wanted_language(filters.language)
    rows = []
    for name, tasks in sorted(catalog.categories.items()):
        if filters.category and name != filters.category:
            continue
        specs = [catalog.datasets[d] for t in tasks for d in catalog.tasks[t].datasets]
        specs = [
            s
            for s in specs
            if (not language or language in _language_set(s.language))
            and _modality_matches(s.modality, filters.modality)
        ]
        if (language or filters.modality) and not specs:
            continue
        rows.append({"name": name, "tasks": sorted(tasks), "datasets": len(specs)})
    return rows


def metric_rows(filters: Filters, runspecs_dirs: Iterable[str] = ()) -> list[dict[str, Any]]:
    infos = metric_infos()
    wanted = _check_metric(filters.metric, infos)
    catalog = _catalog(runspecs_dirs)
    _check_filter(filters.category, catalog.categories, "--category")
    _check_filter(filters.task, catalog.tasks, "--task")
    used_by: dict[str, list[str]] = {}
    for task in catalog.tasks.values():
        for metric in task.metrics:
            used_by.setdefault(METRICS.canonical(metric), []).append(task.name)
    allowed: set[str] | None = None
    if filters.task or filters.category:
        allowed = {
            METRICS.canonical(m)
            for t in catalog.tasks.values()
            if (not filters.task or t.name == filters.task) and (not filters.category or t.category == filters.category)
            for m in t.metrics
        }
    rows = []
    for name, info in sorted(infos.items()):
        if wanted and name != wanted:
            continue
        if allowed is not None and name not in allowed:
            continue
        rows.append(
            {
                "name": name,
                "aliases": list(info.aliases),
                "better": "higher" if info.higher_is_better else "lower",
                "ci": info.ci_method,
                "judge": info.needs_judge,
                "tasks": sorted(used_by.get(name, [])),
                "reference": info.reference.short if info.reference else "",
                "description": info.summary,
            }
        )
    return rows


def _processor_rows(registry: Any) -> list[dict[str, Any]]:
    rows = []
    for name, obj in registry.items():
        doc = (getattr(obj, "__doc__", "") or "").strip()
        rows.append(
            {"name": name, "aliases": list(registry.aliases(name)), "description": doc.splitlines()[0] if doc else ""}
        )
    return rows


def preprocessor_rows(filters: Filters, runspecs_dirs: Iterable[str] = ()) -> list[dict[str, Any]]:
    from evalkit.prompts.preprocessors import PREPROCESSORS

    return _with_usage(_processor_rows(PREPROCESSORS), "preprocessor", runspecs_dirs, PREPROCESSORS)


def postprocessor_rows(filters: Filters, runspecs_dirs: Iterable[str] = ()) -> list[dict[str, Any]]:
    from evalkit.processing.postprocessors import POSTPROCESSORS

    return _with_usage(_processor_rows(POSTPROCESSORS), "postprocessor", runspecs_dirs, POSTPROCESSORS)


def text_processor_rows(filters: Filters, runspecs_dirs: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The processors with arguments (KARMA's), each with its arguments and how many datasets' runspecs use it."""
    from evalkit.processing.processors import PROCESSORS

    catalog = _catalog(runspecs_dirs)
    counts: dict[str, int] = {}
    for spec in catalog.entries().values():
        for entry in spec.processors:
            name = entry if isinstance(entry, str) else str(entry.get("name"))
            key = PROCESSORS.canonical(name) if name in PROCESSORS else name
            counts[key] = counts.get(key, 0) + 1
    rows = _processor_rows(PROCESSORS)
    for row in rows:
        cls = PROCESSORS.get(row["name"])
        row["arguments"] = [f"{key}: {text}" for key, text in getattr(cls, "arguments", {}).items()]
        row["datasets"] = counts.get(row["name"], 0)
    return rows


def _with_usage(
    rows: list[dict[str, Any]], field_name: str, runspecs_dirs: Iterable[str], registry: Any
) -> list[dict[str, Any]]:
    catalog = _catalog(runspecs_dirs)
    counts: dict[str, int] = {}
    for spec in catalog.entries().values():
        name = getattr(spec, field_name)
        key = registry.canonical(name) if name in registry else name
        counts[key] = counts.get(key, 0) + 1
    for row in rows:
        row["datasets"] = counts.get(row["name"], 0)
    return rows


def import_config_plugins(config_path: str | None = None) -> None:
    """Import the ``plugins:`` modules of a config, so listings and ``info`` show the metrics they register.

    The config is ``--config`` (an error in it is exit 2, as for a run) or ``./config.yaml`` when
    present (an error in that one is a warning: a listing is not a run, and must not fail on a
    config the user did not name). Modules are found beside the config first, as in a run;
    entry-point plugins are imported by the registry itself.
    """
    import logging

    path = Path(config_path) if config_path else Path("config.yaml")
    if not config_path and not path.is_file():
        return
    from evalkit.registry import import_plugin_modules
    from evalkit.util.yaml_safe import load_yaml_file

    try:
        if not config_path and not _names_plugins(load_yaml_file(path)):
            return  # ./config.yaml has no plugins to list: validating all of it would only cost the listing time
        from evalkit.config import load_config

        config = load_config(path)
        import_plugin_modules(config.plugins, f"{path}: plugins", beside=config.base_dir)
    except UserError as error:
        if config_path:
            raise
        logging.getLogger("evalkit").warning("%s: its plugins are not listed: %s", path, error)


def _names_plugins(data: Any) -> bool:
    """Whether a config tree may name plugin modules: a ``plugins`` key, or not a mapping (validation says what)."""
    return not isinstance(data, dict) or "plugins" in data


def model_rows(filters: Filters, config_path: str | None = None) -> list[dict[str, Any]]:
    """The models of a config (default ./config.yaml when present), then the local backends `evalkit serve` offers."""
    rows: list[dict[str, Any]] = []
    path = Path(config_path) if config_path else Path("config.yaml")
    if config_path or path.is_file():
        from evalkit.config import load_config

        config = load_config(path)
        grouped: dict[str, list[Any]] = {}
        for entry in config.models:
            grouped.setdefault(entry.info.name, []).append(entry.info)
        for name, infos in grouped.items():
            info = infos[0]
            endpoints = sum(len(i.urls) for i in infos) or len([i for i in infos if i.launch is not None])
            rows.append(
                {
                    "name": name,
                    "inference_type": info.inference_type,
                    "model": info.model,
                    "endpoints": endpoints,
                    "batch_size": sum(i.batch_size for i in infos),
                    "source": str(path),
                    "notes": "",
                }
            )
    try:
        from evalkit.serve.backends.registry import BACKENDS
    except Exception:
        BACKENDS = {}
    for name, spec in sorted(BACKENDS.items()):
        rows.append(
            {
                "name": name,
                "inference_type": "local",
                "model": "(--model PATH)" if spec.needs_model else "(built in)",
                "endpoints": 0,
                "batch_size": "",
                "source": f"evalkit serve --backend {name}",
                "notes": f"pip extra [{spec.extra}]; {spec.summary}",
            }
        )
    return rows


# ---------------------------------------------------------------- rendering


#: columns shown in the table view per kind (json/csv carry every field)
TABLE_COLUMNS = {
    "datasets": ["name", "task", "language", "modality", "source", "checked", "metrics"],
    "tasks": ["name", "category", "datasets", "default_metric", "metrics", "description"],
    "categories": ["name", "datasets", "tasks"],
    "metrics": ["name", "aliases", "better", "ci", "judge", "reference", "description"],
    "models": ["name", "inference_type", "model", "endpoints", "batch_size", "source", "notes"],
    "preprocessors": ["name", "aliases", "datasets", "description"],
    "postprocessors": ["name", "aliases", "datasets", "description"],
    "processors": ["name", "aliases", "arguments", "datasets", "description"],
}


#: columns kept on one line (identifiers people copy into configs)
_NO_WRAP = {"name", "checked", "task", "language", "modality", "inference_type", "model"}


def _cell(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else ""
    return "" if value is None else str(value)


def render(kind: str, rows: list[dict[str, Any]], fmt: str, *, width: int | None = None) -> str:
    """Rows as text: a boxed table, JSON (a list of objects) or CSV (lists joined with ';')."""
    if fmt == "json":
        return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        import csv

        from evalkit.report.tables import spreadsheet_safe

        buffer = io.StringIO()
        fields = list(dict.fromkeys(k for row in rows for k in row)) or TABLE_COLUMNS[kind]
        writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            cells = {k: ";".join(map(str, v)) if isinstance(v, (list, tuple)) else v for k, v in row.items()}
            writer.writerow({k: spreadsheet_safe(v) for k, v in cells.items()})  # "=cmd" shows as text
        return buffer.getvalue()
    from evalkit.cli.table_text import render_table

    columns = TABLE_COLUMNS[kind]
    return render_table(
        f"{len(rows)} {kind if len(rows) != 1 else kind.rstrip('s')}",
        columns,
        [[_cell(row.get(c)) for c in columns] for row in rows],  # data, never markup
        [c not in _NO_WRAP for c in columns],
        width or 160,
    )


ROW_FUNCTIONS = {
    "datasets": dataset_rows,
    "tasks": task_rows,
    "categories": category_rows,
    "metrics": metric_rows,
    "preprocessors": preprocessor_rows,
    "postprocessors": postprocessor_rows,
    "processors": text_processor_rows,
}

"""`evalkit info dataset|metric|task NAME`: everything needed to use one catalogue entry in a config.

Like listing, this stays import-light (no numpy/datasets): it reads the
runspec catalogue and the static metric table, and counts local rows from
file metadata only.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evalkit.errors import UserError, did_you_mean
from evalkit.metrics.references import Reference
from evalkit.metrics.table import METRICS, MetricInfo, metric_infos

INFO_KINDS = ("dataset", "metric", "task")

_SKIP_FIELDS = {"name", "task", "category", "description", "metrics", "file", "checked"}


def _unknown(kind: str, name: str, known: Iterable[str], catalog: Any, infos: dict[str, MetricInfo]) -> UserError:
    message = f"{name!r} is not a {kind}{did_you_mean(name, known)}."
    elsewhere = []
    if kind != "dataset" and name in catalog.datasets:
        elsewhere.append("dataset")
    if kind != "task" and name in catalog.tasks:
        elsewhere.append("task")
    if kind != "metric" and METRICS.canonical(name) in infos:
        elsewhere.append("metric")
    if name in catalog.categories:
        message += f" It is a category: `evalkit list datasets --category {name}`."
    for other in elsewhere:
        message += f" It is a {other}: `evalkit info {other} {name}`."
    if not elsewhere and name not in catalog.categories:
        message += f" Run `evalkit list {kind}s` to see them all."
    return UserError(message)


def _foreign(catalog: Any, name: str) -> bool:
    """Whether ``name`` is another tool's dataset or group name (AU-Harness, KARMA, ChEF), prefixed or not.

    evalkit's own task and category names keep their meaning here (`asr` is evalkit's task before AU-Harness's).
    """
    if name in catalog.tasks or name in catalog.categories:
        return False
    tool, _, inner = name.partition(":")
    if inner and tool in catalog.foreign:
        return True
    return any(name in names.datasets or name in names.groups for names in catalog.foreign.values())


def _fitting(catalog: Any, spec: Any, infos: dict[str, MetricInfo]) -> list[dict[str, Any]]:
    task = catalog.tasks[spec.task]
    default = METRICS.canonical(task.default_metric) if task.default_metric else None
    out = []
    for metric in catalog.fitting_metrics(spec):
        name = METRICS.canonical(metric)
        out.append({"name": name, "default": name == default, "installed": name in infos})
    return out


def dataset_info(name: str, catalog: Any) -> dict[str, Any]:
    from evalkit.data.counts import local_row_count

    infos = metric_infos()
    # another tool's name for it (a hub repo id, as KARMA users type): the entry it names
    name = catalog.entry_name(name) or name  # also another tool's dataset name (AU-Harness's mmsu_law)
    if name not in catalog.datasets and _foreign(catalog, name):
        # another tool's name with no entry of its own: what `evalkit run` would say (the data it reads, or why not)
        specs = catalog.resolve(name)
        if len(specs) != 1:
            shown = ", ".join(spec.name for spec in specs[:12]) + (" ..." if len(specs) > 12 else "")
            raise UserError(
                f"{name!r} is a group of {len(specs)} datasets ({shown}); `evalkit info dataset NAME` shows one"
            )
        name = specs[0].name
    if name not in catalog.datasets:
        raise _unknown("dataset", name, catalog.datasets, catalog, infos)
    spec = catalog.datasets[name]
    fields = {
        k: v for k, v in spec.model_dump(by_alias=False).items() if k not in _SKIP_FIELDS and v not in (None, {}, [])
    }
    fields["source"] = spec.source
    metrics = _fitting(catalog, spec, infos)
    usable = [m for m in metrics if m["installed"]] or metrics
    example = next((m["name"] for m in usable if m["default"]), usable[0]["name"] if usable else "METRIC")
    return {
        "kind": "dataset",
        "name": name,
        "task": spec.task,
        "category": spec.category,
        "description": spec.description or "",
        "runspec": spec.file,
        "rows": local_row_count(spec) if spec.path is not None else None,
        "fields": fields,
        "checked": spec.checked.model_dump() if spec.checked is not None else None,
        "other_tools": catalog.source_notes(name),
        "metrics": metrics,
        # an entry whose data cannot be had has no config to show: naming it stops the config with its reason
        "example": None if spec.unavailable else f"dataset_metric:\n  - [{name}, {example}]",
    }


def metric_info(name: str, catalog: Any) -> dict[str, Any]:
    infos = metric_infos()
    canonical = METRICS.canonical(name)
    if canonical not in infos:
        raise _unknown("metric", name, METRICS.names(), catalog, infos)
    info = infos[canonical]
    # the full docstring is worth importing one metric module for
    cls = METRICS.get(canonical)
    description = inspect.cleandoc(cls.__doc__ or "") or info.summary
    # a metric fits the tasks whose runspecs list it and those its class declares (as the plan accepts a pair)
    declared = set(getattr(cls, "tasks", ()) or ())
    every = "*" in declared
    tasks = [
        t
        for t in catalog.tasks.values()
        if every or {t.name, t.category} & declared or canonical in {METRICS.canonical(m) for m in t.metrics}
    ]
    datasets = [
        d
        for d, spec in catalog.entries().items()
        if every
        or {spec.task, spec.category} & declared
        or canonical in {METRICS.canonical(m) for m in catalog.fitting_metrics(spec)}
    ]
    # the task that uses the metric most is the example a reader recognises (asr for WER, not a 3-set task)
    target = max(tasks, key=lambda t: len(t.datasets)).name if tasks else "DATASET"
    return {
        "kind": "metric",
        "name": canonical,
        "aliases": list(info.aliases),
        "better": "higher" if info.higher_is_better else "lower",
        "ci_method": info.ci_method,
        "needs_judge": info.needs_judge,
        "description": description,
        "module": info.module,
        "reference": _reference_fields(info.reference),
        "tasks": [{"name": t.name, "category": t.category, "datasets": len(t.datasets)} for t in tasks],
        "datasets": len(datasets),
        "every_task": every,
        "example": f"dataset_metric:\n  - [{target}, {canonical}]",
    }


def _reference_fields(reference: Reference | None) -> dict[str, Any] | None:
    if reference is None:
        return None
    return {
        "project": reference.project,
        "source": reference.source,
        "version": reference.version,
        "checked_by": reference.checked_by,
        "differences": list(reference.differences),
    }


def task_info(name: str, catalog: Any) -> dict[str, Any]:
    infos = metric_infos()
    if name not in catalog.tasks:
        raise _unknown("task", name, catalog.tasks, catalog, infos)
    task = catalog.tasks[name]
    metrics = [METRICS.canonical(m) for m in task.metrics]
    default = METRICS.canonical(task.default_metric) if task.default_metric else (metrics[0] if metrics else "METRIC")
    return {
        "kind": "task",
        "name": name,
        "category": task.category,
        "description": task.description,
        "runspec": task.file,
        "metrics": [{"name": m, "default": m == default, "installed": m in infos} for m in metrics],
        "datasets": [
            {
                "name": d,
                "language": catalog.datasets[d].language,
                "modality": catalog.datasets[d].modality,
                "source": catalog.datasets[d].source_label,
            }
            for d in task.datasets
        ],
        "example": f"dataset_metric:\n  - [{name}, {default}]   # every dataset of the task",
    }


def _where(obj: Any) -> dict[str, str]:
    """A function or class as ``module.qualname`` and ``file:line``, for a reader who opens the code."""
    try:
        file = inspect.getsourcefile(obj) or "?"
        line = inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        file, line = "?", 0
    return {"function": f"{obj.__module__}.{obj.__qualname__}", "file": f"{file}:{line}"}


def _runspec_entry(spec: Any) -> dict[str, Any]:
    """The entry as its runspec file writes it (the loaded form when the file names it otherwise)."""
    try:
        written = json.loads(Path(spec.file).read_text(encoding="utf-8")).get(spec.name)
    except (OSError, ValueError, AttributeError):
        written = None
    if isinstance(written, dict):
        return written
    return spec.model_dump(mode="json", exclude_defaults=True)


def dataset_code(name: str, runspecs_dirs: Iterable[str] = ()) -> dict[str, Any]:
    """`info dataset NAME --show-code`: the runspec entry and the evalkit code that reads, prompts and scores it.

    evalkit has no class per dataset (KARMA's --show-code points at one): a runspec entry is data, read by
    the same loader for every entry of its kind. So this names the runspec file and entry, then each
    function on the entry's way from its source to a request and back.
    """
    from evalkit.catalog import load_catalog
    from evalkit.data import hubcache, loading
    from evalkit.processing.postprocessors import POSTPROCESSORS
    from evalkit.processing.processors import PROCESSORS
    from evalkit.prompts.preprocessors import PREPROCESSORS

    catalog = load_catalog(list(runspecs_dirs))
    spec = catalog.datasets[catalog.entry_name(name) or name]
    steps: list[dict[str, str]] = [{"step": "rows", **_where(loading.iter_rows)}]
    if spec.path is not None:
        steps.append({"step": "local file", **_where(loading.iter_local_file)})
    else:
        steps.append({"step": "hub rows, stored locally", **_where(hubcache.HubRowCache.rows)})
        steps.append({"step": "hub (datasets.load_dataset)", **_where(loading.iter_with_datasets)})
    steps.append({"step": "row to sample", **_where(loading.row_to_sample)})
    steps.append({"step": f"prompt ({spec.preprocessor})", **_where(PREPROCESSORS.get(spec.preprocessor))})
    steps.append({"step": f"answer ({spec.postprocessor})", **_where(POSTPROCESSORS.get(spec.postprocessor))})
    for item in spec.processors:
        processor = item if isinstance(item, str) else str(item.get("name"))
        steps.append({"step": f"text processor ({processor})", **_where(PROCESSORS.get(processor))})
    return {"runspec": spec.file, "entry": {spec.name: _runspec_entry(spec)}, "loader": steps}


def describe(kind: str, name: str, runspecs_dirs: Iterable[str] = ()) -> dict[str, Any]:
    from evalkit.catalog import load_catalog

    catalog = load_catalog(list(runspecs_dirs))
    return {"dataset": dataset_info, "metric": metric_info, "task": task_info}[kind](name, catalog)


def _metric_list(metrics: list[dict[str, Any]]) -> str:
    parts = []
    for m in metrics:
        label = m["name"] + (" (default)" if m["default"] else "") + ("" if m["installed"] else " (not installed)")
        parts.append(label)
    return ", ".join(parts) or "-"


def render_info(data: dict[str, Any], fmt: str = "table") -> None:
    """Print an info record: JSON, or a readable rich layout."""
    if fmt == "json":
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    where = (
        f", {data['category']}/{data['task']}"
        if data["kind"] == "dataset"
        else f", {data['category']}"
        if data["kind"] == "task"
        else ""
    )
    console.print(Text.assemble((data["name"], "bold"), f"  ({data['kind']}{where})"))
    if data.get("description"):
        console.print(data["description"], markup=False)
    console.print()
    if data["kind"] == "dataset":
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for key, value in data["fields"].items():
            table.add_row(key, Text(json.dumps(value) if isinstance(value, (dict, list)) else str(value)))
        if data["rows"] is not None:
            table.add_row("rows", f"{data['rows']} (before filters)")
        checked = data.get("checked")
        if checked:
            table.add_row("checked", Text(f"{checked['date']} against {checked['url']}"))
            table.add_row("what was checked", Text(checked["what"]))
        elif data["fields"].get("hf_repo"):
            table.add_row("checked", "never checked against the hub")
        for note in data.get("other_tools") or []:
            table.add_row("other tools", Text(note))
        table.add_row("runspec", Text(data["runspec"]))
        table.add_row("metrics that fit", _metric_list(data["metrics"]))
        console.print(table)
    elif data["kind"] == "metric":
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        table.add_row("aliases", ", ".join(data["aliases"]) or "-")
        table.add_row("better", data["better"])
        table.add_row("95% CI", data["ci_method"])
        table.add_row("needs judge", "yes" if data["needs_judge"] else "no")
        table.add_row("defined in", data["module"])
        reference = data.get("reference")
        if reference:
            table.add_row("reference", Text(f"{reference['project']}: {reference['source']}"))
            table.add_row("checked against", Text(f"{reference['version']} ({reference['checked_by']})"))
            differences = reference["differences"]
            table.add_row("known differences", Text("\n".join(f"- {d}" for d in differences) or "none known"))
        else:
            table.add_row("reference", "none named (a plugin without a `reference` attribute)")
        if data.get("every_task"):  # its class declares it fits any task: the list would be the whole catalogue
            fits = f"every task ({len(data['tasks'])} tasks, {data['datasets']} datasets)"
        else:
            fits = f"{len(data['tasks'])} tasks, {data['datasets']} datasets: " + ", ".join(
                t["name"] for t in data["tasks"]
            )
        table.add_row("fits", fits)
        console.print(table)
    else:
        console.print(f"metrics that fit: {_metric_list(data['metrics'])}", markup=False)
        console.print(f"runspec: {data['runspec']}", markup=False)
        table = Table(title=f"{len(data['datasets'])} datasets", title_justify="left")
        for column in ("name", "language", "modality", "source"):
            table.add_column(column, overflow="fold")
        for d in data["datasets"]:
            table.add_row(*(Text(d[k]) for k in ("name", "language", "modality", "source")))
        console.print(table)
    if data["example"] is None:
        console.print("\n[bold]cannot be evaluated:[/bold] its data cannot be had (see `unavailable` above)")
    else:
        console.print("\n[bold]example config:[/bold]")
        console.print(data["example"], markup=False)
    code = data.get("code")
    if code:
        console.print(f"\n[bold]runspec entry[/bold] ({code['runspec']}):")
        console.print(json.dumps(code["entry"], indent=2, ensure_ascii=False), markup=False)
        console.print("\n[bold]loaded by:[/bold]")
        for step in code["loader"]:
            console.print(f"  {step['step']}: {step['function']}  ({step['file']})", markup=False)

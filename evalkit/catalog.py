"""Runspec discovery: dataset name, task (file stem) and category (folder) resolution.

Runspecs are read from, in order: the runspecs that ship with evalkit, the
``runspecs/`` folder of the working directory, and every folder named by the
config's ``runspecs_dir``. A dataset name defined twice anywhere is an error,
so a private dataset can never silently shadow a public one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evalkit.errors import RunspecError, did_you_mean

SHIPPED_RUNSPECS = Path(__file__).resolve().parent.parent / "runspecs"


class GenerationSettings(BaseModel):
    """A task's or dataset's default generation parameters (below the config's overrides and the model's own)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=1)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None


class CheckedRecord(BaseModel):
    """Provenance of a hub entry: where and when its repo, config, split, columns and licence were checked."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="The page that was read for the check (dataset card, file tree, viewer), an https URL.")
    date: str = Field(description="When the check was made, as an ISO date (YYYY-MM-DD).")
    what: str = Field(description="What was compared with the hub and what matched, what was fixed, what could not be confirmed.")


class DatasetSpec(BaseModel):
    """One dataset entry of a runspec file, plus where it was found."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = ""
    task: str = ""
    category: str = ""
    file: str = ""

    hf_repo: str | None = None
    path: str | None = None
    subset: str | None = None
    split: str = "test"
    data_files: str | list[str] | None = None
    language: str
    modality: Literal["audio", "text", "audio+text"] = "audio"
    audio_column: str | None = None
    target_column: str | None = None
    textual_input_column: str | None = None
    instruction_column: str | None = Field(None, alias="additional_instruction_column")
    id_column: str | None = None
    choices_column: str | None = None
    accent_column: str | None = None
    accented_column: str | None = None
    gender_column: str | None = None
    speaker_column: str | None = None
    duration_column: str | None = None
    turns_column: str | None = None
    #: more columns copied into ``sample.meta`` under the given keys, e.g. {"rubrics": "rubric_items"}
    extra_columns: dict[str, str] = Field(default_factory=dict)
    instruction: str | None = None
    preprocessor: str = "GeneralPreprocessor"
    postprocessor: str = "GeneralPostprocessor"
    metrics: list[str] | None = None
    long_audio: Literal["chunk", "truncate"] = "chunk"
    generation: GenerationSettings | None = None
    prompt_pool: str | None = None
    prompt_choice: str | int | None = None
    in_context: dict[str, Any] | None = None
    description: str | None = None
    license: str | None = None
    url: str | None = None
    checked: CheckedRecord | None = Field(None, description="Provenance: the hub page this entry was checked against, when, and what was checked.")

    @model_validator(mode="before")
    @classmethod
    def _accept_both_instruction_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and "instruction_column" in data and "additional_instruction_column" not in data:
            data = dict(data)
            data["additional_instruction_column"] = data.pop("instruction_column")
        return data

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        if (self.hf_repo is None) == (self.path is None):
            raise ValueError("needs exactly one of `hf_repo` (a hub dataset) or `path` (a local file or folder)")
        return self

    @property
    def source(self) -> str:
        """The hub id, or the local path resolved against the runspec file."""
        if self.hf_repo is not None:
            return self.hf_repo
        base = Path(self.file).parent
        return str((base / str(self.path)).resolve())


@dataclass
class TaskSpec:
    name: str
    category: str
    file: str
    description: str = ""
    metrics: list[str] = field(default_factory=list)
    default_metric: str | None = None
    datasets: list[str] = field(default_factory=list)
    generation: GenerationSettings = field(default_factory=GenerationSettings)


@dataclass
class Catalog:
    datasets: dict[str, DatasetSpec] = field(default_factory=dict)
    tasks: dict[str, TaskSpec] = field(default_factory=dict)
    categories: dict[str, list[str]] = field(default_factory=dict)
    roots: list[Path] = field(default_factory=list)

    def all_names(self) -> list[str]:
        return sorted({*self.datasets, *self.tasks, *self.categories})

    def resolve(self, name: str, where: str = "") -> list[DatasetSpec]:
        """Datasets selected by a dataset name, a task stem or a category folder."""
        if name in self.datasets:
            return [self.datasets[name]]
        if name in self.tasks:
            return [self.datasets[d] for d in self.tasks[name].datasets]
        if name in self.categories:
            return [self.datasets[d] for task in self.categories[name] for d in self.tasks[task].datasets]
        prefix = f"{where}: " if where else ""
        raise RunspecError(
            f"{prefix}{name!r} is not a dataset, task or category{did_you_mean(name, self.all_names())}. "
            f"Run `evalkit list datasets` to see the catalogue."
        )

    def fitting_metrics(self, spec: DatasetSpec) -> list[str]:
        if spec.metrics is not None:
            return list(spec.metrics)
        return list(self.tasks[spec.task].metrics)


def _runspec_files(root: Path) -> Iterable[Path]:
    for path in sorted(root.glob("*/*.json")):
        if path.parent.name.startswith(("_", ".")):
            continue
        yield path


def _read_runspec(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise RunspecError(f"{path}: line {error.lineno}, column {error.colno}: not valid JSON: {error.msg}") from None
    if not isinstance(data, dict):
        raise RunspecError(f"{path}: expected a JSON object mapping dataset names to entries")
    return data


def _format_runspec_error(error: ValidationError, path: Path, name: str) -> str:
    lines = []
    known = list(DatasetSpec.model_fields) + ["additional_instruction_column"]
    for item in error.errors():
        loc = ".".join(str(p) for p in item["loc"])
        if item["type"] == "extra_forbidden":
            lines.append(f"{path}: {name}.{loc}: unknown key{did_you_mean(str(item['loc'][-1]), known)}")
        elif item["type"] == "missing":
            lines.append(f"{path}: {name}.{loc}: missing mandatory key")
        else:
            where = f"{name}.{loc}" if loc else name
            lines.append(f"{path}: {where}: {item['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def default_roots(extra_dirs: Iterable[str | Path] = (), cwd: Path | None = None) -> list[Path]:
    roots: list[Path] = []
    for candidate in [SHIPPED_RUNSPECS, (cwd or Path.cwd()) / "runspecs", *map(Path, extra_dirs)]:
        resolved = candidate.resolve()
        if resolved not in roots:
            roots.append(resolved)
    return roots


def load_catalog(extra_dirs: Iterable[str | Path] = (), cwd: Path | None = None) -> Catalog:
    """Read every runspec; ``extra_dirs`` must exist (they come from the user's config)."""
    extra = [Path(d) for d in extra_dirs]
    for directory in extra:
        if not directory.is_dir():
            raise RunspecError(f"runspecs_dir: {directory} is not a folder")
    catalog = Catalog(roots=default_roots(extra, cwd))
    for root in catalog.roots:
        if not root.is_dir():
            continue
        for path in _runspec_files(root):
            _add_file(catalog, path)
    return catalog


def _add_file(catalog: Catalog, path: Path) -> None:
    data = _read_runspec(path)
    task_name, category = path.stem, path.parent.name
    task_meta = data.pop("_task", {}) or {}
    if not isinstance(task_meta, dict):
        raise RunspecError(f"{path}: _task: expected an object with description and metrics")
    try:
        generation = GenerationSettings.model_validate(task_meta.get("generation") or {})
    except ValidationError as error:
        raise RunspecError(_format_runspec_error(error, path, "_task.generation")) from None
    task = catalog.tasks.get(task_name)
    if task is None:
        task = TaskSpec(
            name=task_name,
            category=category,
            file=str(path),
            description=str(task_meta.get("description", "")),
            metrics=list(task_meta.get("metrics", [])),
            default_metric=task_meta.get("default_metric"),
            generation=generation,
        )
        catalog.tasks[task_name] = task
        catalog.categories.setdefault(category, []).append(task_name)
    elif task.category != category:
        raise RunspecError(f"{path}: task {task_name!r} is also defined in category {task.category!r} ({task.file})")
    else:
        for metric in task_meta.get("metrics", []):
            if metric not in task.metrics:
                task.metrics.append(metric)
    for name, entry in data.items():
        if not isinstance(entry, dict):
            raise RunspecError(f"{path}: {name}: expected an object of dataset properties")
        if name in catalog.datasets:
            other = catalog.datasets[name].file
            raise RunspecError(f"{path}: dataset {name!r} is already defined in {other}; dataset names must be unique")
        try:
            spec = DatasetSpec.model_validate({**entry, "name": name, "task": task_name, "category": category, "file": str(path)})
        except ValidationError as error:
            raise RunspecError(_format_runspec_error(error, path, name)) from None
        catalog.datasets[name] = spec
        task.datasets.append(name)

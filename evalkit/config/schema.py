"""The whole of config.yaml: the root model, its dataset-metric pairs and what it gathers from the parts.

Every field carries its documentation (``description``) so ``sample_config.yaml``
and error messages speak the same language. The parts (models, filters, the
judge, ...) each have their module beside this one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from evalkit.config.base import Strict
from evalkit.config.budget import Budget
from evalkit.config.filters import Filters
from evalkit.config.generation import GenerationOverride, TemperatureOverride
from evalkit.config.judge import JudgeProperties
from evalkit.config.launch import anchor_args
from evalkit.config.models import ModelEntry
from evalkit.config.prompt_overrides import PromptOverrides
from evalkit.config.store import CacheSettings

AggregateMethod = Literal["macro", "micro"]


def _quoted_pair(text: str, index: int) -> list[str]:
    """``"[name, metric]"`` -> ``["name", "metric"]``; any other string is a mistake named with its position."""
    inner = text.strip()
    parts = [part.strip().strip("'\"").strip() for part in inner[1:-1].split(",")]
    if not (inner.startswith("[") and inner.endswith("]")) or len(parts) != 2 or not all(parts):
        raise ValueError(
            f'[{index}] {text!r} is not a [dataset, metric] pair; write [name, metric] or "[name, metric]"'
        )
    return parts


def aggregate_entry(entry: tuple[Any, ...]) -> tuple[str, list[str], str]:
    """(metric, names, method) of an ``aggregate`` entry written with or without its method."""
    return entry[0], list(entry[1]), entry[2] if len(entry) > 2 else "macro"


class Config(Strict):
    """The whole of config.yaml."""

    dataset_metric: list[tuple[str, str] | tuple[str, str, dict[str, Any]]] = Field(
        min_length=1,
        description="Mandatory: [name, metric] pairs, or [name, metric, {option: value}] with the metric's options "
        '(e.g. {"normalizer": "basic"} for word_error_rate); the name is a dataset, a task (runspec file stem) or a '
        "category (runspecs folder). One engine runs per (dataset, metric) pair. LALMEval's quoted form "
        '"[name, metric]" is accepted too.',
    )

    models: list[ModelEntry] = Field(
        min_length=1,
        description="Mandatory: the models evaluated, each an `info:` block; entries sharing a name are replicas.",
    )
    filters: Filters = Field(
        default_factory=Filters,
        description="Which samples run and how they are prompted; absent: every sample, no add-ons.",
    )
    dataset_paths: dict[str, str] = Field(
        default_factory=dict,
        description="Where catalogue datasets lie on this disk: {dataset name: a file or folder}, relative to the "
        "config file's folder. Private datasets (licensed corpora such as CallHome) need it; a hub dataset given a "
        "local copy (a save_to_disk folder, parquet or arrow files, a snapshot of the hub repo) is read from it "
        "instead of the hub, with its subset, split and columns. Default none.",
    )
    report_as: Literal["evalkit", "auharness"] = Field(
        "evalkit",
        description="Whose names and scale the results tables use: evalkit (its entries, its scale) or auharness: "
        "a pair named in AU-Harness's terms shows AU-Harness's dataset and metric names and its scale (x100 where "
        "AU-Harness prints x100) beside evalkit's n and 95% CI on the same scale; results.json keeps evalkit's "
        "score too. An AU-Harness config, and `evalkit convert`'s output of one, sets auharness. Default evalkit.",
    )
    aggregate: list[tuple[str, list[str]] | tuple[str, list[str], AggregateMethod]] = Field(
        default_factory=list,
        description="[metric, [datasets, tasks or categories]] entries, each adding one row per model with the "
        "average of those datasets' scores and its CI: macro (each dataset counts once, the default) or, with a "
        "third element `micro`, weighted by dataset size (samples; reference length for WER/CER/TER). Default none.",
    )
    temperature_overrides: list[TemperatureOverride] = Field(
        default_factory=list,
        description="Temperature rules by model, task or both; the most specific match wins (model+task, model, "
        "task), above "
        "the model's own temperature (default none).",
    )
    generation_overrides: list[GenerationOverride] = Field(
        default_factory=list,
        description="max_tokens/top_p/seed/temperature rules by model, task or both; the most specific match wins, "
        "above the "
        "model's own values and the runspec's defaults (default none).",
    )
    judge_properties: JudgeProperties | None = Field(
        None,
        description="The LLM judge; needed by judge and rubric metrics, which are refused without it. Absent: no "
        "judge.",
    )
    runspecs_dir: str | list[str] | None = Field(
        None,
        description="Folders of your own runspecs (<folder>/<category>/<task>.json), one or a list, relative to the "
        "config file's folder; evalkit's runspecs and the runspecs/ folder beside the config file are always read. "
        "Absent: no extra folders.",
    )
    prompts_dir: str | None = Field(
        None,
        description="A folder of your own prompts, relative to the config file's folder: any of add_ons.yaml, "
        "system_prompts.yaml, pools.yaml and judges/<metric>.yaml, in the package's formats; an entry replaces "
        "the package's entry of the same name or adds one. Absent: the package's prompts.",
    )
    prompts: PromptOverrides | None = Field(
        None,
        description="Prompts written inline (add_ons, system_prompts, pools, judges), above prompts_dir and the "
        "package's; absent: none.",
    )
    plugins: list[str] = Field(
        default_factory=list,
        description="Python modules imported before planning (looked for beside the config file first, then "
        "installed or on PYTHONPATH), so their "
        "@METRICS/@PREPROCESSORS/@POSTPROCESSORS registrations count, alongside the evalkit.plugins entry points "
        "(default none).",
    )
    output_dir: str = Field(
        "runs",
        description="Folder of the run folders (<timestamp>_<id>/) and the response store, relative to the config "
        "file's folder (default runs beside the config file); --output-dir overrides it (relative to the working "
        "directory).",
    )
    cache: CacheSettings = Field(
        default_factory=CacheSettings, description="The response store; absent: on, at <output_dir>/responses.sqlite."
    )
    max_failure_rate: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Fraction (0-1) of failed samples above which a model's result on a dataset-metric pair is "
        "marked unreliable (!) and `evalkit run` exits with code 3 after writing everything (--allow-failures "
        "keeps exit 0; --max-failure-rate overrides it) (default 0.2: 20%).",
    )
    budget: Budget | None = Field(
        None,
        description="The most the run may spend: {tokens: N} and/or {usd: X} (USD from the models' `price`); once "
        "spent, no new request is sent, requests in flight finish, the results are marked partial and `evalkit run` "
        "exits with code 6. --budget-tokens and --budget-usd replace it. Absent: no limit.",
    )
    log_file: str | None = Field(
        None,
        description="A file, relative to the config file's folder, that `evalkit run` appends its log to (what the "
        "console shows: warnings and errors, debug too with --verbose), beside the console; AU-Harness's "
        "logging.log_file. Absent: the console only.",
    )

    @field_validator("dataset_metric", mode="before")
    @classmethod
    def _pair_shape(cls, value: Any) -> Any:
        """One clear message per malformed entry instead of one per shape of the union.

        LALMEval's README writes pairs as one string, ``"[your_dataset_name, metric_name]"``: read as a pair.
        """
        if not isinstance(value, list):
            return value
        value = [_quoted_pair(item, i) if isinstance(item, str) else item for i, item in enumerate(value)]
        for i, entry in enumerate(value):
            ok = isinstance(entry, (list, tuple)) and len(entry) in (2, 3)
            ok = ok and all(isinstance(part, str) for part in entry[:2])
            if not ok or (len(entry) == 3 and not isinstance(entry[2], dict)):
                raise ValueError(
                    f"entry {i}: expected [name, metric] or [name, metric, {{option: value}}], got {entry!r}"
                )
        return value

    @property
    def pairs(self) -> list[tuple[str, str, dict[str, Any]]]:
        """``dataset_metric`` as (name, metric, options) triples; options are {} when an entry gives none."""
        return [(entry[0], entry[1], dict(entry[2]) if len(entry) > 2 else {}) for entry in self.dataset_metric]

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        seen: dict[str, str] = {}
        for entry in self.models:
            info = entry.info
            if info.name in seen and seen[info.name] != info.model:
                raise ValueError(f"two models are named {info.name!r} with different `model` ids")
            seen[info.name] = info.model
        return self

    _base_dir: Path | None = PrivateAttr(None)
    #: per dataset_metric pair, what made it when a command-line flag did ("--dataset X --metric Y"), else None
    _pair_labels: list[str | None] | None = PrivateAttr(None)

    @property
    def pair_labels(self) -> list[str | None] | None:
        """Where each dataset_metric pair came from, for error messages (None: the config file)."""
        return self._pair_labels

    @pair_labels.setter
    def pair_labels(self, labels: list[str | None] | None) -> None:
        self._pair_labels = labels

    @property
    def base_dir(self) -> Path:
        """The folder relative paths of this config mean: the config file's, else the working directory."""
        return self._base_dir if self._base_dir is not None else Path.cwd()

    @property
    def anchored(self) -> bool:
        """Whether :meth:`anchor` gave this config a folder (a file's), or its paths mean the working directory."""
        return self._base_dir is not None

    def anchor(self, folder: str | Path) -> Config:
        """Make the config's relative paths relative to ``folder`` (the config file's), as absolute paths.

        ``runspecs_dir``, ``output_dir``, ``prompts_dir``, ``cache.path``, and a ``launch.model_path`` or a
        ``launch.args`` value that names a file or folder there; ``./runspecs`` is then looked for in ``folder`` too. So
        ``evalkit run -c sub/config.yaml`` does from anywhere what ``cd sub && evalkit run`` does.
        """
        base = Path(folder).resolve()
        self._base_dir = base

        def absolute(value: str) -> str:
            path = Path(value).expanduser()
            return str(path if path.is_absolute() else base / path)

        if isinstance(self.runspecs_dir, str):
            self.runspecs_dir = absolute(self.runspecs_dir)
        elif self.runspecs_dir is not None:
            self.runspecs_dir = [absolute(d) for d in self.runspecs_dir]
        self.output_dir = absolute(self.output_dir)
        if self.prompts_dir:
            self.prompts_dir = absolute(self.prompts_dir)
        if self.cache.path:
            self.cache.path = absolute(self.cache.path)
        if self.log_file:
            self.log_file = absolute(self.log_file)
        for entry in self.models:
            launch = entry.info.launch
            if launch is not None and launch.model_path and (base / launch.model_path).exists():
                launch.model_path = absolute(launch.model_path)
            if launch is not None and launch.args:
                launch.args = anchor_args(launch.args, base)
        return self

    @property
    def runspec_dirs(self) -> list[str]:
        if self.runspecs_dir is None:
            return []
        return [self.runspecs_dir] if isinstance(self.runspecs_dir, str) else list(self.runspecs_dir)

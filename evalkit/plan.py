"""Config + catalog -> the plan: one EngineSpec per (dataset, metric) pair and the models they share.

Everything that can be wrong with a run is found here, before any request:
unknown names, metrics that do not fit a task, unknown processors.
"""

from __future__ import annotations

import glob
import logging
import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.catalog import Catalog, DatasetSpec, GenerationSettings, load_catalog
from evalkit.config import Config, ModelInfo, RequestKind, aggregate_entry
from evalkit.config.foreign.auharness_names import metric_for_pair as auharness_metric_for_pair
from evalkit.config.foreign.karma import metric_for_pair
from evalkit.config.foreign.reporting import ReportedAs, reported_as
from evalkit.config.stopping import StopRule, split_stop
from evalkit.data.files import require_local_source
from evalkit.data.hubcache import hub_offline, require_stored
from evalkit.errors import ConfigError, RunspecError, UserError, did_you_mean
from evalkit.languages import normalize_language, split_pair, target_language
from evalkit.metrics import METRICS
from evalkit.processing.postprocessors import POSTPROCESSORS
from evalkit.processing.processors import ProcessorChain, build_processors
from evalkit.prompts.chef.recipes import recipe_datasets, split_recipe
from evalkit.prompts.examples import check_in_context
from evalkit.prompts.library import check_prompt_choice, check_prompt_names, library_for
from evalkit.prompts.preprocessors import PREPROCESSORS
from evalkit.registry import import_plugin_modules

log = logging.getLogger("evalkit")


@dataclass
class ModelPlan:
    """A model as the run sees it: a display name and its replicas (entries sharing the name)."""

    name: str
    replicas: list[ModelInfo]

    @property
    def info(self) -> ModelInfo:
        return self.replicas[0]

    @property
    def kind(self) -> RequestKind:
        return self.info.request_kind


@dataclass
class EngineSpec:
    dataset: DatasetSpec
    metric: str
    models: list[str]
    #: generation parameters per model, overrides resolved
    params: dict[str, dict[str, object]] = field(default_factory=dict)
    #: the metric's options from the config (``[name, metric, {option: value}]``), checked by the metric itself
    options: dict[str, Any] = field(default_factory=dict)
    #: how a peer tool reports this pair (a config in its format: ``report_as``), decided here once per pair
    reported_as: ReportedAs | None = None
    #: ``stop_at_ci``: stop asking once the score's CI is this narrow (evalkit/config/stopping.py), else None
    stop: StopRule | None = None

    @property
    def id(self) -> str:
        return f"{self.dataset.name}__{self.metric}"


@dataclass
class Plan:
    config: Config
    catalog: Catalog
    engines: list[EngineSpec]
    models: dict[str, ModelPlan]
    source: str = "config"


def _group_models(config: Config) -> dict[str, ModelPlan]:
    models: dict[str, ModelPlan] = {}
    for entry in config.models:
        info = entry.info
        plan = models.setdefault(info.name, ModelPlan(name=info.name, replicas=[]))
        if plan.replicas and plan.replicas[0].inference_type != info.inference_type:
            raise ConfigError(f"models: entries named {info.name!r} must share one inference_type")
        plan.replicas.append(info)
    return models


_GENERATION_KEYS = ("temperature", "max_tokens", "top_p", "seed")


def _override(rules: list[Any], key: str, model: ModelInfo, names: set[str]) -> object | None:
    """The most specific rule's value for ``key``: model+task, then model, then task."""
    best: tuple[int, object] | None = None
    for rule in rules:
        value = getattr(rule, key, None)
        if value is None:
            continue
        if rule.model is not None and rule.model not in (model.name, model.model):
            continue
        if rule.task is not None and rule.task not in names:
            continue
        rank = 3 if (rule.model and rule.task) else 2 if rule.model else 1
        if best is None or rank > best[0]:
            best = (rank, value)
    return None if best is None else best[1]


def _sends_temperature(spec: DatasetSpec, task_defaults: GenerationSettings | None) -> bool:
    """Whether the fallback temperature is sent: the dataset's ``send_temperature``, else its task's, else yes."""
    for settings in (spec.generation, task_defaults):
        if settings is not None and settings.send_temperature is not None:
            return settings.send_temperature
    return True


def generation_params(
    config: Config, model: ModelInfo, spec: DatasetSpec, catalog: Catalog | None = None
) -> dict[str, object]:
    """Generation parameters sent with every request of this model on this dataset.

    For each parameter the first that is set wins: the most specific override rule
    (model+task, then model, then task; ``temperature_overrides`` and
    ``generation_overrides``), the model's own value, the dataset's then the task's
    runspec default. Temperature falls back to 0, unless the runspec's ``send_temperature`` is
    false (a peer that sends none: ChEF); the others are then not sent.
    """
    names = {spec.task, spec.name, spec.category}
    task_defaults = catalog.tasks[spec.task].generation if catalog is not None and spec.task in catalog.tasks else None
    params: dict[str, object] = {}
    for key in _GENERATION_KEYS:
        rules = (
            [*config.temperature_overrides, *config.generation_overrides]
            if key == "temperature"
            else config.generation_overrides
        )
        value = _override(rules, key, model, names)
        for fallback in (model, spec.generation, task_defaults):
            if value is None and fallback is not None:
                value = getattr(fallback, key, None)
        if value is None and key == "temperature" and _sends_temperature(spec, task_defaults):
            value = 0.0
        if value is not None:
            params[key] = value
    if spec.request_style in ("auharness", "karma") and model.inference_type == "transcription":
        params = {}  # AU-Harness's transcription request carries the file and the model only; KARMA's its prompt too
    token_key = spec.generation.token_key if spec.generation is not None else None
    if token_key is None and task_defaults is not None:
        token_key = task_defaults.token_key
    if token_key is not None and token_key != "max_tokens" and "max_tokens" in params:
        params[token_key] = params.pop("max_tokens")
    params.update(model.extra_body)
    return params


def _check_names(config: Config, catalog: Catalog, source: str) -> None:
    names = {e.info.name for e in config.models} | {e.info.model for e in config.models}
    for section in ("temperature_overrides", "generation_overrides"):
        for i, rule in enumerate(getattr(config, section)):
            if rule.task is not None and not catalog.knows(rule.task):
                raise ConfigError(
                    f"{source}: {section}[{i}].task: {rule.task!r} is not a task, dataset or "
                    f"category{did_you_mean(rule.task, catalog.all_names())}"
                )
            if rule.model is not None and rule.model not in names:
                raise ConfigError(
                    f"{source}: {section}[{i}].model: {rule.model!r} is not a configured "
                    f"model{did_you_mean(rule.model, names)}"
                )


def _check_pair_names(config: Config, catalog: Catalog, source: str) -> None:
    """Every unknown dataset or metric name of the pairs and aggregates in one message, before any other check.

    A config with three misspelt names is fixed in one round, as validation promises for every problem it finds.
    """
    problems: list[str] = []
    unknown_metric = False
    labels = config.pair_labels
    named: list[tuple[str, str, str]] = []
    for i, (name, metric, _) in enumerate(config.pairs):
        label = labels[i] if labels is not None and i < len(labels) else None
        metric = auharness_metric_for_pair(catalog, name, metric_for_pair(catalog, name, metric))
        named.append((label or f"{source}: dataset_metric[{i}]", name, metric))
    for i, entry in enumerate(config.aggregate):
        metric, datasets, _ = aggregate_entry(entry)
        metric = auharness_metric_for_pair(catalog, "", metric) if ":" in metric else metric
        named += [(f"{source}: aggregate[{i}]", name, metric) for name in datasets or [""]]
    seen: set[tuple[str, str]] = set()
    searched = catalog.where_searched()
    unknown_dataset = False
    caught: list[RunspecError] = []
    for where, name, metric in named:
        if name:
            try:
                catalog.resolve(name, where)
            except RunspecError as error:
                caught.append(error)
                text = str(error)
                unknown_dataset |= text.endswith(searched)
                problems.append(text.removesuffix(f" {searched}").removesuffix("."))
        if metric not in METRICS and (where, metric) not in seen:
            seen.add((where, metric))
            unknown_metric = True
            problems.append(f"{where}: unknown metric {metric!r}{did_you_mean(metric, METRICS.names())}")
    if len(problems) == 1 and caught:
        raise caught[0]  # one runspec problem alone: its own error, as the catalogue words it
    if unknown_dataset:
        problems.append(f"{source}: {searched}")
    if unknown_metric:
        problems.append(f"{source}: known metrics: {', '.join(METRICS.names(include_aliases=False))}")
    if problems:
        raise ConfigError("\n".join(problems))


def declared_fit(metric: str, spec: DatasetSpec) -> bool:
    """Whether the metric's class declares the dataset's task (or category, or "*") among its ``tasks``."""
    declared = getattr(METRICS.get(metric), "tasks", ()) or ()
    return "*" in declared or spec.task in declared or spec.category in declared


def _language_matches(spec: DatasetSpec, wanted: str) -> bool:
    try:
        if normalize_language(spec.language) == wanted:
            return True
        source, target = split_pair(spec.language)
    except ValueError:
        return False
    return wanted in {source, target}


def _warn_ignored_api_versions(config: Config, source: str) -> None:
    for i, entry in enumerate(config.models):
        info = entry.info
        if info.api_version is not None and info.azure_api_version is None:
            log.warning(
                "%s: models[%d] (%s): api_version is ignored: Azure routing applies to inference_type openai only, "
                "this entry is %s",
                source,
                i,
                info.name,
                info.inference_type,
            )


#: inference types whose servers offer the completions API with echo + logprobs
_LIKELIHOOD_TYPES = ("vllm", "openai")


def _check_likelihood(engines: list[EngineSpec], models: dict[str, ModelPlan], source: str) -> None:
    """Likelihood metrics need a choices column and servers with the completions API; say so before any request."""
    for engine in engines:
        if METRICS.get(engine.metric).scoring != "loglikelihood":
            continue
        builds_choices = getattr(PREPROCESSORS.get(engine.dataset.preprocessor), "builds_choices", False)
        if engine.dataset.choices_column is None and not builds_choices:
            raise ConfigError(
                f"{source}: metric {engine.metric!r} scores each option of a multiple-choice sample; dataset "
                f"{engine.dataset.name!r} has no choices_column ({engine.dataset.file})"
            )
        for name in engine.models:
            kind = models[name].info.inference_type
            if kind not in _LIKELIHOOD_TYPES:
                raise ConfigError(
                    f"{source}: metric {engine.metric!r} asks /v1/completions for log-probabilities; model {name!r} is "
                    f"inference_type {kind}, which does not offer it (use vllm or openai)"
                )
            media = engine.dataset.modality not in ("text",)
            if media and kind != "vllm":
                raise ConfigError(
                    f"{source}: metric {engine.metric!r} scores options of dataset {engine.dataset.name!r}, whose "
                    f"prompts carry {engine.dataset.modality.replace('+text', '')}: that needs vLLM's prompt_logprobs "
                    f"on chat completions, and model {name!r} is inference_type {kind} (use vllm)"
                )


def dataset_processors(spec: DatasetSpec) -> ProcessorChain:
    """The runspec's ``processors`` chain; an unknown name or argument is a ConfigError naming the file and key."""
    return build_processors(spec.processors, f"{spec.file}: {spec.name}.processors", target_language(spec.language))


def judge_prompt_for(metric: str, judges: dict[str, Any]) -> Any:
    """The run's judge prompt (a file path or an inline mapping) for a judge metric; None for other metrics."""
    cls = METRICS.get(metric)
    if not cls.needs_judge:
        return None
    return judges.get(getattr(cls, "prompt_name", "") or metric)


def check_metric_options(
    metric: str, options: dict[str, Any], spec: DatasetSpec, where: str, judge_prompt: Any = None
) -> None:
    """Build the metric once with the config's options, so an unknown option or a bad value stops the run now.

    A judge metric is built with the run's judge prompt too, so a broken override in prompts_dir stops it here.
    """
    cls = METRICS.get(metric)
    extra = {"judge_prompt": judge_prompt} if cls.needs_judge else {}
    try:
        cls(language=target_language(spec.language), **extra, **options)
    except UserError as error:
        raise ConfigError(f"{where}: {error}") from None
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{where}: metric {metric!r}: bad option value: {error}") from None
    except Exception as error:  # a plugin's own bug: one line naming where, before any request, not a traceback
        frame = traceback.extract_tb(error.__traceback__)[-1]
        raise ConfigError(
            f"{where}: metric {metric!r} could not be built: {type(error).__name__}: {error} "
            f"({Path(frame.filename).name}:{frame.lineno})"
        ) from None


def _with_instruction(spec: DatasetSpec, config: Config) -> DatasetSpec:
    """The dataset with the instruction the config's ``prompts.instructions`` gives it, if any."""
    given = (config.prompts.instructions or {}).get(spec.name) if config.prompts is not None else None
    return spec if given is None else spec.model_copy(update={"instruction": given})


def private_paths(config: Config, catalog: Catalog, source: str) -> dict[str, str]:
    """``dataset_paths`` by catalogue entry: a key may be any of its names (AU-Harness's ``common_voice_15_zh-CN``).

    A private entry (a licensed corpus) is read only from the path given; a hub entry given a path is read from
    that local copy instead of the hub (:mod:`evalkit.data.local_copy`). A key that names no catalogue entry is a
    mistake the user would otherwise find only when the run cannot read the data it meant, so it is an error
    naming the key.
    """
    paths: dict[str, str] = {}
    for key, path in config.dataset_paths.items():
        entry = catalog.entry_name(key)
        if entry is None:
            raise ConfigError(
                f"{source}: dataset_paths.{key}: names no catalogue dataset{did_you_mean(key, list(catalog.datasets))}"
                "; dataset_paths gives the data of a catalogue entry (`evalkit list datasets`)"
            )
        spec = catalog.datasets[entry]
        if spec.unavailable is not None:
            raise ConfigError(
                f"{source}: dataset_paths.{key}: dataset {entry!r} cannot be evaluated: {spec.unavailable}"
            )
        paths[entry] = path
    return paths


def _path_key(spec: DatasetSpec) -> str:
    """The ``dataset_paths`` key of an entry: another tool's variant reads its entry's data, under the entry's key."""
    return spec.variant_of or spec.name


def _given_path(spec: DatasetSpec, config: Config) -> Path:
    given = Path(config.dataset_paths[_path_key(spec)]).expanduser()
    return Path(os.path.normpath(given if given.is_absolute() else config.base_dir / given))


def with_given_path(spec: DatasetSpec, config: Config, where: str) -> DatasetSpec:
    """The dataset read from the path ``dataset_paths`` gives it: a private corpus's data, or a hub entry's copy.

    A private dataset without one is an error naming the key.
    """
    key = _path_key(spec)
    if not spec.private:
        return _with_local_copy(spec, config, where) if key in config.dataset_paths else spec
    if key not in config.dataset_paths:
        raise ConfigError(
            f"{where}: {key!r} is a private dataset ({spec.description or 'licensed data'}); give its path in "
            f"the config: `dataset_paths: {{{key}: /path/to/its/data}}`"
        )
    path = _given_path(spec, config)
    if not path.exists():
        raise ConfigError(
            f"{where}: private dataset {key!r}: {path} does not exist; give the folder or file of your copy in "
            f"`dataset_paths: {{{key}: PATH}}`"
        )
    return spec.model_copy(update={"path": str(path)})


def _with_local_copy(spec: DatasetSpec, config: Config, where: str) -> DatasetSpec:
    """A catalogue entry read from a local copy of its data: the files of its subset and split, found now.

    Its column mapping, subset and split apply as they do to the hub; the copy's files become the entry's
    ``path`` (one file) or ``path`` + ``data_files`` (several), so every reader of local data (rows, counts,
    fingerprints, the viewer) reads them as it reads any local dataset.
    """
    from evalkit.data.local_copy import LAYOUTS, LocalCopyError, find_copy  # only a run with a local copy of hub data

    path = _given_path(spec, config)
    key = f"dataset_paths.{_path_key(spec)}"
    try:
        copy = find_copy(path, spec.subset, spec.split)
        examples = _local_examples(spec, path)
    except LocalCopyError as error:
        raise ConfigError(f"{where}: {key}: {error}; expected {LAYOUTS}") from None
    log.info("%s: %s read from %s (%s, %d files)", where, spec.name, path, copy.layout, len(copy.files))
    update: dict[str, Any] = {"hf_repo": None, "revision": None, "subset": spec.subset, "in_context": examples}
    if len(copy.files) == 1 and not copy.files[0].is_symlink():  # a link is named by its folder: its own name is data
        update.update(path=str(copy.files[0]), data_files=None)
    else:
        update.update(
            path=str(copy.root),
            data_files=[glob.escape(f.relative_to(copy.root).as_posix()) for f in copy.files],
        )
    return spec.model_copy(update=update)


def _local_examples(spec: DatasetSpec, path: Path) -> dict[str, Any] | None:
    """The entry's in-context block with its example split read from the copy too (one file of it)."""
    from evalkit.data.local_copy import LocalCopyError, find_copy

    settings = spec.in_context
    if not settings or "split" not in settings or "path" in settings:
        return settings
    copy = find_copy(path, spec.subset, str(settings["split"]))
    if len(copy.files) != 1:
        raise LocalCopyError(
            f"the in-context examples' split {settings['split']!r} is {len(copy.files)} files in the copy; evalkit "
            "reads examples from one file (merge them into one parquet file)"
        )
    return {**{k: v for k, v in settings.items() if k != "split"}, "path": str(copy.files[0])}


def _readable(specs: list[DatasetSpec], name: str, config: Config, where: str) -> list[DatasetSpec]:
    """The selected datasets that have data to read: a task, category or group leaves out the rest, saying why.

    An entry whose data cannot be had (``unavailable``), or a private corpus the
    config gives no path for, is an error when named alone: the user asked for
    exactly that. Within a larger selection it is left out with a warning, so that
    ``asr`` still runs when one of its entries is a licensed corpus; a selection
    that leaves nothing is an error naming every reason.
    """
    if len(specs) == 1:
        spec = specs[0]
        if spec.unavailable is not None:
            raise ConfigError(f"{where}: dataset {spec.name!r} cannot be evaluated: {spec.unavailable}")
        return specs
    kept: list[DatasetSpec] = []
    left_out: list[str] = []
    for spec in specs:
        if spec.unavailable is not None:
            left_out.append(f"{spec.name} (unavailable: {spec.unavailable})")
        elif spec.private and spec.name not in config.dataset_paths and spec.variant_of not in config.dataset_paths:
            left_out.append(f"{spec.variant_of or spec.name} (private: give its path in `dataset_paths`)")
        else:
            kept.append(spec)
    if left_out and not kept:
        raise ConfigError(f"{where}: no dataset of {name!r} can be read: {'; '.join(left_out)}")
    if left_out:
        shown = "; ".join(left_out[:5]) + (f"; and {len(left_out) - 5} more" if len(left_out) > 5 else "")
        log.warning("%s: %d of %r's datasets are left out: %s", where, len(left_out), name, shown)
    return kept


def build_plan(
    config: Config, catalog: Catalog | None = None, source: str = "config", *, check_catalog: bool = False
) -> Plan:
    """Resolve every (name, metric) pair to engines; raises ConfigError on the first unfixable problem.

    Only the catalogue entries the config selects are validated, so a broken entry it does not name does not
    stop a run; ``check_catalog`` (``evalkit validate``) validates every entry of the catalogue it reads.
    """
    import_plugin_modules(config.plugins, f"{source}: plugins", beside=config.base_dir)
    catalog = catalog or load_catalog(config.runspec_dirs, cwd=config.base_dir, check=check_catalog)
    models = _group_models(config)
    _check_names(config, catalog, source)
    _check_pair_names(config, catalog, source)
    if config.dataset_paths:
        config = config.model_copy(update={"dataset_paths": private_paths(config, catalog, source)})
    _warn_ignored_api_versions(config, source)
    check_prompt_names(config, source)
    library = library_for(config, source)
    wanted_language = None
    if config.filters.language:
        try:
            wanted_language = normalize_language(config.filters.language)
        except ValueError as error:
            raise ConfigError(f"{source}: filters.language: {error}") from None
    engines: list[EngineSpec] = []
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    labels = config.pair_labels
    for i, (name, metric, options) in enumerate(config.pairs):
        label = labels[i] if labels is not None and i < len(labels) else None
        where = label or f"{source}: dataset_metric[{i}]"
        metric = metric_for_pair(catalog, name, metric)  # KARMA's exact_match on a KARMA id is karma:exact_match
        metric = auharness_metric_for_pair(catalog, name, metric)  # and AU-Harness's bleu on its names
        if metric not in METRICS:
            raise ConfigError(
                f"{where}: unknown metric {metric!r}{did_you_mean(metric, METRICS.names())}. Known: "
                f"{', '.join(METRICS.names(include_aliases=False))}"
            )
        canonical = METRICS.canonical(metric)
        specs = [
            _with_instruction(with_given_path(spec, config, where), config)
            for spec in _readable(catalog.resolve(name, where), name, config, where)
        ]
        for spec in specs:
            fitting = [METRICS.canonical(m) for m in catalog.fitting_metrics(spec) if m in METRICS]
            if fitting and canonical not in fitting and not declared_fit(canonical, spec):
                if len(specs) == 1:
                    raise ConfigError(
                        f"{where}: metric {metric!r} does not fit dataset {spec.name!r} (task {spec.task}); fitting "
                        f"metrics: {', '.join(fitting)}"
                    )
                continue  # a task/category selection keeps the datasets the metric fits
            if wanted_language and not _language_matches(spec, wanted_language):
                if name == spec.name:
                    # named explicitly: keep the engine; it reports 0 samples with a warning
                    log.warning(
                        "%s: dataset %r is in %s, not %s (filters.language): it runs with 0 samples",
                        where,
                        spec.name,
                        spec.language,
                        wanted_language,
                    )
                else:
                    continue
            if spec.path is not None:
                require_local_source(spec)
            check_prompt_choice(spec, library.pools if spec.prompt_pool is not None else None)  # pools read if named
            check_in_context(spec)
            PREPROCESSORS.get(spec.preprocessor, where=f"{spec.file}: {spec.name}.preprocessor")
            POSTPROCESSORS.get(spec.postprocessor, where=f"{spec.file}: {spec.name}.postprocessor")
            dataset_processors(spec)
            if (spec.name, canonical) in seen:
                if seen[(spec.name, canonical)] != options:
                    raise ConfigError(
                        f"{where}: {spec.name} x {canonical} is listed twice with different metric options; one "
                        "engine runs per dataset-metric pair"
                    )
                continue
            seen[(spec.name, canonical)] = options
            pair_options, stop = split_stop(options, where)  # stop_at_ci: how much of the dataset is asked
            metric_options, recipe = split_recipe(pair_options, where)  # ChEF's recipes: chain of thought, corruptions
            check_metric_options(canonical, metric_options, spec, where, judge_prompt_for(canonical, library.judges))
            for variant in recipe_datasets(spec, recipe, where):
                engine = EngineSpec(
                    dataset=variant,
                    metric=canonical,
                    models=list(models),
                    options=dict(metric_options),
                    reported_as=reported_as(catalog, config.report_as, name, canonical, variant),
                    stop=stop,
                )
                engine.params = {m.name: generation_params(config, m.info, spec, catalog) for m in models.values()}
                engines.append(engine)
    if hub_offline():  # one message naming every hub dataset without stored rows
        require_stored(engine.dataset for engine in engines)
    for i, entry in enumerate(config.aggregate):
        metric, datasets, _ = aggregate_entry(entry)
        metric = auharness_metric_for_pair(catalog, "", metric) if ":" in metric else metric
        if metric not in METRICS:
            raise ConfigError(
                f"{source}: aggregate[{i}]: unknown metric {metric!r}{did_you_mean(metric, METRICS.names())}"
            )
        for name in datasets:
            catalog.resolve(name, f"{source}: aggregate[{i}]")
    _check_likelihood(engines, models, source)
    if config.judge_properties is None:
        for engine in engines:
            if METRICS.get(engine.metric).needs_judge:
                raise ConfigError(
                    f"{source}: metric {engine.metric!r} needs an LLM judge: add a `judge_properties` section"
                )
    return Plan(config=config, catalog=catalog, engines=engines, models=models, source=source)

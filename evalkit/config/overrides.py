"""Every override of a loaded config, applied in one pass, so a run made from flags is a run made from a file.

`evalkit run`'s flags and ``evaluate(**overrides)`` change a config the way its
file would, in this order:

- top-level config keys (``evaluate(max_failure_rate=0.1)``): the config is validated again with them;
- ``--num-samples``, ``--output-dir``, ``--batch-size`` (on every replica: the number is per endpoint);
- ``--model``: only those models of the config;
- ``--dataset`` / ``--metric``: the config's pairs for those names or metrics; a name the config does not
  mention runs its default metrics (:func:`evalkit.config.pairs.default_metrics`); both together pair every
  dataset with every metric;
- KARMA-style component arguments (``--dataset-args/--metric-args/--processor-args/--model-args``, and
  ``evaluate(dataset_args=..., ...)``), each landing where a config file writes the same thing, so a run made
  from flags records, resumes and re-scores exactly like one made from a file:

  - dataset arguments: they pick the catalogue entry a KARMA dataset id means for that language, subset or
    pair (:meth:`evalkit.catalog.Catalog.select`), and the pair names that entry
    (``--datasets ai4bharat/IN22-Conv --dataset-args ai4bharat/IN22-Conv:source_language=en,target_language=hi``
    runs ``in22_conv_en_hi``);
  - metric arguments: the pair's metric options (``[name, metric, {key: value}]``), on every pair of that metric;
  - processor arguments: a ``{"name": processor, ...}`` item appended to the pair's ``processors`` option,
    applied after the dataset's own processors;
  - model arguments: a model entry's field (temperature, max_tokens, top_p, seed, batch_size, timeout, ...)
    when it is one, else a key of the request body (``extra_body``), on every model of the run.

A name the run does not hold, or a key that cannot be set from a command line, is a ConfigError
that names the flag and the part at fault, before any request is sent.

Metric and processor names are checked against the registries the caller hands in (:class:`Registries`):
they live in ``evalkit.metrics`` and ``evalkit.processing``, later layers that themselves read the config,
so this module takes them as arguments instead of importing them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evalkit.catalog import Catalog, load_catalog
from evalkit.config.foreign.karma import SAME_NAME_OTHER_COMPUTATION, karma_metric
from evalkit.config.limits import MAX_IN_FLIGHT, MAX_SAMPLES
from evalkit.config.messages import format_validation_error
from evalkit.config.models import RUNS_A_PROGRAM, ModelInfo, refuse_request_built_keys
from evalkit.config.pairs import default_metrics
from evalkit.config.schema import Config
from evalkit.errors import ConfigError, did_you_mean

if TYPE_CHECKING:
    from evalkit.registry import Registry


@dataclass(frozen=True)
class Registries:
    """The metric and processor registries that overrides check names against (``METRICS``, ``PROCESSORS``)."""

    metrics: Registry[Any]
    processors: Registry[Any]


@dataclass
class Overrides:
    """What a run changes in its config without editing the file: `evalkit run`'s flags, ``evaluate()``'s keywords."""

    #: keep the config's pairs for these datasets, tasks or categories (one name or several)
    dataset: str | Sequence[str] | None = None
    #: keep the config's pairs with these metrics
    metric: str | Sequence[str] | None = None
    #: keep only these models of the config, by name
    model: str | Sequence[str] | None = None
    num_samples: int | None = None
    output_dir: str | Path | None = None
    batch_size: int | None = None
    dataset_args: dict[str, dict[str, Any]] | None = None
    metric_args: dict[str, dict[str, Any]] | None = None
    processor_args: dict[str, dict[str, dict[str, Any]]] | None = None
    model_args: dict[str, Any] | None = None
    #: top-level config keys set as if the file had them (``max_failure_rate``, ``filters``, ...)
    fields: dict[str, Any] = field(default_factory=dict)


def apply_overrides(config: Config, overrides: Overrides, registries: Registries) -> Config:
    """``config`` with every override applied; ConfigError naming the flag at fault.

    The config is changed in place, except when top-level keys are set: then a newly validated one is returned.
    """
    if overrides.fields:
        config = _set_config_fields(config, overrides.fields)
    datasets, metrics, models = _as_list(overrides.dataset), _as_list(overrides.metric), _as_list(overrides.model)
    num_samples, batch_size = overrides.num_samples, overrides.batch_size
    if num_samples is not None:
        if not 0 <= num_samples <= MAX_SAMPLES:
            raise ConfigError(f"--num-samples: must be 0 to {MAX_SAMPLES} (got {num_samples})")
        config.filters.num_samples = num_samples
    if overrides.output_dir:
        config.output_dir = str(overrides.output_dir)
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
        config.dataset_metric = _select_pairs(config, datasets, metrics, registries.metrics)
        config.pair_labels = [
            None
            if pair in before
            else f"--dataset {pair[0]} --metric {pair[1]}"
            if metrics
            else f"--dataset {pair[0]} (its task's default metric {pair[1]})"
            for pair in config.dataset_metric
        ]
    if overrides.dataset_args or overrides.metric_args or overrides.processor_args or overrides.model_args:
        apply_component_args(
            config,
            overrides.dataset_args or {},
            overrides.metric_args or {},
            overrides.processor_args or {},
            overrides.model_args or {},
            registries,
        )
    return config


def _as_list(value: str | Sequence[str] | None) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _set_config_fields(config: Config, fields: dict[str, Any]) -> Config:
    data = config.model_dump(mode="python")
    data.update(fields)
    try:
        updated = Config.model_validate(data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, "evaluate() overrides")) from None
    return updated.anchor(config.base_dir) if config.anchored else updated


def _select_pairs(
    config: Config, datasets: list[str] | None, metrics: list[str] | None, registry: Registry[Any]
) -> list[Any]:
    if metrics:
        for name in metrics:
            if name not in registry and karma_metric(name) not in registry:
                raise ConfigError(
                    f"--metric: {name!r} is not a metric{did_you_mean(name, registry.names())}. "
                    "Run `evalkit list metrics`."
                )
    wanted_metrics = {registry.canonical(m) for m in metrics or []}
    pairs = list(config.dataset_metric)  # [name, metric] or [name, metric, options]: options stay with their pair
    if datasets and metrics:
        return [(d, m) for d in datasets for m in metrics]
    if metrics:
        chosen: list[Any] = [p for p in pairs if registry.canonical(p[1]) in wanted_metrics]
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
        catalog = load_catalog(config.runspec_dirs, cwd=config.base_dir)
        for name in missing:
            chosen += [(name, metric) for metric in default_metrics(catalog, name, registry)]
    return chosen


#: model entry fields a command line may not set, and why
_MODEL_FIELDS_REFUSED = {
    "name": "the model's name comes from the config or from --model",
    "model": "the model id comes from the config, --model or --model-name",
    "url": "the endpoint comes from the config or --model-url",
    "inference_type": "how the model is spoken to comes from the config or --inference-type",
    "launch": "a launched server is described in the config's launch: block, or by --model with a folder or hub id",
    "auth_token": "a secret on a command line is kept in shell history and process lists; use --api-key-env VAR or "
    "${VAR} in the config",
    "api_version": "the Azure api-version belongs to the config's model entry",
    "model_name_or_path": "give the model folder or hub id as --model (or --model-path), or the config's "
    "launch.model_path",
}
#: KARMA model arguments that vLLM-style servers read from the chat template's keyword arguments
_CHAT_TEMPLATE_KEYS = frozenset({"enable_thinking"})


def apply_component_args(
    config: Config,
    dataset_args: dict[str, dict[str, Any]],
    metric_args: dict[str, dict[str, Any]],
    processor_args: dict[str, dict[str, dict[str, Any]]],
    model_args: dict[str, Any],
    registries: Registries,
) -> None:
    """Write the four kinds of arguments into ``config`` in place (its pairs' options and model entries)."""
    pairs = [(name, metric, dict(options)) for name, metric, options in config.pairs]
    if dataset_args or processor_args:
        pairs = _dataset_scoped(config, pairs, dataset_args, processor_args, registries.processors)
    if metric_args:
        _metric_scoped(pairs, metric_args, registries.metrics)
    config.dataset_metric = [(name, metric, options) if options else (name, metric) for name, metric, options in pairs]
    if model_args:
        _model_fields(config, model_args)


def _dataset_scoped(
    config: Config,
    pairs: list[tuple[str, str, dict[str, Any]]],
    dataset_args: dict[str, dict[str, Any]],
    processor_args: dict[str, dict[str, dict[str, Any]]],
    processor_registry: Registry[Any],
) -> list[tuple[str, str, dict[str, Any]]]:
    catalog: Catalog = load_catalog(config.runspec_dirs, cwd=config.base_dir)

    def entry(name: str) -> str:
        return catalog.entry_name(name) or name

    names = list(dict.fromkeys(name for name, _, _ in pairs))
    for flag, scoped in (("--dataset-args", dataset_args), ("--processor-args", processor_args)):
        for name in scoped:
            if not any(entry(name) == entry(held) for held in names):
                raise ConfigError(
                    f"{flag}: {name!r} is not a dataset of this run{did_you_mean(name, names)} (the run's "
                    f"datasets: {', '.join(names)}); add it with --datasets"
                )
    for processors in processor_args.values():
        for processor in processors:
            if processor not in processor_registry:
                known = processor_registry.names()
                raise ConfigError(
                    f"--processor-args: {processor!r} is not a processor{did_you_mean(processor, known)}"
                    ". Run `evalkit list processors`."
                )
    chosen: list[tuple[str, str, dict[str, Any]]] = []
    for name, metric, options in pairs:
        for given, processors in processor_args.items():
            if entry(given) == entry(name):
                chain = list(options.get("processors") or [])
                chain += [{"name": processor, **arguments} for processor, arguments in processors.items()]
                options["processors"] = chain
        picked = name
        for given, arguments in dataset_args.items():
            if entry(given) == entry(name):
                picked = catalog.select(name, arguments, "--dataset-args").name
        chosen.append((picked, metric, options))
    return chosen


def _metric_scoped(
    pairs: list[tuple[str, str, dict[str, Any]]], metric_args: dict[str, dict[str, Any]], registry: Registry[Any]
) -> None:
    used = list(dict.fromkeys(registry.canonical(metric) for _, metric, _ in pairs))
    for name in metric_args:
        if name not in registry and karma_metric(name) not in registry:
            raise ConfigError(
                f"--metric-args: {name!r} is not a metric{did_you_mean(name, registry.names())}. "
                "Run `evalkit list metrics`."
            )
        if not _addressed(name, used, registry):
            raise ConfigError(
                f"--metric-args: no dataset of this run is scored with {name!r} (the run's metrics: "
                f"{', '.join(used)}); add it with --metric"
            )
    for _, metric, options in pairs:
        for name, arguments in metric_args.items():
            if _addressed(name, [registry.canonical(metric)], registry):
                options.update(arguments)


def _addressed(name: str, metrics: list[str], registry: Registry[Any]) -> bool:
    """Whether ``--metric-args NAME:...`` sets options of one of ``metrics``: the metric itself, or, for KARMA's
    ``exact_match`` and the other names it computes otherwise, its ``karma:`` computation (what a KARMA id runs)."""
    own = registry.canonical(name) if name in registry else None
    karmas = name in SAME_NAME_OTHER_COMPUTATION or name.startswith("karma:")
    return own in metrics or (
        karmas and karma_metric(name) in registry and registry.canonical(karma_metric(name)) in metrics
    )


def _model_fields(config: Config, model_args: dict[str, Any]) -> None:
    for key in model_args:
        if key in RUNS_A_PROGRAM and key not in _MODEL_FIELDS_REFUSED:
            raise ConfigError(
                f"--model-args: {key!r} cannot be set here: it runs a program, which only the config's model entry "
                "may name"
            )
        if key in _MODEL_FIELDS_REFUSED:
            raise ConfigError(f"--model-args: {key!r} cannot be set here: {_MODEL_FIELDS_REFUSED[key]}")
    # a request key evalkit builds, given bare or inside extra_body: what was sent must be what is recorded
    bare = {k: v for k, v in model_args.items() if k not in ModelInfo.model_fields}
    nested = model_args.get("extra_body")
    for where, body in (("", bare), ("extra_body: ", nested if isinstance(nested, dict) else {})):
        try:
            refuse_request_built_keys(body)
        except ValueError as error:
            raise ConfigError(f"--model-args: {where}{error}") from None
    for entry in config.models:
        data = entry.info.model_dump(mode="python", exclude_unset=True)
        extra = dict(data.get("extra_body") or {})
        for key, value in model_args.items():
            if key == "extra_body" and isinstance(value, dict):
                extra.update(value)
            elif key in ModelInfo.model_fields:
                data[key] = value
            elif key in _CHAT_TEMPLATE_KEYS:
                extra["chat_template_kwargs"] = {**(extra.get("chat_template_kwargs") or {}), key: value}
            else:
                extra[key] = value
        if extra:
            data["extra_body"] = extra
        try:
            entry.info = ModelInfo.model_validate(data)
        except ValidationError as error:
            raise ConfigError(format_validation_error(error, "--model-args")) from None

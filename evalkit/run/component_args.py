"""KARMA-style component arguments laid onto a config: dataset, metric, processor and model arguments.

`evalkit run --dataset-args/--metric-args/--processor-args/--model-args` (and
``evaluate(dataset_args=..., ...)``) change a loaded config the way its file
would: each lands where a config file writes the same thing, so a run made from
flags records, resumes and re-scores exactly like one made from a file:

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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalkit.compat.karma import SAME_NAME_OTHER_COMPUTATION, karma_metric
from evalkit.errors import ConfigError, did_you_mean

if TYPE_CHECKING:
    from evalkit.config import Config

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
) -> None:
    """Write the four kinds of arguments into ``config`` in place (its pairs' options and model entries)."""
    pairs = [(name, metric, dict(options)) for name, metric, options in config.pairs]
    if dataset_args or processor_args:
        pairs = _dataset_scoped(config, pairs, dataset_args, processor_args)
    if metric_args:
        _metric_scoped(pairs, metric_args)
    config.dataset_metric = [(name, metric, options) if options else (name, metric) for name, metric, options in pairs]
    if model_args:
        _model_fields(config, model_args)


def _dataset_scoped(
    config: Config,
    pairs: list[tuple[str, str, dict[str, Any]]],
    dataset_args: dict[str, dict[str, Any]],
    processor_args: dict[str, dict[str, dict[str, Any]]],
) -> list[tuple[str, str, dict[str, Any]]]:
    from evalkit.catalog import load_catalog
    from evalkit.processing.processors import PROCESSORS

    catalog = load_catalog(config.runspec_dirs, cwd=config.base_dir)

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
            if processor not in PROCESSORS:
                raise ConfigError(
                    f"--processor-args: {processor!r} is not a processor{did_you_mean(processor, PROCESSORS.names())}"
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


def _metric_scoped(pairs: list[tuple[str, str, dict[str, Any]]], metric_args: dict[str, dict[str, Any]]) -> None:
    from evalkit.metrics import METRICS

    used = list(dict.fromkeys(METRICS.canonical(metric) for _, metric, _ in pairs))
    for name in metric_args:
        if name not in METRICS and karma_metric(name) not in METRICS:
            raise ConfigError(
                f"--metric-args: {name!r} is not a metric{did_you_mean(name, METRICS.names())}. "
                "Run `evalkit list metrics`."
            )
        if not _addressed(name, used):
            raise ConfigError(
                f"--metric-args: no dataset of this run is scored with {name!r} (the run's metrics: "
                f"{', '.join(used)}); add it with --metric"
            )
    for _, metric, options in pairs:
        for name, arguments in metric_args.items():
            if _addressed(name, [METRICS.canonical(metric)]):
                options.update(arguments)


def _addressed(name: str, metrics: list[str]) -> bool:
    """Whether ``--metric-args NAME:...`` sets options of one of ``metrics``: the metric itself, or, for KARMA's
    ``exact_match`` and the other names it computes otherwise, its ``karma:`` computation (what a KARMA id runs)."""
    from evalkit.metrics import METRICS

    own = METRICS.canonical(name) if name in METRICS else None
    karmas = name in SAME_NAME_OTHER_COMPUTATION or name.startswith("karma:")
    return own in metrics or (
        karmas and karma_metric(name) in METRICS and METRICS.canonical(karma_metric(name)) in metrics
    )


def _model_fields(config: Config, model_args: dict[str, Any]) -> None:
    from pydantic import ValidationError

    from evalkit.config import ModelInfo, format_validation_error

    for key in model_args:
        if key in _MODEL_FIELDS_REFUSED:
            raise ConfigError(f"--model-args: {key!r} cannot be set here: {_MODEL_FIELDS_REFUSED[key]}")
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

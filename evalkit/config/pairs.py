"""Dataset names made into ``dataset_metric`` pairs when no metric is given, and the config of a run without a file.

A name given without a metric runs what its own tool would run: a KARMA id KARMA's registered metrics (as
``karma eval`` does), an entry that lists its metrics the first of them, else its task's default metric. So
``evalkit run --model-url URL --model-name ID --dataset X`` needs no config file, as KARMA's
``karma eval --model M --datasets X`` needs none.

Metric names are checked against the registry the caller hands in (``evalkit.metrics.METRICS``), a later layer
that itself reads the config.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from evalkit.catalog import Catalog, load_catalog
from evalkit.config.foreign.karma import default_metrics as karma_default_metrics
from evalkit.errors import ConfigError

if TYPE_CHECKING:
    from evalkit.registry import Registry


def default_pairs(names: Sequence[str], metrics: Sequence[str] | None, registry: Registry[Any]) -> list[list[str]]:
    """Each name with the given metrics, or with its default metrics (as KARMA needs no metric either)."""
    catalog = load_catalog()
    pairs: list[list[str]] = []
    for name in names:
        if metrics:
            pairs += [[name, metric] for metric in metrics]
            continue
        pairs += [[name, metric] for metric in default_metrics(catalog, name, registry)]
    return pairs


def default_metrics(catalog: Catalog, name: str, registry: Registry[Any]) -> list[str]:
    """What a dataset name runs with no metric given: a KARMA id KARMA's metrics, else its default metric."""
    specs = catalog.resolve(name, "--dataset")
    karma = [m for m in karma_default_metrics(catalog, name) or [] if m in registry]
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


def model_config(
    info: dict[str, Any], names: Sequence[str], metrics: Sequence[str] | None, registry: Registry[Any]
) -> dict[str, Any]:
    """The config tree of one model entry (``info``) run on ``names``, for a run named by flags alone."""
    return {"dataset_metric": default_pairs(names, metrics, registry), "models": [{"info": info}]}


def endpoint_config(
    url: str,
    model: str,
    names: Sequence[str],
    metrics: Sequence[str] | None,
    registry: Registry[Any],
    inference_type: str = "vllm",
    auth_env: str | None = None,
) -> dict[str, Any]:
    """A config for one endpoint and some datasets, for `evalkit run --model-url URL --model-name ID --dataset X`.

    The API key, when ``auth_env`` names its variable, is written as ``${VAR}``: expanded when the config is
    read, like a file's, and never held in the tree.
    """
    info: dict[str, Any] = {"name": model, "inference_type": inference_type, "url": url, "model": model}
    if auth_env:
        info["auth_token"] = f"${{{auth_env}}}"
    return model_config(info, names, metrics, registry)

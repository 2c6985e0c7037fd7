"""What a metric must know of the whole corpus before it scores a sample: CIDEr's document frequencies.

CIDEr weighs n-grams by how many images of the *evaluated corpus* have them in their references, so a metric
with ``fit_references(references)`` is given the references of every sample of the plan before its first score:
the filtered samples, before a shard is taken, so every shard of ``evalkit run --shard K/N`` (and a rescore, and
a merge) counts over the same corpus and scores a sample as one unsharded run would. Only the references pass
through, one sample at a time: the dataset is read again in a worker thread, never held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from evalkit.data.sample import Sample
from evalkit.errors import UserError
from evalkit.metrics.accumulator import crash_message
from evalkit.metrics.base import Metric


def needs_corpus(metric: Metric) -> bool:
    """True when the metric counts something over the whole corpus before scoring (``fit_references``)."""
    return callable(getattr(metric, "fit_references", None))


def fit_references(metric: Metric, references: Iterable[Any]) -> None:
    """``metric.fit_references(references)``; its exception is one UserError line naming the metric (the pair fails)."""
    try:
        metric.fit_references(references)  # type: ignore[attr-defined]
    except UserError:
        raise
    except Exception as error:
        raise UserError(crash_message(metric, "fit_references", error)) from error


async def fit_corpus(metric: Metric, samples: Callable[[], Iterator[Sample]]) -> bool:
    """Give ``metric`` the references of ``samples()`` (the plan's, unsharded) in a thread; False when it needs none."""
    if not needs_corpus(metric):
        return False
    await asyncio.to_thread(lambda: fit_references(metric, (sample.reference for sample in samples())))
    return True

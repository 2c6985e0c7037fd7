"""One plan split across processes: ``evalkit run --shard K/N`` runs the samples whose id hashes to K.

A sample belongs to shard ``int(sha256(id)[:8]) mod N``. The hash is of the
sample id, not of its position, so:

- the N shards of a plan are a partition of the plan's samples: every sample is
  in exactly one, whatever the order rows are read in;
- two rows with the same id land in the same shard, where the second is a
  ``duplicate_id`` failure exactly as in an unsharded run;
- it is stable across processes, machines and Python versions (Python's own
  ``hash()`` of a str is salted per process, so it could not be used).

The shard is taken *after* the config's filters: ``num_samples`` (with
``sampling: first`` or ``random``, whose draw is seeded by ``filters.seed`` and
the dataset name, not by the process) picks the plan's samples first, and each
shard keeps its share of exactly those. K counts from 0, as Slurm's
``SLURM_ARRAY_TASK_ID`` does with ``sbatch --array=0-7``.

The plan fingerprint is what every shard of one plan shares and a merge checks:
the config's answer fingerprint (what decides answers and scores), the engines
with their runspec entries and generation parameters, and the content hash of
each local dataset. It holds no path of the machine it was made on: copies of
one project at different paths (node-local copies, per-job scratch folders,
containers, Ray nodes with other temporary folders) make the same plan, and a
file that a path names counts by its content (the in-context examples' file).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.catalog import DatasetSpec, resolve_runspec_path
from evalkit.config import Filters
from evalkit.data.filters import apply_filters
from evalkit.data.sample import Sample
from evalkit.data.share import share_samples
from evalkit.errors import UserError
from evalkit.plan import Plan
from evalkit.prompts.preprocessors import Preprocessor

_SHARD = re.compile(r"^\s*(-?\d+)\s*/\s*(-?\d+)\s*$")
#: dataset spec fields that say where the data lies on this machine, not what it is (its content is hashed)
_WHERE_FIELDS = frozenset({"path", "file"})
#: a file that cannot be read counts as this, so the plans of two machines that both lack it still agree
_UNREADABLE = "unreadable"


def shard_of(sample_id: str, count: int) -> int:
    """The shard (0 .. count-1) a sample id belongs to: the first 8 bytes of its SHA-256, modulo ``count``."""
    digest = hashlib.sha256(str(sample_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0 <= index < count)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise UserError(
                f"--shard {self.index}/{self.count}: expected K/N with N >= 1 and 0 <= K < N (K counts from 0, "
                "as SLURM_ARRAY_TASK_ID does with sbatch --array=0-(N-1))"
            )

    @classmethod
    def parse(cls, text: str, flag: str = "--shard") -> Shard:
        """``"3/8"`` -> Shard(3, 8); anything else is a UserError naming ``flag`` and the expected form."""
        match = _SHARD.match(str(text))
        if match is None:
            raise UserError(
                f"{flag} {text!r}: expected K/N, two whole numbers such as 0/8 (K counts from 0: "
                "--shard $SLURM_ARRAY_TASK_ID/8 with sbatch --array=0-7)"
            )
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1:
            raise UserError(f"{flag} {text}: N must be at least 1 (the number of shards)")
        if not 0 <= index < count:
            raise UserError(
                f"{flag} {text}: K must be from 0 to {count - 1} (K counts from 0, as SLURM_ARRAY_TASK_ID does "
                f"with sbatch --array=0-{count - 1})"
            )
        return cls(index, count)

    def owns(self, sample_id: str) -> bool:
        return shard_of(sample_id, self.count) == self.index

    def select(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        """This shard's share of ``samples`` (already filtered), in their order."""
        if self.count == 1:
            yield from samples
            return
        for sample in samples:
            if self.owns(sample.id):
                yield sample

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_samples(samples: Iterator[Sample], shard: Shard | None) -> Iterator[Sample]:
    """``samples`` as they are without a shard, else the shard's share of them."""
    return samples if shard is None else shard.select(samples)


def read_share(
    dataset: DatasetSpec, shard: Shard | None, filters: Filters, preprocessor: Preprocessor
) -> Iterator[Sample] | None:
    """The shard's samples read without building the others' (evalkit.data.share), or None to read them all.

    Only where that gives the same samples as taking the share of the plan's: the
    filters keep or drop each sample on its own (``num_samples`` counts across
    samples, so it must see them all), and the preprocessor sends each row as it
    is (circular copies get ids of their own).
    """
    if shard is None or shard.count == 1 or filters.num_samples is not None:
        return None
    if type(preprocessor).expand is not Preprocessor.expand:
        return None
    samples = share_samples(dataset, shard.owns)
    return None if samples is None else apply_filters(samples, filters, dataset.name)


def plan_fingerprint(plan: Plan, answer_fingerprint: str, datasets: Mapping[str, Any]) -> str:
    """What every shard of one plan has in common (see the module docstring), as a SHA-256 hex digest.

    ``datasets`` is run.json's ``datasets`` (name -> fingerprint dict or None); only the content hash
    and row count count, not the files' paths, so shards on machines that mount the data elsewhere agree.
    """
    engines = []
    for spec in plan.engines:
        dataset = {k: v for k, v in spec.dataset.model_dump(mode="json").items() if k not in _WHERE_FIELDS}
        dataset["in_context"] = _examples_content(spec.dataset)
        engine = {
            "id": spec.id,
            "dataset": dataset,
            "metric": spec.metric,
            "options": spec.options,
            "models": list(spec.models),
            "params": spec.params,
        }
        if spec.stop is not None:  # shards must stop by one rule; a plan without one keeps its fingerprint
            engine["stop"] = spec.stop.as_dict()
        engines.append(engine)
    content = {
        name: {"sha256": found.get("sha256"), "rows": found.get("rows")} if isinstance(found, Mapping) else None
        for name, found in sorted(datasets.items())
    }
    data = {"config": answer_fingerprint, "engines": engines, "datasets": content}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _examples_content(spec: DatasetSpec) -> dict[str, Any] | None:
    """The entry's ``in_context`` block with its examples file (a path) replaced by the file's SHA-256."""
    settings = spec.in_context
    if not settings or "path" not in settings:
        return settings
    try:
        found = resolve_runspec_path(spec.file, str(settings["path"]))
        digest = hashlib.sha256(Path(found).read_bytes()).hexdigest()
    except (OSError, ValueError, UserError):
        digest = _UNREADABLE  # the engine reports it, naming the file, when it reads the examples
    return {**{k: v for k, v in settings.items() if k != "path"}, "path_sha256": digest}

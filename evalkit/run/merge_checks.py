"""What ``evalkit merge`` verifies of each shard before it trusts a number in it.

A shard folder is input: it may have been damaged in a copy, cut short, or
edited. Before anything is written a merge checks that

- its ``records/`` and ``results.json`` are exactly what the shard wrote
  (:mod:`evalkit.run.checksums`); a shard made by an evalkit from before
  checksums is refused unless ``--trust-unverified`` says to accept it;
- no result of the shard failed on more than ``max_failure_rate`` of its
  samples (a shard whose server was down is "finished" but not worth
  merging), unless ``--allow-failures``;

and while it reads the records, that each planned sample of the shard is
there once per model (:class:`PlannedSamples`): none twice, none missing,
none from elsewhere. The planned samples are the plan's own, read from the
data as each shard read them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from evalkit.data.sample import Sample
from evalkit.errors import UserError
from evalkit.run.checksums import CHECKSUMS, verify_checksums
from evalkit.run.shard import shard_of

log = logging.getLogger("evalkit")

#: a planned sample as its record names it: (sample id, dataset row); a repeated id has its own row
SampleKey = tuple[str, int | None]


def verify_shard_files(run_dir: Path, manifest: dict[str, Any], trust_unverified: bool) -> None:
    """Refuse a shard whose files differ from its checksums; one without checksums needs ``trust_unverified``."""
    if (run_dir / "run.json").is_symlink():
        raise UserError(f"merge {run_dir / 'run.json'}: a symbolic link; a shard's run.json is a file of its own")
    listed = manifest.get(CHECKSUMS)
    if listed is None:
        if not trust_unverified:
            raise UserError(
                f"merge {run_dir / 'run.json'}: no `{CHECKSUMS}` (made by an evalkit from before merges were "
                "verified, or edited); run the shard again, or pass --trust-unverified to merge it unverified"
            )
        log.warning("merge: %s has no checksums; merged unverified (--trust-unverified)", run_dir)
        return
    verify_checksums(run_dir, listed, "merge")


def check_failure_rates(results: dict[str, Any], path: Path, max_failure_rate: float) -> None:
    """Refuse a shard whose results.json has a result over ``max_failure_rate`` (naming it and the file)."""
    over = [
        row
        for row in results.get("results") or []
        if isinstance(row, dict)
        and row.get("kind", "dataset") == "dataset"
        and float(row.get("failure_rate") or 0) > max_failure_rate
    ]
    if not over:
        return
    row = over[0]
    failed, total = int(row.get("n_failed") or 0), int(row.get("n") or 0) + int(row.get("n_failed") or 0)
    more = f" and {len(over) - 1} more" if len(over) > 1 else ""
    raise UserError(
        f"merge {path}: {row.get('model')} on {row.get('dataset')} x {row.get('metric')} failed on {failed}/{total} "
        f"samples, over max_failure_rate {max_failure_rate:g}{more}; resume or rerun the shard, or pass "
        "--allow-failures to merge it as it is"
    )


class PlannedSamples:
    """Which samples each shard of a pair must hold: the plan's samples, split by id as the shards split them.

    ``read`` gives a dataset's planned samples (filters and expansion applied); it is called once per dataset
    spec. When it fails (the data is not readable here), the pair is refused unless ``trust_unverified`` or
    the pair already failed in a shard (its data unreadable there too): then only the duplicate check is made.
    """

    def __init__(self, read: Callable[[Any], Iterable[Sample]], count: int, trust_unverified: bool) -> None:
        self._read = read
        self._count = count
        self._trust = trust_unverified
        self._by_dataset: dict[str, list[set[SampleKey]] | str] = {}

    def of(self, spec: Any, pair_failed: bool = False) -> list[set[SampleKey]] | None:
        """Per shard index, the keys of the pair's planned samples; None when they cannot be read and may be let be."""
        key = spec.dataset.model_dump_json()
        if key not in self._by_dataset:
            self._by_dataset[key] = self._load(spec)
        found = self._by_dataset[key]
        if not isinstance(found, str):
            return found
        if not (self._trust or pair_failed):
            raise UserError(
                f"merge: dataset {spec.dataset.name!r} cannot be read here ({found}), so the shards' samples cannot "
                "be checked against the plan; merge where the data is readable, or pass --trust-unverified"
            )
        log.warning("merge: %s: planned samples not checked (%s)", spec.id, found)
        return None

    def _load(self, spec: Any) -> list[set[SampleKey]] | str:
        """The keys per shard, or what went wrong reading them."""
        shards: list[set[SampleKey]] = [set() for _ in range(self._count)]
        try:
            for sample in self._read(spec):
                row = sample.meta.get("index")
                shards[shard_of(sample.id, self._count)].add((str(sample.id), row if isinstance(row, int) else None))
        except UserError as error:
            return str(error)
        except Exception as error:
            return f"{type(error).__name__}: {error}"
        return shards


def row_number(row: int | None) -> str:
    """A record's row (stored from 0) as messages count rows: from 1, as the viewer shows it."""
    return "unknown" if row is None else str(row + 1)


def record_key(record: dict[str, Any]) -> SampleKey:
    row = record.get("row")
    return str(record.get("sample_id")), row if isinstance(row, int) else None


def check_whole(
    source: Path, model: str, held: set[SampleKey], planned: set[SampleKey] | None, pair_error: bool
) -> None:
    """Refuse a shard's records that lack a planned sample of ``model`` (a pair that failed is let be)."""
    if planned is None or pair_error:
        return
    missing = sorted(planned - held, key=str)
    if missing:
        first = missing[0]
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise UserError(
            f"merge: {source}: no record of sample {first[0]!r} (row {row_number(first[1])}) for model "
            f"{model!r}{more}, though the shard's plan holds it; the shard's records are incomplete (or the data "
            "changed since the shards ran): run the shard again"
        )

"""``evalkit merge RUN_DIR...``: the shards of one plan (``evalkit run --shard K/N``) as one run folder.

The merged folder is a normal run folder (run.json, records, results.json/csv/md,
report.html) whose scores and confidence intervals are exactly those of the
same plan run in one process. That holds because a result is a function of the
per-sample rows alone: every scored record carries the statistics the run's
accumulator added (``stats``), its row in file order (``row``) and its groups,
so the merge feeds each pair's records from every shard into the same
:class:`~evalkit.metrics.accumulator.ScoreAccumulator` a run uses and lets it
compute the corpus statistic, the bootstrap (same seed, rows in file order),
the normal CI, the per-group results and the subscores. A metric scored over
groups of samples (MMBench's circular copies, MME's images) gets each record's
``group`` back, so a group whose members ran in different shards is whole again
here; a metric that counts over the corpus (CIDEr) needs nothing recounted (the
shards scored with the whole plan's counts), but is given the references again
so the merged settings say what was counted, when the data is readable here. Shard CIs are never
averaged: a CI of the whole is not a function of the parts' CIs. Failed records
are counted as the run counts them.

What is refused, before anything is written (exit 2, naming the folders):
folders that are not shard runs, shards of different plans (another config,
other runspecs or other data: the plan fingerprint each shard's run.json
keeps), shards that did not finish, a shard given twice, and missing shards;
a shard whose files differ from its checksums, or that has none, or whose
results failed over ``max_failure_rate`` (:mod:`evalkit.run.merge_checks`);
an ``--output`` that is a link or holds what a merge did not write. While
the records are read, a planned sample held twice, missing or not the
shard's is refused naming the file and line; the merged folder is built
beside its target and renamed into place only when whole
(:mod:`evalkit.run.merge_output`), so a refused or killed merge leaves an
earlier merge's folder as it was.

Not exact, by nature: ``failure_examples`` (the first message per failure
reason) follow the order the records are read in, as a run's follow the order
answers came back in; a pair's error (a metric that raised) is the first
shard's that has one; ``seconds`` is the longest shard's. The response stores
stay where the shards kept them (run.json names each); the merged folder has
no store of its own.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import secrets
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from evalkit.errors import UserError
from evalkit.metrics.accumulator import GroupMember, ScoreAccumulator, sample_groups
from evalkit.metrics.base import SampleScore
from evalkit.plan import EngineSpec, Plan
from evalkit.report.files import write_results
from evalkit.report.results import ResultRow, aggregate_rows, package_versions
from evalkit.run.checksums import CHECKSUMS, folder_checksums
from evalkit.run.corpus import fit_corpus
from evalkit.run.cost.usage import merged_run_usage, summed_usage
from evalkit.run.engine_result import EngineResult, ModelResult
from evalkit.run.manifest import (
    MANIFEST,
    MANIFEST_FORMAT,
    ManifestWriter,
    answer_fingerprint,
    plan_for_resume,
    read_manifest,
)
from evalkit.run.merge_checks import (
    PlannedSamples,
    SampleKey,
    check_failure_rates,
    check_whole,
    record_key,
    row_number,
    verify_shard_files,
)
from evalkit.run.merge_output import check_output, put_in_place, start_building
from evalkit.run.result_rows import rows_from_engines
from evalkit.run.runner import build_metric
from evalkit.run.scoring import metric_settings, summarize
from evalkit.run.shard import Shard, plan_fingerprint
from evalkit.run.stopping.at_ci import check_drawn, merged_partial, partial_summary, seeded_prefix
from evalkit.util import jsonutil
from evalkit.util.safe_names import safe_path

log = logging.getLogger("evalkit")

#: the integer counters of a model's request statistics that add up across shards
_REQUEST_COUNTERS = ("sent", "store_hits", "reused", "deduplicated", "retried", "rate_limited")


@dataclass
class ShardRun:
    """One shard's run folder, as its run.json describes it."""

    path: Path
    manifest: dict[str, Any]
    shard: Shard
    plan: str

    @property
    def status(self) -> str:
        return str(self.manifest.get("status"))


@dataclass
class MergeOutcome:
    """The merged run folder and what it holds (``rows`` and ``engines`` as a run's outcome has them)."""

    run_dir: Path
    rows: list[ResultRow]
    engines: list[EngineResult]
    shards: list[ShardRun]
    #: record lines that could not be read (a torn last line) and were left out, per records file
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    #: the shards' ``max_failure_rate``, which judges the merged results as it judged each shard's
    max_failure_rate: float = 0.2


@dataclass(frozen=True)
class RecordedJudge:
    """What a judge metric reads of its judge when it is built: the judge's names. A merge asks nothing."""

    model: str
    prompt_model: str
    temperature: float = 0.0

    async def ask(self, *_: Any, **__: Any) -> Any:  # pragma: no cover - a merge scores nothing
        raise RuntimeError("evalkit merge asks no judge")


# -- which folders are the shards of one plan ----------------------------------------------------------------


def read_shards(run_dirs: Sequence[str | Path], trust_unverified: bool = False) -> list[ShardRun]:
    """Every folder's shard, checked to be all of one plan, finished, each once, its files as it wrote them.

    UserError naming the problem (and the file); ``trust_unverified`` accepts shards without checksums.
    """
    if not run_dirs:
        raise UserError("merge: give the run folders of the shards (evalkit merge RUN_DIR...)")
    shards: list[ShardRun] = []
    for given in run_dirs:
        path = Path(given)
        manifest = read_manifest(path, "merge")
        saved = manifest.get("shard")
        if not isinstance(saved, dict):
            what = "a merged run" if manifest.get("merged") else "a run of the whole plan"
            raise UserError(
                f"merge {path}: not a shard run ({what}: its {MANIFEST} has no `shard`); merge takes the folders "
                "of `evalkit run --shard K/N`"
            )
        try:
            shard = Shard(int(saved["index"]), int(saved["count"]))
        except (KeyError, TypeError, ValueError):
            raise UserError(f"merge {path}: {MANIFEST} has an unreadable `shard` entry: {saved!r}") from None
        shards.append(ShardRun(path, manifest, shard, str(saved.get("plan"))))
    _check_one_plan(shards)
    _check_finished(shards)
    _check_complete(shards)
    for run in shards:
        verify_shard_files(run.path, run.manifest, trust_unverified)
    return sorted(shards, key=lambda s: s.shard.index)


def _check_one_plan(shards: list[ShardRun]) -> None:
    kinds: dict[tuple[str, int], list[ShardRun]] = {}
    for run in shards:
        kinds.setdefault((run.plan, run.shard.count), []).append(run)
    if len(kinds) == 1:
        return
    first = shards[0]
    others = [run for run in shards if (run.plan, run.shard.count) != (first.plan, first.shard.count)]
    same = [run for run in shards if (run.plan, run.shard.count) == (first.plan, first.shard.count)]

    def describe(runs: list[ShardRun]) -> str:
        return f"{', '.join(str(r.path) for r in runs)} (plan {runs[0].plan[:12]}, {runs[0].shard.count} shards)"

    why = (
        "another number of shards"
        if all(r.plan == first.plan for r in others)
        else "another config, other runspecs or other data"
    )
    raise UserError(
        f"merge: these folders are shards of different plans ({why}): {describe(same)} vs {describe(others)}; "
        "merge the shards of one plan"
    )


def _check_finished(shards: list[ShardRun]) -> None:
    unfinished = [run for run in shards if run.status != "finished"]
    if not unfinished:
        return
    listed = "; ".join(f"{run.path} (shard {run.shard}, status {run.status!r})" for run in unfinished)
    raise UserError(
        f"merge: {len(unfinished)} shard{'s' * (len(unfinished) != 1)} did not finish: {listed}; finish each with "
        "`evalkit run --resume RUN_DIR`, then merge"
    )


def _check_complete(shards: list[ShardRun]) -> None:
    count = shards[0].shard.count
    by_index: dict[int, list[ShardRun]] = {}
    for run in shards:
        by_index.setdefault(run.shard.index, []).append(run)
    twice = {index: runs for index, runs in sorted(by_index.items()) if len(runs) > 1}
    if twice:
        listed = "; ".join(
            f"shard {index}/{count} in {', '.join(str(r.path) for r in runs)}" for index, runs in twice.items()
        )
        raise UserError(f"merge: a shard given more than once: {listed}; give each shard's folder once")
    missing = [index for index in range(count) if index not in by_index]
    if missing:
        names = ", ".join(f"{index}/{count}" for index in missing)
        raise UserError(
            f"merge: missing shard{'s' * (len(missing) != 1)} {names} of {count} (K counts from 0); run "
            "`evalkit run --shard K/N` for each and give every shard's folder"
        )


# -- the merged folder ---------------------------------------------------------------------------------------


def _output_dir(output: str | Path | None, shards: list[ShardRun]) -> Path:
    """``--output`` (new, empty, or an earlier merge's folder, checked), or a new name beside the shards.

    Nothing is made here: the merge is built beside it and renamed into place (:mod:`evalkit.run.merge_output`).
    """
    if output is None:
        parents = [str(run.path.resolve().parent) for run in shards]
        base = Path(os.path.commonpath(parents))
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        return base / f"merged_{stamp}_{secrets.token_hex(3)}"
    run_dir = Path(output)
    if any(run_dir.resolve() == run.path.resolve() for run in shards):
        raise UserError(f"merge --output {run_dir}: that is one of the shards' folders; choose a new folder")
    check_output(run_dir)
    return run_dir


def _plan(shards: list[ShardRun]) -> Plan:
    """The shards' plan, rebuilt from the first shard's run.json (and config file), checked against every shard."""
    first = shards[0]
    plan = plan_for_resume(first.path, "merge")
    rebuilt = plan_fingerprint(plan, answer_fingerprint(plan.config), first.manifest.get("datasets") or {})
    if rebuilt != first.plan:
        raise UserError(
            f"merge {first.path}: the plan rebuilt from its {MANIFEST} differs from the one the shards ran (a "
            "runspec or the config file changed since); restore them as they were, or run the shards again"
        )
    return plan


def _judge_standin(plan: Plan) -> RecordedJudge | None:
    props = plan.config.judge_properties
    if props is None:
        return None
    model = str(props.judge_model or "")
    return RecordedJudge(model, str(props.judge_prompt_model_override or model), float(props.judge_temperature or 0))


def _records(path: Path, skipped: dict[str, int] | None) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """(line number, line, record) of one JSONL file; an unreadable line is counted in ``skipped`` and left out.

    ``skipped`` None: such lines are expected (a resumed run's sent file keeps the line a kill cut) and only
    left out.
    """
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = jsonutil.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict):
                if skipped is not None:
                    skipped[str(path)] = skipped.get(str(path), 0) + 1
                    log.warning("%s: line %d is not a record (cut mid-write?); left out of the merge", path, number)
                continue
            yield number, line, record


def _add(accumulator: ScoreAccumulator, record: dict[str, Any], where: str) -> None:
    """One record into the pair's accumulator, as the run added it: a failure with its reason, or its stats row."""
    failure = record.get("failure")
    group = record_group(record)
    if failure is not None:
        accumulator.add_failure(str(failure), record.get("error"), group=group)
        return
    stats = record.get("stats")
    if not isinstance(stats, list):
        raise UserError(
            f"merge: {where}: a scored record without `stats` (made by an evalkit from before shards); run this "
            "shard again with this evalkit"
        )
    row = record.get("row")
    score = record.get("score")
    try:
        accumulator.add(
            SampleScore(None if score is None else float(score), tuple(float(x) for x in stats), record.get("details")),
            _result_groups(record),
            order=row if isinstance(row, int) else None,
            group=group,
        )
    except (TypeError, ValueError) as error:
        raise UserError(f"merge: {where}: unusable `stats` {stats!r}: {error}") from None


def record_group(record: dict[str, Any]) -> GroupMember | None:
    """The (group key, size) a grouped metric's record carries ("group", "group_size"), else None."""
    key = record.get("group")
    if key is None:
        return None
    size = record.get("group_size")
    return str(key), size if isinstance(size, int) and size > 0 else None


def _result_groups(record: dict[str, Any]) -> dict[str, str]:
    """The groups the run's accumulator got for this record's sample, by the run's own function.

    A record's ``groups`` may hold more than the results are split by (its language, for slicing records);
    :func:`sample_groups` picks from them, and from the recorded duration, exactly what the run picked.
    """
    groups = record.get("groups")
    meta = dict(groups) if isinstance(groups, dict) else {}
    meta["duration"] = record.get("duration")
    return sample_groups(SimpleNamespace(meta=meta))


async def _merge_engine(
    spec: EngineSpec,
    plan: Plan,
    shards: list[ShardRun],
    shard_rows: list[dict[tuple[str, str, str], dict[str, Any]]],
    records_dir: Path,
    skipped: dict[str, int],
    planned: PlannedSamples,
) -> EngineResult:
    """One pair: every shard's records copied into the merged file and added to one accumulator per model.

    Each shard must hold each of its planned samples once per model: a repeated, missing or foreign record is
    refused, naming the file and line.
    """
    metric = build_metric(spec, plan.config, _judge_standin(plan))
    try:  # nothing is scored here (the records' stats are final), but the settings say what was counted over
        await fit_corpus(metric, lambda: _corpus_samples(spec, plan))
    except Exception as error:  # the data is not readable here: the merge stays exact, the setting unknown
        log.warning(
            "merge: %s: corpus counts not taken again (%s); scores come from the shards' records", spec.id, error
        )
    settings, broken = metric_settings(metric)
    result = EngineResult(spec=spec, metric_info=settings, error=broken)
    accumulators = {name: ScoreAccumulator(metric) for name in spec.models}
    target = safe_path(records_dir, spec.dataset.name, spec.metric, suffix=".jsonl")
    result.records_path = target  # a robustness variant's paired test reads the merged records, as a run's does
    first_model = spec.models[0] if spec.models else None
    pair_failed = any(
        (rows.get((spec.dataset.name, spec.metric, m)) or {}).get("error") for rows in shard_rows for m in spec.models
    )
    plans = await asyncio.to_thread(planned.of, spec, pair_failed)
    stops: dict[str, list[tuple[int, dict[str, Any] | None]]] = {}  # per model, each shard's records and stop
    with target.open("wb") as out:
        for run, rows in zip(shards, shard_rows):
            source = safe_path(run.path / "records", spec.dataset.name, spec.metric, suffix=".jsonl")
            mine = None if plans is None else plans[run.shard.index]
            failed = {m for m in spec.models if (rows.get((spec.dataset.name, spec.metric, m)) or {}).get("error")}
            held: dict[str, set[SampleKey]] = {name: set() for name in spec.models}
            if source.is_file():  # else the pair failed in that shard before its first record: its error says why
                _copy_records(source, run, accumulators, held, mine, skipped, out)
            order: list[SampleKey] | None = None
            for name in spec.models:
                stopped = (rows.get((spec.dataset.name, spec.metric, name)) or {}).get("partial")
                if isinstance(stopped, dict):  # stop_at_ci: the shard asked a prefix of its seeded order
                    if order is None and mine is not None and not callable(getattr(metric, "group_of", None)):
                        order = seeded_prefix(mine, plan.config.filters.seed, spec.dataset.name)
                    check_drawn(source, name, held[name], stopped, order)
                    stops.setdefault(name, []).append((len(held[name]), stopped))
                else:
                    check_whole(source, name, held[name], mine, name in failed)
                    stops.setdefault(name, []).append((len(held[name]), None))
            counted = {name: len(keys) for name, keys in held.items()}
            result.n_samples += counted.get(str(first_model), 0)
            if source.is_file():
                _check_counts(source, counted, rows, spec)
    seconds = [
        float(rows.get((spec.dataset.name, spec.metric, m), {}).get("seconds") or 0)
        for rows in shard_rows
        for m in spec.models
    ]
    result.seconds = max(seconds, default=0.0)
    errors = [
        rows[(spec.dataset.name, spec.metric, m)].get("error")
        for rows in shard_rows
        for m in spec.models
        if (spec.dataset.name, spec.metric, m) in rows
    ]
    result.error = result.error or next((e for e in errors if e), None)
    for name, accumulator in accumulators.items():
        scored, crashed = await summarize(accumulator, plan.config.filters.seed)
        result.error = result.error or crashed
        found = [rows.get((spec.dataset.name, spec.metric, name)) or {} for rows in shard_rows]
        judge = plan.config.judge_properties
        result.models[name] = ModelResult(
            model=name,
            result=scored,
            n_failed=accumulator.n_failed,
            failure_reasons=dict(accumulator.failures),
            failure_examples=dict(accumulator.failure_examples),
            partial=merged_partial(stops.get(name, []), scored, spec.stop),
            # what each shard's answers took, added up (a shard counts what it sent; cost from today's price)
            usage=summed_usage([row.get("usage") for row in found], plan.models[name].info.price),
            judge_usage=summed_usage([row.get("judge_usage") for row in found], judge.judge_price if judge else None),
        )
    return result


def _copy_records(
    source: Path,
    run: ShardRun,
    accumulators: dict[str, ScoreAccumulator],
    held: dict[str, set[SampleKey]],
    planned: set[SampleKey] | None,
    skipped: dict[str, int],
    out: Any,
) -> None:
    """One shard's records of a pair into the merged file and the accumulators, each planned sample once."""
    for number, line, record in _records(source, skipped):
        where = f"{source}: line {number}"
        sample_id = str(record.get("sample_id"))
        if not run.shard.owns(sample_id):
            raise UserError(
                f"merge: {where}: sample {sample_id!r} is not shard {run.shard}'s; the folder's records do "
                "not match its run.json"
            )
        model = str(record.get("model"))
        accumulator = accumulators.get(model)
        if accumulator is None:
            continue  # a model the plan no longer has cannot be in a shard of this plan: left out
        key = record_key(record)
        if key in held[model]:
            raise UserError(
                f"merge: {where}: a second record of sample {sample_id!r} (row {row_number(key[1])}) for model "
                f"{model!r}; each sample is recorded once: the shard's records are damaged, run the shard again"
            )
        if planned is not None and key not in planned:
            raise UserError(
                f"merge: {where}: sample {sample_id!r} (row {row_number(key[1])}) is not in the plan of shard "
                f"{run.shard}; the folder's records do not match its run.json (or the data changed since the shards "
                "ran)"
            )
        held[model].add(key)
        _add(accumulator, record, where)
        out.write(line if line.endswith(b"\n") else line + b"\n")


def _corpus_samples(spec: EngineSpec, plan: Plan) -> Iterator[Any]:
    """The plan's samples of the pair's dataset, unsharded, as each shard's engine read them for its corpus."""
    from evalkit.data.filters import apply_filters
    from evalkit.data.loading import iter_samples
    from evalkit.prompts.preprocessors import PREPROCESSORS

    filtered = apply_filters(iter_samples(spec.dataset), plan.config.filters, spec.dataset.name)
    return PREPROCESSORS.get(spec.dataset.preprocessor)().expand(filtered)


def _check_counts(
    source: Path, counted: dict[str, int], rows: dict[tuple[str, str, str], dict[str, Any]], spec: EngineSpec
) -> None:
    """A shard's records hold every sample its results counted: else the merge could not equal one run."""
    for model in spec.models:
        row = rows.get((spec.dataset.name, spec.metric, model))
        if row is None:
            continue
        # a grouped metric's n counts groups; its records are one per sample (details["n_samples"])
        scored = (row.get("details") or {}).get("n_samples", row.get("n"))
        expected = int(scored or 0) + int(row.get("n_failed") or 0)
        if counted.get(model, 0) != expected:
            raise UserError(
                f"merge: {source}: {counted.get(model, 0)} records of model {model!r}, but the shard's results.json "
                f"counts {expected} samples; the shard's records are damaged: run the shard again"
            )


def _merge_sent(shards: list[ShardRun], records_dir: Path) -> None:
    """records/sent/<dataset>.jsonl: every shard's lines, each content key once."""
    names = sorted({p.name for run in shards for p in (run.path / "records" / "sent").glob("*.jsonl")})
    if not names:
        return
    (records_dir / "sent").mkdir(parents=True, exist_ok=True)
    for name in names:
        seen: set[str] = set()
        with (records_dir / "sent" / name).open("wb") as out:
            for run in shards:
                source = run.path / "records" / "sent" / name
                if not source.is_file():
                    continue
                for _, line, entry in _records(source, None):
                    key = str(entry.get("key"))
                    if key in seen:
                        continue
                    seen.add(key)
                    out.write(line if line.endswith(b"\n") else line + b"\n")


def _requests(shards: list[ShardRun]) -> dict[str, dict[str, Any]]:
    """Per model, the shards' request counters added up (per-endpoint details stay in each shard's results)."""
    total: dict[str, dict[str, Any]] = {}
    for run in shards:
        try:
            payload = json.loads((run.path / "results.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for model, stats in (payload.get("requests") or {}).items():
            into = total.setdefault(model, {key: 0 for key in _REQUEST_COUNTERS} | {"replicas": {}})
            for key in _REQUEST_COUNTERS:
                into[key] += int(stats.get(key) or 0)
            for replica, count in (stats.get("replicas") or {}).items():
                into["replicas"][replica] = into["replicas"].get(replica, 0) + int(count or 0)
    return total


async def amerge(
    run_dirs: Sequence[str | Path],
    output: str | Path | None = None,
    *,
    allow_failures: bool = False,
    trust_unverified: bool = False,
) -> MergeOutcome:
    """Merge the shard folders ``run_dirs`` into ``output`` (default: a new folder beside them).

    ``allow_failures`` merges shards with results over ``max_failure_rate``; ``trust_unverified`` merges shards
    without checksums (older evalkit) and data not readable here. Nothing is written unless the merge completes.
    """
    started = time.perf_counter()
    shards = read_shards(run_dirs, trust_unverified)
    plan = _plan(shards)
    shard_rows = []
    for run in shards:
        results = _shard_results(run)
        if not allow_failures:
            check_failure_rates(results, run.path / "results.json", plan.config.max_failure_rate)
        shard_rows.append(
            {(r.get("dataset"), r.get("metric"), r.get("model")): r for r in results.get("results") or []}
        )
    first = shards[0].manifest
    target = _output_dir(output, shards)
    described = [
        {
            "index": run.shard.index,
            "run_dir": str(run.path.resolve()),
            "run_id": run.manifest.get("run_id"),
            "store": (run.manifest.get("store") or {}).get("path"),
        }
        for run in shards
    ]
    merged = {"count": shards[0].shard.count, "plan": shards[0].plan, "shards": described}
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "run_id": target.name,
        "status": "running",
        "started": min(str(run.manifest.get("started") or "") for run in shards) or None,
        "resumed": [],
        "config_file": first.get("config_file"),
        "command": list(sys.argv),
        "fingerprint": first.get("fingerprint"),
        "config": first.get("config"),
        "store": {"enabled": False, "path": None, "refresh_since": None},
        "engines": first.get("engines"),
        "models": first.get("models"),
        "datasets": first.get("datasets"),
        "merged": merged,
    }
    planned = PlannedSamples(lambda spec: _corpus_samples(spec, plan), shards[0].shard.count, trust_unverified)
    building = start_building(target)
    try:
        writer = ManifestWriter(building, manifest)
        writer.update()
        outcome = await _write_merged(shards, shard_rows, plan, building, writer, merged, planned, started)
        put_in_place(building, target)
    except BaseException:  # a merge that did not complete leaves nothing: an earlier merge's folder is untouched
        shutil.rmtree(building, ignore_errors=True)
        raise
    outcome.run_dir = target
    for engine in outcome.engines:
        if engine.records_path is not None:
            engine.records_path = target / engine.records_path.relative_to(building)
    return outcome


def _shard_results(run: ShardRun) -> dict[str, Any]:
    """A finished shard's results.json (verified by its checksum, unless merged unverified)."""
    path = run.path / "results.json"
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UserError(f"merge {path}: cannot read the results of a finished shard: {error}") from None
    if not isinstance(payload, dict):
        raise UserError(f"merge {path}: not a results file (expected a JSON object)")
    return payload


async def _write_merged(
    shards: list[ShardRun],
    shard_rows: list[dict[tuple[str, str, str], dict[str, Any]]],
    plan: Plan,
    run_dir: Path,
    writer: ManifestWriter,
    merged: dict[str, Any],
    planned: PlannedSamples,
    started: float,
) -> MergeOutcome:
    """Records, results and views of the merged folder; run.json "finished", with its checksums, at the end."""
    first = shards[0].manifest
    records_dir = run_dir / "records"
    records_dir.mkdir(parents=True, exist_ok=True)
    skipped: dict[str, int] = {}
    engines = [
        await _merge_engine(spec, plan, shards, shard_rows, records_dir, skipped, planned) for spec in plan.engines
    ]
    _merge_sent(shards, records_dir)
    rows = rows_from_engines(engines, plan.config.max_failure_rate)
    rows += aggregate_rows(rows, plan.config.aggregate, plan.catalog.resolve)
    finished = dt.datetime.now().isoformat(timespec="seconds")
    seconds = max((float(run.manifest.get("seconds") or 0) for run in shards), default=0.0)
    meta: dict[str, Any] = {
        "run_id": writer.data["run_id"],
        "finished": finished,
        "seconds": round(seconds, 3),
        "config_file": first.get("config_file"),
        "config": first.get("config"),
        "versions": package_versions(),
        "requests": _requests(shards),
        "servers": [],
        "merged": merged,
    }
    judge = plan.config.judge_properties
    usage = merged_run_usage(
        [_shard_results(run) for run in shards],
        {name: model.info.price for name, model in plan.models.items()},
        judge.judge_price if judge is not None else None,
    )
    if usage is not None:  # what the shards' answers took, added up
        meta["usage"] = usage
    stopped = partial_summary(rows)  # rows over fewer samples than the plan's (stop_at_ci, a shard's budget)
    if stopped is not None:
        meta["partial"] = stopped
    write_results(run_dir, rows, meta)
    checksums = await asyncio.to_thread(folder_checksums, run_dir)
    took = time.perf_counter() - started
    writer.update(
        status="finished",
        finished=finished,
        seconds=round(seconds, 3),
        merge_seconds=round(took, 3),
        **{CHECKSUMS: checksums},
    )
    return MergeOutcome(run_dir, rows, engines, shards, skipped, took, plan.config.max_failure_rate)


def merge(
    run_dirs: Sequence[str | Path],
    output: str | Path | None = None,
    *,
    allow_failures: bool = False,
    trust_unverified: bool = False,
) -> MergeOutcome:
    """:func:`amerge` in a new event loop (for scripts and the command line)."""
    return asyncio.run(amerge(run_dirs, output, allow_failures=allow_failures, trust_unverified=trust_unverified))

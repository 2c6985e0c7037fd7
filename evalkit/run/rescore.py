"""Re-scoring a finished run: compute a metric from the stored responses, without asking any model.

A run leaves one record per (sample, model) in ``records/<dataset>__<metric>.jsonl``
with the raw response, the reference and the failure reason of requests that
failed. Re-scoring reads those records and scores every response again with
another (or a changed) metric, exactly as the engine would have:

- the dataset's postprocessor turns the raw response into the prediction;
- a metric that needs more of the sample than its reference (choices for
  ``mcq_accuracy``, the question and rubric for judges) gets the sample
  rebuilt from the runspec (audio reduced to a marker, never decoded) (the run's ``runspecs_dir`` plus the shipped
  runspecs), matched by sample id; reference-only metrics (WER, BLEU, exact
  match, ...) use the records alone, except for local datasets, which are
  cheap to read and also give the speaker/accent/gender groups;
- a request that failed in the run is counted as a failure with its reason,
  as in the run; the engine's audio-length groups come from the recorded
  duration;
- a metric that counts over the whole corpus before scoring (CIDEr's document
  frequencies, :mod:`evalkit.run.corpus`) is given the references of the
  dataset's filtered samples, as the run counted them (the whole plan, even for
  a shard's folder), else the records' references;
- a preprocessor's expansion (circular copies ``<id>#c<k>``) is applied when
  samples are rebuilt, so each copy finds its own options;
- judge metrics call the judge (``judge_properties`` of the run's config file,
  or of ``config_path``), through the same response store, so a second
  re-score asks the judge nothing new. No model endpoint is ever contacted.

The result rows have the shape of the run's rows (score, 95% CI, n, failures,
details; a run whose config reports as AU-Harness does (``report_as: auharness``) gets AU-Harness's dataset
and metric names and scale where the metric is AU-Harness's, as the run's own rows), written to
``RUN_DIR/rescore_<metric>.json`` with per-sample
records in ``RUN_DIR/rescore/<dataset>__<metric>.jsonl``. Scores, counts and
normal CIs equal those of a run with that metric; so do bootstrap CIs (WER,
BLEU), since resampling follows each record's ``row`` (file order). Records of
runs made before rows were kept, and not rebuilt from the dataset, are
resampled in the order they were recorded, so their bootstrap CI can differ
slightly. A re-scored record keeps the run's ``sent`` key (what was sent, in
``RUN_DIR/records/sent/``), ``row`` and ``groups``, and gains ``stats``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalkit.catalog import Catalog, DatasetSpec, load_catalog
from evalkit.config import Config, Filters, JudgeProperties, format_validation_error, load_config
from evalkit.config.foreign.reporting import ReportedAs, reported_in_run
from evalkit.data.sample import Audio, Sample
from evalkit.errors import ConfigError, RunspecError, UserError
from evalkit.languages import target_language
from evalkit.metrics import METRICS, Metric
from evalkit.metrics.accumulator import ScoreAccumulator, sample_groups
from evalkit.plan import declared_fit, with_given_path
from evalkit.report.results import ResultRow, aggregate_rows
from evalkit.util import jsonutil
from evalkit.util.safe_names import safe_path

log = logging.getLogger("evalkit")

#: metrics that read nothing of a sample but its reference (and the prediction)
REFERENCE_ONLY = frozenset(
    {"word_error_rate", "cer", "bleu", "chrf", "chrf++", "ter", "exact_match", "f1"}
    | {"auharness:word_error_rate", "auharness:bleu"}
)
#: samples scored at once (judge calls run concurrently within a chunk; results are added in record order)
_CHUNK = 256
#: record fields copied from the run's record into the re-scored one (``sent`` names the run's records/sent line)
_KEPT = ("latency", "attempts", "cached", "replica", "duration", "images", "prompt", "sent")


@dataclass
class RescoreOutcome:
    """What one re-score produced."""

    metric: str
    rows: list[ResultRow]
    aggregate: list[ResultRow] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    judge: dict[str, Any] | None = None
    seconds: float = 0.0

    def payload(self, run_dir: Path) -> dict[str, Any]:
        return {
            "run_id": run_dir.name,
            "run_dir": str(run_dir),
            "metric": self.metric,
            "rescored": dt.datetime.now().isoformat(timespec="seconds"),
            "seconds": round(self.seconds, 3),
            "model_requests": 0,
            "judge": self.judge,
            "results": [r.as_dict() for r in self.rows],
            "aggregate": [r.as_dict() for r in self.aggregate],
            "skipped": self.skipped,
            "notes": self.notes,
        }


# -- reading the run ------------------------------------------------------------------------


def read_run_meta(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "results.json"
    if not path.is_file():
        raise UserError(
            f"{run_dir}: not a finished run (no results.json); re-scoring needs the run's results and records"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise UserError(f"{path}: not valid JSON: {error}") from None


def run_config(meta: dict[str, Any], run_dir: Path) -> Config:
    """The run's config as results.json recorded it (secrets masked; ``${VAR}`` already expanded)."""
    data = meta.get("config")
    source = str(run_dir / "results.json")
    if not isinstance(data, dict):
        raise UserError(f"{source}: has no `config` section")
    try:
        return Config.model_validate(data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, source)) from None


def _resolve_dirs(dirs: Iterable[str], config_file: str | None) -> tuple[list[Path], list[str]]:
    """Runspec folders as the run saw them: relative to the current folder, else to the config file's."""
    found: list[Path] = []
    missing: list[str] = []
    bases = [Path.cwd()]
    if config_file:
        bases.append(Path(config_file).resolve().parent)
    for entry in dirs:
        path = Path(entry)
        candidates = [path] if path.is_absolute() else [base / path for base in bases]
        hit = next((c for c in candidates if c.is_dir()), None)
        if hit is None:
            missing.append(entry)
        else:
            found.append(hit)
    return found, missing


def records_by_dataset(run_dir: Path, metric: str) -> dict[str, tuple[Path, list[dict[str, Any]]]]:
    """One records file per dataset: the metric's own when the run has it, else the fullest one.

    All files of a dataset hold the same responses (the store answered repeats),
    so any one of them gives every (sample, model) response of the run.
    """
    folder = run_dir / "records"
    if not folder.is_dir():
        raise UserError(f"{run_dir}: no records folder; re-scoring needs records/*.jsonl")
    candidates: dict[str, list[tuple[Path, list[dict[str, Any]]]]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        records = []
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    records.append(jsonutil.loads(line))
                except ValueError:
                    log.warning("%s: line %d is not JSON (a run killed mid-write?); skipped", path, number)
        if not records:
            continue
        dataset = str(records[0].get("dataset") or path.stem.rsplit("__", 1)[0])
        candidates.setdefault(dataset, []).append((path, records))
    chosen: dict[str, tuple[Path, list[dict[str, Any]]]] = {}
    for dataset, files in candidates.items():
        own = [f for f in files if f[1][0].get("metric") == metric]
        chosen[dataset] = own[0] if own else max(files, key=lambda f: (len(f[1]), f[0].name))
    return chosen


# -- samples ----------------------------------------------------------------------------------


def _find_samples(spec: DatasetSpec, wanted: set[str]) -> dict[str, Sample]:
    """The dataset's samples with the wanted ids (first occurrence), reading only until all are found.

    The preprocessor's expansion applies, so a circular run's copies (``<id>#c<k>``) are found as they were sent.
    """
    from evalkit.data.loading import iter_samples
    from evalkit.prompts.preprocessors import PREPROCESSORS

    found: dict[str, Sample] = {}
    for sample in PREPROCESSORS.get(spec.preprocessor)().expand(iter_samples(spec)):
        if sample.id in wanted and sample.id not in found:
            found[sample.id] = _without_audio_payload(sample)
            if len(found) == len(wanted):
                break
    return found


def _without_audio_payload(sample: Sample) -> Sample:
    """The sample with its audio reduced to a marker: metrics only ask whether there was audio,
    and keeping every clip's bytes of a large set would hold the dataset in memory."""
    if sample.audio is not None:
        sample.audio = Audio(path=sample.audio.path or "(audio)")
    for turn in sample.turns or []:
        if turn.audio is not None:
            turn.audio = Audio(path=turn.audio.path or "(audio)")
    return sample


def sample_from_record(record: dict[str, Any]) -> Sample:
    """A sample with what a record keeps: id, reference, duration, row and groups.

    The row keeps the re-scored corpus in file order (bootstrap CIs as in the run); the groups
    (speaker, accent, gender, language) keep the per-group results of a run whose dataset is gone.
    """
    meta: dict[str, Any] = {}
    if record.get("duration") is not None:
        meta["duration"] = record["duration"]
    if isinstance(record.get("row"), int):
        meta["index"] = record["row"]
    groups = record.get("groups")
    if isinstance(groups, dict):
        for key in ("speaker", "accent", "gender", "language"):
            if groups.get(key) is not None:
                meta[key] = groups[key]
    if record.get("group") is not None:  # a grouped metric's group (circular copies, MME's image)
        meta["group"] = record["group"]
        if isinstance(record.get("group_size"), int):
            meta["group_size"] = record["group_size"]
    return Sample(id=str(record.get("sample_id")), reference=record.get("reference"), meta=meta)


# -- the judge ----------------------------------------------------------------------------------


def judge_properties(config: Config, meta: dict[str, Any], config_path: str | Path | None) -> JudgeProperties | None:
    """The judge to use: ``config_path``'s, else the run's config file's (it has the real key), else results.json's."""
    if config_path is not None:
        return load_config(config_path).judge_properties
    source = meta.get("config_file")
    if source and Path(source).is_file():
        try:
            props = load_config(source).judge_properties
        except UserError as error:
            log.warning("cannot read the run's config %s (%s); using the judge of results.json", source, error)
        else:
            if props is not None:
                return props
    props = config.judge_properties
    if props is not None and props.judge_api_key == "***":
        log.warning(
            "the judge's API key is masked in results.json; pass the config file to re-score with a keyed judge"
        )
        props = props.model_copy(update={"judge_api_key": None})
    return props


# -- scoring ----------------------------------------------------------------------------------


async def _rescore_dataset(
    spec: DatasetSpec,
    metric_name: str,
    metric: Metric,
    records: list[dict[str, Any]],
    samples: dict[str, Sample],
    out_path: Path | None,
    seed: int,
    filters: Filters | None = None,
    reported: ReportedAs | None = None,
) -> Any:
    from evalkit.plan import EngineSpec, dataset_processors
    from evalkit.processing.postprocessors import POSTPROCESSORS
    from evalkit.run.engine_result import EngineResult, ModelResult
    from evalkit.run.scoring import metric_settings, new_record, score_into_record, summarize

    started = time.perf_counter()
    postprocessor = POSTPROCESSORS.get(spec.postprocessor)()
    processors = dataset_processors(spec)
    models = list(dict.fromkeys(str(r.get("model")) for r in records))
    corpus_error = await _fit_corpus(metric, spec, records, models[0] if models else None, filters)
    accumulators = {m: ScoreAccumulator(metric) for m in models}
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("w", encoding="utf-8") if out_path is not None else contextlib.nullcontext(None) as out:
        for start in range(0, len(records), _CHUNK):
            chunk = records[start : start + _CHUNK]
            prepared: list[tuple[dict[str, Any], Sample, str | None]] = []
            for record in chunk:
                sample_id = str(record.get("sample_id"))
                base = samples.get(sample_id)
                sample = sample_from_record(record) if base is None else dataclasses.replace(base, meta=dict(base.meta))
                if "reference" in record:
                    sample.reference = record["reference"]
                if record.get("duration") is not None:
                    sample.meta.setdefault("duration", record["duration"])
                response = record.get("response")
                prepared.append((record, sample, None if response is None else postprocessor.process(str(response))))
            lines = [
                new_record(sample, str(record.get("model")), spec.name, metric_name) for record, sample, _ in prepared
            ]
            for line, (record, _, _) in zip(lines, prepared):
                line["reference"] = record.get("reference")
            await asyncio.gather(
                *(
                    score_into_record(
                        line,
                        accumulators[str(record.get("model"))],
                        metric,
                        sample,
                        response=record.get("response"),
                        prediction=prediction,
                        failure=record.get("failure"),
                        error=record.get("error"),
                        processors=processors,
                        answers=record["answers"] if isinstance(record.get("answers"), list) else None,
                    )
                    for line, (record, sample, prediction) in zip(lines, prepared)
                )
            )
            for line, (record, _, _) in zip(lines, prepared):
                for key in _KEPT:
                    if key in record:
                        line[key] = record[key]
                line["rescored"] = True
                if out is not None:
                    out.write(jsonutil.dumps(line) + "\n")
    engine_spec = EngineSpec(dataset=spec, metric=metric_name, models=models, reported_as=reported)
    settings, broken = metric_settings(metric)  # a metric that raises fails this pair, as in a run
    result = EngineResult(spec=engine_spec, metric_info=settings, error=broken or corpus_error)
    result.n_samples = len({str(r.get("sample_id")) for r in records})
    for name, acc in accumulators.items():
        summary, crashed = await summarize(acc, seed)
        result.error = result.error or crashed
        result.models[name] = ModelResult(
            model=name,
            result=summary,
            n_failed=acc.n_failed,
            failure_reasons=dict(acc.failures),
            failure_examples=dict(acc.failure_examples),
        )
    result.seconds = time.perf_counter() - started
    return result


async def _fit_corpus(
    metric: Metric, spec: DatasetSpec, records: list[dict[str, Any]], model: str | None, filters: Filters | None
) -> str | None:
    """Give a corpus-counting metric (CIDEr) the run's references before anything is re-scored.

    The dataset's filtered samples when it can be read (as the run counted them, whole even when the run was a
    shard); else the records' own references (one per sample: the first model's records). Returns the pair's
    error when the metric refused them.
    """
    from evalkit.run.corpus import fit_corpus

    def from_records() -> Iterator[Sample]:
        return (
            Sample(id=str(r.get("sample_id")), reference=r.get("reference")) for r in records if r.get("model") == model
        )

    def from_dataset() -> Iterator[Sample]:
        from evalkit.data.filters import apply_filters
        from evalkit.data.loading import iter_samples
        from evalkit.prompts.preprocessors import PREPROCESSORS

        samples: Iterator[Sample] = iter_samples(spec)
        if filters is not None:
            samples = apply_filters(samples, filters, spec.name)
        return PREPROCESSORS.get(spec.preprocessor)().expand(samples)

    try:
        try:
            await fit_corpus(metric, from_dataset)
        except (RunspecError, OSError, ValueError) as error:
            log.info("%s: corpus counted over the records' references (dataset not readable: %s)", spec.name, error)
            await fit_corpus(metric, from_records)
    except UserError as error:
        return str(error)
    return None


def _keep_stopped(result: Any, meta: dict[str, Any], dataset: str, records_of: str) -> None:
    """A model whose records come from a pair that stopped at its CI (``stop_at_ci``) is re-scored over that
    draw only: its row stays partial, never reads as a score of the whole dataset."""
    from evalkit.run.stopping.at_ci import rescored_partial

    found_rows = meta.get("results")
    rows: list[Any] = found_rows if isinstance(found_rows, list) else []
    for name, found in result.models.items():
        source = next(
            (
                row.get("partial")
                for row in rows
                if isinstance(row, dict)
                and (row.get("dataset"), row.get("metric"), row.get("model")) == (dataset, records_of, name)
            ),
            None,
        )
        if isinstance(source, dict):
            found.partial = rescored_partial(source, records_of, found.result)


async def arescore(
    run_dir: str | Path,
    metric: str,
    *,
    config_path: str | Path | None = None,
    rebuild: bool | None = None,
    write: bool = True,
) -> RescoreOutcome:
    """Re-score every dataset of a finished run with ``metric``; the async form of :func:`rescore`.

    ``rebuild`` forces (True) or forbids (False) rebuilding samples from the
    runspecs; the default rebuilds when the metric needs more than the
    reference or the dataset is a local file. ``config_path`` supplies the
    judge for judge metrics. ``write=False`` leaves the run folder untouched.
    """
    started = time.perf_counter()
    run_dir = Path(run_dir)
    meta = read_run_meta(run_dir)
    config = run_config(meta, run_dir)
    cls = METRICS.get(metric, where="rescore --metric")
    canonical = METRICS.canonical(metric)
    outcome = RescoreOutcome(metric=canonical, rows=[])

    dirs, missing = _resolve_dirs(config.runspec_dirs, meta.get("config_file"))
    for entry in missing:
        outcome.notes[f"runspecs_dir {entry}"] = "not found from here; datasets defined there cannot be rebuilt"
    catalog: Catalog = load_catalog(dirs)
    chosen = records_by_dataset(run_dir, canonical)
    if not chosen:
        raise UserError(f"{run_dir}: the records folder holds no records")

    judge = None
    store = None
    if cls.needs_judge:
        props = judge_properties(config, meta, config_path)
        if props is None:
            raise ConfigError(
                f"metric {canonical!r} needs an LLM judge: the run's config has no `judge_properties` (pass a config "
                "file that has one)"
            )
        from evalkit.clients.judge import JudgeClient
        from evalkit.clients.store import ResponseStore

        if config.cache.enabled:
            store_path = Path(config.cache.path) if config.cache.path else run_dir.parent / "responses.sqlite"
            store = await ResponseStore(store_path).open()
        judge = JudgeClient(props, store)

    results = []
    try:
        for dataset, (path, records) in sorted(chosen.items()):
            spec = catalog.datasets.get(dataset)
            if spec is None:
                outcome.skipped[dataset] = (
                    "not in the runspecs found from here (its postprocessor and language are unknown)"
                )
                continue
            given = {catalog.entry_name(k) or k: v for k, v in config.dataset_paths.items()}
            key = spec.variant_of or spec.name  # another tool's variant reads its entry's data, under the entry's key
            if spec.private and key not in given:
                outcome.skipped[dataset] = "a private dataset the run's config gives no path for (dataset_paths)"
                continue
            if key in given:  # a licensed corpus or a local copy: read where the run's config said
                try:
                    spec = with_given_path(spec, config.model_copy(update={"dataset_paths": given}), "rescore")
                except ConfigError as error:
                    outcome.skipped[dataset] = f"its dataset_paths copy cannot be read: {error}"
                    continue
            fitting = [METRICS.canonical(m) for m in catalog.fitting_metrics(spec) if m in METRICS]
            if fitting and canonical not in fitting and not declared_fit(canonical, spec):  # as the plan checks
                outcome.skipped[dataset] = (
                    f"metric {canonical!r} does not fit task {spec.task} (fitting: {', '.join(fitting)})"
                )
                continue
            language = target_language(spec.language)
            instance = cls(language=language, judge=judge) if cls.needs_judge else cls(language=language)
            needs_sample = canonical not in REFERENCE_ONLY
            want_rebuild = rebuild if rebuild is not None else (needs_sample or spec.path is not None)
            samples: dict[str, Sample] = {}
            if want_rebuild:
                wanted = {str(r.get("sample_id")) for r in records}
                try:
                    samples = await asyncio.to_thread(_find_samples, spec, wanted)
                except (RunspecError, OSError, ValueError) as error:
                    if needs_sample:
                        outcome.skipped[dataset] = f"cannot rebuild its samples, which {canonical} needs: {error}"
                        continue
                    outcome.notes[dataset] = f"scored from the records alone (samples not readable: {error})"
                else:
                    lost = len(wanted) - len(samples)
                    if lost:
                        outcome.notes[dataset] = (
                            f"{lost} sample ids of the records are no longer in the dataset; scored from their records"
                        )
            out_path = safe_path(run_dir / "rescore", dataset, canonical, suffix=".jsonl") if write else None
            # named and scaled as the run's config reports the pair (an AU-Harness config: AU-Harness's table)
            reported = reported_in_run(catalog, config.report_as, (p[0] for p in config.pairs), canonical, spec)
            log.info("re-scoring %s (%s) with %s", dataset, path.name, canonical)
            rescored = await _rescore_dataset(
                spec, canonical, instance, records, samples, out_path, config.filters.seed, config.filters, reported
            )
            _keep_stopped(rescored, meta, dataset, str(records[0].get("metric") or path.stem.rsplit("__", 1)[-1]))
            results.append(rescored)
    finally:
        if judge is not None:
            outcome.judge = {"model": judge.model, "sent": judge.client.sent, "store_hits": judge.client.store_hits}
            await judge.close()
        if store is not None:
            await store.close()
    from evalkit.run.result_rows import rows_from_engines

    outcome.rows = rows_from_engines(results, config.max_failure_rate)
    try:
        outcome.aggregate = aggregate_rows(outcome.rows, config.aggregate, catalog.resolve)
    except UserError as error:
        outcome.notes["aggregate"] = f"not computed: {error}"
    outcome.seconds = time.perf_counter() - started
    if write:
        path = safe_path(run_dir, f"rescore_{canonical}", suffix=".json")
        path.write_text(
            json.dumps(outcome.payload(run_dir), indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
        )
    return outcome


def _run(coro: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def rescore(run_dir: str | Path, metric: str, **options: Any) -> list[ResultRow]:
    """Re-score a finished run with ``metric``: one row per (dataset, model), then aggregate rows.

    Writes ``RUN_DIR/rescore_<metric>.json`` (unless ``write=False``); see
    :func:`arescore` for the options. Call :func:`arescore` from async code.
    """
    outcome: RescoreOutcome = _run(arescore(run_dir, metric, **options))
    return outcome.rows + outcome.aggregate


def rescore_command(run_dir: str, metrics: list[str], output: str | None = None) -> int:
    """``evalkit rescore RUN_DIR --metric NAME [--metric NAME2] [--output FILE]``.

    Writes ``RUN_DIR/rescore_<metric>.json`` per metric (and, with ``output``,
    one JSON file holding every metric's results), prints the table, and
    returns 0, or 1 when a dataset could not be re-scored. User mistakes raise
    UserError (the CLI prints them, exit 2).
    """
    from rich.console import Console
    from rich.table import Table

    from evalkit.report.tables import headers, table_rows

    if not metrics:
        raise UserError("rescore: name at least one metric (--metric NAME)")
    path = Path(run_dir)
    outcomes = []
    for metric in dict.fromkeys(METRICS.canonical(m) if m in METRICS else m for m in metrics):
        outcomes.append(_run(arescore(path, metric)))
    console = Console(width=max(120, Console().width))
    table = Table(title=f"evalkit rescore — {path}")
    for header in headers(r for outcome in outcomes for r in outcome.rows + outcome.aggregate):
        table.add_column(header, justify="right" if header in ("score", "n", "failed") else "left")
    for outcome in outcomes:
        for cells in table_rows(outcome.rows + outcome.aggregate):
            table.add_row(*cells)
    console.print(table)
    failed = False
    for outcome in outcomes:
        for dataset, reason in outcome.skipped.items():
            console.print(f"[yellow]{outcome.metric}: skipped {dataset}:[/yellow] {reason}")
        for what, note in outcome.notes.items():
            console.print(f"{outcome.metric}: {what}: {note}")
        failed = failed or not outcome.rows or any(r.error for r in outcome.rows)
        judge = outcome.judge
        asked = (
            f"; judge {judge['model']}: {judge['sent']} requests, {judge['store_hits']} from the store" if judge else ""
        )
        console.print(
            f"{outcome.metric}: written to {safe_path(path, f'rescore_{outcome.metric}', suffix='.json')} (0 model "
            f"requests{asked})"
        )
    if output is not None:
        combined = {"run_dir": str(path), "rescores": [o.payload(path) for o in outcomes]}
        Path(output).write_text(
            json.dumps(combined, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
        )
    return 1 if failed else 0


__all__ = ["REFERENCE_ONLY", "RescoreOutcome", "arescore", "rescore", "rescore_command", "sample_groups"]

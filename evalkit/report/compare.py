"""`evalkit report A B`: two runs (or two models) tested on the samples they share, written to a folder.

For each dataset-metric pair present in both sides the paired samples are
tested (:mod:`evalkit.report.paired`: the paired bootstrap of the metric's own
corpus statistic, and McNemar's exact test for 0/1 scores), and the samples
whose score changed are named. A side is a run folder, optionally narrowed to
one model (``RUN:MODEL``); without models every model present in both runs is
compared with itself. The result goes to the console and, as HTML, JSON and
Markdown, into a new folder, so a regression can be read and shared later.

:class:`Comparison` and :func:`compare_rows` match results.json rows (the
runs' own headline scores and CIs), which the files show beside the test.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from evalkit.errors import UserError
from evalkit.report.files import load_results
from evalkit.report.paired import ALPHA, PairedComparison, compare_sides, split_by_model
from evalkit.report.records import RecordReader, pair_files
from evalkit.report.results import ResultRow
from evalkit.report.samples import VIEWER, sample_url
from evalkit.report.tables import EVALKIT_COLUMN, fmt, safe_csv_row
from evalkit.util.atomic import write_text_atomic
from evalkit.util.safe_names import safe_name

#: changed or failed samples listed per comparison in the Markdown and HTML (the JSON has them all)
LISTED = 200
#: ... and on the console
PRINTED = 10


# ---------------------------------------------------------------- results.json rows (headline scores)


@dataclass
class Comparison:
    """One (dataset, metric, model) row of each run's results.json, side by side."""

    dataset: str
    metric: str
    model: str
    a: ResultRow | None
    b: ResultRow | None

    @property
    def diff(self) -> float | None:
        if self.a is None or self.b is None or self.a.score is None or self.b.score is None:
            return None
        return self.b.score - self.a.score

    @property
    def overlap(self) -> bool | None:
        """True when the CIs overlap, False when they are disjoint, None when either is missing."""
        if self.a is None or self.b is None:
            return None
        a_low, a_high, b_low, b_high = self.a.ci_low, self.a.ci_high, self.b.ci_low, self.b.ci_high
        if a_low is None or a_high is None or b_low is None or b_high is None:
            return None
        if not all(math.isfinite(v) for v in (a_low, a_high, b_low, b_high)):
            return None
        return not (a_high < b_low or b_high < a_low)

    def verdict(self, higher_is_better: bool | None) -> str:
        """'better' / 'worse' (B against A) when the CIs are disjoint, 'within CI' when they overlap."""
        if self.a is None:
            return "only in B"
        if self.b is None:
            return "only in A"
        diff, overlap = self.diff, self.overlap
        if diff is None or overlap is None:
            return "-"
        if overlap:
            return "within CI"
        if higher_is_better is None:
            return "differs"
        return "better" if (diff > 0) == higher_is_better else "worse"


def compare_rows(rows_a: list[ResultRow], rows_b: list[ResultRow]) -> list[Comparison]:
    """Rows matched on (dataset, metric, model); rows present in one run only are kept, marked as such."""
    index_a = {(r.dataset, r.metric, r.model): r for r in rows_a}
    index_b = {(r.dataset, r.metric, r.model): r for r in rows_b}
    keys = list(dict.fromkeys([*index_a, *index_b]))
    return [Comparison(d, m, model, index_a.get((d, m, model)), index_b.get((d, m, model))) for d, m, model in keys]


#: what of a row's ``reported_as`` says how it is reported (results.json adds the scaled numbers, which differ)
_REPORTING = ("tool", "dataset", "metric", "scale")


def agreed_reporting(a: ResultRow | None, b: ResultRow | None) -> tuple[dict[str, Any] | None, str | None]:
    """How both sides report a pair: a peer's names and scale where they agree (or one side has no row), else None.

    Two runs of an AU-Harness config compare on AU-Harness's scale; a run that reports a pair in evalkit's terms
    against one that reports it in AU-Harness's compares in evalkit's, and the second item says why.
    """
    mine = [None if r.reported_as is None else {k: r.reported_as.get(k) for k in _REPORTING} for r in (a, b) if r]
    if not mine:
        return None, None
    if any(m != mine[0] for m in mine):
        described = [
            "evalkit's terms" if m is None else f"{m['tool']}'s ({m['dataset']} / {m['metric']})" for m in mine
        ]
        return None, (
            f"A reports this pair in {described[0]}, B in {described[1]}: the comparison is shown in evalkit's terms"
        )
    return mine[0], None


def render_comparison(comparisons: list[Comparison], fmt_name: str, label_a: str, label_b: str) -> str:
    """The headline rows of two results.json side by side, as CSV (no records needed; no test of the difference).

    Kept for callers of the pre-paired comparison; ``evalkit report A B`` writes :func:`render_csv`.
    """
    if fmt_name != "csv":
        raise ValueError(f"{fmt_name}: the headline comparison is rendered as csv only")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["dataset", "metric", "model", "A", "B", "B − A"])
    for c in comparisons:
        diff = c.diff
        reported, _ = agreed_reporting(c.a, c.b)
        factor = float((reported or {}).get("scale") or 1)
        change = "-" if diff is None else f"{diff:+.4f}" if reported is None else f"{diff * factor:+.2f}"
        names = [c.dataset, c.metric] if reported is None else [str(reported["dataset"]), str(reported["metric"])]
        cells = [_headline(c.a, reported, factor), _headline(c.b, reported, factor)]
        writer.writerow(safe_csv_row([*names, c.model, *cells, change]))
    return buffer.getvalue()


def _headline(row: ResultRow | None, reported: dict[str, Any] | None, factor: float) -> str:
    if row is None:
        return "-"
    return fmt(row.score) if reported is None or row.score is None else f"{row.score * factor:.2f}"


# ---------------------------------------------------------------- sides


@dataclass(frozen=True)
class RunSide:
    """One side of a comparison: a run folder, and the model to take from it (None: every model)."""

    run_dir: Path
    model: str | None = None

    @property
    def run_id(self) -> str:
        """The run's id as `evalkit view` names it: its folder's name."""
        return self.run_dir.resolve().name

    @property
    def label(self) -> str:
        return self.run_id + (f":{self.model}" if self.model is not None else "")


def parse_side(text: str) -> RunSide:
    """``RUN_DIR`` or ``RUN_DIR:MODEL`` (a folder whose own name holds ``:`` is taken whole when it exists)."""
    path = Path(text)
    if path.is_dir():
        return RunSide(path)
    folder, colon, model = text.rpartition(":")
    if colon and folder and model and Path(folder).is_dir():
        return RunSide(Path(folder), model)
    raise UserError(f"{text}: not a run directory (give RUN_DIR or RUN_DIR:MODEL)")


@dataclass
class RunComparison:
    """Every paired comparison between two sides, with what could not be paired."""

    a: RunSide
    b: RunSide
    seed: int
    n_resamples: int
    rows: list[PairedComparison] = field(default_factory=list)
    #: (dataset, metric, model, where): a pair or model found on one side only
    unmatched: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: results.json headline of each (dataset, metric, model of A, model of B)
    headlines: dict[tuple[str, str, str, str], tuple[ResultRow | None, ResultRow | None]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def metric_options(meta: dict[str, Any], dataset: str, metric: str) -> dict[str, Any] | None:
    """The metric options the run's config gave the pair (None when its entries disagree or there is no config).

    A config entry names a dataset, a task or a category, so the dataset's own entry wins; otherwise
    the options every entry of that metric agrees on.
    """
    from evalkit.metrics import METRICS

    entries = (meta.get("config") or {}).get("dataset_metric") or []
    found: list[tuple[str, dict[str, Any]]] = []
    for entry in entries:
        if not isinstance(entry, (list, tuple)) or len(entry) < 2:
            continue
        try:
            canonical = METRICS.canonical(str(entry[1]))
        except Exception:
            canonical = str(entry[1])
        if canonical == metric or str(entry[1]) == metric:
            options = entry[2] if len(entry) > 2 and isinstance(entry[2], dict) else {}
            found.append((str(entry[0]), options))
    own = [options for name, options in found if name == dataset]
    if own:
        return own[0]
    distinct = {json.dumps(options, sort_keys=True) for _, options in found}
    return found[0][1] if len(distinct) == 1 else None


def pair_single_models(
    a: RunSide, b: RunSide, rows_a: list[ResultRow], rows_b: list[ResultRow]
) -> tuple[RunSide, RunSide, str | None]:
    """Two runs of differently named models: each run's only model is paired with the other's.

    Models are otherwise paired by name, and two runs of two models (the common case) share none,
    which would compare nothing. With several models on a side the pairing is the user's to name.
    """
    if a.model is not None or b.model is not None or a.run_dir.resolve() == b.run_dir.resolve():
        return a, b, None
    models_a = sorted({r.model for r in rows_a if r.kind == "dataset"})
    models_b = sorted({r.model for r in rows_b if r.kind == "dataset"})
    if not models_a or not models_b or set(models_a) & set(models_b):
        return a, b, None
    if len(models_a) == 1 and len(models_b) == 1:
        note = (
            f"the runs share no model name: A's only model {models_a[0]!r} is compared with B's only model "
            f"{models_b[0]!r}"
        )
        return RunSide(a.run_dir, models_a[0]), RunSide(b.run_dir, models_b[0]), note
    raise UserError(
        f"report: the runs share no model name (A: {', '.join(models_a)}; B: {', '.join(models_b)}), so nothing "
        f"pairs by name; name the two to compare: evalkit report {a.run_dir}:{models_a[0]} {b.run_dir}:{models_b[0]} "
        f"(or --models {models_a[0]} {models_b[0]})"
    )


def compare_runs(
    a: RunSide,
    b: RunSide,
    *,
    pairs: list[tuple[str, str]] | None = None,
    seed: int = 0,
    n_resamples: int = 1000,
) -> RunComparison:
    """Test every dataset-metric pair present on both sides (only ``pairs`` when given)."""
    rows_a, meta_a = load_results(a.run_dir)
    rows_b, meta_b = load_results(b.run_dir)
    a, b, paired = pair_single_models(a, b, rows_a, rows_b)
    result = RunComparison(a, b, seed, n_resamples)
    if paired:
        result.notes.append(paired)
    reader_a, reader_b = RecordReader(a.run_dir / "records"), RecordReader(b.run_dir / "records")
    files_a, files_b = pair_files(reader_a.records_dir), pair_files(reader_b.records_dir)
    if not files_a:
        raise UserError(f"{a.run_dir}: no records (records/*.jsonl); a paired comparison needs the per-sample records")
    if not files_b:
        raise UserError(f"{b.run_dir}: no records (records/*.jsonl); a paired comparison needs the per-sample records")
    keys = list(dict.fromkeys([*files_a, *files_b]))
    if pairs is not None:  # a pair may be named as the tables show it (an AU-Harness config's names)
        shown = {(r.shown_dataset, r.shown_metric): (r.dataset, r.metric) for r in [*rows_a, *rows_b]}
        pairs = [p if p in files_a or p in files_b else shown.get(p, p) for p in pairs]
        unknown = [f"{d}/{m}" for d, m in pairs if (d, m) not in files_a and (d, m) not in files_b]
        if unknown:
            known = ", ".join(f"{d}/{m}" for d, m in keys)
            raise UserError(f"--pair {unknown[0]}: not a dataset/metric pair of either run (found: {known})")
        keys = [k for k in keys if k in pairs]
    headline_a = {(r.dataset, r.metric, r.model): r for r in rows_a if r.kind == "dataset"}
    headline_b = {(r.dataset, r.metric, r.model): r for r in rows_b if r.kind == "dataset"}
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    for dataset, metric in keys:
        if (dataset, metric) not in files_b:
            result.unmatched.append((dataset, metric, a.model or "*", "only in A"))
            continue
        if (dataset, metric) not in files_a:
            result.unmatched.append((dataset, metric, b.model or "*", "only in B"))
            continue
        same_run = a.run_dir.resolve() == b.run_dir.resolve()
        # only the named models are kept (a pair can hold millions of records); every model name is noted
        wanted = None if a.model is None and b.model is None else {m for m in (a.model, b.model) if m is not None}
        sides_a = split_by_model(reader_a.read(files_a[(dataset, metric)]), wanted, seen_a)
        if same_run:
            sides_b = sides_a
            seen_b.update(seen_a)
        else:
            sides_b = split_by_model(reader_b.read(files_b[(dataset, metric)]), wanted, seen_b)
        if a.model is None and b.model is None:
            matches = [(m, m) for m in sides_a if m in sides_b]
            result.unmatched += [(dataset, metric, m, "only in A") for m in sides_a if m not in sides_b]
            result.unmatched += [(dataset, metric, m, "only in B") for m in sides_b if m not in sides_a]
        else:
            model_a = a.model if a.model is not None else b.model
            model_b = b.model if b.model is not None else a.model
            assert model_a is not None and model_b is not None
            if model_a not in sides_a:
                result.unmatched.append((dataset, metric, model_a, "not in A"))
            if model_b not in sides_b:
                result.unmatched.append((dataset, metric, model_b, "not in B"))
            matches = [(model_a, model_b)] if model_a in sides_a and model_b in sides_b else []
        options = metric_options(meta_a, dataset, metric)
        other = metric_options(meta_b, dataset, metric)
        for model_a, model_b in matches:
            row = compare_sides(
                sides_a[model_a], sides_b[model_b], metric, options=options, seed=seed, n_resamples=n_resamples
            )
            if options is None:
                row.notes.append(
                    f"A's config gives {metric} no single set of options here (none, or entries that disagree): "
                    "the metric's defaults are used"
                )
            elif options != other:
                row.notes.append(f"the runs give {metric} different options (A: {options}, B: {other}); A's are used")
            heads = headline_a.get((dataset, metric, model_a)), headline_b.get((dataset, metric, model_b))
            row.reported_as, differ = agreed_reporting(*heads)
            if differ:
                row.notes.append(differ)
            result.rows.append(row)
            result.headlines[(dataset, metric, model_a, model_b)] = heads
    for side, found in ((a, seen_a), (b, seen_b)):
        if side.model is not None and side.model not in found:
            known = ", ".join(sorted(found)) or "none"
            raise UserError(f"{side.run_dir}: no records of model {side.model!r} (models found: {known})")
    for label, reader in (("A", reader_a), ("B", reader_b)):
        result.notes += [f"{label}: {note}" for note in reader.notes()]
    return result


# ---------------------------------------------------------------- where the files go


def default_folder(a: RunSide, b: RunSide) -> Path:
    """``<A's parent>/compare-<A>-vs-<B>``, with ``-2``, ``-3``, ... when that folder exists (never overwritten)."""
    base = safe_name(f"compare-{a.label}-vs-{b.label}", max_bytes=180)
    parent = a.run_dir.resolve().parent
    candidate = parent / base
    number = 2
    while candidate.exists():
        candidate = parent / f"{base}-{number}"
        number += 1
    return candidate


def write_comparison(comparison: RunComparison, folder: Path | None = None) -> Path:
    """comparison.json, comparison.md and comparison.html in a new folder (or an empty ``folder``); its path."""
    if folder is None:
        folder = default_folder(comparison.a, comparison.b)
    elif folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"--output {folder}: exists and is not an empty folder; a comparison never overwrites files")
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / "comparison.json", render_json(comparison))
    write_text_atomic(folder / "comparison.md", render_markdown(comparison))
    write_text_atomic(folder / "comparison.html", render_html(comparison))
    return folder


# ---------------------------------------------------------------- text views


HEADERS = [
    "dataset",
    "metric",
    "model",
    "n",
    "A",
    "B",
    "B − A",
    "95% CI (B − A)",
    "p",
    "changed",
    "failed A / B",
    "verdict",
]


def headers(comparison: RunComparison) -> list[str]:
    """The summary's columns; evalkit's names and the factor beside a peer's, as the runs' own tables have them."""
    return [*HEADERS, EVALKIT_COLUMN] if any(r.reported_as for r in comparison.rows) else list(HEADERS)


def _evalkit_name(row: PairedComparison) -> str:
    if row.reported_as is None:
        return ""
    same = (row.shown_dataset, row.shown_metric) == (row.dataset, row.metric)
    return ("" if same else f"{row.dataset} / {row.metric}") + (f" x{row.scale:g}" if row.scale != 1 else "")


def _models(row: PairedComparison) -> str:
    return row.model_a if row.model_a == row.model_b else f"{row.model_a} → {row.model_b}"


def _number(value: float, row: PairedComparison | None = None) -> str:
    """A score as the row shows it: on a peer's scale with its two decimals, else evalkit's."""
    if not math.isfinite(value):
        return "-"
    return fmt(value) if row is None or row.reported_as is None else f"{value * row.scale:.2f}"


def _signed(value: float, row: PairedComparison | None = None) -> str:
    """A difference with its sign; a tiny one in exponent form rather than as +0.0000 (a peer's: two decimals)."""
    if not math.isfinite(value):
        return "-"
    if row is not None and row.reported_as is not None:
        return f"{value * row.scale:+.2f}"
    return f"{value:+.4f}" if value == 0 or abs(value) >= 0.001 else f"{value:+.2e}"


def _p(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def _p_cell(row: PairedComparison) -> str:
    """The verdict's p-value and its test; "≤" where the bootstrap's p is at its floor of 2/(resamples + 1)."""
    if row.binary:
        return ("<1e-300" if row.p_value == 0 else _p(row.p_value)) + " (McNemar)"
    floor = 2.0 / (row.n_resamples + 1)
    at_floor = math.isfinite(row.p_value) and row.p_value <= floor * (1 + 1e-9)
    return ("≤" if at_floor else "") + _p(row.p_value) + " (bootstrap)"


def _changed_cell(row: PairedComparison) -> str:
    """How many samples changed score: "2 up, 4 down" when the direction is known (up = better)."""
    if not row.changed or row.higher_is_better is None:
        return str(len(row.changed))
    return f"{row.improved} better, {row.worsened} worse"


def summary_cells(row: PairedComparison, peer: bool = False) -> list[str]:
    """One comparison as the summary table's cells (plain text; callers escape for their format).

    A pair a peer reports shows its names, and its scores, difference and CI on its scale; with ``peer`` (some
    row of the table is so reported) the last cell names evalkit's pair and the factor.
    """
    ci = "-" if not math.isfinite(row.ci_low) else f"[{_signed(row.ci_low, row)}, {_signed(row.ci_high, row)}]"
    cells = [
        row.shown_dataset,
        row.shown_metric,
        _models(row),
        str(row.n_paired),
        _number(row.score_a, row),
        _number(row.score_b, row),
        _signed(row.diff, row),
        ci,
        _p_cell(row),
        _changed_cell(row),
        f"{len(row.failed_only_a)} / {len(row.failed_only_b)}",
        row.verdict,
    ]
    return [*cells, _evalkit_name(row)] if peer else cells


def _peer(comparison: RunComparison) -> bool:
    return any(r.reported_as for r in comparison.rows)


def _head(row: PairedComparison) -> tuple[str, str]:
    """The pair as a section heading names it: the names the summary shows."""
    return row.shown_dataset, row.shown_metric


def _explanation(comparison: RunComparison) -> list[str]:
    return [
        f"A = {comparison.a.label} ({comparison.a.run_dir}), B = {comparison.b.label} ({comparison.b.run_dir}).",
        "Only samples scored in both are paired; A and B are the metric's corpus value over those samples, so they "
        "may differ from each run's headline. B − A with the 95% CI of a paired bootstrap "
        f"({comparison.n_resamples} resamples, seed {comparison.seed}); p is McNemar's exact test for 0/1 scores, "
        f"else the paired bootstrap's; the verdict calls p < {ALPHA} a difference. 'failed A / B' counts samples "
        "that failed in A / in B and were scored in the other: listed, never scored as 0.",
    ]


def _flip_label(row: PairedComparison, score_a: float, score_b: float) -> str:
    if row.binary:
        return "right → wrong" if score_a > score_b else "wrong → right"
    return f"{_number(score_a, row)} → {_number(score_b, row)}"


def render_json(comparison: RunComparison) -> str:
    rows = []
    for row in comparison.rows:
        entry = row.as_dict()
        entry["model"] = _models(row)
        head_a, head_b = comparison.headlines.get((row.dataset, row.metric, row.model_a, row.model_b), (None, None))
        entry["ci_overlap"] = Comparison(row.dataset, row.metric, entry["model"], head_a, head_b).overlap
        entry["run_a"] = (
            None if head_a is None else {"score": head_a.score, "ci": [head_a.ci_low, head_a.ci_high], "n": head_a.n}
        )
        entry["run_b"] = (
            None if head_b is None else {"score": head_b.score, "ci": [head_b.ci_low, head_b.ci_high], "n": head_b.n}
        )
        rows.append(entry)
    payload = {
        "a": comparison.a.label,
        "b": comparison.b.label,
        "run_a": str(comparison.a.run_dir),
        "run_b": str(comparison.b.run_dir),
        "seed": comparison.seed,
        "n_resamples": comparison.n_resamples,
        "alpha": ALPHA,
        "difference": "B - A",
        "rows": rows,
        "unmatched": [
            {"dataset": d, "metric": m, "model": model, "where": w} for d, m, model, w in comparison.unmatched
        ],
        "notes": comparison.notes,
    }
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


def render_csv(comparison: RunComparison) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headers(comparison))
    peer = _peer(comparison)
    writer.writerows(
        safe_csv_row(summary_cells(r, peer)) for r in comparison.rows
    )  # "=cmd" stays text in a spreadsheet
    return buffer.getvalue()


def _md(text: str) -> str:
    """A Markdown table cell: pipes escaped, line breaks flattened, HTML tags shown as text."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def render_markdown(comparison: RunComparison) -> str:
    lines = ["# evalkit comparison", "", *_explanation(comparison), ""]
    columns, peer = headers(comparison), _peer(comparison)
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_md(c) for c in summary_cells(r, peer)) + " |" for r in comparison.rows]
    for dataset, metric, model, where in comparison.unmatched:
        lines.append(f"\n- {_md(dataset)} / {_md(metric)} / {_md(model)}: {where}")
    for row in comparison.rows:
        dataset, metric = _head(row)
        lines += ["", f"## {_md(dataset)} · {_md(metric)} · {_md(_models(row))}", ""]
        lines += [f"- {_md(note)}" for note in row.notes]
        if row.changed:
            lines += ["", f"Samples whose score changed ({len(row.changed)}):", ""]
            lines += ["| sample | A → B | answer A | answer B |", "|---|---|---|---|"]
            for c in row.changed[:LISTED]:
                lines.append(
                    f"| {_md(c.sample_id)} | {_flip_label(row, c.score_a, c.score_b)} | {_md(c.answer_a or '')} | "
                    f"{_md(c.answer_b or '')} |"
                )
            if len(row.changed) > LISTED:
                lines.append(f"\n… and {len(row.changed) - LISTED} more (all in comparison.json)")
        for label, failed in (("A", row.failed_only_a), ("B", row.failed_only_b)):
            if failed:
                lines += ["", f"Failed in {label} only ({len(failed)}), scored in the other:", ""]
                lines += ["| sample | reason | error | other score |", "|---|---|---|---|"]
                for f in failed[:LISTED]:
                    other = _number(f.score if f.score is not None else math.nan, row)
                    lines.append(f"| {_md(f.sample_id)} | {_md(f.reason)} | {_md(f.error or '')} | {other} |")
    if comparison.notes:
        lines += ["", "Notes:", *(f"- {_md(n)}" for n in comparison.notes)]
    return "\n".join(lines) + "\n"


def compare_url(comparison: RunComparison, row: PairedComparison) -> str:
    a = comparison.a.run_id + f":{row.model_a}"
    b = comparison.b.run_id + f":{row.model_b}"
    pair = f"{row.dataset}/{row.metric}"
    return f"{VIEWER}/compare/?a={quote(a, safe=':')}&b={quote(b, safe=':')}&pair={quote(pair, safe='/')}"


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1100px;
       color: #1d1d1f; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 12px; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f7; } td.answer { max-width: 360px; white-space: pre-wrap; word-break: break-word; }
.better { color: #15803d; font-weight: 600; } .worse { color: #b91c1c; font-weight: 600; }
.note { color: #555; font-size: 12px; }
"""


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>" for cells in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CHANGE_CLASS = {"improved": "better", "worsened": "worse"}


def _sample_link(run_id: str, row: PairedComparison, sample_id: str) -> str:
    return f'<a href="{escape(sample_url(run_id, row.dataset, row.metric, sample_id))}">{escape(sample_id)}</a>'


def render_html(comparison: RunComparison) -> str:
    """A self-contained page (no scripts); every text from a record is escaped; samples link into the viewer."""
    summary = []
    peer = _peer(comparison)
    verdict_at = len(HEADERS) - 1
    for row in comparison.rows:
        cells = [escape(c) for c in summary_cells(row, peer)]
        verdict = row.verdict
        if verdict in ("better", "worse"):
            cells[verdict_at] = f'<span class="{verdict}">{cells[verdict_at]}</span>'
        summary.append(cells)
    body = "<h1>evalkit comparison</h1>" + "".join(f'<p class="note">{escape(t)}</p>' for t in _explanation(comparison))
    body += (
        f'<p class="note">Sample links open in <code>evalkit view</code>: start <code>evalkit view '
        f"{escape(str(comparison.a.run_dir.resolve().parent))}</code> to follow them.</p>"
    )
    body += _html_table(headers(comparison), summary)
    if comparison.unmatched:
        body += (
            "<ul>"
            + "".join(
                f"<li>{escape(d)} / {escape(m)} / {escape(model)}: {escape(w)}</li>"
                for d, m, model, w in comparison.unmatched
            )
            + "</ul>"
        )
    run_id = comparison.a.run_id
    for row in comparison.rows:
        dataset, metric = _head(row)
        body += f"<h2>{escape(dataset)} · {escape(metric)} · {escape(_models(row))}</h2>"
        body += f'<p><a href="{escape(compare_url(comparison, row))}">open in the viewer</a></p>'
        body += "".join(f'<p class="note">{escape(n)}</p>' for n in row.notes)
        if row.changed:
            rows = [
                [
                    _sample_link(run_id, row, c.sample_id),
                    escape(_flip_label(row, c.score_a, c.score_b)),
                    f'<span class="{_CHANGE_CLASS.get(c.change, "")}">{escape(c.change)}</span>',
                    f'<div class="answer">{escape(c.answer_a or "")}</div>',
                    f'<div class="answer">{escape(c.answer_b or "")}</div>',
                ]
                for c in row.changed[:LISTED]
            ]
            body += f"<h3>Samples whose score changed ({len(row.changed)})</h3>"
            body += _html_table(["sample", "A → B", "change", "answer A", "answer B"], rows)
            if len(row.changed) > LISTED:
                body += f'<p class="note">… and {len(row.changed) - LISTED} more (all in comparison.json).</p>'
        for label, failed in (("A", row.failed_only_a), ("B", row.failed_only_b)):
            if failed:
                rows = [
                    [
                        _sample_link(run_id, row, f.sample_id),
                        escape(f.reason),
                        f'<div class="answer">{escape(f.error or "")}</div>',
                        escape(_number(f.score if f.score is not None else math.nan, row)),
                    ]
                    for f in failed[:LISTED]
                ]
                body += f"<h3>Failed in {label} only ({len(failed)}), scored in the other</h3>"
                body += _html_table(["sample", "reason", "error", "other score"], rows)
    if comparison.notes:
        body += "<h2>Notes</h2>" + "".join(f'<p class="note">{escape(n)}</p>' for n in comparison.notes)
    title = escape(f"{comparison.a.label} vs {comparison.b.label}")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>evalkit comparison {title}</title><style>{_CSS}</style></head><body>{body}</body></html>\n"
    )


def print_comparison(comparison: RunComparison, console: Any = None) -> None:
    """The summary table, then per pair the first changed and failed samples, on the console."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console(width=max(200, Console().width), highlight=False)
    table = Table(title=f"A = {comparison.a.label}\nB = {comparison.b.label}", title_justify="left")
    for header in headers(comparison):
        table.add_column(header, justify="right" if header in ("n", "A", "B", "B − A") else "left", no_wrap=True)
    styles = {"better": "green", "worse": "red"}
    peer = _peer(comparison)
    for row in comparison.rows:
        cells = summary_cells(row, peer)
        texts = [Text(c) for c in cells]
        texts[len(HEADERS) - 1].stylize(styles.get(row.verdict, ""))
        table.add_row(*texts)
    console.print(table)
    for dataset, metric, model, where in comparison.unmatched:
        console.print(Text(f"{dataset} / {metric} / {model}: {where}"))
    for row in comparison.rows:
        head = " · ".join([*_head(row), _models(row)])
        if row.changed:
            console.print(Text(f"{head}: {len(row.changed)} sample(s) changed score"))
            for c in row.changed[:PRINTED]:
                console.print(Text(f"  {c.sample_id}: {_flip_label(row, c.score_a, c.score_b)} ({c.change})"))
            if len(row.changed) > PRINTED:
                console.print(Text(f"  … and {len(row.changed) - PRINTED} more"))
        for label, failed in (("A", row.failed_only_a), ("B", row.failed_only_b)):
            if failed:
                console.print(Text(f"{head}: {len(failed)} sample(s) failed in {label} only (not scored as 0)"))
                for f in failed[:PRINTED]:
                    console.print(Text(f"  {f.sample_id}: {f.reason}: {' '.join((f.error or '').split())[:200]}"))
        for note in row.notes:
            console.print(Text(f"{head}: note: {note}"))
    for note in comparison.notes:
        console.print(Text(f"note: {note}"))
    significant = sum(1 for r in comparison.rows if r.verdict in ("better", "worse", "differs"))
    console.print(f"{len(comparison.rows)} comparisons; {significant} with p < {ALPHA}.")

"""The samples behind report.html's totals: the failed ones with their messages, and the worst-scoring ones.

A total such as ``endpoint_unavailable: 20`` does not say what went wrong; the
record's ``error`` does ("Connection refused"). A low score is read by looking
at the samples that pulled it down. Both lists come from one streamed pass over
the records with bounded memory whatever the run's size: counters per failure
reason, the first :data:`FAILED_SHOWN` failed records, and per (pair, model) a
heap of the :data:`WORST_SHOWN` worst scores in the metric's own direction.
Each sample links to its page in `evalkit view`, which shows what was sent.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

#: failed samples listed (the first ones met, in record-file order); every one is counted
FAILED_SHOWN = 50
#: worst-scoring samples listed per dataset-metric pair and model
WORST_SHOWN = 10
#: characters of an answer or reference shown in the worst-samples table (the viewer shows all)
TEXT_CHARS = 160
#: where `evalkit view` listens by default
VIEWER = "http://127.0.0.1:8765"


def sample_url(run_id: str, dataset: str, metric: str, sample_id: str) -> str:
    """The viewer's page of one sample; every part is one percent-encoded path segment (``/`` too).

    A sample id of ``.``, ``..`` or nothing goes in the query (``.../<metric>/?id=..``), as the viewer's own
    links put it: a browser drops or climbs such a segment even written ``%2E%2E``.
    """
    run, data, met = (quote(str(part), safe="") for part in (run_id, dataset, metric))
    base = f"{VIEWER}/run/{run}/sample/{data}/{met}/"
    if str(sample_id) in ("", ".", ".."):
        return base + "?" + urlencode({"id": str(sample_id)})
    return base + quote(str(sample_id), safe="")


@dataclass(frozen=True, slots=True)
class FailedRecord:
    sample_id: str
    model: str
    dataset: str
    metric: str
    reason: str
    error: str


@dataclass(frozen=True, slots=True)
class LowScore:
    sample_id: str
    score: float
    row: int | None
    answer: str
    reference: str


def _short(value: Any) -> str:
    text = "" if value is None else value if isinstance(value, str) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


@dataclass
class SampleLists:
    """Fed one record at a time (:meth:`add`); holds only the counters, the first failures and the heaps."""

    #: metric -> True when higher is better, False when lower is; None (unknown) lists no worst samples
    directions: dict[str, bool | None] = field(default_factory=dict)
    failed_shown: int = FAILED_SHOWN
    worst_shown: int = WORST_SHOWN
    failures: Counter[str] = field(default_factory=Counter)
    first_failures: list[FailedRecord] = field(default_factory=list)
    #: (dataset, metric, model) -> min-heap of (badness, -order, seq, LowScore): the top holds the mildest kept
    _heaps: dict[tuple[str, str, str], list[tuple[float, float, int, LowScore]]] = field(default_factory=dict)
    _seq: int = 0

    def add(self, record: dict[str, Any]) -> None:
        dataset, metric = str(record.get("dataset", "")), str(record.get("metric", ""))
        model, sample_id = str(record.get("model", "")), str(record.get("sample_id", ""))
        failure = record.get("failure")
        if failure is not None:
            reason = str(failure)
            self.failures[reason] += 1
            if len(self.first_failures) < self.failed_shown:
                error = record.get("error")
                self.first_failures.append(
                    FailedRecord(sample_id, model, dataset, metric, reason, "" if error is None else str(error))
                )
            return
        score = record.get("score")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
            return
        direction = self.directions.get(metric)
        if direction is None or self.worst_shown <= 0:
            return
        badness = -float(score) if direction else float(score)
        row = record.get("row")
        row = row if isinstance(row, int) and not isinstance(row, bool) else None
        order = -float(row) if row is not None else -math.inf  # ties: the earlier row is kept
        heap = self._heaps.setdefault((dataset, metric, model), [])
        key = (badness, order)
        if len(heap) >= self.worst_shown and key <= heap[0][:2]:
            return  # not worse than the mildest kept: nothing built, nothing stored
        answer = record.get("prediction")
        if answer is None:
            answer = record.get("response")
        low = LowScore(sample_id, float(score), row, _short(answer), _short(record.get("reference")))
        self._seq += 1
        item = (badness, order, self._seq, low)
        if len(heap) < self.worst_shown:
            heapq.heappush(heap, item)
        else:
            heapq.heapreplace(heap, item)

    def worst(self) -> dict[tuple[str, str, str], list[LowScore]]:
        """(dataset, metric, model) -> its worst samples, worst first (ties in file order)."""
        return {
            key: [item[3] for item in sorted(heap, key=lambda item: (-item[0], -item[1], item[2]))]
            for key, heap in self._heaps.items()
        }


def _link(run_id: str | None, dataset: str, metric: str, sample_id: str) -> str:
    if not run_id:
        return f"<code>{escape(sample_id)}</code>"
    return f'<a href="{escape(sample_url(run_id, dataset, metric, sample_id))}"><code>{escape(sample_id)}</code></a>'


def failed_samples_section(lists: SampleLists, run_id: str | None, note: str = "") -> str:
    """Failed samples grouped by reason: the count, then each listed sample with its model, pair and full error.

    ``note`` (HTML) follows the heading: the line that says how to follow the sample links.
    """
    html = "<h2>Failed samples</h2>" + note
    total = sum(lists.failures.values())
    if not total:
        return html + "<p class='note'>No sample failed.</p>"
    shown = len(lists.first_failures)
    html += (
        f"<p class='note'>{total} failed sample record{'s' if total != 1 else ''} "
        f"(one per sample, model and metric); the first {shown} in record order are listed with the full message, "
        "grouped by reason. A failed sample is counted, never scored as 0.</p>"
    )
    by_reason: dict[str, list[FailedRecord]] = {}
    for failed in lists.first_failures:
        by_reason.setdefault(failed.reason, []).append(failed)
    for reason, count in lists.failures.most_common():
        listed = by_reason.get(reason, [])
        html += f"<h3>{escape(reason)}: {count}</h3>"
        if not listed:
            html += "<p class='note'>None among the first listed.</p>"
            continue
        rows = "".join(
            "<tr>"
            f"<td>{_link(run_id, f.dataset, f.metric, f.sample_id)}</td><td>{escape(f.model)}</td>"
            f"<td>{escape(f.dataset)} · {escape(f.metric)}</td><td><pre class='error'>{escape(f.error)}</pre></td>"
            "</tr>"
            for f in listed
        )
        html += (
            "<table><thead><tr><th>sample</th><th>model</th><th>pair</th><th>error</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
    return html


def worst_samples_section(lists: SampleLists, run_id: str | None) -> str:
    """Per pair and model, the samples that scored worst in the metric's direction, with answer and reference."""
    html = "<h2>Worst-scoring samples</h2>"
    worst = lists.worst()
    if not worst:
        return html + "<p class='note'>No scored sample with a metric of known direction.</p>"
    html += (
        f"<p class='note'>The {lists.worst_shown} lowest-scoring samples per pair and model (highest for "
        "lower-is-better metrics such as WER), ties in file order.</p>"
    )
    for (dataset, metric, model), samples in sorted(worst.items()):
        direction = "lower is better" if lists.directions.get(metric) is False else "higher is better"
        rows = "".join(
            "<tr>"
            f"<td>{_link(run_id, dataset, metric, s.sample_id)}</td><td class='num'>{s.score:.4g}</td>"
            f"<td>{escape(s.answer)}</td><td>{escape(s.reference)}</td>"
            "</tr>"
            for s in samples
        )
        html += (
            f"<h3>{escape(dataset)} · {escape(metric)} · {escape(model)} ({direction})</h3>"
            "<table><thead><tr><th>sample</th><th>score</th><th>answer</th><th>reference</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
    return html


def viewer_note(run_dir: str) -> str:
    """The line that tells a reader how to make the sample links work."""
    return (
        "<p class='note'>Sample ids link into the sample viewer: start <code>evalkit view "
        f"{escape(run_dir)}</code> to follow them (it serves on {escape(VIEWER)}).</p>"
    )

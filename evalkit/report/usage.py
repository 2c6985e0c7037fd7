"""Usage and cost as text: the console's footer, report.html's section and the viewer's lines say the same.

Everything here reads results.json's ``usage``/``budget``/``partial`` (or a row's ``usage``), which a copied or
edited run folder may hold anything in: a number that is not a whole, non-negative count is shown as "not
reported", never trusted, and a count no answer reported is "not reported", never 0.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from evalkit.report.results import ResultRow

NOT_REPORTED = "not reported"


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if value >= 0 else None


def _usd(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def money(value: float) -> str:
    """Dollars with enough digits that a small run's cost is not shown as $0.00."""
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}" if value >= 0.0001 else f"${value:.6f}"


def tokens_text(usage: Any) -> str:
    """``1,234 prompt + 567 completion tokens (38 reasoning, 57 cached) in 19 requests; 21 from the store``."""
    if not isinstance(usage, dict):
        return NOT_REPORTED
    requests = _count(usage.get("requests")) or 0
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if requests and prompt is None and completion is None:
        text = f"tokens {NOT_REPORTED} ({requests:,} request{'s' * (requests != 1)})"
    else:
        text = (
            f"{prompt if prompt is not None else NOT_REPORTED:,} prompt + "
            f"{completion if completion is not None else NOT_REPORTED:,} completion tokens"
            if prompt is not None and completion is not None
            else f"{_or_not(prompt)} prompt + {_or_not(completion)} completion tokens"
        )
        details = [
            f"{value:,} {name}"
            for name, value in (
                ("reasoning", _count(usage.get("reasoning_tokens"))),
                ("cached", _count(usage.get("cached_tokens"))),
            )
            if value is not None
        ]
        if details:
            text += f" ({', '.join(details)})"
        text += f" in {requests:,} request{'s' * (requests != 1)}"
        missing = _count(usage.get("not_reported")) or 0
        if missing:
            text += f" ({missing:,} without usage: {NOT_REPORTED})"
    stored, shared = _count(usage.get("from_store")) or 0, _count(usage.get("shared")) or 0
    if stored:
        text += f"; {stored:,} answer{'s' * (stored != 1)} from the response store (no cost on this run)"
    if shared:
        text += f"; {shared:,} shared with an identical request of this run"
    return text


def _or_not(value: int | None) -> str:
    return f"{value:,}" if value is not None else NOT_REPORTED


def cost_text(usage: Any) -> str:
    """``$0.0123``, or why there is no cost (no price)."""
    cost = _usd(usage.get("cost_usd")) if isinstance(usage, dict) else None
    return money(cost) if cost is not None else "no cost (no price, or tokens not reported)"


def usage_line(usage: Any) -> str:
    return f"{tokens_text(usage)}; {cost_text(usage)}"


def usage_lines(meta: dict[str, Any]) -> list[str]:
    """The run's usage, model by model and judge by judge, its total and its budget, one line each."""
    usage = meta.get("usage")
    lines: list[str] = []
    if isinstance(usage, dict):
        for group, label in (("models", "model"), ("judges", "judge")):
            found = usage.get(group)
            if isinstance(found, dict):
                lines += [f"{label} {name}: {usage_line(value)}" for name, value in found.items()]
        total = usage.get("total")
        if isinstance(total, dict):
            line = f"run total: {usage_line(total)}"
            unpriced = total.get("unpriced")
            if isinstance(unpriced, list) and unpriced:
                line += f" (without {', '.join(str(name) for name in unpriced)}, which have no price)"
            lines.append(line)
    budget = meta.get("budget")
    if isinstance(budget, dict):
        lines.append(budget_line(budget))
    partial = meta.get("partial")
    reason = partial.get("reason") if isinstance(partial, dict) else partial  # a reason alone: the earlier form
    if reason and "budget" in str(reason).split("+"):  # stop_at_ci's rows are described under the table
        lines.append(
            f"PARTIAL RESULTS ({reason}): the run stopped before its plan's end; rows marked (partial) did not "
            "score all their samples"
        )
    return lines


def budget_line(budget: dict[str, Any]) -> str:
    limits = []
    tokens, usd = _count(budget.get("tokens")), _usd(budget.get("usd"))
    spent_tokens, spent_usd = _count(budget.get("spent_tokens")) or 0, _usd(budget.get("spent_usd")) or 0.0
    if tokens is not None:
        limits.append(f"{spent_tokens:,} of {tokens:,} tokens")
    if usd is not None:
        limits.append(f"{money(spent_usd)} of {money(usd)}")
    state = "spent: no new request was sent" if budget.get("exhausted") else "not spent"
    refused = _count(budget.get("refused_requests")) or 0
    more = f", {refused:,} request{'s' * (refused != 1)} not sent" if refused else ""
    return f"budget: {', '.join(limits) or 'none'} ({state}{more}; the run's invocations together)"


def usage_html(rows: list[ResultRow], meta: dict[str, Any]) -> str:
    """report.html's section: each pair and model's usage and cost (the judge's apart), then the run's lines."""
    lines = usage_lines(meta)
    shown = [r for r in rows if r.kind == "dataset" and (r.usage is not None or r.judge_usage is not None)]
    if not lines and not shown:
        return ""
    html = "<h2>Usage and cost</h2>"
    if shown:
        cells = "".join(
            "<tr>"
            + "".join(f"<td>{escape(str(v))}</td>" for v in (r.dataset, r.metric, r.model))
            + f"<td>{escape(tokens_text(r.usage))}</td><td>{escape(cost_text(r.usage))}</td>"
            + f"<td>{escape(usage_line(r.judge_usage)) if r.judge_usage is not None else ''}</td>"
            + f"<td>{escape(str((r.partial or {}).get('reason', ''))) if r.partial else ''}</td></tr>"
            for r in shown
        )
        html += (
            "<table><thead><tr><th>dataset</th><th>metric</th><th>model</th><th>tokens</th><th>cost</th>"
            f"<th>judge</th><th>partial</th></tr></thead><tbody>{cells}</tbody></table>"
        )
    html += "".join(f"<p class='meta'>{escape(line)}</p>" for line in lines)
    return html

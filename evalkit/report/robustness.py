"""How a score falls with a corruption's level: a line per model, level 0 the clean pair, each point's paired test.

A sweep (``corruption_severity: [1, 3, 5]``) runs one variant per corruption and level; each variant's result
row carries ``details["robustness"]`` (:mod:`evalkit.run.robustness`): the level, the clean score and the paired
test against the clean pair. report.html and the viewer's run page both draw them here, one chart per dataset,
metric and corruption, with the table of the paired tests below it, so the numbers are in the page too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from evalkit.report.svg import color, fmt_number, nice_ticks

_FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="12"'
_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 520, 240, 56, 150, 24, 40

#: one model's points: level -> (score, paired test or None); level 0 is the clean pair
Curve = dict[int, tuple[float, dict[str, Any] | None]]


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def sweeps(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], dict[str, Curve]]:
    """(clean dataset, metric, corruption) -> model -> its curve, from rows with ``robustness`` (or ``details``)."""
    out: dict[tuple[str, str, str], dict[str, Curve]] = {}
    for row in rows:
        info = row.get("robustness") or (row.get("details") or {}).get("robustness")
        if not isinstance(info, dict):
            continue
        score, level = _finite(row.get("score")), info.get("severity")
        if score is None or not isinstance(level, int):
            continue
        key = (str(info.get("clean_dataset")), str(row.get("metric")), str(info.get("corruption")))
        curve = out.setdefault(key, {}).setdefault(str(row.get("model")), {})
        curve[level] = (score, info.get("paired") if isinstance(info.get("paired"), dict) else None)
        clean = _finite(info.get("clean_score"))
        if clean is not None:
            curve.setdefault(0, (clean, None))
    return out


def _chart(title: str, curves: dict[str, Curve]) -> str:
    levels = sorted({level for curve in curves.values() for level in curve})
    values = [score for curve in curves.values() for score, _ in curve.values()]
    ticks = nice_ticks(min(values), max(values))
    low, high = ticks[0], ticks[-1] if ticks[-1] > ticks[0] else ticks[0] + 1.0
    span_x = max(1, max(levels) - min(levels))

    def x(level: int) -> float:
        return _LEFT + (level - min(levels)) / span_x * (_W - _LEFT - _RIGHT)

    def y(value: float) -> float:
        return _TOP + (high - value) / (high - low) * (_H - _TOP - _BOTTOM)

    parts = [f'<svg class="chart" role="img" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" {_FONT}>']
    parts.append(f"<title>{escape(title)}</title>")
    for tick in ticks:
        parts.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ddd"/>'
            f'<text x="{_LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{escape(fmt_number(tick))}</text>'
        )
    for level in levels:
        label = "clean" if level == 0 else str(level)
        parts.append(f'<text x="{x(level):.1f}" y="{_H - _BOTTOM + 16}" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{(_LEFT + _W - _RIGHT) / 2:.0f}" y="{_H - 6}" text-anchor="middle">level</text>')
    for index, (model, curve) in enumerate(sorted(curves.items())):
        points = sorted(curve.items())
        line = " ".join(f"{x(level):.1f},{y(score):.1f}" for level, (score, _) in points)
        parts.append(f'<polyline fill="none" stroke="{color(index)}" stroke-width="2" points="{line}"/>')
        for level, (score, paired) in points:
            note = f"{model}, level {level}: {fmt_number(score)}" if level else f"{model}, clean: {fmt_number(score)}"
            if paired:
                note += f"; paired test p = {fmt_number(float(paired.get('p_value') or 0))} ({paired.get('verdict')})"
            parts.append(
                f'<circle class="point" cx="{x(level):.1f}" cy="{y(score):.1f}" r="4" fill="{color(index)}">'
                f"<title>{escape(note)}</title></circle>"
            )
        legend_y = _TOP + 16 * index
        parts.append(
            f'<rect x="{_W - _RIGHT + 12}" y="{legend_y}" width="10" height="10" fill="{color(index)}"/>'
            f'<text x="{_W - _RIGHT + 28}" y="{legend_y + 9}">{escape(model[:20])}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(curves: dict[str, Curve]) -> str:
    rows = []
    for model, curve in sorted(curves.items()):
        clean = curve.get(0, (None, None))[0]
        for level, (score, paired) in sorted(curve.items()):
            if level == 0:
                continue
            change = fmt_number(score - clean) if clean is not None else "–"
            p = fmt_number(float(paired["p_value"])) if paired and paired.get("p_value") is not None else "–"
            verdict = escape(str(paired.get("verdict"))) if paired else "no paired test (records missing)"
            test = escape(str(paired.get("test"))) if paired else ""
            rows.append(
                f"<tr><td>{escape(model)}</td><td class='num'>{level}</td><td class='num'>{fmt_number(score)}</td>"
                f"<td class='num'>{change}</td><td class='num'>{p}</td><td>{verdict}</td><td>{test}</td></tr>"
            )
    head = "".join(f"<th>{h}</th>" for h in ("model", "level", "score", "change", "p", "verdict", "test"))
    return f"<table class='robustness'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def robustness_section(rows: Iterable[Mapping[str, Any]]) -> str:
    """The score against the level per model, for every corruption a run swept; empty when it swept none."""
    found = sweeps(rows)
    if not found:
        return ""
    html = ["<h2>Robustness</h2><p class='note'>Each corruption's score against its level (clean: the pair "
            "without it), per model; each level's paired test against the clean pair.</p>"]  # fmt: skip
    for (dataset, metric, corruption), curves in sorted(found.items()):
        title = f"{dataset} × {metric}: {corruption}"
        html.append(f"<h3>{escape(title)}</h3>{_chart(title, curves)}{_table(curves)}")
    return "".join(html)

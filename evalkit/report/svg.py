"""Inline SVG charts for report.html: grouped bars with CI whiskers, histograms.

Hand-written SVG rather than a JS plotting library: the report must open
offline, from a mail attachment or a CI artifact, and stay readable when
printed. Every bar is a ``<rect class="bar">`` with a ``<title>`` tooltip, so
the numbers are in the document, not only in pixels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac", "#eeca3b")

_FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="12"'


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


@dataclass(frozen=True, slots=True)
class Point:
    """One bar: its value and, when known, the 95% CI drawn as a whisker."""

    value: float
    low: float | None = None
    high: float | None = None
    note: str = ""
    #: the value and CI as the page's table prints them (a peer's two decimals), so bar and cell read alike;
    #: empty: :func:`fmt_number`'s short form
    text: str = ""
    ci_text: str = ""


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1-2-5 steps)."""
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        high = low + 1.0
    raw = (high - low) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while value < high + step * 0.5:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def fmt_number(value: float) -> str:
    if value == 0:
        return "0"
    if float(value).is_integer() and abs(value) < 1e9:
        return str(int(value))
    if abs(value) >= 100:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return f"{value:.3f}".rstrip("0").rstrip(".") if abs(value) >= 0.001 else f"{value:.1e}"


def distinct_labels(values: Sequence[float]) -> list[str]:
    """Labels for ``values`` with the fewest significant digits (at least 3) that tell neighbours apart.

    Histogram edges can be close together (latencies from 1.201 s to 1.236 s):
    three digits would print several edges as "1.2"; more digits are used until
    every distinct value reads differently.
    """
    for digits in range(3, 10):
        labels = [_significant(v, digits) for v in values]
        if len(set(labels)) == len(set(values)):
            return labels
    return [repr(float(v)) for v in values]


def _significant(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    if float(value).is_integer() and abs(value) < 1e9:
        return str(int(value))
    if abs(value) < 0.001:
        return f"{value:.{digits - 2}e}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _truncate(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def legend(series: Sequence[str], width: int) -> tuple[str, int]:
    """Colour keys laid out left to right, wrapping; returns (svg, height used)."""
    parts, x, y = [], 0, 0
    for i, name in enumerate(series):
        label = _truncate(name, 40)
        w = 22 + 7 * len(label)
        if x and x + w > width:
            x, y = 0, y + 18
        parts.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{color(i)}" rx="2"/>')
        parts.append(f'<text x="{x + 16}" y="{y + 10}" {_FONT}>{escape(label)}</text>')
        x += w + 12
    return "".join(parts), y + 18


def bar_chart(
    groups: Sequence[str],
    series: Sequence[str],
    points: dict[tuple[str, str], Point],
    *,
    title: str = "",
    axis_label: str = "",
    width: int = 880,
    label_width: int = 220,
    css_class: str = "chart",
) -> str:
    """Horizontal grouped bars: one block per group, one bar per series, whiskers for CIs."""
    bar_h, bar_gap, group_gap = 16, 3, 14
    plot_w = width - label_width - 70
    key_svg, key_h = legend(series, width - 20) if len(series) > 1 else ("", 0)
    top = 8 + (22 if title else 0) + key_h
    values = [v for p in points.values() for v in (p.value, p.low, p.high) if v is not None and math.isfinite(v)]
    low = min([0.0, *values])
    high = max([0.0, *values]) or 1.0
    ticks = nice_ticks(low, high)
    lo_t, hi_t = ticks[0], ticks[-1]

    def x_of(v: float) -> float:
        return label_width + (v - lo_t) / (hi_t - lo_t) * plot_w

    rows = []
    y = top + 6
    for group in groups:
        present = [s for s in series if (group, s) in points]
        if not present:
            continue
        block_h = len(present) * (bar_h + bar_gap) - bar_gap
        rows.append(
            f'<text class="group-label" x="{label_width - 8}" y="{y + block_h / 2 + 4:.1f}" text-anchor="end" {_FONT}>'
            f"<title>{escape(group)}</title>{escape(_truncate(group, max(8, int((label_width - 12) / 6.8))))}</text>"
        )
        for s in present:
            p = points[(group, s)]
            i = series.index(s)
            x0, x1 = sorted((x_of(0.0), x_of(p.value)))
            shown = p.text or fmt_number(p.value)
            tip = f"{group} · {s}: {shown}"
            if p.low is not None and p.high is not None:
                tip += " " + (p.ci_text or f"[{fmt_number(p.low)}, {fmt_number(p.high)}]")
            if p.note:
                tip += f" — {p.note}"
            rows.append(
                f'<rect class="bar" x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 0.0):.1f}" height="{bar_h}" '
                f'fill="{color(i)}">'
                f"<title>{escape(tip)}</title></rect>"
            )
            if p.low is not None and p.high is not None and math.isfinite(p.low) and math.isfinite(p.high):
                cy = y + bar_h / 2
                wl, wh = x_of(p.low), x_of(p.high)
                rows.append(
                    f'<g class="whisker" stroke="#222" stroke-width="1.3"><line x1="{wl:.1f}" y1="{cy}" '
                    f'x2="{wh:.1f}" y2="{cy}"/>'
                    f'<line x1="{wl:.1f}" y1="{cy - 5}" x2="{wl:.1f}" y2="{cy + 5}"/><line x1="{wh:.1f}" '
                    f'y1="{cy - 5}" x2="{wh:.1f}" y2="{cy + 5}"/></g>'
                )
                label_x = max(x1, wh) + 5
            else:
                label_x = x1 + 5
            rows.append(f'<text x="{label_x:.1f}" y="{y + bar_h - 4}" {_FONT} fill="#333">{escape(shown)}</text>')
            y += bar_h + bar_gap
        y += group_gap - bar_gap
    plot_bottom = y
    axis = [f'<line x1="{label_width}" y1="{top}" x2="{label_width}" y2="{plot_bottom}" stroke="#999"/>']
    for t in ticks:
        x = x_of(t)
        axis.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{plot_bottom}" stroke="#e4e4e4"/>')
        axis.append(
            f'<text x="{x:.1f}" y="{plot_bottom + 14}" text-anchor="middle" {_FONT} '
            f'fill="#555">{escape(fmt_number(t))}</text>'
        )
    if axis_label:
        axis.append(
            f'<text x="{label_width + plot_w / 2:.1f}" y="{plot_bottom + 30}" text-anchor="middle" {_FONT} '
            f'fill="#555">{escape(axis_label)}</text>'
        )
    height = plot_bottom + (38 if axis_label else 24)
    head = f'<text x="0" y="16" {_FONT} font-size="14" font-weight="600">{escape(title)}</text>' if title else ""
    key = f'<g transform="translate(0,{8 + (22 if title else 0)})">{key_svg}</g>' if key_svg else ""
    return (
        f'<svg class="{css_class}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 '
        f'{width} {height}" role="img">'
        f"<title>{escape(title)}</title>{head}{key}{''.join(axis)}{''.join(rows)}</svg>"
    )


def histogram_bins(values: Sequence[float], bins: int = 24) -> tuple[list[float], bool]:
    """Bin edges for latencies: log-spaced when they span more than a factor of 20, else linear."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return [0.0, 1.0], False
    lo, hi = min(positive), max(positive)
    if hi <= lo:
        return [lo * 0.9, hi * 1.1 if hi > 0 else 1.0], False
    if hi / lo > 20:
        a, b = math.log10(lo), math.log10(hi)
        return [10 ** (a + (b - a) * i / bins) for i in range(bins + 1)], True
    return [lo + (hi - lo) * i / bins for i in range(bins + 1)], False


def count_into(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    import bisect

    counts = [0] * (len(edges) - 1)
    for v in values:
        if not math.isfinite(v):
            continue
        i = bisect.bisect_right(edges, v) - 1
        counts[min(max(i, 0), len(counts) - 1)] += 1
    return counts


def histograms(series: Mapping[str, Sequence[float]], *, title: str, unit: str = "s", width: int = 880) -> str:
    """Small multiples: one histogram row per series on a shared x axis (log-spaced when wide)."""
    names = list(series)
    edges, log_scale = histogram_bins([v for vs in series.values() for v in vs])
    row_h, label_w, gap = 70, 160, 16
    plot_w = width - label_w - 20
    top = 30
    parts = [f'<text x="0" y="16" {_FONT} font-size="14" font-weight="600">{escape(title)}</text>']
    n_bins = len(edges) - 1
    bin_w = plot_w / n_bins
    labels = distinct_labels(edges)
    for r, name in enumerate(names):
        counts = count_into(series[name], edges)
        peak = max(counts) or 1
        y0 = top + r * (row_h + gap)
        parts.append(
            f'<text class="group-label" x="{label_w - 8}" y="{y0 + row_h / 2 + 4}" text-anchor="end" {_FONT}>'
            f"<title>{escape(name)}</title>{escape(_truncate(name, 24))}</text>"
        )
        parts.append(
            f'<line x1="{label_w}" y1="{y0 + row_h}" x2="{label_w + plot_w}" y2="{y0 + row_h}" stroke="#999"/>'
        )
        for b, count in enumerate(counts):
            if not count:
                continue
            h = max(count / peak * (row_h - 4), 1.0)
            tip = f"{name}: {count} in [{labels[b]}, {labels[b + 1]}) {unit}"
            parts.append(
                f'<rect class="bar" x="{label_w + b * bin_w + 0.5:.1f}" y="{y0 + row_h - h:.1f}" '
                f'width="{max(bin_w - 1, 0.5):.1f}" '
                f'height="{h:.1f}" fill="{color(r)}"><title>{escape(tip)}</title></rect>'
            )
    bottom = top + len(names) * (row_h + gap) - gap
    step = max(1, n_bins // 6)
    shown = list(range(0, n_bins + 1, step))
    axis_labels = distinct_labels([edges[b] for b in shown])
    for b, label in zip(shown, axis_labels):
        x = label_w + b * bin_w
        parts.append(
            f'<text class="bin-edge" x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" {_FONT} '
            f'fill="#555">{escape(label)}</text>'
        )
    scale = "log scale" if log_scale else "linear scale"
    parts.append(
        f'<text x="{label_w + plot_w / 2:.1f}" y="{bottom + 30}" text-anchor="middle" {_FONT} '
        f'fill="#555">{escape(unit)} ({scale})</text>'
    )
    height = bottom + 38
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 '
        f'{width} {height}" role="img">'
        f"<title>{escape(title)}</title>{''.join(parts)}</svg>"
    )

"""The viewer's HTML pages, rendered from the data of :mod:`evalkit.view.viewer`.

Every value that came from a run (names, sample ids, prompts, answers,
details) goes through :func:`html.escape`, in text and in attributes alike,
so an answer holding ``<script>`` is shown as text. The live pages carry no
script at all (filters are a plain GET form), which lets the server send a
Content-Security-Policy without ``script-src``; the static export adds one
script file of its own for filtering without a server.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from html import escape
from typing import Any

from evalkit.report.robustness import robustness_section
from evalkit.report.tables import fmt
from evalkit.report.usage import tokens_text
from evalkit.view.links import ExportLinks, Links
from evalkit.view.media import CLEAN
from evalkit.view.queries import SORTS

SORT_LABELS = {"row": "dataset order", "score": "score ↑", "-score": "score ↓", "id": "sample id"}
#: characters of a detail value shown before it is folded away
_FOLD = 600
_DEPTH = 4


def e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def number(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)) and math.isfinite(value):
        return fmt(value)
    return "–"


def seconds(value: Any) -> str:
    """Seconds as people read them: ``2``, ``0.75``, ``12.34``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return "–"


def layout(
    title: str,
    body: str,
    links: Links,
    crumbs: Iterable[tuple[str, str | None]] = (),
    scripts: Iterable[str] = (),
    reload_s: int | None = None,
) -> str:
    """The page around ``body``; ``reload_s``: the browser loads the page again after so many seconds (no script)."""
    trail = " › ".join(f'<a href="{e(href)}">{e(text)}</a>' if href else e(text) for text, href in crumbs)
    tags = "".join(f'<script src="{e(src)}"></script>' for src in scripts)
    again = f'<meta http-equiv="refresh" content="{int(reload_s)}">' if reload_s else ""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">{again}'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{e(title)} · evalkit view</title><link rel="stylesheet" href="{e(links.static("view.css"))}">'
        f'</head><body><nav><a href="{e(links.runs())}">evalkit view</a>{" › " + trail if trail else ""}</nav>'
        f"<main>{body}</main>{tags}</body></html>"
    )


def problems(items: Iterable[str]) -> str:
    listed = "".join(f"<li>{e(p)}</li>" for p in items)
    return f'<ul class="problems">{listed}</ul>' if listed else ""


def _input(label: str, name: str, values: dict[str, Any], size: int, hint: str, choices: str | None = None) -> str:
    offered = f' list="{e(choices)}"' if choices else ""
    return (
        f'<label>{e(label)} <input name="{e(name)}" size="{size}" value="{e(values.get(name, ""))}" '
        f'placeholder="{e(hint)}"{offered}></label>'
    )


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _table(headers: list[str], rows: Iterable[str], cls: str = "") -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


# -- runs ------------------------------------------------------------------------------------------------------


def runs_page(runs: list[dict[str, Any]], links: Links) -> str:
    rows = []
    for r in runs:
        status = f'<span class="status {e(r["status"])}">{e(r["status"])}</span>'
        if r["in_progress"]:
            status += ' <span class="note">in progress</span>'
        if r.get("shard"):
            status += f' <span class="note">shard {e(r["shard"])}</span>'
        rows.append(
            f'<tr><td><a href="{e(links.run(r["run_id"]))}">{e(r["run_id"])}</a></td><td>{status}</td>'
            f"<td>{e(r['started'])}</td><td>{e(', '.join(r['models']))}</td><td>{e(', '.join(r['datasets']))}</td>"
            f"<td>{problems(r['problems'])}</td></tr>"
        )
    body = "<h1>Runs</h1>"
    compare = links.compare()
    if compare and len(runs) > 1:
        body += f'<p><a href="{e(compare)}">compare two runs</a>, sample by sample</p>'
    body += (
        _table(["run", "status", "started", "models", "datasets", ""], rows, "runs")
        if rows
        else '<p class="note">No run folders here.</p>'
    )
    return layout("runs", body, links)


# -- a run -----------------------------------------------------------------------------------------------------


def _peer_number(value: Any) -> str:
    """A score on a peer's scale, with the two decimals the peer prints."""
    return f"{value:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else number(value)


def _evalkit_names(row: dict[str, Any]) -> str:
    """evalkit's entry and metric behind a peer's names, and the factor (blank for evalkit's own rows)."""
    shown = row.get("shown")
    if not shown:
        return ""
    same = shown.get("dataset") == row["dataset"] and shown.get("metric") == row["metric"]
    scale = shown.get("scale")
    factor = f" x{scale:g}" if isinstance(scale, (int, float)) and scale != 1 else ""
    return ("" if same else f"{row['dataset']} / {row['metric']}") + factor


def run_page(run: dict[str, Any], links: Links) -> str:
    rid = run["run_id"]
    state = f'<span class="status {e(run["status"])}">{e(run["status"])}</span>'
    if run["in_progress"]:
        state += " — in progress: the results table is written when the run ends; the records so far are below"
    where = f" · {e(run['path'])}" if run.get("path") else ""  # the folder, when the viewer was asked to show it
    body = f'<h1>Run {e(rid)}</h1><p class="meta">{state} · started {e(run["started"])}{where}</p>'
    body += problems(run["problems"])
    rows = []
    peer = any(x.get("shown") for x in run["results"])
    for r in (x for x in run["results"] if x["kind"] == "dataset"):
        ds, metric, model = r["dataset"], r["metric"], r["model"]
        shown = r.get("shown") or {"dataset": ds, "metric": metric, **{k: r[k] for k in ("score", "ci_low", "ci_high")}}
        show = _peer_number if r.get("shown") else number

        def cell(
            text: str, params: dict[str, str], ok: bool = r["has_records"], ds: str = ds, metric: str = metric
        ) -> str:
            return f'<a href="{e(links.pair(rid, ds, metric, params))}">{text}</a>' if ok else text

        ci = f"[{show(shown['ci_low'])}, {show(shown['ci_high'])}]" if shown["ci_low"] is not None else "–"
        evalkit = f"<td>{e(_evalkit_names(r))}</td>" if peer else ""
        reasons = ", ".join(
            cell(f"{e(reason)}: {e(n)}", {"model": model, "failure": reason})
            for reason, n in r["failure_reasons"].items()
        )
        flag = ' class="unreliable"' if r["unreliable"] else ""
        cut = r.get("partial") if isinstance(r.get("partial"), dict) else None
        reason = cut.get("reason") if cut is not None else None
        # stop_at_ci's rows say how far they went in n; a budget's are marked beside the score
        partial = (
            f' <span class="failure">(partial: {e(reason)})</span>' if reason and reason != "stopped_at_ci" else ""
        )
        rows.append(
            f"<tr{flag}><td>{cell(e(shown['dataset']), {})}</td><td>{e(shown['metric'])}</td><td>{e(model)}</td>"
            f'<td class="num">{cell(show(shown["score"]), {"model": model})}{partial}</td><td class="num">{ci}</td>'
            f'<td class="num">{cell(e(r.get("n_text") or r["n"]), {"model": model, "failure": "none"})}</td>'
            f'<td class="num">{cell(e(r["n_failed"]), {"model": model, "failure": "any"})}</td>'
            f"<td>{reasons}{'<br>' + e(r['error']) if r['error'] else ''}</td>{evalkit}</tr>"
        )
    if rows:
        columns = ["dataset", "metric", "model", "score", "95% CI", "n", "failed", "failures"]
        body += "<h2>Results</h2>" + _table(
            [*columns, "evalkit entry / metric, scale"] if peer else columns, rows, "results"
        )
    body += robustness_section(x for x in run["results"] if x["kind"] == "dataset")
    body += _usage_section(run)
    aggregates = [x for x in run["results"] if x["kind"] == "aggregate"]
    if aggregates:
        body += "<h2>Aggregates</h2>" + _table(
            ["datasets", "metric", "model", "score", "95% CI", "n"],
            (
                f"<tr><td>{e(s['dataset'])}</td><td>{e(s['metric'])}</td><td>{e(a['model'])}</td>"
                f'<td class="num">{show(s["score"])}</td>'
                f'<td class="num">[{show(s["ci_low"])}, {show(s["ci_high"])}]</td>'
                f'<td class="num">{e(a["n"])}</td></tr>'
                for a in aggregates
                for s, show in [(a.get("shown") or a, _peer_number if a.get("shown") else number)]
            ),
        )
    pair_rows = []
    for p in run["pairs"]:
        name = f"{e(p['dataset'])} × {e(p['metric'])}"
        link = (
            f'<a href="{e(links.pair(rid, p["dataset"], p["metric"]))}">samples</a>'
            if p["has_records"]
            else "no records yet"
        )
        compares = ""
        models = run["models"]
        if p["has_records"] and len(models) >= 2:
            hrefs = [
                (
                    f"{a} vs {b}",
                    links.compare({"a": f"{rid}:{a}", "b": f"{rid}:{b}", "pair": f"{p['dataset']}/{p['metric']}"}),
                )
                for a, b in zip(models, models[1:])
            ]
            compares = " ".join(f'<a href="{e(h)}">{e(t)}</a>' for t, h in hrefs if h)
        pair_rows.append(f"<tr><td>{name}</td><td>{link}</td><td>{compares}</td></tr>")
    if pair_rows:
        body += "<h2>Samples</h2>" + _table(["dataset × metric", "", "compare"], pair_rows, "pairs")
    crumbs = [(f"run {rid}", None)]
    return layout(f"run {rid}", body, links, crumbs)


def _usage_section(run: dict[str, Any]) -> str:
    """Tokens and cost per pair and model (the judge's apart), then the run's lines: model, judge, total, budget."""
    used = [x for x in run["results"] if x["kind"] == "dataset" and (x.get("usage") or x.get("judge_usage"))]
    lines = run.get("usage") or []
    if not used and not lines:
        return ""
    body = "<h2>Usage and cost</h2>"
    if used:
        body += _table(
            ["dataset", "metric", "model", "tokens and cost", "judge"],
            (
                f"<tr><td>{e(x['dataset'])}</td><td>{e(x['metric'])}</td><td>{e(x['model'])}</td>"
                f"<td>{e(x.get('usage') or '')}</td><td>{e(x.get('judge_usage') or '')}</td></tr>"
                for x in used
            ),
            "usage",
        )
    return body + "".join(f'<p class="meta">{e(line)}</p>' for line in lines)


# -- a pair's samples ------------------------------------------------------------------------------------------


def _select(name: str, options: list[tuple[str, str]], chosen: str | None) -> str:
    opts = "".join(
        f'<option value="{e(v)}"{" selected" if v == (chosen or "") else ""}>{e(label)}</option>'
        for v, label in options
    )
    return f'<label>{e(name)} <select name="{e(name)}">{opts}</select></label>'


def filter_form(data: dict[str, Any], links: Links, action: str) -> str:
    facets, f = data["facets"], data["filter"]
    models = [("", "all models"), *((m, m) for m in facets["models"])]
    failures = [("", "all"), ("none", "scored only"), ("any", "failed only")]
    failures += [(reason, f"{reason} ({n})") for reason, n in facets["failures"].items()]
    groups_opts = "".join(
        f'<optgroup label="{e(name)}">'
        + "".join(
            f'<option value="{e(name)}:{e(value)}"{" selected" if f.get("group") == f"{name}:{value}" else ""}>'
            f"{e(value)} ({n})</option>"
            for value, n in sorted(values.items())
        )
        + "</optgroup>"
        for name, values in sorted(facets["groups"].items())
    )
    group = f'<label>group <select name="group"><option value="">all</option>{groups_opts}</select></label>'
    low, high = facets["score_min"], facets["score_max"]
    span = f"{number(low)} to {number(high)}" if low is not None else "no scores"
    if facets.get("from_results") and low is None:
        span = "not counted yet"
    records = f"{e(facets['records'])} records"
    if facets.get("from_results"):  # no index yet: what results.json says, not a count of the file
        records += " by results.json"
    return (
        f'<form class="filters" id="filters" method="get" action="{e(action)}">'
        + _select("model", models, f.get("model"))
        + _select("failure", failures, f.get("failure"))
        + group
        + _input("score from", "min", f, 6, number(low))
        + _input("to", "max", f, 6, number(high))
        + _input("text", "q", f, 24, "prompt, answer or reference")
        + _select(
            "sort",
            [(s, SORT_LABELS[s]) for s in SORTS],
            f.get("sort", "row"),
        )
        + _select("per", [(str(n), f"{n} a page") for n in (20, 50, 100, 200)], f.get("per", "50"))
        + '<button type="submit">filter</button>'
        + f'<span class="note">scores {span}; {records}</span></form>'
    )


def shown_row(row: Any) -> str:
    """A record's ``row`` (counted from 0, as stored) as people and evalkit's messages count it: from 1."""
    return str(row + 1) if isinstance(row, int) and not isinstance(row, bool) else ""


def sample_row(r: dict[str, Any], href: str) -> str:
    failed = f'<span class="failure">{e(r["failure"])}</span> {e(r["error"])}' if r["failure"] else ""
    return (
        f'<tr><td><a href="{e(href)}">{e(r["sample_id"])}</a></td><td>{e(r["model"])}</td>'
        f'<td class="num">{shown_row(r["row"])}</td><td class="num">{number(r["score"])}</td>'
        f"<td>{e(r['answer'])}{failed}</td><td>{e(r['reference'])}</td></tr>"
    )


SAMPLE_HEADERS = ["sample", "model", "row", "score", "answer", "reference"]


def pair_page(data: dict[str, Any], links: Links) -> str:
    rid, ds, metric = data["run_id"], data["dataset"], data["metric"]
    here = links.pair(rid, ds, metric)
    body = f"<h1>{e(ds)} × {e(metric)}</h1>" + problems(data["problems"])
    body += filter_form(data, links, here)
    rows = [sample_row(r, links.sample(rid, ds, metric, r["sample_id"])) for r in data["rows"]]
    partial = data.get("partial")
    if partial:
        body += reading_note(partial)
        body += f'<p class="meta">{e(data["total"])} matching records so far · page {e(data["page"])}</p>'
    else:
        count = f"{e(data['total'])} matching records · page {e(data['page'])} of {e(data['pages'])}"
        body += f'<p class="meta">{count}</p>'
    body += _table(SAMPLE_HEADERS, rows, "samples")
    pager = []
    f = data["filter"]
    if data["page"] > 1:
        pager.append(
            f'<a rel="prev" href="{e(links.pair(rid, ds, metric, {**f, "page": str(data["page"] - 1)}))}">'
            "← previous</a>"
        )
    if data["page"] < data["pages"]:
        pager.append(
            f'<a rel="next" href="{e(links.pair(rid, ds, metric, {**f, "page": str(data["page"] + 1)}))}">next →</a>'
        )
    body += f'<p class="pager">{" ".join(pager)}</p>'
    crumbs = [(f"run {rid}", links.run(rid)), (f"{ds} × {metric}", None)]
    return layout(f"{ds} × {metric}", body, links, crumbs, reload_s=READING_RELOAD_S if partial else None)


#: seconds before a page answered from part of a file loads again (each load reads on; see evalkit.view.scan)
READING_RELOAD_S = 2


def reading_note(partial: dict[str, Any]) -> str:
    """How far an answer read from the file (no index yet) got: never a count of part shown as the whole."""
    if partial.get("reading") == "prompts":
        done = _share(partial.get("sent_bytes_read"), partial.get("sent_bytes"))
        text = (
            f"Still reading: searching the prompts that were sent ({done} read) before the records; "
            "no record has been read yet."
        )
    else:
        about = partial.get("records_about")
        of = f"of about {about:,} " if isinstance(about, int) and about else ""
        read = int(partial.get("records_read") or 0)
        done = _share(partial.get("bytes_read"), partial.get("bytes"))
        text = (
            f"Still reading: {read:,} records read {of}({done} of the file) while this pair is indexed. "
            "The rows and the count below are the matches among the records read so far; more may follow."
        )
    return f'<p class="reading">{e(text)} This page reloads itself until the answer is whole.</p>'


def _share(part: Any, whole: Any) -> str:
    if not isinstance(part, int) or not isinstance(whole, int) or whole <= 0:
        return "part"
    return f"{min(99, 100 * part // whole)}%"


def export_pair_page(data: dict[str, Any], links: Links) -> str:
    """The export's samples page: the same form and table, filled and filtered by view.js from data.js."""
    rid, ds, metric = data["run_id"], data["dataset"], data["metric"]
    body = f"<h1>{e(ds)} × {e(metric)}</h1>" + problems(data["problems"])
    body += filter_form(data, links, "index.html")
    body += '<p class="meta" id="count"></p>' + _table(SAMPLE_HEADERS, [], "samples")
    body += '<p class="pager" id="pager"></p><noscript>Filtering this exported page needs JavaScript.</noscript>'
    crumbs = [(f"run {rid}", links.run(rid)), (f"{ds} × {metric}", None)]
    return layout(f"{ds} × {metric}", body, links, crumbs, scripts=["data.js", links.static("view.js")])


def export_sample_page(run_id: str, dataset: str, metric: str, models: list[str]) -> str:
    """The export's one page for all of a pair's samples: sample.js draws the one its address names."""
    links = ExportLinks(3)
    body = (
        f'<div id="sample" data-models="{e(json.dumps(models))}" data-pair="{e(dataset)} × {e(metric)}">'
        "<noscript>This exported page needs JavaScript.</noscript></div>"
    )
    crumbs = [(f"run {run_id}", links.run(run_id)), (f"{dataset} × {metric}", "index.html"), ("sample", None)]
    return layout("sample", body, links, crumbs, scripts=[links.static("sample.js")])


# -- one sample ------------------------------------------------------------------------------------------------


def _media_ext(part: dict[str, Any]) -> str:
    if part["kind"] == "audio":
        return "wav"
    return str(part["ref"].get("format") or "img").lower()


def media_block(part: dict[str, Any], conv: dict[str, Any], data: dict[str, Any], links: Links) -> str:
    where = e(part["where"])
    if part["missing"]:
        return f'<div class="media missing"><b>{e(part["kind"])}</b> {where}: {e(part["missing"])}</div>'
    rid, ds, key = data["run_id"], data["dataset"], conv["key"]
    ref = part["ref"]
    if part["kind"] == "image":
        src = links.media(rid, ds, key, str(part["index"]), _media_ext(part))
        size = f"{e(ref.get('width'))}×{e(ref.get('height'))} {e(ref.get('format'))}" if ref.get("width") else ""
        return (
            f'<figure class="media image"><img src="{e(src)}" alt="image {e(part["index"])} of the prompt">'
            f"<figcaption>{where} {size}</figcaption></figure>"
        )
    corruption = ref.get("corruption")
    sent = f"{corruption.get('name')} level {corruption.get('severity')}" if isinstance(corruption, dict) else "as sent"
    clips = [(str(part["index"]), ref.get("start"), ref.get("end"), sent)]
    if part["chunks"]:
        clips = [
            (f"{part['index']}-{i}", s, t, f"chunk {i + 1} of {len(part['chunks'])}")
            for i, (s, t) in enumerate(part["chunks"])
        ]
    players = "".join(
        f'<div class="clip"><audio controls preload="metadata" '
        f'src="{e(links.media(rid, ds, key, name, "wav"))}"></audio>'
        f'<span class="note">{e(label)}: {seconds(start)}–{seconds(end)} s</span></div>'
        for name, start, end, label in clips
    )
    if isinstance(corruption, dict):  # a robustness variant: the clean clip beside the corrupted one it sent
        players = (
            f'<div class="clip"><audio controls preload="metadata" '
            f'src="{e(links.media(rid, ds, key, str(part["index"]) + CLEAN, "wav"))}"></audio>'
            f'<span class="note">clean source</span></div>' + players
        )
        return f'<div class="media audio corrupted"><b>audio</b> {where}<div class="side">{players}</div></div>'
    return f'<div class="media audio"><b>audio</b> {where}{players}</div>'


def conversation_block(conv: dict[str, Any], data: dict[str, Any], links: Links) -> str:
    who = ", ".join(conv["models"])
    if conv["missing"]:
        return (
            f'<section class="conversation"><h3>sent to {e(who)}</h3><p class="missing">what was sent '
            f"(key {e(conv['key'])}) is not in the sent file</p></section>"
        )
    head = f"sent to {who}"
    if conv.get("kind"):
        head += f" · {conv['kind']}"
    if conv.get("requests") and conv["requests"] != 1:
        head += f" · {conv['requests']} requests"
    if conv.get("old"):
        head = "images the records name (this run did not record the prompt it sent)"
    parts_by_message: dict[int, list[dict[str, Any]]] = {}
    for part in conv["media"]:
        parts_by_message.setdefault(part["message"], []).append(part)
    blocks = []
    for m, message in enumerate(conv["messages"]):
        role = message.get("role", "?") if isinstance(message, dict) else "?"
        content = message.get("content") if isinstance(message, dict) else message
        inner = []
        media_here = iter(parts_by_message.get(m, []))
        for part in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                inner.append(f'<pre class="text">{e(part.get("text"))}</pre>')
            elif kind in ("audio", "image"):
                found = next(media_here, None)
                if found is not None:
                    inner.append(media_block(found, conv, data, links))
            else:
                inner.append(f'<pre class="text">{e(json.dumps(part, ensure_ascii=False))}</pre>')
        blocks.append(f'<div class="message {e(role)}"><div class="role">{e(role)}</div>{"".join(inner)}</div>')
    if conv.get("old"):
        blocks.append("".join(media_block(p, conv, data, links) for p in conv["media"]))
    if conv.get("tools"):
        offered = json.dumps(conv["tools"], ensure_ascii=False, indent=2)
        blocks.append(f'<details class="tools"><summary>tools offered</summary><pre>{e(offered)}</pre></details>')
    if conv.get("params") or conv.get("params_by_turn"):
        # what the request carried beside the messages (temperature, token limit, each extra_body key), as sent
        fields = json.dumps(conv.get("params_by_turn") or conv["params"], ensure_ascii=False, indent=2)
        blocks.append(f'<details class="params"><summary>request fields</summary><pre>{e(fields)}</pre></details>')
    return f'<section class="conversation"><h3>{e(head)}</h3>{"".join(blocks)}</section>'


def value_html(value: Any, depth: int = 0) -> str:
    """A detail value: numbers formatted, text kept as written (folded when long), lists and dicts nested."""
    if value is None:
        return '<span class="note">null</span>'
    if isinstance(value, (bool, int, float)):
        return e(number(value) if isinstance(value, float) else value)
    if isinstance(value, str):
        if len(value) > _FOLD:
            head = f"{e(value[:120])}… ({len(value)} characters)"
            return f"<details><summary>{head}</summary><pre>{e(value)}</pre></details>"
        return f'<span class="text">{e(value)}</span>'
    if depth >= _DEPTH:
        return f"<pre>{e(json.dumps(value, ensure_ascii=False, default=str)[:4000])}</pre>"
    if isinstance(value, dict):
        items = "".join(f"<dt>{e(k)}</dt><dd>{value_html(v, depth + 1)}</dd>" for k, v in value.items())
        return f"<dl>{items}</dl>"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in value) and len(value) <= 50:
            return "<ol>" + "".join(f"<li>{value_html(v, depth + 1)}</li>" for v in value) + "</ol>"
        return f"<pre>{e(json.dumps(value, ensure_ascii=False, default=str)[:4000])}</pre>"
    return e(value)


def _judge(details: Any) -> str:
    judge = details.get("judge") if isinstance(details, dict) else None
    if not isinstance(judge, dict):
        return ""
    out = f'<div class="judge"><b>judge {e(judge.get("model"))}</b>'
    if judge.get("rationale"):
        out += f'<p class="rationale">{e(judge["rationale"])}</p>'
    out += f"<p>verdict: {value_html(judge.get('verdict'))}</p>"
    if judge.get("response"):
        out += f"<details><summary>judge's answer</summary><pre>{e(judge['response'])}</pre></details>"
    if judge.get("prompt"):
        out += f"<details><summary>judge's prompt</summary>{value_html(judge['prompt'])}</details>"
    return out + "</div>"


def answers_table(records: list[dict[str, Any]]) -> str:
    heads = "".join(f"<th>{e(r.get('model'))}</th>" for r in records)

    def line(label: str, cells: Iterable[str]) -> str:
        return f"<tr><th>{e(label)}</th>{''.join(f'<td>{c}</td>' for c in cells)}</tr>"

    rows = [
        line("score", (f'<span class="score">{number(r.get("score"))}</span>' for r in records)),
        line(
            "answer",
            (
                f'<pre class="text">{e(r.get("response"))}</pre>' if r.get("response") is not None else "–"
                for r in records
            ),
        ),
        line(
            "prediction",
            (
                f'<pre class="text">{e(_as_text(r.get("prediction")))}</pre>'
                if r.get("prediction") is not None
                else "–"
                for r in records
            ),
        ),
    ]
    if any(isinstance(r.get("answers"), list) and len(r["answers"]) > 1 for r in records):
        rows.append(line("each turn's answer", (_turn_answers(r.get("answers")) for r in records)))
    if any(r.get("failure") for r in records):
        rows.append(
            line(
                "failure",
                (
                    f'<span class="failure">{e(r.get("failure"))}</span><pre class="error">{e(r.get("error"))}</pre>'
                    if r.get("failure")
                    else ""
                    for r in records
                ),
            )
        )
    rows.append(
        line(
            "details",
            (
                value_html({k: v for k, v in (r.get("details") or {}).items() if k != "judge"})
                + _judge(r.get("details"))
                if isinstance(r.get("details"), dict)
                else value_html(r.get("details"))
                for r in records
            ),
        )
    )
    rows.append(
        line(
            "request",
            (
                f"latency {seconds(r.get('latency'))} s · attempts {e(r.get('attempts'))}"
                + (" · from the store" if r.get("cached") else "")
                + (f" · {e(tokens_text(r['usage']))}" if isinstance(r.get("usage"), dict) else "")
                + (f" · judge: {e(tokens_text(r['judge_usage']))}" if isinstance(r.get("judge_usage"), dict) else "")
                + (f" · replica {e(r.get('replica'))}" if r.get("replica") is not None else "")
                for r in records
            ),
        )
    )
    if any(r.get("prompt") for r in records):
        rows.append(line("prompt made from", (value_html(r.get("prompt")) if r.get("prompt") else "" for r in records)))
    return f'<table class="answers"><thead><tr><th></th>{heads}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _turn_answers(answers: Any) -> str:
    """A conversation's answers, turn by turn (MT-Bench's judge rates each), numbered as the turns are."""
    if not isinstance(answers, list) or not answers:
        return "–"
    return "".join(
        f'<div class="turn"><div class="role">turn {i}</div><pre class="text">{e(a)}</pre></div>'
        for i, a in enumerate(answers, 1)
    )


def sample_page(data: dict[str, Any], links: Links) -> str:
    rid, ds, metric, sid = data["run_id"], data["dataset"], data["metric"], data["sample_id"]
    records = data["records"]
    first = records[0]
    body = f'<h1>Sample <span class="sid">{e(sid)}</span></h1><p class="meta">{e(ds)} × {e(metric)}'
    if shown_row(first.get("row")):
        body += f" · row {shown_row(first['row'])}"
    if isinstance(first.get("duration"), (int, float)):
        body += f" · {seconds(first['duration'])} s of audio"
    body += "</p>" + problems(data["problems"])
    groups = first.get("groups")
    if isinstance(groups, dict) and groups:
        chips = "".join(
            f'<a class="chip" href="{e(links.pair(rid, ds, metric, {"group": f"{k}:{v}"}))}">{e(k)}: {e(v)}</a>'
            for k, v in groups.items()
            if v is not None
        )
        body += f'<p class="groups">{chips}</p>'
    body += f'<h2>Reference</h2><pre class="text reference">{e(_reference(first.get("reference")))}</pre>'
    body += "<h2>What was sent</h2>"
    if data["conversations"]:
        body += "".join(conversation_block(c, data, links) for c in data["conversations"])
    else:
        body += (
            '<p class="note">This run did not record what it sent (records made before evalkit kept prompts), '
            "or nothing was sent.</p>"
        )
    body += "<h2>Answers</h2>" + answers_table(records)
    crumbs = [(f"run {rid}", links.run(rid)), (f"{ds} × {metric}", links.pair(rid, ds, metric)), (sid, None)]
    return layout(f"sample {sid}", body, links, crumbs)


def _reference(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    if isinstance(value, str) or value is None:
        return value or ""
    return json.dumps(value, ensure_ascii=False)


# -- comparisons -----------------------------------------------------------------------------------------------


def compare_form(params: dict[str, str], links: Links, runs: list[dict[str, Any]] | None = None) -> str:
    """The form, with the runs here offered in A and B (``run`` and ``run:model``) and their datasets' pairs."""
    action = links.compare() or ""
    sides = [r["run_id"] for r in runs or []]
    sides += [f"{r['run_id']}:{model}" for r in runs or [] for model in r.get("models") or []]
    pairs = sorted({pair for r in runs or [] for pair in r.get("pairs") or []})
    lists = "".join(
        f'<datalist id="{name}">' + "".join(f'<option value="{e(v)}">' for v in values) + "</datalist>"
        for name, values in (("compare-runs", sides), ("compare-pairs", pairs))
        if values
    )
    return (
        f'<form class="filters" method="get" action="{e(action)}">'
        + _input("A", "a", params, 32, "run id or run id:model", "compare-runs" if sides else None)
        + _input("B", "b", params, 32, "run id or run id:model", "compare-runs" if sides else None)
        + _input("pair", "pair", params, 32, "dataset/metric", "compare-pairs" if pairs else None)
        + f'<button type="submit">compare</button></form>{lists}'
    )


def _statistics(stats: dict[str, Any] | None) -> str:
    """The paired test's verdict in one line, then its numbers (see evalkit.report.paired)."""
    if not stats:
        return ""
    if stats.get("error"):
        return f'<section class="statistics"><h2>Paired test</h2>{problems([stats["error"]])}</section>'
    low, high = (stats.get("diff_ci") or [None, None])[:2]
    line = (
        f"<p><b>{e(stats.get('verdict'))}</b>: B − A = {number(stats.get('diff'))} "
        f"(95% CI [{number(low)}, {number(high)}]), p = {number(stats.get('p_value'))} by {e(stats.get('test'))}, "
        f"on {e(stats.get('n_paired'))} samples scored in both; {e(stats.get('improved'))} improved, "
        f"{e(stats.get('worsened'))} worsened</p>"
    )
    shown = {
        k: stats.get(k)
        for k in ("statistic", "score_a", "score_b", "mcnemar", "p_bootstrap", "n_resamples", "seed")
        if stats.get(k) is not None
    }
    shown["failed in A only"] = stats.get("failed_only_a")
    shown["failed in B only"] = stats.get("failed_only_b")
    shown["failed in both"] = stats.get("failed_both")
    extra = problems(stats.get("notes") or [])
    return f'<section class="statistics"><h2>Paired test</h2>{line}{value_html(shown)}{extra}</section>'


def compare_page(
    data: dict[str, Any] | None,
    params: dict[str, str],
    links: Links,
    error: str | None = None,
    runs: list[dict[str, Any]] | None = None,
) -> str:
    """``runs``: what the form offers to pick from (the server's runs; an export has no form)."""
    body = "<h1>Compare</h1>" + ("" if links.export else compare_form(params, links, runs))  # a form needs the server
    if error:
        body += problems([error])
    if data:
        a, b = data["a"], data["b"]
        la, lb = f"{a['run_id']} · {a['model']}", f"{b['run_id']} · {b['model']}"
        body += problems(data["problems"])
        body += (
            f'<p class="meta">{e(data["dataset"])} × {e(data["metric"])}: A = {e(la)}, B = {e(lb)}; '
            f"{e(data['compared'])} samples in both, {e(data['changed'])} changed score "
            f"({e(data['higher_in_b'])} higher in B, {e(data['lower_in_b'])} lower)</p>"
        )
        body += _statistics(data.get("statistics"))
        rows = []
        for r in data["rows"]:
            href = links.sample(a["run_id"], data["dataset"], data["metric"], r["sample_id"])
            fa = f' <span class="failure">{e(r["failure_a"])}</span>' if r["failure_a"] else ""
            fb = f' <span class="failure">{e(r["failure_b"])}</span>' if r["failure_b"] else ""
            rows.append(
                f'<tr><td><a href="{e(href)}">{e(r["sample_id"])}</a></td><td class="num">{number(r["score_a"])}</td>'
                f'<td class="num">{number(r["score_b"])}</td><td>{e(r["answer_a"])}{fa}</td>'
                f"<td>{e(r['answer_b'])}{fb}</td>"
                f"<td>{e(r['reference'])}</td></tr>"
            )
        body += _table(["sample", "A", "B", "answer A", "answer B", "reference"], rows, "changes")
        body += _change_pages(data, params, links)
    return layout("compare", body, links, [("compare", None)])


def _change_pages(data: dict[str, Any], params: dict[str, str], links: Links) -> str:
    """Which changes the list shows, and (with the server) links to the pages before and after it."""
    shown, offset, total = len(data["rows"]), int(data["offset"]), int(data["changed"])
    if not offset and shown >= total:
        return ""
    if links.export or (not offset and not shown):
        return f'<p class="note">the first {shown} of {e(total)} changes, biggest first</p>' if shown < total else ""
    around = []
    if offset:
        before = links.compare({**params, "offset": str(max(0, offset - int(data["limit"])))})
        around.append(f'<a href="{e(before)}">previous {e(data["limit"])}</a>')
    if offset + shown < total:
        after = links.compare({**params, "offset": str(offset + shown)})
        around.append(f'<a href="{e(after)}">next {e(min(int(data["limit"]), total - offset - shown))}</a>')
    where = f"changes {offset + 1:,}-{offset + shown:,} of {total:,}" if shown else f"no change past {offset:,}"
    return f'<p class="note">{e(where)}, biggest first {" · ".join(around)}</p>'


def error_page(status: int, message: str, links: Links) -> str:
    body = f'<h1>{e(status)}</h1><p class="error">{e(message)}</p><p><a href="{e(links.runs())}">all runs</a></p>'
    return layout(str(status), body, links)

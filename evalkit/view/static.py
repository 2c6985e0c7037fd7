"""The viewer's style sheet and the export's one script, kept as text here so the wheel carries them as code.

``view.js`` is used by the static export only (the live pages have no script):
it fills the samples table from ``data.js`` and filters, sorts and pages it in
the browser, inserting every value with ``textContent``, never as HTML.
"""

from __future__ import annotations

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1f; font-size: 14px; }
nav { background: #1d1d1f; color: #ddd; padding: 8px 20px; font-size: 13px; }
nav a { color: #fff; text-decoration: none; } nav a:hover { text-decoration: underline; }
main { padding: 12px 20px 40px; max-width: 1400px; }
h1 { font-size: 21px; margin: 8px 0 4px; } h2 { font-size: 16px; margin: 22px 0 6px; border-bottom: 1px solid #ddd; }
h3 { font-size: 14px; margin: 10px 0 6px; color: #333; }
.meta, .note { color: #666; font-size: 12px; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f7; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.unreliable td { background: #fff4e5; }
table.samples td:nth-child(5), table.samples td:nth-child(6) { max-width: 460px; overflow-wrap: anywhere; }
table.answers td { min-width: 220px; max-width: 520px; overflow-wrap: anywhere; }
table.answers th[scope], table.answers tbody th { width: 90px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 2px 0; font-family: ui-monospace, Menlo, monospace;
      font-size: 12px; }
pre.text { background: #f7f7f9; padding: 6px 8px; border-radius: 4px; }
pre.error { color: #9b1c1c; }
.failure { color: #9b1c1c; font-weight: 600; }
.score { font-size: 16px; font-weight: 600; }
.status { padding: 1px 6px; border-radius: 8px; background: #eee; font-size: 12px; }
.status.finished { background: #dcfce7; } .status.running { background: #dbeafe; }
.status.failed, .status.interrupted { background: #fee2e2; }
ul.problems { background: #fff7ed; border: 1px solid #fed7aa; padding: 6px 8px 6px 26px; margin: 8px 0; }
form.filters { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: center; background: #f5f5f7;
               padding: 8px 10px; border-radius: 6px; margin: 8px 0; }
form.filters label { font-size: 12px; color: #333; }
.pager a, .pager button { margin-right: 14px; }
section.conversation { border: 1px solid #e6e6e6; border-radius: 6px; padding: 6px 10px; margin: 8px 0; }
.message { display: grid; grid-template-columns: 80px 1fr; gap: 6px; margin: 6px 0; }
.message .role { font-weight: 600; color: #555; }
.message > :not(.role) { grid-column: 2; }
.media { margin: 4px 0; } .media.missing { color: #9b1c1c; }
.media img { max-width: 480px; max-height: 360px; border: 1px solid #ddd; display: block; }
.clip { display: flex; align-items: center; gap: 10px; margin: 4px 0; }
.side { display: flex; flex-wrap: wrap; gap: 16px; }
dl { margin: 0; display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; font-size: 12px; }
dt { color: #555; } dd { margin: 0; } ol { margin: 0; padding-left: 18px; }
.judge { border-left: 3px solid #6366f1; padding-left: 8px; margin-top: 6px; }
.rationale { font-style: italic; }
.chip { display: inline-block; background: #eef2ff; border-radius: 10px; padding: 1px 8px; margin-right: 6px;
        font-size: 12px; text-decoration: none; color: #3730a3; }
.sid { font-family: ui-monospace, Menlo, monospace; }
"""

JS = """
(function () {
  "use strict";
  var data = window.EVALKIT_PAIR;
  var form = document.getElementById("filters");
  var body = document.querySelector("table.samples tbody");
  var count = document.getElementById("count");
  var pager = document.getElementById("pager");
  if (!data || !form || !body) { return; }
  var page = 1;
  var given = new URLSearchParams(window.location.search);
  Array.prototype.forEach.call(form.elements, function (el) {
    if (el.name && given.has(el.name)) { el.value = given.get(el.name); }
  });
  if (given.has("page")) { page = Math.max(1, parseInt(given.get("page"), 10) || 1); }
  function value(name) { var el = form.elements[name]; return el ? el.value : ""; }
  function num(text) { if (text === "") { return null; } var x = Number(text); return isFinite(x) ? x : null; }
  function fmt(x) {
    if (x === null || x === undefined) { return "\\u2013"; }
    return Math.abs(x) >= 100 ? x.toFixed(2) : x.toFixed(4);
  }
  function keep(r, q) {
    if (q.model && r.model !== q.model) { return false; }
    if (q.min !== null && (r.score === null || r.score < q.min)) { return false; }
    if (q.max !== null && (r.score === null || r.score > q.max)) { return false; }
    if (q.failure === "any" && !r.failure) { return false; }
    if (q.failure === "none" && r.failure) { return false; }
    if (q.failure && q.failure !== "any" && q.failure !== "none" && r.failure !== q.failure) { return false; }
    if (q.group) {
      var cut = q.group.indexOf(":");
      var name = q.group.slice(0, cut), want = q.group.slice(cut + 1);
      if (!r.groups || r.groups[name] !== want) { return false; }
    }
    if (q.text && r.text.indexOf(q.text) < 0) { return false; }
    return true;
  }
  function order(a, b, sort) {
    if (sort === "id") { return a.sample_id < b.sample_id ? -1 : a.sample_id > b.sample_id ? 1 : a.line - b.line; }
    if (sort === "score" || sort === "-score") {
      if (a.score === null || b.score === null) { return (a.score === null) - (b.score === null) || a.line - b.line; }
      var d = sort === "score" ? a.score - b.score : b.score - a.score;
      return d || a.line - b.line;
    }
    var ra = a.row === null ? -1 : a.row, rb = b.row === null ? -1 : b.row;
    return ra - rb || a.line - b.line;
  }
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) { td.className = cls; }
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }
  function render() {
    var q = {
      model: value("model"), min: num(value("min")), max: num(value("max")), failure: value("failure"),
      group: value("group"), text: value("q").trim().toLocaleLowerCase(), sort: value("sort") || "row"
    };
    var per = parseInt(value("per"), 10) || 50;
    var found = data.rows.filter(function (r) { return keep(r, q); });
    found.sort(function (a, b) { return order(a, b, q.sort); });
    var pages = Math.max(1, Math.ceil(found.length / per));
    page = Math.min(page, pages);
    body.textContent = "";
    found.slice((page - 1) * per, page * per).forEach(function (r) {
      var tr = document.createElement("tr");
      var link = document.createElement("a");
      link.href = r.href;
      link.textContent = r.sample_id;
      cell(tr, "").appendChild(link);
      cell(tr, r.model);
      cell(tr, r.row === null ? "" : String(r.row + 1), "num");  // counted from 1, as the server's pages
      cell(tr, fmt(r.score), "num");
      var answer = cell(tr, r.answer);
      if (r.failure) {
        var span = document.createElement("span");
        span.className = "failure";
        span.textContent = " " + r.failure;
        answer.appendChild(span);
        answer.appendChild(document.createTextNode(" " + r.error));
      }
      cell(tr, r.reference);
      body.appendChild(tr);
    });
    count.textContent = found.length + " matching records \\u00b7 page " + page + " of " + pages;
    pager.textContent = "";
    [["\\u2190 previous", page - 1], ["next \\u2192", page + 1]].forEach(function (step) {
      if (step[1] < 1 || step[1] > pages) { return; }
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = step[0];
      button.addEventListener("click", function () { page = step[1]; render(); });
      pager.appendChild(button);
    });
  }
  form.addEventListener("submit", function (event) { event.preventDefault(); page = 1; render(); });
  render();
})();
"""

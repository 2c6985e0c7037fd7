"""The viewer's style sheet and the export's one script, kept as text here so the wheel carries them as code.

``view.js`` is used by the static export only (the live pages have no script):
it fills the samples table from the pair's row files (``rows/0001.js``, ...,
listed in ``data.js`` and loaded one after another, the table filled as they
come) and filters, sorts and pages it in the browser; ``sample.js`` draws one
sample's page (``sample.html#<chunk>/<sample id>``) from the chunk file that
holds its records and what was sent (``samples/<chunk>.js``). Both insert every
value with ``textContent``, never as HTML.
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
p.reading { background: #eff6ff; border: 1px solid #bfdbfe; padding: 6px 8px; margin: 8px 0; }
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
  data.rows = [];
  var loaded = 0, drawn = 0;
  window.EVALKIT_ROWS = function (rows) {
    for (var i = 0; i < rows.length; i++) { data.rows.push(rows[i]); }
    loaded += 1;
    if (loaded === data.files.length || Date.now() - drawn > 700) { drawn = Date.now(); render(); }
    next();
  };
  function next() {
    if (loaded >= data.files.length) { return; }
    var tag = document.createElement("script");
    tag.src = data.files[loaded];
    document.body.appendChild(tag);
  }
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
    var partial = loaded < data.files.length
      ? " (" + data.rows.length + " of " + data.records + " records loaded)" : "";
    count.textContent = found.length + " matching records \\u00b7 page " + page + " of " + pages + partial;
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
  next();
})();
"""

SAMPLE_JS = """
(function () {
  "use strict";
  var root = document.getElementById("sample");
  if (!root) { return; }
  var models = JSON.parse(root.getAttribute("data-models") || "[]");
  var chunks = {}, wanted = null;
  function el(tag, cls, text) {
    var x = document.createElement(tag);
    if (cls) { x.className = cls; }
    if (text !== undefined && text !== null) { x.textContent = String(text); }
    return x;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function fmt(x) {
    if (typeof x === "boolean") { return String(x); }
    if (typeof x !== "number" || !isFinite(x)) { return "\\u2013"; }
    return Math.abs(x) >= 100 ? x.toFixed(2) : x.toFixed(4);
  }
  function secs(x) { return typeof x === "number" && isFinite(x) ? String(Number(x.toFixed(2))) : "\\u2013"; }
  function str(v) { return v === null || v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v); }
  function pre(cls, v) { return el("pre", cls, str(v)); }
  function json(v) { return el("pre", "", JSON.stringify(v, null, 2)); }
  function folded(label, v, cls) {
    var d = el("details", cls || "");
    add(d, el("summary", "", label));
    add(d, json(v));
    return d;
  }
  function parse() {
    var h = window.location.hash.slice(1), cut = h.indexOf("/");
    if (cut < 1 || !/^[0-9]+$/.test(h.slice(0, cut))) { return null; }
    try { return {chunk: h.slice(0, cut), id: decodeURIComponent(h.slice(cut + 1))}; } catch (e) { return null; }
  }
  window.EVALKIT_SAMPLES = function (data) {
    if (wanted) { chunks[wanted.chunk] = data; }
    draw();
  };
  function load() {
    wanted = parse();
    if (!wanted) { root.textContent = "No sample named in this address."; return; }
    if (chunks[wanted.chunk]) { draw(); return; }
    var tag = document.createElement("script");
    tag.src = "samples/" + wanted.chunk + ".js";
    document.body.appendChild(tag);
  }
  function mediaBlock(part) {
    if (part.missing) {
      var gone = el("div", "media missing");
      add(gone, el("b", "", part.kind));
      gone.appendChild(document.createTextNode(" " + part.where + ": " + part.missing));
      return gone;
    }
    if (part.kind === "image") {
      var fig = el("figure", "media image");
      var img = add(fig, el("img"));
      img.src = part.clips[0].src;
      img.alt = "image " + part.index + " of the prompt";
      add(fig, el("figcaption", "", part.where + " " + (part.caption || "")));
      return fig;
    }
    var box = el("div", "media audio");
    add(box, el("b", "", "audio"));
    box.appendChild(document.createTextNode(" " + part.where));
    part.clips.forEach(function (clip) {
      var row = add(box, el("div", "clip"));
      var player = add(row, el("audio"));
      player.controls = true;
      player.preload = "metadata";
      player.src = clip.src;
      add(row, el("span", "note", clip.label));
    });
    return box;
  }
  function conversation(conv) {
    var section = el("section", "conversation");
    if (conv.missing) {
      add(section, el("h3", "", "sent to " + conv.models.join(", ")));
      add(section, el("p", "missing", "what was sent (key " + conv.key + ") is not in the sent file"));
      return section;
    }
    var head = "sent to " + conv.models.join(", ");
    if (conv.kind) { head += " \\u00b7 " + conv.kind; }
    if (conv.requests && conv.requests !== 1) { head += " \\u00b7 " + conv.requests + " requests"; }
    if (conv.old) { head = "images the records name (this run did not record the prompt it sent)"; }
    add(section, el("h3", "", head));
    if (conv.old) { (conv.media || []).forEach(function (p) { add(section, mediaBlock(p)); }); }
    var byMessage = {};
    (conv.media || []).forEach(function (p) { (byMessage[p.message] = byMessage[p.message] || []).push(p); });
    (conv.messages || []).forEach(function (message, m) {
      var role = message && typeof message === "object" && typeof message.role === "string" ? message.role : "?";
      var content = message && typeof message === "object" ? message.content : message;
      var box = add(section, el("div", "message " + role));
      add(box, el("div", "role", role));
      var here = (byMessage[m] || []).slice();
      (Array.isArray(content) ? content : [{type: "text", text: content}]).forEach(function (part) {
        var kind = part && typeof part === "object" ? part.type : null;
        if (kind === "text") { add(box, pre("text", part.text)); }
        else if (kind === "audio" || kind === "image") {
          if (conv.media) { var found = here.shift(); if (found) { add(box, mediaBlock(found)); } }
          else { add(box, el("div", "media missing", kind + ": not in this export (export fewer samples)")); }
        } else { add(box, pre("text", JSON.stringify(part))); }
      });
    });
    if (conv.tools && conv.tools.length) { add(section, folded("tools offered", conv.tools, "tools")); }
    var fields = conv.params_by_turn && conv.params_by_turn.length ? conv.params_by_turn : conv.params;
    if (fields && Object.keys(fields).length) { add(section, folded("request fields", fields, "params")); }
    return section;
  }
  function sentConversations(records, sent) {
    var keys = [];
    records.forEach(function (r) {
      if (typeof r.sent === "string" && keys.indexOf(r.sent) < 0) { keys.push(r.sent); }
    });
    return keys.map(function (key) {
      var entry = sent[key];
      var who = records.filter(function (r) { return r.sent === key; }).map(function (r) { return str(r.model); });
      if (!entry) { return {key: key, models: who, missing: true}; }
      return {key: key, models: who, missing: false, kind: entry.kind, requests: entry.requests,
              messages: Array.isArray(entry.messages) ? entry.messages : [], tools: entry.tools || [],
              params: entry.params && typeof entry.params === "object" ? entry.params : {},
              params_by_turn: Array.isArray(entry.params_by_turn) ? entry.params_by_turn : [], media: null};
    });
  }
  function answers(records) {
    var table = el("table", "answers");
    var head = add(add(table, el("thead")), el("tr"));
    add(head, el("th"));
    records.forEach(function (r) { add(head, el("th", "", str(r.model))); });
    var body = add(table, el("tbody"));
    function line(label, cell) {
      var tr = add(body, el("tr"));
      add(tr, el("th", "", label));
      records.forEach(function (r) { var td = add(tr, el("td")); var c = cell(r); if (c) { td.appendChild(c); } });
    }
    line("score", function (r) { return el("span", "score", fmt(r.score)); });
    function shown(v) { return v !== null && v !== undefined ? pre("text", v) : el("span", "", "\\u2013"); }
    line("answer", function (r) { return shown(r.response); });
    line("prediction", function (r) { return shown(r.prediction); });
    if (records.some(function (r) { return Array.isArray(r.answers) && r.answers.length > 1; })) {
      line("each turn's answer", function (r) {
        var box = el("div");
        (Array.isArray(r.answers) ? r.answers : []).forEach(function (a, i) {
          var turn = add(box, el("div", "turn"));
          add(turn, el("div", "role", "turn " + (i + 1)));
          add(turn, pre("text", a));
        });
        return box;
      });
    }
    if (records.some(function (r) { return r.failure; })) {
      line("failure", function (r) {
        if (!r.failure) { return null; }
        var box = el("div");
        add(box, el("span", "failure", str(r.failure)));
        add(box, pre("error", r.error));
        return box;
      });
    }
    line("details", function (r) { return r.details === undefined || r.details === null ? null : json(r.details); });
    line("request", function (r) {
      var text = "latency " + secs(r.latency) + " s \\u00b7 attempts " + str(r.attempts);
      if (r.cached) { text += " \\u00b7 from the store"; }
      if (r.replica !== null && r.replica !== undefined) { text += " \\u00b7 replica " + str(r.replica); }
      return el("span", "", text);
    });
    if (records.some(function (r) { return r.prompt; })) {
      line("prompt made from", function (r) { return r.prompt ? json(r.prompt) : null; });
    }
    return table;
  }
  function draw() {
    var data = wanted && chunks[wanted.chunk];
    if (!data) { return; }
    var sid = wanted.id;
    var records = data.records.filter(function (r) { return r && str(r.sample_id) === sid; });
    records.sort(function (a, b) {
      var x = models.indexOf(str(a.model)), y = models.indexOf(str(b.model));
      return (x < 0 ? models.length : x) - (y < 0 ? models.length : y);
    });
    root.textContent = "";
    if (!records.length) { add(root, el("p", "error", "no sample " + sid + " in this export")); return; }
    document.title = "sample " + sid + " \\u00b7 evalkit view";
    var first = records[0];
    var h1 = add(root, el("h1", "", "Sample "));
    add(h1, el("span", "sid", sid));
    var meta = root.getAttribute("data-pair");
    // counted from 1, as the samples table, the server's pages and evalkit's messages
    if (typeof first.row === "number") { meta += " \\u00b7 row " + (first.row + 1); }
    if (typeof first.duration === "number") { meta += " \\u00b7 " + secs(first.duration) + " s of audio"; }
    add(root, el("p", "meta", meta));
    if (first.groups && typeof first.groups === "object") {
      var chips = el("p", "groups");
      Object.keys(first.groups).forEach(function (k) {
        if (first.groups[k] === null || first.groups[k] === undefined) { return; }
        var value = str(first.groups[k]);
        var a = add(chips, el("a", "chip", k + ": " + value));
        a.href = "index.html?group=" + encodeURIComponent(k + ":" + value);
      });
      if (chips.childNodes.length) { add(root, chips); }
    }
    add(root, el("h2", "", "Reference"));
    add(root, pre("text reference", Array.isArray(first.reference) ? first.reference.join("\\n") : first.reference));
    add(root, el("h2", "", "What was sent"));
    var sent = {};
    data.sent.forEach(function (entry) {
      if (entry && typeof entry.key === "string" && !sent[entry.key]) { sent[entry.key] = entry; }
    });
    var own = Object.prototype.hasOwnProperty.call(data.media, sid);
    var convs = own ? data.media[sid] : sentConversations(records, sent);
    if (!convs.length) {
      add(root, el("p", "note", "This run did not record what it sent (records made before evalkit kept " +
                   "prompts), or nothing was sent."));
    }
    convs.forEach(function (conv) { add(root, conversation(conv)); });
    add(root, el("h2", "", "Answers"));
    add(root, answers(records));
  }
  window.addEventListener("hashchange", load);
  load();
})();
"""

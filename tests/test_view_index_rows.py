"""An index holds what a plain reading of its file gives, line by line, whatever the lines are like.

The build reads the file in one loop and takes shortcuts for the usual record
(one text, or the same text three times; a float score). Each test compares
the tables it wrote with rows made here from ``json.loads`` of every line and
the rules as documented (texts case-folded, cut at the limit, each kept once
unless held inside a longer one): blank, broken and non-object lines, a line
too long to read, a last line cut mid-write, CRLF endings, texts that repeat,
contain one another or differ only in case, and values that are not strings.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from evalkit.util.confine import MAX_LINE_BYTES
from evalkit.view import index as view_index
from evalkit.view.indexrows import TEXT_LIMIT, search_text


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(_text(v) for v in value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _search_text(*values: Any) -> str:
    """The documented rule, written plainly: longest first, a text inside a kept one left out."""
    texts = [_text(v)[:TEXT_LIMIT].casefold() for v in values]
    kept: list[str] = []
    for found in sorted(texts, key=len, reverse=True):
        if found and not any(found in other for other in kept):
            kept.append(found)
    return "\n".join(kept)


def _score(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


RECORDS: list[dict[str, Any]] = [
    {
        "sample_id": "a",
        "model": "m",
        "row": 0,
        "score": 1.0,
        "reference": "Same",
        "response": "Same",
        "prediction": "Same",
    },
    {"sample_id": "b", "model": "m", "row": 1, "score": 0.5, "reference": "Hello World", "response": "hello world"},
    {
        "sample_id": "c",
        "model": "m",
        "row": 2,
        "score": 0,
        "reference": "cat",
        "response": "the cat sat",
        "prediction": "",
    },
    {"sample_id": "d", "model": "n", "row": True, "score": True, "reference": ["x", "y"], "response": {"k": "Straße"}},
    {"sample_id": 7, "model": None, "row": 3.0, "score": None, "failure": "timeout", "response": None, "sent": "k1"},
    {"sample_id": "e", "model": "m", "row": 4, "score": "0.3", "reference": 12, "prediction": 12.5, "sent": 5},
    {"sample_id": "f", "model": "m", "row": 5, "score": 0.25, "reference": "ab" * TEXT_LIMIT, "response": "AB"},
    {"sample_id": "g", "model": "m", "row": 6, "score": 2.0, "failure": "", "groups": {"lang": "en", "spk": None}},
    {"sample_id": "h", "model": "m", "row": 7, "score": 0.0, "response": "ΣΊΣΥΦΟΣ", "prediction": "σίσυφος"},
]


def _records_file(path: Path, long_line: bool) -> bytes:
    lines = [json.dumps(r, ensure_ascii=False).encode() for r in RECORDS]
    body = [
        lines[0] + b"\n",
        b"\n",  # blank: not counted
        b"   \n",
        lines[1] + b"\r\n",  # CRLF: the record is read, its length includes the \r
        b"{not json\n",  # bad
        b"[1, 2]\n",  # JSON, but not an object: bad
        lines[2] + b"\n",
        *([b'{"x": "' + b"y" * MAX_LINE_BYTES + b'"}\n'] if long_line else []),
        *(line + b"\n" for line in lines[3:]),
        b'{"sample_id": "cut", "mod',  # a last line cut mid-write: left for the next read
    ]
    path.write_bytes(b"".join(body))
    return path.read_bytes()


def _expected(data: bytes) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], dict[str, Any]]:
    rows: list[tuple[Any, ...]] = []
    texts: list[tuple[Any, ...]] = []
    bad = lines = 0
    long = 0
    off = 0
    line_id = 1
    for raw in data.split(b"\n")[:-1]:
        size = len(raw) + 1
        if size > MAX_LINE_BYTES + 1:
            long += 1
        elif raw.strip():
            try:
                rec = json.loads(raw)
            except ValueError:
                rec = None
            if isinstance(rec, dict):
                lines += 1
                row = rec.get("row")
                sent = rec.get("sent")
                rows.append(
                    (
                        line_id,
                        off,
                        len(raw),
                        _text(rec.get("sample_id")),
                        _text(rec.get("model")),
                        row if isinstance(row, int) and not isinstance(row, bool) else None,
                        _score(rec.get("score")),
                        _text(rec.get("failure")) or None,
                        sent if isinstance(sent, str) else None,
                    )
                )
                texts.append((line_id, _search_text(rec.get("reference"), rec.get("response"), rec.get("prediction"))))
            else:
                bad += 1
        off += size
        line_id += 1
    return rows, texts, {"lines": lines, "bad": bad, "long": long, "offset": off, "next": line_id}


@pytest.mark.parametrize("long_line", [False, True])
def test_a_records_index_holds_what_a_plain_reading_of_each_line_gives(tmp_path: Path, long_line: bool) -> None:
    source = tmp_path / "records" / "d__m.jsonl"
    source.parent.mkdir()
    data = _records_file(source, long_line)
    state = view_index.build_into(source, "records", tmp_path / "index.sqlite")
    rows, texts, counts = _expected(data)
    db = sqlite3.connect(state.db)
    try:
        assert db.execute("SELECT * FROM rec ORDER BY id").fetchall() == rows
        assert db.execute("SELECT * FROM txt ORDER BY id").fetchall() == texts
        assert db.execute("SELECT name, value, id FROM grp JOIN gv USING (gv)").fetchall() == [
            ("lang", "en", rows[7][0])
        ]
        meta = dict(db.execute("SELECT k, v FROM meta"))
        assert {k: meta[k] for k in counts} == counts
        assert db.execute("""SELECT rowid FROM fts WHERE fts MATCH '"σίσυφοσ"'""").fetchall() == [(rows[-1][0],)]
    finally:
        db.close()
    assert state.lines == len(RECORDS) and state.bad_lines == 2 and state.long_lines == int(long_line)
    assert state.tail_bytes == len(b'{"sample_id": "cut", "mod') and not state.complete


@pytest.mark.parametrize(
    "values",
    [
        ("Same", "Same", "Same"),
        ("Hello", "hello", "HELLO"),
        ("cat", "the cat sat", ""),
        ("", None, ""),
        (None,),
        ("b", "a", "b", "ab"),
        ("x" * (TEXT_LIMIT + 5), "X" * TEXT_LIMIT, "xx"),
        (["one", "two"], {"k": 1}, 3, 2.5),
        ("Straße", "STRASSE", "strasse!"),
        ("aa", "bb", "aabb", "bbaa"),
    ],
)
def test_the_searched_text_follows_the_plain_rule(values: tuple[Any, ...]) -> None:
    assert search_text(*values) == _search_text(*values)

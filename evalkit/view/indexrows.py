"""What an index keeps of one line: a record's columns and searched text, a sent entry's key and prompt text.

One definition for the build (:mod:`evalkit.view.index`) and for the check of
an index found in a run folder (:mod:`evalkit.view.indexcheck`), which reads a
few lines back and compares them with what the index holds: an index made for
another file, or edited, differs there.
"""

from __future__ import annotations

from typing import Any

from evalkit.util import jsonutil

#: characters of an answer or reference kept for text search (longer texts are searched in this prefix)
TEXT_LIMIT = 4000

_INF = float("inf")

#: a record's columns in the index, in the order of the ``rec`` table after (id, off, len)
RecordRow = tuple[str, str, int | None, float | None, str | None, str | None]


def text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(text(v) for v in value)
    return jsonutil.dumps(value)


def search_text(*values: Any) -> str:
    """The texts searched, case-folded, each kept once: one held inside another (an answer and its prediction,
    often the same) adds nothing a search could find, only bytes."""
    texts: list[str] = []
    for value in values:
        found = value if type(value) is str else text(value)
        if found:
            found = found[:TEXT_LIMIT].casefold()
            if found not in texts:  # an exact repeat (an answer and its prediction) is held inside the first
                texts.append(found)
    if len(texts) < 2:  # most records: one text, or all the same
        return texts[0] if texts else ""
    kept: list[str] = []
    for found in sorted(texts, key=len, reverse=True):
        if not any(found in other for other in kept):
            kept.append(found)
    return "\n".join(kept)


def score(value: Any) -> float | None:
    if type(value) is float:  # a record's usual score
        return value if value == value and abs(value) != _INF else None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and value == value and abs(value) != float("inf"):
        return float(value)
    return None


def record_row(rec: dict[str, Any]) -> RecordRow:
    """(sample_id, model, row, score, failure, sent) as the index keeps them."""
    get = rec.get
    row = get("row")
    sent = get("sent")
    failure = get("failure")
    return (
        text(get("sample_id")),
        text(get("model")),
        row if type(row) is int or (isinstance(row, int) and not isinstance(row, bool)) else None,
        score(get("score")),
        None if failure is None else text(failure) or None,
        sent if isinstance(sent, str) else None,
    )


def record_text(rec: dict[str, Any]) -> str:
    """What a text search reads of a record: its reference, answer and prediction."""
    return search_text(rec.get("reference"), rec.get("response"), rec.get("prediction"))


def prompt_text(entry: dict[str, Any]) -> str:
    """Every text part of what was sent, for text search over prompts."""
    parts: list[str] = []
    for message in entry.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [str(p.get("text")) for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return search_text("\n".join(parts))


def sent_row(entry: dict[str, Any]) -> tuple[str, str] | None:
    """(key, sample_id) of a sent entry; None for one without a key (not indexed)."""
    key = entry.get("key")
    return (str(key), text(entry.get("sample_id"))) if key else None

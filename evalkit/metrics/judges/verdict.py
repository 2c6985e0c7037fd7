"""Reading a judge's verdict out of whatever text the judge sent back.

Judges are asked for a JSON object, but real judge models wrap it in
reasoning (``<think>`` blocks), markdown code fences and prose, write Python
dicts (single quotes, ``True``), leave trailing commas, or drop the JSON and
write "Score: 4". A verdict we cannot read with confidence must become a
judge failure (excluded and counted), never a guessed score, so the rules
are explicit and conservative:

1. Reasoning blocks are removed: ``<think>…</think>`` (also ``thinking``,
   ``reasoning``, ``analysis`` tags) and a dangling prefix that ends in a
   closing tag (models whose chat template opens the block in the prompt).
2. Every ``{…}`` object in the rest is read, first as JSON, then leniently:
   single-quoted strings, unescaped inner quotes (a quote only closes a
   string when ``,`` ``:`` ``}`` ``]`` or the end follows), trailing commas,
   ``True``/``False``/``None``, unquoted keys and bare-word values.
3. The **last** object that carries a verdict key decides (a judge that
   quotes the format before answering ends with its real answer); its value
   must be valid, or the verdict is a failure. Keys are matched without
   regard to case, also one level of nesting down.
4. Without such an object, labelled lines are read ("Verdict: 1",
   "Score: **4**", "rating = 4/5", "criteria_met: true"); they count only
   when every labelled value in the text agrees. A text that is nothing but
   a value ("4", "Correct.", "**no**") is read as that value.

Anything else, and values outside the scale (7 on 0-5, "maybe" for a binary
verdict, "4/10" on a 0-5 scale), raise :class:`VerdictError`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

#: keys that carry the verdict in a JSON answer, most specific first
BINARY_KEYS = ("verdict", "correct", "is_correct", "judgement", "judgment", "result", "score", "label", "grade")
SCALE_KEYS = ("verdict", "score", "rating", "grade", "judgement", "judgment", "result", "points")
MET_KEYS = ("criteria_met", "criterion_met", "met", "verdict", "result", "judgement", "judgment")
#: labels read in plain text ("Verdict: 1"); narrower than the keys, because prose also
#: says "reference answer: 0" or "the result: ..." without giving a verdict
BINARY_LABELS = ("final verdict", "verdict", "judgement", "judgment", "score", "grade")
SCALE_LABELS = ("final verdict", "verdict", "final score", "score", "rating", "grade", "judgement", "judgment")
MET_LABELS = ("criteria_met", "criterion_met", "criteria met", "criterion met", "verdict", "judgement", "judgment")
EXPLANATION_KEYS = (
    "explanation",
    "reason",
    "reasoning",
    "rationale",
    "justification",
    "explain",
    "comment",
    "feedback",
)

_TRUE_WORDS = frozenset(
    {
        "1",
        "yes",
        "y",
        "true",
        "correct",
        "right",
        "pass",
        "passed",
        "met",
        "accept",
        "accepted",
        "consistent",
        "equivalent",
        "match",
        "matches",
    }
)
_FALSE_WORDS = frozenset(
    {
        "0",
        "no",
        "n",
        "false",
        "incorrect",
        "wrong",
        "fail",
        "failed",
        "not met",
        "unmet",
        "reject",
        "rejected",
        "inconsistent",
        "not equivalent",
        "no match",
        "mismatch",
    }
)

_REASONING = "think|thinking|reasoning|analysis|thought"
_BLOCK = re.compile(rf"<(?P<tag>{_REASONING})>.*?</(?P=tag)>", re.DOTALL | re.IGNORECASE)
_DANGLING_CLOSE = re.compile(rf"^.*</(?:{_REASONING})>", re.DOTALL | re.IGNORECASE)
_UNCLOSED_OPEN = re.compile(rf"<(?:{_REASONING})>.*$", re.DOTALL | re.IGNORECASE)

_CLOSERS = ",:}]"
_EXPLANATION_LIMIT = 2000
#: objects are looked for in the answer's last characters only (the verdict ends the answer;
#: the lenient scan is quadratic in the number of unbalanced braces)
_SCAN_LIMIT = 20_000


class VerdictError(ValueError):
    """The judge's answer holds no usable verdict (the sample becomes a ``judge_parse`` failure)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A verdict read from a judge's answer.

    ``value`` is on the verdict's own scale (1.0/0.0 for binary and met/not
    met verdicts); ``raw`` is what the judge wrote for it; ``method`` says
    how it was read: "json", "json_lenient" or "text".
    """

    value: float
    raw: Any
    explanation: str | None
    method: str


# -- reasoning and objects ------------------------------------------------------------------


def strip_reasoning(text: str) -> str:
    """The text without reasoning blocks (see rule 1 of the module docstring)."""
    text = _BLOCK.sub(" ", text)
    text = _DANGLING_CLOSE.sub(" ", text)
    return _UNCLOSED_OPEN.sub(" ", text)


def _closes(text: str, index: int) -> bool:
    """A quote at ``index`` closes its string when only whitespace and then a closer (or the end) follow."""
    j = index + 1
    while j < len(text) and text[j] in " \t\r\n":
        j += 1
    return j >= len(text) or text[j] in _CLOSERS


def _decode_string(body: str, quote: str) -> str:
    """The value of a string literal's body written with ``quote`` (JSON or Python-ish escapes)."""
    fixed = body.replace("\\'", "'")
    fixed = re.sub(r'(?<!\\)"', '\\"', fixed) if quote == "'" else fixed
    try:
        return json.loads(f'"{fixed}"', strict=False)
    except ValueError:
        return body.replace("\\'", "'").replace('\\"', '"')


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$")
_LITERALS = {"true": "true", "false": "false", "null": "null", "True": "true", "False": "false", "None": "null"}


def _scan_object(text: str, start: int) -> tuple[int, str] | None:
    """From the ``{`` at ``start``: (index after its matching ``}``, the object rewritten as strict JSON).

    None when the braces never balance. The rewrite is what rule 2 of the
    module docstring allows; for valid JSON it is the same object.
    """
    out: list[str] = []
    depth = 0
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == c and _closes(text, j):
                    break
                j += 1
            if j >= n:
                return None
            out.append(json.dumps(_decode_string(text[i + 1 : j], c), ensure_ascii=False))
            i = j + 1
        elif c in "{[":
            depth += 1
            out.append(c)
            i += 1
        elif c in "}]":
            depth -= 1
            out.append(c)
            i += 1
            if depth == 0:
                return i, "".join(out)
        elif c == ",":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j < n and text[j] not in "}]":
                out.append(c)
            i += 1
        elif c == ":" or c.isspace():
            out.append(c)
            i += 1
        else:
            j = i
            while j < n and text[j] not in "{}[],:\"'" and not text[j].isspace():
                j += 1
            # a bare word runs on to the next structural character (a value like `yes please`)
            k = j
            while k < n and text[k] not in "{}[],:\"'\n":
                k += 1
            token = text[i:j]
            words = text[i:k].rstrip()
            m = k
            while m < n and text[m] in " \t":
                m += 1
            is_key = m < n and text[m] == ":"
            if not is_key and (token in _LITERALS or _NUMBER.match(token)) and not text[j:k].strip():
                out.append(_LITERALS.get(token, token))
                i = j
            else:
                out.append(json.dumps(words))
                i = k
    return None


def json_objects(text: str) -> list[tuple[dict[str, Any], bool]]:
    """Every outermost object in ``text`` that can be read, in order, with whether it was valid JSON."""
    found: list[tuple[dict[str, Any], bool]] = []
    i = 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return found
        strict_end = None
        try:
            value, strict_end = json.JSONDecoder(strict=False).raw_decode(text, i)
        except ValueError:
            value = None
        if isinstance(value, dict) and strict_end is not None:
            found.append((value, True))
            i = strict_end
            continue
        scanned = _scan_object(text, i)
        if scanned is not None:
            end, rewritten = scanned
            try:
                value = json.loads(rewritten, strict=False)
            except ValueError:
                value = None
            if isinstance(value, dict):
                found.append((value, False))
                i = end
                continue
        i += 1


def _lookup(obj: dict[str, Any], keys: Sequence[str]) -> tuple[bool, Any]:
    """(found, value) of the first of ``keys`` in ``obj`` (case-insensitive), then one level down."""
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    for key in keys:
        if key in lowered and not isinstance(lowered[key], (dict, list)):
            return True, lowered[key]
    for value in obj.values():
        if isinstance(value, dict):
            found, inner = _lookup(value, keys)
            if found:
                return True, inner
    return False, None


def _explanation(obj: dict[str, Any]) -> str | None:
    found, value = _lookup(obj, EXPLANATION_KEYS)
    if not found or value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text[:_EXPLANATION_LIMIT]


# -- value scales ---------------------------------------------------------------------------


def _word(value: str) -> str:
    return " ".join(re.sub(r"[^\w/.\- ]", " ", value.lower()).split()).strip(". ")


def binary_value(raw: Any) -> float:
    """1.0 or 0.0 for a binary verdict value (bool, 0/1, yes/no, correct/incorrect, ...)."""
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    if isinstance(raw, (int, float)):
        if raw in (0, 1):
            return float(raw)
        raise VerdictError(f"binary verdict must be 0 or 1, got {raw!r}")
    if isinstance(raw, str):
        word = _word(raw)
        if word in _TRUE_WORDS:
            return 1.0
        if word in _FALSE_WORDS:
            return 0.0
        if _NUMBER.match(word) and float(word) in (0.0, 1.0):
            return float(word)
    raise VerdictError(f"binary verdict must be 0/1, true/false, yes/no or correct/incorrect, got {raw!r}")


_FRACTION = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(?:/|out of|of)\s*(\d+(?:\.\d+)?)$")


def scale_value(raw: Any, low: float, high: float) -> float:
    """A number on ``[low, high]`` from a verdict value (4, 4.0, "4", "4/5", "4 out of 5")."""
    if isinstance(raw, bool) or raw is None:
        raise VerdictError(f"verdict must be a number from {low:g} to {high:g}, got {raw!r}")
    if isinstance(raw, (int, float)):
        value = float(raw)
    elif isinstance(raw, str):
        word = _word(raw)
        fraction = _FRACTION.match(word)
        if fraction:
            if float(fraction.group(2)) != high:
                raise VerdictError(f"verdict {raw!r} is not on the {low:g}-{high:g} scale")
            value = float(fraction.group(1))
        elif _NUMBER.match(word):
            value = float(word)
        else:
            raise VerdictError(f"verdict must be a number from {low:g} to {high:g}, got {raw!r}")
    else:
        raise VerdictError(f"verdict must be a number from {low:g} to {high:g}, got {raw!r}")
    if not math.isfinite(value) or not low <= value <= high:
        raise VerdictError(f"verdict {raw!r} is outside {low:g}-{high:g}")
    return value


# -- the parsers ----------------------------------------------------------------------------

_VALUE = r"(?P<value>-?\d+(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?|[A-Za-z]+(?:\s+(?:met|equivalent|match))?)"
_LABEL_SEP = r"\W{0,3}\s*(?:is|was|of|=|:|-)?\s*[*_`\"'\[(]*\s*"


def _labelled(text: str, keys: Sequence[str]) -> Iterator[str]:
    labels = "|".join(
        re.escape(k).replace("_", "[ _]").replace("\\ ", "[ _]") for k in sorted(keys, key=len, reverse=True)
    )
    pattern = re.compile(rf"(?<![A-Za-z])(?:{labels})(?![A-Za-z]){_LABEL_SEP}{_VALUE}", re.IGNORECASE)
    for match in pattern.finditer(text):
        yield match.group("value")


def _parse(text: str, keys: Sequence[str], labels: Sequence[str], convert: Any) -> Verdict:
    if text is None or not str(text).strip():
        raise VerdictError("the judge's answer is empty")
    body = strip_reasoning(str(text))
    decided: tuple[dict[str, Any], bool, Any] | None = None
    for obj, strict in json_objects(body[-_SCAN_LIMIT:]):
        found, raw = _lookup(obj, keys)
        if found:
            decided = (obj, strict, raw)
    if decided is not None:
        obj, strict, raw = decided
        return Verdict(convert(raw), raw, _explanation(obj), "json" if strict else "json_lenient")
    values: list[tuple[float, str]] = []
    rejected: VerdictError | None = None
    for raw in _labelled(body, labels):
        try:
            values.append((convert(raw), raw))
        except VerdictError as error:
            rejected = rejected or error
    distinct = {v for v, _ in values}
    if len(distinct) == 1:
        return Verdict(values[-1][0], values[-1][1], None, "text")
    if len(distinct) > 1:
        shown = ", ".join(sorted({r for _, r in values}))
        raise VerdictError(f"ambiguous verdict: the answer gives {shown}")
    if rejected is not None:
        raise rejected
    whole = body.strip().strip("*_`\"' \n\t.")
    if whole and len(whole) <= 20:
        try:
            return Verdict(convert(whole), whole, None, "text")
        except VerdictError:
            pass
    raise VerdictError(f"no verdict found: expected a JSON object with a {keys[0]!r} key")


def parse_binary(text: str) -> Verdict:
    """A correct (1.0) / incorrect (0.0) verdict; raises VerdictError."""
    return _parse(text, BINARY_KEYS, BINARY_LABELS, binary_value)


def parse_scale(text: str, low: float = 0.0, high: float = 5.0) -> Verdict:
    """A rating on ``[low, high]``; raises VerdictError."""
    return _parse(text, SCALE_KEYS, SCALE_LABELS, lambda raw: scale_value(raw, low, high))


def parse_met(text: str) -> Verdict:
    """Whether a rubric criterion is met (1.0) or not (0.0); raises VerdictError."""
    return _parse(text, MET_KEYS, MET_LABELS, binary_value)

"""KARMA's command-line argument strings, read into plain dicts for `evalkit run`.

KARMA users write ``--dataset-args "in22conv:source_language=en,target_language=hi;other:split=test"``,
``--processor-args "in22conv.devnagari_transliterator:source_script=en"`` and
``--metric-args "bleu:max_order=4"``; ``--model-args`` is a JSON object there. The
same strings work here, so a KARMA command line moves over unchanged. This
module only parses: what each value means for a config (dataset options, a
metric's options, a model entry's fields) is decided by
:func:`evalkit.config.overrides.apply_overrides`, which also refuses names the run does
not hold. Every malformed string is a UserError naming the flag and the part
that is wrong (exit 2, before any request).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from evalkit.errors import UserError
from evalkit.util.json_safe import load_json
from evalkit.util.yaml_safe import shorten

#: a number as a user types it on a command line (no leading zeros taken as octal, no hex)
_INT = re.compile(r"[+-]?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?")


def split_names(values: Iterable[str] | None) -> list[str] | None:
    """``--datasets a,b --datasets c`` (and ``--dataset``) as [a, b, c]: comma-separated and repeatable."""
    if values is None:
        return None
    names = [part.strip() for value in values for part in value.split(",")]
    return list(dict.fromkeys(name for name in names if name)) or None


def typed_value(text: str, source: str = "a value") -> Any:
    """A command-line value as the config would hold it: true/false, none/null, a number, JSON [..]/{..}, or text.

    KARMA passes every value on as a string and lets each component convert it;
    evalkit's options are validated by type, so ``max_order=4`` must arrive as 4.
    A value in quotes stays text (``language="1"``); one that is not JSON stays text too. JSON nested beyond the
    loader's depth, or with a key twice, is a UserError naming ``source`` (never a RecursionError).
    """
    value = text.strip()
    lowered = value.lower()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    if value[:1] in "[{":
        try:
            json.loads(value)
        except json.JSONDecodeError:
            return value
        except RecursionError:
            pass  # JSON, nested too deep: the safe loader says so
        return load_json(value, source, UserError)
    return value


def _key_values(text: str, flag: str, scope: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in text.split(","):
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise UserError(f"{flag}: {shorten(pair.strip())!r} (for {shorten(scope)}) is not key=value")
        values[key.strip()] = typed_value(value, f"{flag} ({shorten(scope)}: {shorten(key.strip())})")
    return values


def parse_scoped(values: Iterable[str] | None, flag: str) -> dict[str, dict[str, Any]]:
    """``NAME:key=value,key=value;NAME2:key=value`` (repeatable) as {NAME: {key: value}}.

    The name ends at the last ``:`` before the first ``=``, so names that hold a
    colon (``karma:ai4bharat/IN22-Conv``) and values that hold one both read right.
    A name given twice has its keys merged, the later value winning.
    """
    found: dict[str, dict[str, Any]] = {}
    for text in values or ():
        for entry in text.split(";"):
            if not entry.strip():
                continue
            head = entry.split("=", 1)[0]
            cut = head.rfind(":")
            if cut <= 0 or not entry[cut + 1 :].strip():
                raise UserError(
                    f"{flag}: {shorten(entry.strip())!r} is not NAME:key=value[,key=value] "
                    "(entries are separated by ';')"
                )
            name = entry[:cut].strip()
            found.setdefault(name, {}).update(_key_values(entry[cut + 1 :], flag, name))
    return found


def parse_processor_args(values: Iterable[str] | None) -> dict[str, dict[str, dict[str, Any]]]:
    """``DATASET.PROCESSOR:key=value;...`` as {DATASET: {PROCESSOR: {key: value}}}.

    The processor is what follows the dataset name's last dot (processor names
    have none; a dataset name may, as in ``v1.0``).
    """
    flag = "--processor-args"
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for scope, arguments in parse_scoped(values, flag).items():
        dataset, dot, processor = scope.rpartition(".")
        if not dot or not dataset or not processor:
            raise UserError(
                f"{flag}: {shorten(scope)!r} is not DATASET.PROCESSOR (e.g. in22conv.devnagari_transliterator)"
            )
        found.setdefault(dataset, {}).setdefault(processor, {}).update(arguments)
    return found


def parse_model_args(values: Iterable[str] | None) -> dict[str, Any]:
    """``--model-args``: KARMA's JSON object (``'{"temperature": 0.7}'``) or ``key=value,key=value``."""
    flag = "--model-args"
    found: dict[str, Any] = {}
    for text in values or ():
        stripped = text.strip()
        if stripped.startswith("{"):
            # nested too deep or a key twice: one line naming the flag (never a RecursionError, never the last wins)
            data = load_json(stripped, flag, UserError)
            if not isinstance(data, dict):
                raise UserError(f"{flag}: expected a JSON object of model parameters")
            found.update(data)
        elif stripped:
            found.update(_key_values(stripped, flag, "the model"))
    return found

"""Validation errors as users read them: one line per problem with the file, the key path and what was expected.

Validation collects *all* problems and reports them at once, each with a "did you
mean" suggestion for an unknown key and the documented range for a number outside it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from evalkit.config.schema import Config
from evalkit.errors import did_you_mean
from evalkit.util.redact import is_secret_key
from evalkit.util.yaml_safe import shorten


def _known_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names valid at ``loc`` (for "did you mean"), walking nested models."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        annotation = field.annotation
        current = _first_model(annotation)
    return list(getattr(current, "model_fields", {}) or [])


def _first_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return shorten(out) or "(top level)"


def _field_at(loc: tuple[Any, ...]) -> Any:
    """The pydantic FieldInfo a ``loc`` ends at (None when it ends inside a list, a tuple or an unknown key)."""
    if not loc or not isinstance(loc[-1], str):
        return None
    current: Any = Config
    field = None
    for part in loc:
        if isinstance(part, int):
            continue
        field = (getattr(current, "model_fields", None) or {}).get(part)
        if field is None:
            return None
        current = _first_model(field.annotation)
    return field


def _number(value: Any) -> str:
    return str(value) if isinstance(value, int) else repr(value)


def documented_range(field: Any, name: str) -> str | None:
    """``"1 <= batch_size <= 65536"`` from a field's ge/gt/le/lt bounds; None when it has none."""
    low = high = ""
    for bound in getattr(field, "metadata", ()):
        for attr, side, sign in (("ge", "low", "<="), ("gt", "low", "<"), ("le", "high", "<="), ("lt", "high", "<")):
            value = getattr(bound, attr, None)
            if value is None:
                continue
            if side == "low":
                low = f"{_number(value)} {sign} "
            else:
                high = f" {sign} {_number(value)}"
    return f"{low}{name}{high}" if low or high else None


#: pydantic's error types for a number outside a field's bounds, and for inf/nan
_RANGE_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"})
#: most problems listed in one message: a generated config wrong in 10,000 places is not printed 10,000 times
_MAX_PROBLEMS = 50


def format_validation_error(error: ValidationError, source: str) -> str:
    """One line per problem: the file, the key path, the value (at most 200 characters) and what was expected."""
    lines = []
    for item in error.errors():
        loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        where = _format_loc(loc)
        secret = any(isinstance(p, str) and is_secret_key(p) for p in loc)
        got = item.get("input")
        if item["type"] == "extra_forbidden":
            key = loc[-1]
            hint = did_you_mean(str(key), _known_fields(Config, loc))
            lines.append(f"{source}: {where}: unknown key{hint}")
        elif item["type"] == "missing":
            lines.append(f"{source}: {where}: missing mandatory key")
        elif item["type"] == "literal_error":
            expected = item.get("ctx", {}).get("expected", "")
            hint = did_you_mean(
                str(item.get("input")), [s.strip("'") for s in str(expected).replace(" or ", ", ").split(", ")]
            )
            lines.append(f"{source}: {where}: {shorten(repr(item['input']))} is not one of {expected}{hint}")
        elif item["type"] in _RANGE_ERRORS and (allowed := documented_range(_field_at(loc), str(loc[-1]))):
            shown = "" if secret else f" (got {shorten(repr(got))})"
            lines.append(f"{source}: {where}: {item['msg']}{shown}; allowed: {allowed}")
        else:
            msg = item["msg"].removeprefix("Value error, ")
            shown = "" if isinstance(got, (dict, list)) or secret else f" (got {shorten(repr(got))})"
            lines.append(f"{source}: {where}: {shorten(msg)}{shown}")
    if len(lines) > _MAX_PROBLEMS:
        lines[_MAX_PROBLEMS:] = [f"{source}: ... and {len(lines) - _MAX_PROBLEMS} more problems"]
    return "\n".join(lines)

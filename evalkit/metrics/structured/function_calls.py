"""Function calls checked as the Berkeley Function Calling Leaderboard's AST checker checks them
(``bfcl_match_score``; BFCL lives in the gorilla repository, ``berkeley-function-call-leaderboard``).

A sample carries the functions the model may call (``meta["functions"]`` or
``meta["tools"]``: BFCL's descriptions, JSON or a list; OpenAI's
``{"type": "function", "function": {...}}`` wrappers are unwrapped) and, as its
reference, BFCL's possible answer: ``[{name: {parameter: [allowed values]}}]``,
one entry per expected call, ``""`` among the allowed values marking a
parameter that may be left out.

The answer is read as a list of calls ``{name: {parameter: value}}``: JSON (the
format AU-Harness's prompt asks for, with or without a ```json fence; a single
call or OpenAI's ``{"name", "arguments"}`` objects too), or Python call syntax
``[f(a=1), g(b="x")]`` (BFCL's prompting format). An answer with no calls,
or none that can be read, has no calls.

Checking follows BFCL's ``ast_checker`` for Python (``simple``, ``multiple``,
``parallel`` and ``parallel_multiple``; the category from ``meta["category"]``,
option ``category``, or, when neither says, from the answer key: several expected
calls are checked as ``parallel``, in any order, one as ``multiple``):

* the function name must be the description's (option ``underscore_to_dot``:
  with dots written as underscores, as BFCL expects from function-calling APIs);
* every required parameter given, no parameter the description or the
  answer key does not know, every parameter of the answer key given unless
  ``""`` is allowed;
* each value of the description's type (an int is accepted for a float; a
  value of the answer key's own type is a "variable" and compared as is),
  then among the allowed values: strings after removing spaces and
  ``,./-_*^``, lower-cased, ``'`` read as ``"``; lists element-wise the same
  way; dicts and lists of dicts key by key.

An empty answer key (BFCL's irrelevance category) is met by an answer with no
calls. Per sample 1 or 0 with the first reason found; the corpus value is the
accuracy (AU-Harness prints it x 100).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any, cast

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options

CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")

#: BFCL's Python types of the description's type names
PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_NESTED = ("array", "tuple")
_STANDARD_DROP = re.compile(r"[ ,./\-_*^]")
_OPTIONAL = ""

Call = dict[str, Any]


class CallError(ValueError):
    """The sample's functions or answer key cannot be read."""


# --- reading the answer --------------------------------------------------------------------------------------------


def _as_calls(value: Any) -> list[Call] | None:
    """A decoded JSON value as a list of ``{name: arguments}`` calls, or None when it is not one."""
    items = value if isinstance(value, list) else [value]
    calls: list[Call] = []
    for item in items:
        if not isinstance(item, dict):
            return None
        if set(item) >= {"name", "arguments"} and isinstance(item["name"], str):
            arguments = item["arguments"]
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    return None
            calls.append({item["name"]: arguments})
        elif len(item) == 1 and isinstance(next(iter(item.values())), dict):
            calls.append(dict(item))
        else:
            return None
    return calls


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _python_calls(text: str) -> list[Call] | None:
    """``[f(a=1), mod.g(b=[1, 2])]`` as calls; None when it is not a list of calls with literal keyword arguments."""
    source = text.strip()
    if not source.startswith("["):
        source = f"[{source}]"
    try:
        tree = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(tree, ast.List) or not tree.elts:
        return None
    calls: list[Call] = []
    for node in tree.elts:
        if not isinstance(node, ast.Call) or node.args:
            return None
        name = ast.unparse(node.func)
        arguments: dict[str, Any] = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                return None
            try:
                arguments[keyword.arg] = ast.literal_eval(keyword.value)
            except (ValueError, SyntaxError, TypeError):
                arguments[keyword.arg] = ast.unparse(keyword.value)  # a variable: BFCL keeps its name as a string
        calls.append({name: arguments})
    return calls


_FENCE = re.compile(r"```(?:json|python|py)?\s*(.*?)```", re.DOTALL)


def read_calls(answer: str) -> list[Call]:
    """The calls in a model's answer (rules in the module docstring); [] when none can be read."""
    text = answer.strip()
    candidates = [text, *(block.strip() for block in _FENCE.findall(answer))]
    for candidate in candidates:
        calls = _as_calls(_decoded(candidate)) if candidate else None
        if calls is not None:
            return calls
    for candidate in candidates:
        calls = _python_calls(candidate) if candidate else None
        if calls is not None:
            return calls
    return []


# --- BFCL's checks -------------------------------------------------------------------------------------------------


def standard_string(text: str) -> str:
    return _STANDARD_DROP.sub("", text).lower().replace("'", '"')


def _standard_items(values: Any) -> list[Any]:
    """The allowed values with the strings standardised (iterating as BFCL does, by index)."""
    return [standard_string(v) if type(v) is str else v for v in values]


def _answer_key_type(allowed: list[Any]) -> type | None:
    return next((type(v) for v in allowed if v != _OPTIONAL), None)


def _type_ok(value: Any, allowed: list[Any], expected: type, nested: type | None) -> tuple[bool, bool]:
    """(valid, is_variable) as BFCL's type_checker decides them."""
    key_type = _answer_key_type(allowed)
    is_variable = key_type is not None and key_type is not expected
    if type(value) is expected:
        if nested is None:
            return True, is_variable
        items = cast(list[Any], value)  # nested is set only for list types
        for option in allowed:
            if type(option) is list and not all(_type_ok(item, option, nested, None)[0] for item in items):
                continue
            return True, is_variable
        return False, is_variable
    if key_type is not None and type(value) is key_type:
        return True, True
    return False, is_variable


def _dict_ok(value: Mapping[str, Any], allowed: list[Any]) -> bool:
    for option in allowed:
        if option == _OPTIONAL:
            continue
        if any(key not in option for key in value):
            continue
        if any(
            (standard_string(v) if type(v) is str else v) not in _standard_items(option[key])
            for key, v in value.items()
        ):
            continue
        if any(key not in value and _OPTIONAL not in options for key, options in option.items()):
            continue
        return True
    return False


def _list_of_dicts_ok(value: list[Any], allowed: list[Any]) -> bool:
    for option in allowed:
        if len(value) != len(option):
            continue
        if all(_dict_ok(item, [expected]) for item, expected in zip(value, option)):
            return True
    return False


def _value_ok(value: Any, allowed: list[Any], expected: type, nested: type | None) -> bool:
    if expected is dict:
        return _dict_ok(value, allowed)
    if expected is list and nested is dict:
        return _list_of_dicts_ok(value, allowed)
    if expected is str:
        return standard_string(value) in [standard_string(v) for v in allowed if type(v) is str]
    if expected is list:
        return _standard_items(value) in [_standard_items(option) for option in allowed]
    return value in allowed


def check_call(description: Mapping[str, Any], call: Call, answer: Mapping[str, Any], dotted_names: bool) -> str | None:
    """Why ``call`` does not meet one expected call (BFCL's simple_function_checker); None when it does."""
    allowed_by_param = next(iter(answer.values()))
    name = str(description["name"])
    if not dotted_names:
        name = name.replace(".", "_")
    if name not in call:
        return f"function {name!r} not called"
    arguments = call[name]
    if not isinstance(arguments, dict):
        return f"the arguments of {name!r} are not an object"
    parameters = description.get("parameters") or {}
    properties = parameters.get("properties") or {}
    missing = next((p for p in parameters.get("required") or () if p not in arguments), None)
    if missing is not None:
        return f"required parameter {missing!r} missing"
    for param, value in arguments.items():
        if param not in properties or param not in allowed_by_param:
            return f"unexpected parameter {param!r}"
        type_name = properties[param].get("type")
        if type_name not in PYTHON_TYPES:
            raise CallError(
                f"parameter {param!r} of {name!r} has type {type_name!r}; BFCL's Python types: {sorted(PYTHON_TYPES)}"
            )
        expected = PYTHON_TYPES[type_name]
        nested = None
        if type_name in _NESTED:
            item_type = (properties[param].get("items") or {}).get("type")
            if item_type not in PYTHON_TYPES:
                raise CallError(f"parameter {param!r} of {name!r}: items of type {item_type!r} are not a BFCL type")
            nested = PYTHON_TYPES[item_type]
        if type_name == "tuple" and type(value) is tuple:
            value = list(value)
        if type_name == "float" and type(value) is int:
            value = float(value)
        allowed = allowed_by_param[param]
        valid, is_variable = _type_ok(value, allowed, expected, nested)
        if not valid:
            return f"parameter {param!r}: {type(value).__name__} is not {type_name}"
        if is_variable:
            if value not in allowed:
                return f"parameter {param!r}: {value!r} is not among {allowed!r}"
        elif not _value_ok(value, allowed, expected, nested):
            return f"parameter {param!r}: {value!r} is not among {allowed!r}"
    left_out = next(
        (p for p, allowed in allowed_by_param.items() if p not in arguments and _OPTIONAL not in allowed), None
    )
    if left_out is not None:
        return f"parameter {left_out!r} of the answer key not given"
    return None


def _description(functions: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = next((f for f in functions if f.get("name") == name), None)
    if found is None:
        raise CallError(f"the answer key calls {name!r}, which the sample's functions do not describe")
    return found


def check_calls(
    functions: list[dict[str, Any]], calls: list[Call], answers: list[dict[str, Any]], category: str, dotted: bool
) -> str | None:
    """Why the calls do not meet the answer key under BFCL's checker for ``category``; None when they do."""
    if not answers:
        return None if not calls else f"{len(calls)} call(s) where none is expected"
    if len(calls) != len(answers):
        return f"{len(calls)} call(s) where {len(answers)} are expected"
    if "parallel" in category:
        used: set[int] = set()
        for i, answer in enumerate(answers):
            description = _description(functions, next(iter(answer)))
            match = next(
                (
                    j
                    for j in range(len(calls))
                    if j not in used and check_call(description, calls[j], answer, dotted) is None
                ),
                None,
            )
            if match is None:
                return f"no call meets expected call {i + 1} ({next(iter(answer))})"
            used.add(match)
        return None
    if "multiple" in category:
        return check_call(_description(functions, next(iter(answers[0]))), calls[0], answers[0], dotted)
    if not functions:
        raise CallError("no function descriptions")
    return check_call(functions[0], calls[0], answers[0], dotted)


# --- the sample ----------------------------------------------------------------------------------------------------


def _loaded(value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as error:
            raise CallError(f"{what} is text but not JSON: {error}") from None
    return value


def functions_of(sample: Sample) -> list[dict[str, Any]]:
    value = next((sample.meta[k] for k in ("functions", "tools", "function") if sample.meta.get(k) is not None), None)
    value = _loaded(value, "the functions")
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(f, dict) for f in value):
        raise CallError("no function descriptions: expected a list in meta['functions'] (map the dataset's column)")
    return [f["function"] if f.get("type") == "function" and isinstance(f.get("function"), dict) else f for f in value]


def answer_key_of(sample: Sample) -> list[dict[str, Any]]:
    value = _loaded(sample.reference, "the answer key")
    if isinstance(value, dict):
        value = [{name: args} for name, args in value.items()]
    if not isinstance(value, list) or not all(
        isinstance(a, dict) and len(a) == 1 and isinstance(next(iter(a.values())), dict) for a in value
    ):
        raise CallError("the answer key must be BFCL's possible answer: [{function: {parameter: [allowed values]}}]")
    return value


class FunctionCallMatch(Metric):
    """1 when the answer's function calls pass BFCL's AST checker against the possible answer, else 0."""

    name = "bfcl_match_score"
    bounds = (0.0, 1.0)
    tasks = ("bfcl", "function_calling")

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("category", "underscore_to_dot"))
        super().__init__(language, **options)
        self.category = options.get("category")
        if self.category is not None and self.category not in CATEGORIES:
            raise ConfigError(f"metric {self.name!r}: option 'category': {self.category!r} is not one of {CATEGORIES}")
        self.underscore_to_dot = bool(options.get("underscore_to_dot", False))

    def _category(self, sample: Sample, answers: list[dict[str, Any]]) -> str:
        given = self.category or sample.meta.get("category") or sample.meta.get("test_category")
        if given:
            return str(given)
        return "parallel" if len(answers) > 1 else "multiple"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        calls = read_calls(prediction or "")
        try:
            functions = functions_of(sample)
            answers = answer_key_of(sample)
            why = check_calls(functions, calls, answers, self._category(sample, answers), not self.underscore_to_dot)
        except CallError as error:
            return SampleScore(None, failure=FailureReason.UNRESOLVABLE_REFERENCE, details={"error": str(error)})
        value = 0.0 if why else 1.0
        details: dict[str, Any] = {"calls": calls}
        if why:
            details["reason"] = why
        return SampleScore(value, (value, 1.0), details=details)

    def describe(self) -> dict[str, Any]:
        return {"checker": "BFCL ast_checker (Python)", "underscore_to_dot": self.underscore_to_dot}

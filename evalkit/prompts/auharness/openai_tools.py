"""BFCL function descriptions written as the chat API's ``tools``, as AU-Harness writes them.

BFCL describes parameters with its own type names (``dict``, ``float``,
``tuple``, Java's ``HashMap``...), which function-calling APIs refuse. When
AU-Harness offers the functions through the API (its ``_no_prompt`` BFCL
tasks) it rewrites each description first (models/request_resp_handler.py,
``convert_to_tool``); the same rewrite here makes the request the same:

* the name with every ``.`` written ``_`` (many APIs refuse dots);
* ``parameters.type`` set to ``object``;
* each property's type mapped to JSON Schema's (``dict`` -> ``object``,
  ``float`` -> ``number``, ``tuple`` -> ``array``, ``any`` -> ``string``...),
  an unknown or missing type written ``string``; a ``float`` also gets
  ``"format": "float"`` and " This is a float type value." after its
  description;
* nested ``properties`` rewritten the same way, and an array's ``items`` type
  mapped (one level of nested ``items`` too, and an object item's properties).

Where AU-Harness stops with a KeyError (an item type it does not know, a float
without a description) the type is written ``string`` and the description is
started; the descriptions themselves are never changed otherwise.
"""

from __future__ import annotations

import copy
from typing import Any

#: BFCL's (and Java's, JavaScript's) type names -> JSON Schema's, as AU-Harness maps them
OPENAI_TYPES: dict[str, str] = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
}
FLOAT_NOTE = " This is a float type value."


def underscored(name: str) -> str:
    """A function name as AU-Harness sends it: dots written as underscores."""
    return name.replace(".", "_")


def _mapped(type_name: Any) -> str:
    return OPENAI_TYPES.get(type_name, "string") if isinstance(type_name, str) else "string"


def _items(items: dict[str, Any]) -> None:
    items["type"] = _mapped(items.get("type"))
    nested = items.get("items")
    if items["type"] == "array" and isinstance(nested, dict):
        nested["type"] = _mapped(nested.get("type"))
    elif items["type"] == "object" and isinstance(items.get("properties"), dict):
        _properties(items["properties"])


def _properties(properties: dict[str, Any]) -> None:
    for value in properties.values():
        if not isinstance(value, dict):
            continue
        if "type" not in value:
            value["type"] = "string"
        else:
            if value["type"] == "float":
                value["format"] = "float"
                value["description"] = str(value.get("description", "")) + FLOAT_NOTE
            value["type"] = _mapped(value["type"])
        if value["type"] in ("array", "object"):
            if isinstance(value.get("properties"), dict):
                _properties(value["properties"])
            elif isinstance(value.get("items"), dict):
                _items(value["items"])


def openai_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``functions`` (BFCL descriptions) as ``[{"type": "function", "function": ...}]``; the input is not changed."""
    tools = []
    for described in copy.deepcopy(functions):
        described["name"] = underscored(str(described.get("name", "")))
        parameters = described.setdefault("parameters", {})
        parameters["type"] = "object"
        properties = parameters.setdefault("properties", {})
        if isinstance(properties, dict):
            _properties(properties)
        tools.append({"type": "function", "function": described})
    return tools

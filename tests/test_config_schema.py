"""The config and runspec schemas document themselves, and sample_config.yaml documents every option.

Every field of every config.yaml model (evalkit.config) and runspec model
(evalkit.catalog: DatasetSpec, GenerationSettings, CheckedRecord, TaskSpec),
nested ones included, must carry a description: it is the one place that
says what a key does, its unit and what its default means, and what tools
such as ``evalkit info`` can show.

sample_config.yaml is checked against the schema rather than generated from
it. The file is a hand-written tutorial: it explains how options interact
(override precedence, replicas, what the command line overrides), shows
realistic values (a dataset that ships with evalkit, override rules that
name the sample's model) and keeps a runnable configuration switched on; a
generator would either flatten that into a list of descriptions or need the
examples moved into the schema. So the test holds the file to the schema
instead:

- as written, it loads with evalkit's own loader and plans (what ``evalkit
  validate`` does), so the switched-on part is a working config;
- every key of every model level appears in it, switched on or as a
  commented-out line ``# key: value`` (the ``#`` at the key's indentation);
- with every such line switched on, it still validates, so no commented
  example is misspelled, misplaced or of the wrong type.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
import typing
from typing import Any

import yaml
from helpers import ROOT
from pydantic import BaseModel

from evalkit import catalog as catalog_module
from evalkit import config as config_module
from evalkit.catalog import DatasetSpec, ForeignNames, TaskSpec
from evalkit.config import Config, load_config, parse_config
from evalkit.plan import build_plan

SAMPLE = ROOT / "sample_config.yaml"
#: the schemas a user writes: config.yaml, a runspec's dataset entries and its ``_task`` block
ROOTS: tuple[type, ...] = (Config, DatasetSpec, TaskSpec, ForeignNames)
#: classes of the schema modules that are no schema: the pydantic base of the config models, and the loaded catalogue
NOT_SCHEMA = {"Strict", "_RuleTarget", "Catalog"}  # bases: their fields are checked on the subclasses
#: ... and the config package's working records, which no user writes: overrides from flags and keywords, the
#: registries they are checked against, an AU-Harness config being translated, a pair's stop_at_ci rule
NOT_SCHEMA |= {"Overrides", "Registries", "Translation", "ReportedAs", "StopRule"}
#: every module of the config package (its schema is split by concern) and the catalogue
SCHEMA_MODULES = [
    catalog_module,
    *(importlib.import_module(m.name) for m in pkgutil.walk_packages(config_module.__path__, "evalkit.config.")),
]
#: what the ${VAR} references of sample_config.yaml need once every option is switched on
SAMPLE_ENV = {
    "EVALKIT_TOKEN": "sample-token",
    "API_VERSION": "2024-10-21",
    "JUDGE_URL": "https://judge.example/v1",
    "JUDGE_KEY": "sample-key",
}

#: a full-line comment: its indentation and what follows "# "
_COMMENT = re.compile(r"^(?P<indent> *)# ?(?P<rest>.*)$")
#: a comment that is a switched-off option: a `key:` (lower-case, as every schema key),
#: a list item of one, or a flow list item
_OPTION = re.compile(r"^\s*(?:- )?(?:[a-z_][a-z0-9_]*:(?:\s|$)|\[)")


def _is_schema_class(value: Any) -> bool:
    return isinstance(value, type) and (issubclass(value, BaseModel) or dataclasses.is_dataclass(value))


def _nested(annotation: Any) -> list[type]:
    """The schema classes inside a field's type: ``X``, ``X | None``, ``list[X]``, ``dict[str, X]``, ``tuple[...]``."""
    if _is_schema_class(annotation):
        return [annotation]
    return [found for arg in typing.get_args(annotation) for found in _nested(arg)]


def _fields(cls: type) -> dict[str, tuple[str | None, Any]]:
    """Field name -> (description, type) of a pydantic model or a dataclass (its description in ``metadata``)."""
    if issubclass(cls, BaseModel):
        return {name: (field.description, field.annotation) for name, field in cls.model_fields.items()}
    hints = typing.get_type_hints(cls)
    return {field.name: (field.metadata.get("description"), hints[field.name]) for field in dataclasses.fields(cls)}


def _walk(roots: tuple[type, ...]) -> list[type]:
    """Every schema class reachable from ``roots`` through field types, each once."""
    seen: list[type] = []
    todo = list(roots)
    while todo:
        cls = todo.pop(0)
        if cls in seen:
            continue
        seen.append(cls)
        for _, annotation in _fields(cls).values():
            todo += _nested(annotation)
    return seen


def switch_on(text: str) -> str:
    """``text`` with every commented-out option (``# key: value``) uncommented in place; prose comments stay."""
    lines = []
    for line in text.splitlines():
        match = _COMMENT.match(line)
        if match and _OPTION.match(match["rest"]):
            line = match["indent"] + match["rest"]
        lines.append(line)
    return "\n".join(lines) + "\n"


def _undocumented(model: type[BaseModel], nodes: list[dict[str, Any]], where: str = "") -> list[str]:
    """Key paths of ``model`` that none of ``nodes`` holds, nested models included.

    ``nodes`` are the model's occurrences in the YAML tree.
    """
    gaps: list[str] = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        path = f"{where}.{key}" if where else key
        values = [node[key] for node in nodes if key in node]
        if not values:
            gaps.append(path)
            continue
        for nested in _nested(field.annotation):
            if not issubclass(nested, BaseModel):
                continue
            children = [v for v in values if isinstance(v, dict)]
            items = [item for v in values if isinstance(v, list) for item in v if isinstance(item, dict)]
            if items:
                gaps += _undocumented(nested, items, f"{path}[]")
            if children or not items:  # a null value documents none of the nested keys
                gaps += _undocumented(nested, children, path)
    return gaps


def _switched_on_tree() -> dict[str, Any]:
    tree = yaml.safe_load(switch_on(SAMPLE.read_text(encoding="utf-8")))
    assert isinstance(tree, dict), "sample_config.yaml with every option switched on is not a mapping"
    return tree


def test_the_walk_reaches_every_schema_class() -> None:
    """Guards the description test: a nested model the walk missed would have its fields go unchecked."""
    walked = {cls.__name__ for cls in _walk(ROOTS)}
    defined = {
        name
        for module in SCHEMA_MODULES
        for name, value in vars(module).items()
        if _is_schema_class(value) and value.__module__ == module.__name__ and name not in NOT_SCHEMA
    }
    assert defined <= walked, f"not reachable from {[r.__name__ for r in ROOTS]}: {sorted(defined - walked)}"
    assert {"LaunchSpec", "ModelInfo", "JudgeProperties", "GenerationSettings", "CheckedRecord"} <= walked


def test_every_field_has_a_description() -> None:
    missing = []
    for cls in _walk(ROOTS):
        for name, (description, _) in _fields(cls).items():
            if not description or len(description.split()) < 3:
                missing.append(f"{cls.__name__}.{name}: {description!r}")
    assert not missing, "fields without a description (a sentence: what it does, its unit, its default):\n" + "\n".join(
        missing
    )


def test_switch_on_uncomments_options_and_keeps_prose() -> None:
    text = (
        "a:\n  # b: 1   # a note\n  # Optional: prose, not a key\n  # - [x, y]\n# c:\n#   d: 2\n  #   # a "
        "continued note\n"
    )
    assert (
        switch_on(text) == "a:\n  b: 1   # a note\n  # Optional: prose, not a key\n  - [x, y]\n"
        "c:\n  d: 2\n  #   # a continued note\n"
    )


def test_sample_config_validates_and_plans_as_written() -> None:
    """What ``evalkit validate sample_config.yaml`` checks; no environment needed (its ${VAR}s have defaults)."""
    config = load_config(SAMPLE, env={})
    plan = build_plan(config, source=str(SAMPLE))
    assert plan.engines, "the sample's switched-on part plans no engine"


def test_sample_config_documents_every_option() -> None:
    gaps = _undocumented(Config, [_switched_on_tree()])
    assert not gaps, "keys missing from sample_config.yaml (add them, switched on or as `# key: value`):\n" + "\n".join(
        gaps
    )


def test_sample_config_with_every_option_switched_on_validates() -> None:
    """A commented example that is misspelled, misplaced or of the wrong type fails here, as a user would meet it."""
    parse_config(_switched_on_tree(), "sample_config.yaml (every option switched on)", env=SAMPLE_ENV)

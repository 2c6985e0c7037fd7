"""Re-derive, from an AU-Harness checkout, what each of its task names sends a model: ``request`` in the name table.

AU-Harness writes a task's request from its task file (``tasks/**/<name>.yaml``
merged over the ``base.yaml`` files it ``extends``): the ``user_prompt``, the
row columns its preprocessor appends, the generation settings and how long
audio is cut. evalkit's AU-Harness variants (``auharness:<name>``, see
``evalkit/catalog.py``) are built from this record, so when AU-Harness changes a
prompt, re-running this script and the table-wide test
(``tests/test_auharness_requests.py``) shows every name that moved.

Usage::

    git --git-dir=/path/to/AU-Harness.git archive COMMIT | tar -x -C /tmp/auh
    python scripts/auharness_tasks.py /tmp/auh --commit COMMIT [--write runspecs/_names/auharness.json]

Without ``--write`` the records are printed as JSON. Reading only YAML and one
literal from ``utils/constants.py`` (its language names), it needs none of
AU-Harness's dependencies.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

#: what AU-Harness's request handler sends when a task gives no generation settings (utils/constants.py)
DEFAULT_TEMPERATURE = 0.7
DEFAULT_MAX_COMPLETION_TOKENS = 4096
#: the generation keys AU-Harness's tasks use; another one would need a decision on how evalkit sends it
KNOWN_GENERATION_KEYS = ("temperature", "max_completion_tokens")


def _merge(base: Any, top: Any) -> Any:
    """``top`` over ``base``, mappings merged key by key (AU-Harness's ``extends`` semantics)."""
    if isinstance(base, dict) and isinstance(top, dict):
        merged = dict(base)
        for key, value in top.items():
            merged[key] = _merge(base[key], value) if key in base else value
        return merged
    return top


def _pointer(doc: Any, fragment: str) -> Any:
    for part in [p for p in fragment.split("/") if p]:
        doc = doc[part.replace("~1", "/").replace("~0", "~")]
    return doc


def resolve(path: Path, seen: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A task file with every file it ``extends`` merged under it, in order."""
    doc = _read(path)
    return _resolve_node(path, doc, seen)


def _read(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _resolve_node(path: Path, node: Any, seen: frozenset[str]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for ref in node.get("extends") or []:
        url = urlparse(ref)
        target = (path.parent / (url.path or path.name)).resolve()
        key = f"{target}#{url.fragment}"
        if key in seen:
            raise ValueError(f"{path}: extends cycle at {key}")
        parent = _pointer(_read(target), url.fragment)
        merged = _merge(merged, _resolve_node(target, parent, seen | {key}))
    return _merge(merged, {k: v for k, v in node.items() if k != "extends"})


def language_names(root: Path) -> dict[str, str]:
    """AU-Harness's ``language_map`` (code -> lower-case name), read as a literal from utils/constants.py."""
    tree = ast.parse((root / "utils" / "constants.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "language_map" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return {str(k): str(v) for k, v in value.items()}
    raise SystemExit(f"{root}/utils/constants.py: no language_map")


def _render(template: str, values: dict[str, str]) -> str:
    """The ``{{ name }}`` placeholders filled, and one final newline dropped, as a default Jinja2 Template renders."""
    text = template
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value).replace("{{ " + key + " }}", value)
    if "{{" in text or "{%" in text:
        raise ValueError(f"unfilled template left: {text!r}")
    return text[:-1] if text.endswith("\n") else text


def request_of(config: dict[str, Any], languages: dict[str, str]) -> dict[str, Any]:
    """What AU-Harness sends a model for one resolved task config (the ``request`` record)."""
    generation = config.get("generation_kwargs") or {}
    unknown = sorted(set(generation) - set(KNOWN_GENERATION_KEYS))
    if unknown:
        raise ValueError(f"{config['task_name']}: generation keys {unknown} not handled")
    preprocessor = config.get("preprocessor") or "GeneralPreprocessor"
    user_prompt = config.get("user_prompt") or ""
    if preprocessor == "Covost2Preprocessor":
        # the prompt names both languages, as the preprocessor spells them (language_map, capitalised)
        names = {
            "source_language_name": languages.get(config["source_language"], config["source_language"]).capitalize(),
            "target_language_name": languages.get(config["target_language"], config["target_language"]).capitalize(),
        }
        user_prompt = _render(user_prompt, names)
    modality = config.get("modality", "audio")
    return {
        "preprocessor": preprocessor,
        "user_prompt": user_prompt,
        "instruction_column": config.get("instruction_column"),
        "textual_input_column": config.get("textual_input_column") if modality == "text" else None,
        "choices_column": config.get("choices_column"),
        "modality": modality,
        "long_audio": config.get("long_audio_processing_logic"),
        "temperature": generation.get("temperature", DEFAULT_TEMPERATURE),
        "max_completion_tokens": generation.get("max_completion_tokens", DEFAULT_MAX_COMPLETION_TOKENS),
    }


def task_requests(root: Path) -> dict[str, dict[str, Any]]:
    """Every task name of the checkout -> its request record."""
    languages = language_names(root)
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((root / "tasks").rglob("*.y*ml")):
        if path.name == "base.yaml" or path.suffix not in (".yaml", ".yml"):
            continue
        config = resolve(path)
        name = config.get("task_name")
        if not name:
            continue
        if name in found:
            raise ValueError(f"{path}: task name {name!r} given twice")
        found[name] = request_of(config, languages)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="an AU-Harness working tree (the folder holding tasks/)")
    parser.add_argument("--commit", help="the commit the checkout is at, written into the table's _about")
    parser.add_argument("--write", type=Path, help="the name table to update (runspecs/_names/auharness.json)")
    args = parser.parse_args(argv)
    requests = task_requests(args.checkout)
    if args.write is None:
        json.dump(requests, sys.stdout, indent=1, ensure_ascii=False)
        print()
        return 0
    table = json.loads(args.write.read_text(encoding="utf-8"))
    missing = sorted(set(table["datasets"]) ^ set(requests))
    if missing:
        print(f"names in only one of the table and the checkout: {missing}", file=sys.stderr)
        return 1
    for name, entry in table["datasets"].items():
        entry["request"] = requests[name]
    if args.commit and args.commit not in table["_about"]:
        print(f"note: the table's _about names another commit than {args.commit}; update it", file=sys.stderr)
    lines = ["{"]
    head = {k: v for k, v in table.items() if k not in ("datasets", "groups")}
    for key, value in head.items():
        lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},")
    lines.append(' "datasets": {')
    rows = [f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in table["datasets"].items()]
    lines.append(",\n".join(rows))
    lines.append(" },")
    lines.append(' "groups": {')
    groups = [f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in table["groups"].items()]
    lines.append(",\n".join(groups))
    lines.append(" }")
    lines.append("}")
    args.write.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

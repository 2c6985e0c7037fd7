"""One source for every default: the documentation, sample_config.yaml and ``--help`` say what the code does.

The code is the source: the pydantic schema's field defaults (evalkit/config/) and, for options
that exist only on a command line, the argparse defaults of ``evalkit run`` and ``evalkit serve``.
Each document is read for what it claims and compared with that source; a mismatch names the file
(and line), the option and both values.

What each document is held to, and the convention that keeps it machine-readable:

- sample_config.yaml: every option with a default states it as ``default X`` in its comment (on its
  line, or on the ``#   # ...`` continuation lines below it), X written as the value would be; the
  colon form ``default: ...`` describes a default that is computed or absent and is not compared.
  Every schema field with a plain default must be stated somewhere in the file.
- docs/configuration.md: the defaults table (``key: value`` and ``--flag value`` items; remarks in
  parentheses are prose) must list every schema field with a plain default and every ``evalkit run`` /
  ``evalkit serve`` flag with one, each equal to the code's; and in README.md and every page of docs/, a
  backticked option followed closely by "default N" in the prose must say the code's N.
- ``--help``: a ``default X`` a help text writes by hand (not through ``%(default)s``) must be the
  parser's default, or the code's default for a flag whose value the code fills in.
- the path rule (how relative paths are read) is one sentence, worded alike in the documentation,
  sample_config.yaml and ``evalkit run --help``, and it is what ``load_config`` does.
"""

from __future__ import annotations

import argparse
import ast
import math
import re
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, documentation, documentation_files
from pydantic import BaseModel

from evalkit.cli.main import PATH_RULE
from evalkit.cli.main import build_parser as build_main_parser
from evalkit.config import SERVE_DEFAULT_MAX_BATCH, Config, load_config
from evalkit.serve.cli import build_parser as build_serve_parser

SAMPLE = ROOT / "sample_config.yaml"
#: the page holding the defaults table
DEFAULTS_PAGE = ROOT / "docs" / "configuration.md"
PAGE = "docs/configuration.md"

# -- the code's defaults ---------------------------------------------------------------------------------


def _models_in(annotation: Any) -> list[tuple[type[BaseModel], bool]]:
    """(model, inside a list) for each pydantic model a field's type holds: X, X | None, list[X]."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, False)]
    inner = [found for arg in typing.get_args(annotation) for found in _models_in(arg)]
    if typing.get_origin(annotation) is list:
        return [(model, True) for model, _ in inner]
    return inner


def schema_fields(model: type[BaseModel] = Config, prefix: str = "") -> dict[str, tuple[Any, str]]:
    """Every leaf field by its path as documents write it (``models[].info.batch_size``): (default, owner).

    The default is ``PydanticUndefined`` for a mandatory field and ``list``/``dict`` for one made by a factory.
    """
    found: dict[str, tuple[Any, str]] = {}
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        nested = _models_in(field.annotation)
        if nested:
            for sub, in_list in nested:
                found.update(schema_fields(sub, f"{path}{'[]' if in_list else ''}."))
            continue
        default = field.default_factory if field.default_factory is not None else field.default
        found[path] = (default, f"{model.__module__.replace('.', '/')}.py {model.__name__}.{name}")
    return found


def plain_defaults() -> dict[str, tuple[Any, str]]:
    """The fields whose default is one value a document can state: a number, a bool or a string."""
    return {
        path: (default, owner)
        for path, (default, owner) in schema_fields().items()
        if isinstance(default, (bool, int, float, str))
    }


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise AssertionError(f"evalkit has no {name!r} command")


def _dtype_default() -> str:
    """The transformers backend's ``dtype`` parameter default, read from its source (importing it needs torch)."""
    source = (ROOT / "evalkit/serve/backends/transformers_backend.py").read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            names = [a.arg for a in node.args.args]
            defaults = dict(zip(names[len(names) - len(node.args.defaults) :], node.args.defaults))
            if "dtype" in defaults:
                return str(ast.literal_eval(defaults["dtype"]))
    raise AssertionError("transformers_backend.py: no __init__ with a dtype parameter")


def parsers() -> dict[str, argparse.ArgumentParser]:
    return {"evalkit run": _subparser(build_main_parser(), "run"), "evalkit serve": build_serve_parser()}


#: flags whose argparse default is None because the code fills the value in later: where that value lives
CODE_DEFAULTS: dict[tuple[str, str], tuple[Any, str]] = {
    ("evalkit run", "--max-failure-rate"): (
        Config.model_fields["max_failure_rate"].default,
        "evalkit/config/schema.py Config.max_failure_rate",
    ),
    ("evalkit serve", "--max-batch-size"): (
        SERVE_DEFAULT_MAX_BATCH,
        "evalkit/config/launch.py SERVE_DEFAULT_MAX_BATCH",
    ),
    ("evalkit serve", "--dtype"): (_dtype_default(), "evalkit/serve/backends/transformers_backend.py dtype"),
}


def cli_defaults() -> dict[tuple[str, str], tuple[Any, str]]:
    """(command, flag) -> (default, where it is set) for every flag with a value default (no store_true)."""
    found: dict[tuple[str, str], tuple[Any, str]] = {}
    for command, parser in parsers().items():
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0:  # positionals; flags without a value
                continue
            flag = max(action.option_strings, key=len)
            if (command, flag) in CODE_DEFAULTS:
                found[(command, flag)] = CODE_DEFAULTS[(command, flag)]
            elif action.default is not None:
                found[(command, flag)] = (action.default, f"the argparse default of `{command} {flag}`")
    return found


# -- comparing what a document says with the code ----------------------------------------------------------

_UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def stated(text: str) -> Any:
    """A value as a document writes it (``8``, ``0.2``, ``true``, ``runs``, ``10 MiB``), parsed as YAML reads it."""
    text = text.strip().rstrip(":.;,")
    number, _, unit = text.partition(" ")
    if unit in _UNITS:
        return float(number) * _UNITS[unit]
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def same(documented: Any, code: Any) -> bool:
    """Equal as a reader means it: 60 is 60.0, but true is not 1, and "8" (a string) is not 8."""
    if isinstance(code, bool) or isinstance(documented, bool):
        return type(code) is type(documented) and code == documented
    if isinstance(code, (int, float)) and isinstance(documented, (int, float)):
        return math.isclose(float(code), float(documented), rel_tol=0, abs_tol=1e-12)
    return isinstance(documented, str) and str(code) == documented


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value)


def test_same_reads_values_as_a_reader_does() -> None:
    assert same(stated("60"), 60.0) and same(stated("0.2;"), 0.2) and same(stated("10 MiB"), 10 * 2**20)
    assert same(stated("true"), True) and not same(stated("1"), True) and not same(stated("true"), 1)
    assert same(stated("first"), "first") and not same(stated("8"), "8")


# -- sample_config.yaml -------------------------------------------------------------------------------------

#: a full-line comment: its indentation and what follows "# " (a switched-off option keeps its key's place)
_COMMENT = re.compile(r"^(?P<indent> *)# ?(?P<rest>.*)$")
#: an option line once switched on: its indentation, an optional list dash, the key and the rest
_KEY = re.compile(r"^(?P<indent> *)(?P<dash>- )?(?P<key>[a-z_][a-z0-9_]*):(?:\s|$)(?P<rest>.*)$")
#: a continuation of the comment above: `#` at the option's indentation, then `#` again further right
_CONTINUATION = re.compile(r"^\s*#\s+#(?P<text>.*)$")
#: a stated default: `default X`; the colon form `default: ...` describes and is not compared
_STATED = re.compile(r"\bdefault (?P<value>[^\s;,()]+(?: (?:KiB|MiB|GiB)\b)?)")


def sample_statements(text: str) -> list[tuple[int, str, str]]:
    """(line number, option path, comment text) for every option line, switched on or off, of sample_config.yaml."""
    lines = text.splitlines()
    found: list[tuple[int, str, str]] = []
    stack: list[tuple[int, str]] = []  # (indentation, path segment) of the keys above the current line
    for number, raw in enumerate(lines, start=1):
        line = raw
        comment = _COMMENT.match(raw)
        if comment:
            line = comment["indent"] + comment["rest"]
        match = _KEY.match(line)
        if match is None:
            continue
        indent = len(match["indent"])
        key_indent = indent + (2 if match["dash"] else 0)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if match["dash"]:
            stack.append((indent, "[]"))
        path = ".".join(segment for _, segment in [*stack, (key_indent, match["key"])]).replace(".[]", "[]")
        stack.append((key_indent, match["key"]))
        note = match["rest"].partition(" # ")[2] if " # " in match["rest"] else ""
        note = note or (match["rest"][1:] if match["rest"].startswith("#") else "")
        for following in lines[number:]:
            more = _CONTINUATION.match(following)
            if more is None:
                break
            note += " " + more["text"].strip()
        found.append((number, path, note))
    return found


def test_sample_statements_reads_paths_and_comments() -> None:
    text = (
        "models:\n  - info:\n      batch_size: 32   # in flight (default 8; 1 to 65536)\n"
        "      # delay: 0     # ms (default 0;\n      #              # a day)\n"
        "# judge_properties:\n#   judge_type: x   # default openai; or vllm\noutput_dir: runs   # default runs\n"
    )
    assert sample_statements(text) == [
        (1, "models", ""),
        (2, "models[].info", ""),
        (3, "models[].info.batch_size", "in flight (default 8; 1 to 65536)"),
        (4, "models[].info.delay", "ms (default 0; a day)"),
        (6, "judge_properties", ""),
        (7, "judge_properties.judge_type", "default openai; or vllm"),
        (8, "output_dir", "default runs"),
    ]


def test_sample_config_states_every_default_the_schema_has() -> None:
    fields = schema_fields()
    defaults = plain_defaults()
    problems: list[str] = []
    documented: set[str] = set()
    for number, path, note in sample_statements(SAMPLE.read_text(encoding="utf-8")):
        if path not in fields:
            continue  # a key inside a free-form mapping (prompts, extra_body, ...)
        for claim in _STATED.finditer(note):
            value = stated(claim["value"])
            code, owner = fields[path]
            where = f"sample_config.yaml:{number}: {path}"
            if path in defaults:
                documented.add(path)
                if not same(value, code):
                    problems.append(f"{where}: says default {claim['value']}, the code ({owner}) has {_show(code)}")
            elif isinstance(value, (bool, int, float)):
                problems.append(f"{where}: says default {claim['value']}, the code ({owner}) has none")
            break  # the first statement is the option's own; later ones describe something else
    problems += [
        f"sample_config.yaml: {path}: no `default {_show(code)}` in its comment (the code: {owner})"
        for path, (code, owner) in defaults.items()
        if path not in documented
    ]
    assert not problems, "\n".join(problems)


# -- the documentation --------------------------------------------------------------------------------------


def readme_table() -> list[tuple[int, str, str]]:
    """(line number, where, defaults cell) of each row of the defaults table (docs/configuration.md)."""
    lines = DEFAULTS_PAGE.read_text(encoding="utf-8").splitlines()
    start = next(
        (i for i, line in enumerate(lines) if "tests/test_documented_defaults.py" in line), None
    )  # the sentence that introduces the table
    assert start is not None, f"{PAGE}: the defaults table (introduced by a sentence naming this test) is missing"
    rows: list[tuple[int, str, str]] = []
    for number, line in enumerate(lines[start:], start=start + 1):
        if rows and not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("where", "---"):
            rows.append((number, cells[0], cells[1]))
    assert rows, f"{PAGE}: the defaults table has no rows"
    return rows


_ITEM = re.compile(r"`(?P<name>--[a-z0-9-]+|[a-z_][a-z0-9_]*)(?::)? (?P<value>[^`]+)`")


def test_readme_defaults_table_equals_the_code() -> None:
    defaults = plain_defaults()
    flags = cli_defaults()
    problems: list[str] = []
    seen_fields: set[str] = set()
    seen_flags: set[tuple[str, str]] = set()
    for number, where, cell in readme_table():
        command = where.strip("`") if where.startswith("`evalkit ") else None
        prefix = "" if where == "top level" else where.strip("`") + "."
        for item in _ITEM.finditer(re.sub(r"\([^()]*\)", "", cell)):  # remarks in parentheses are prose
            name, value = item["name"], stated(item["value"])
            if command is not None:
                key: tuple[str, str] = (command, name)
                if key not in flags:
                    problems.append(f"{PAGE}:{number}: `{command} {name}` has no default in the code")
                    continue
                seen_flags.add(key)
                code, owner = flags[key]
            else:
                path = prefix + name
                if path not in defaults:
                    problems.append(f"{PAGE}:{number}: {path}: no such option with a default in the schema")
                    continue
                seen_fields.add(path)
                code, owner = defaults[path]
            if not same(value, code):
                option = f"`{command} {name}`" if command else prefix + name
                problems.append(
                    f"{PAGE}:{number}: {option}: says {item['value']}, the code ({owner}) has {_show(code)}"
                )
    problems += [
        f"{PAGE}: the defaults table lacks {path} (the code: {_show(code)}, {owner})"
        for path, (code, owner) in defaults.items()
        if path not in seen_fields
    ]
    problems += [
        f"{PAGE}: the defaults table lacks `{command} {flag}` (the code: {_show(code)})"
        for (command, flag), (code, _) in flags.items()
        if (command, flag) not in seen_flags
    ]
    assert not problems, "\n".join(problems)


def test_readme_prose_says_the_defaults_the_code_has() -> None:
    """`max_response_bytes` (default 10 MiB, ...), `--body-timeout` (default 60 s): each such number is the code's."""
    by_name: dict[str, list[tuple[Any, str]]] = {}
    for path, (code, owner) in plain_defaults().items():
        by_name.setdefault(path.rsplit(".", 1)[-1], []).append((code, owner))
    for (_, flag), (code, owner) in cli_defaults().items():
        by_name.setdefault(flag, []).append((code, owner))
    problems: list[str] = []
    checked = 0
    for path in documentation_files():
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(
            r"`(?P<name>[a-z_-][a-z0-9_-]*)`[^`]{0,60}?\bdefault (?P<value>\d[\d.]*(?: (?:KiB|MiB|GiB)\b)?)", text
        ):
            known = by_name.get(match["name"])
            if not known:
                continue
            checked += 1
            value = stated(match["value"])
            if not any(same(value, code) for code, _ in known):
                line = text.count("\n", 0, match.start()) + 1
                code, owner = known[0]
                problems.append(
                    f"{path.relative_to(ROOT)}:{line}: `{match['name']}` says default {match['value']}, the code "
                    f"({owner}) has {_show(code)}"
                )
    assert checked >= 4, "the documentation's prose statements of defaults were not found; is the pattern out of date?"
    assert not problems, "\n".join(problems)


# -- --help -------------------------------------------------------------------------------------------------

_HELP_STATED = re.compile(r"\bdefault:? (?P<value>[^\s;,()]+)")


def test_help_texts_state_the_defaults_the_parsers_have() -> None:
    problems: list[str] = []
    for command, parser in parsers().items():
        for action in parser._actions:
            if not action.help or "%(default)" in action.help or not action.option_strings or action.nargs == 0:
                continue
            flag = max(action.option_strings, key=len)
            claim = _HELP_STATED.search(action.help)
            if claim is None:
                continue
            value = stated(claim["value"])
            if (command, flag) in CODE_DEFAULTS:
                code, owner = CODE_DEFAULTS[(command, flag)]
            elif action.default is not None:
                code, owner = action.default, "its argparse default"
            elif isinstance(value, (bool, int, float)):
                problems.append(f"`{command} --help`, {flag}: says default {claim['value']}, the parser has none")
                continue
            else:
                continue  # "default: an eighth of the machine's memory": a description, not a value
            if not same(value, code):
                problems.append(
                    f"`{command} --help`, {flag}: says default {claim['value']}, the code ({owner}) has {_show(code)}"
                )
    assert not problems, "\n".join(problems)


def test_the_code_defaults_these_tests_read_are_the_ones_documented_for_a_user() -> None:
    """Guards the walk: the defaults the issue was about are among those compared."""
    defaults = plain_defaults()
    assert defaults["max_failure_rate"][0] == 0.2
    assert defaults["models[].info.batch_size"][0] == 8
    assert defaults["filters.sampling"][0] == "first"
    assert ("evalkit serve", "--max-body-mb") in cli_defaults()
    assert ("evalkit run", "--max-failure-rate") in cli_defaults()


# -- the path rule ------------------------------------------------------------------------------------------


def _plain(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def _comment_text(text: str) -> str:
    return _plain(" ".join(line.lstrip().removeprefix("#") for line in text.splitlines() if line.lstrip()[:1] == "#"))


def test_the_path_rule_is_worded_alike_in_readme_sample_config_and_help() -> None:
    rule = _plain(PATH_RULE)
    assert rule in _plain(documentation()), f"neither README.md nor docs/ states the path rule: {rule}"
    assert rule in _comment_text(SAMPLE.read_text(encoding="utf-8")), (
        f"sample_config.yaml does not state the path rule: {rule}"
    )
    main = build_main_parser()
    for command in ("run", "validate"):
        epilog = _subparser(main, command).epilog or ""
        assert rule in _plain(epilog), f"`evalkit {command} --help` does not state the path rule: {rule}"
    wrong = "relative to the working directory"
    assert wrong not in _comment_text(SAMPLE.read_text(encoding="utf-8")), f"sample_config.yaml still says {wrong!r}"


def test_the_path_rule_is_what_load_config_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config in sub/ loaded from elsewhere: every path the rule names means sub/."""
    sub = tmp_path / "sub"
    for folder in ("specs", "my_prompts"):
        (sub / folder).mkdir(parents=True)
    (sub / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "dataset_metric": [["basic_qa", "exact_match"]],
                "models": [
                    {"info": {"name": "m", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1", "model": "m"}}
                ],
                "runspecs_dir": "specs",
                "output_dir": "out",
                "prompts_dir": "my_prompts",
                "cache": {"path": "store/responses.sqlite"},
                "dataset_paths": {"callhome_eng": "data/eng.parquet"},
            }
        )
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(Path("..") / "sub" / "config.yaml")
    base = sub.resolve()
    assert config.runspec_dirs == [str(base / "specs")]
    assert config.output_dir == str(base / "out")
    assert config.prompts_dir == str(base / "my_prompts")
    assert config.cache.path == str(base / "store" / "responses.sqlite")
    assert config.base_dir / config.dataset_paths["callhome_eng"] == base / "data" / "eng.parquet"
    for name in ("runspecs_dir", "output_dir", "prompts_dir", "cache.path", "dataset_paths", "launch.model_path"):
        assert name in PATH_RULE, f"the path rule does not name {name}"

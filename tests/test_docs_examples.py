"""Every example in the documentation runs as written, or says why it cannot here.

Each fenced block of README.md and docs/*.md that holds a config (```yaml) or an ``evalkit`` command is a
test case of its own:

- a config block is written to a file and checked as ``evalkit validate`` checks it (the schema, then the plan:
  dataset, task and metric names, metric options, runspec fields). A fragment is completed with what it leaves
  out and says so: a model entry list becomes ``models:``, a config without ``models`` gets one placeholder
  model, one without pairs gets one pair; ``${VAR}`` placeholders are filled, ``...`` values likewise;
- every ``evalkit`` command line is parsed by evalkit's own parser (a renamed or misspelt flag fails), and the
  ones that send nothing (``list``, ``info``, ``validate``, ``--help``) are run from the repository root: they
  must exit 0, and where the block shows their output, its first line must be what they print first.

A block that cannot run here is marked in the markdown, on the line before it (a blank line between is allowed):
``<!-- example: skip (why) -->`` (neither parsed nor run: a synopsis, output only), ``<!-- example: no-run
(why) -->`` (commands parsed, not run: they need a server, a GPU, a file of yours) or ``<!-- example: schema
(why) -->`` (a config checked against the schema only: its paths or datasets are the user's own). A block
marked ``skip`` is a skipped test naming its file, line and reason, so ``pytest -rs`` lists them; the others
are listed by :func:`test_the_blocks_not_run_in_full_are_these`. ``<!-- example: runspecs (DIR) -->`` validates
a config with the repository's folder DIR as its ``runspecs_dir`` (an example's own runspec);
``<!-- example: script (why) -->`` marks a test-server script, checked by the server's own script reader.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, documentation_files

from evalkit.cli.main import build_parser
from evalkit.config import load_config
from evalkit.errors import UserError
from evalkit.plan import build_plan
from evalkit.serve.cli import build_parser as build_serve_parser
from evalkit.testing.script import load_script

#: an address nothing listens on: validation never sends a request
NOWHERE = "http://127.0.0.1:9/v1"
#: what a completed fragment gets when it names no model or no pair
PLACEHOLDER_MODEL = {"info": {"name": "docs-model", "inference_type": "vllm", "url": NOWHERE, "model": "m"}}
PLACEHOLDER_PAIR = ["basic_qa", "exact_match"]
#: the subcommands that read and print only: run for real
SAFE = {"list", "info", "validate"}
_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)
_MARK = re.compile(r"<!-- example: (skip|no-run|schema|runspecs|script) \((?P<why>[^)]+)\) -->\Z")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and the mark before it (if any)."""

    where: str
    language: str
    body: str
    mark: str = ""
    why: str = ""


def blocks() -> list[Block]:
    found = []
    for path in documentation_files():
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            indent = len(match.group(1))
            body = "\n".join(line[indent:] for line in match.group(3).splitlines())
            before = [line for line in text[max(0, match.start() - 300) : match.start()].splitlines() if line.strip()]
            mark = _MARK.match(before[-1]) if before else None
            line = text.count("\n", 0, match.start()) + 1
            found.append(
                Block(
                    f"{path.relative_to(ROOT)}:{line}",
                    match.group(2),
                    body,
                    mark.group(1) if mark else "",
                    mark.group("why") if mark else "",
                )
            )
    return found


def commands(block: Block) -> list[tuple[list[str], list[str]]]:
    """The ``evalkit`` command lines of a shell or console block, each with the output lines shown after it.

    In a block with ``$`` prompts only prompted lines are commands; elsewhere a line is one when it starts
    with ``evalkit `` (``evalkit: error: ...`` is output). A pipe's reader is left out: evalkit is the command.
    """
    lines = block.body.splitlines()
    prompted = any(line.startswith("$ ") for line in lines)
    found: list[tuple[list[str], list[str]]] = []
    for line in lines:
        command = line[2:] if prompted and line.startswith("$ ") else (None if prompted else line)
        if command is None:
            if found and line.strip():
                found[-1][1].append(line)
            continue
        if not command.startswith("evalkit "):
            continue
        words = shlex.split(command.split(" | ")[0], comments=True)
        found.append((words[1:], []))
    return found


ALL = blocks()
CONFIGS = [block for block in ALL if block.language == "yaml"]
COMMANDS = [block for block in ALL if block.language in ("", "bash", "console", "sh") and commands(block)]


def _skip_if_marked(block: Block, *marks: str) -> None:
    if block.mark in marks:
        pytest.skip(f"{block.where}: {block.mark} ({block.why})")


def _filled(value: Any, key: str = "") -> Any:
    """A config with its ``...`` placeholders given a value of their kind."""
    if isinstance(value, dict):
        return {k: _filled(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, key) for v in value]
    if value == "...":
        return NOWHERE if ("url" in key or "endpoint" in key) else "placeholder"
    return value


def completed(block: Block) -> dict[str, Any]:
    """The block as a whole config: what a fragment leaves out, filled in."""
    data = yaml.safe_load(block.body)
    if isinstance(data, list):  # a list of model entries, shown as it sits under models:
        data = {"models": data}
    assert isinstance(data, dict), f"{block.where}: a yaml block is neither a config nor a list of model entries"
    data = _filled(data)
    if block.mark == "runspecs":
        data["runspecs_dir"] = str(ROOT / block.why)
    data.setdefault("models", [PLACEHOLDER_MODEL])
    if not any(key in data for key in ("dataset_metric", "task_metric")):
        data["dataset_metric"] = [PLACEHOLDER_PAIR]
    return data


@pytest.mark.parametrize("block", CONFIGS, ids=[block.where for block in CONFIGS])
def test_each_config_block_validates(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _skip_if_marked(block, "skip")
    if block.mark == "script":
        load_script(yaml.safe_load(block.body))  # a bad key or value raises, naming it
        return
    for name in re.findall(r"\$\{(\w+)\}", block.body):  # ${VAR} without a default: the user's own value
        monkeypatch.setenv(name, "placeholder")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(completed(block), sort_keys=False), encoding="utf-8")
    try:
        config = load_config(path)
    except UserError as error:
        pytest.fail(f"{block.where}: {error}")
    if block.mark == "schema":
        return
    plan = build_plan(config, source=f"{block.where} (written to {path})")
    assert plan.engines, f"{block.where}: no dataset-metric pair is left"


def _parse(words: list[str]) -> None:
    if words[:1] == ["serve"]:
        build_serve_parser().parse_args(words[1:])
    else:
        build_parser().parse_args(words)


@pytest.mark.parametrize("block", COMMANDS, ids=[block.where for block in COMMANDS])
def test_each_command_block_parses_and_the_safe_ones_run(block: Block) -> None:
    _skip_if_marked(block, "skip")
    for words, shown in commands(block):
        if "--help" in words or "-h" in words:
            ran = _evalkit(words)
            assert ran.returncode == 0, f"{block.where}: `evalkit {shlex.join(words)}`: {ran.stderr}"
            continue
        try:
            _parse(words)
        except SystemExit as error:
            pytest.fail(f"{block.where}: `evalkit {shlex.join(words)}` is refused by the parser (exit {error.code})")
        if block.mark == "no-run" or words[0] not in SAFE:
            continue
        ran = _evalkit(words)
        assert ran.returncode == 0, f"{block.where}: `evalkit {shlex.join(words)}` exit {ran.returncode}: {ran.stderr}"
        if shown:
            printed = ran.stdout.splitlines()
            assert printed and printed[0].rstrip() == shown[0].rstrip(), (
                f"{block.where}: `evalkit {shlex.join(words)}` prints {printed[:1]}, the docs show {shown[:1]}"
            )


def _evalkit(words: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *words], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_every_mark_names_its_reason_and_sits_before_a_block() -> None:
    """A mark with no block after it (a block moved away) or no reason would hide nothing, or hide silently."""
    marked = sum(1 for block in ALL if block.mark)
    written = 0
    for path in documentation_files():
        text = path.read_text(encoding="utf-8")
        for mark in re.finditer(r"^<!-- example:[^>]*-->", text, re.M):  # a mark is a line of its own
            written += 1
            expected = "expected skip|no-run|schema|runspecs|script (why)"
            assert _MARK.match(mark.group(0)), f"{path.name}: {mark.group(0)}: {expected}"
    assert written == marked, "a mark is not directly before a fenced block"


def test_the_examples_are_found() -> None:
    """Guards the walk: the blocks this file checks are there (a changed fence pattern would find none)."""
    assert len(CONFIGS) >= 15 and len(COMMANDS) >= 10
    assert any(words[:1] == ["list"] for block in COMMANDS for words, _ in commands(block))


def test_the_blocks_not_run_in_full_are_these() -> None:
    """The list of blocks checked only in part, with their reasons: a new one is a decision, made here."""
    partial = {block.where.split(":")[0] + f" {block.mark}: {block.why}" for block in ALL if block.mark}
    assert partial == {
        "docs/auharness.md no-run: run_configs/covost2.yaml is your AU-Harness file",
        "docs/chef.md schema: ChEF's data is your own copy, at the paths given",
        "docs/chef.md schema: mmbench_en_dev_circular is the entry of your own runspec above",
        "docs/chef.md schema: my_mcq is a dataset of your own",
        "docs/datasets.md runspecs: examples/vqa/runspecs",
        "docs/datasets.md schema: the paths are your own copies",
        "docs/datasets.md skip: a synopsis: brackets and alternatives",
        "docs/getting-started.md skip: a synopsis: brackets and alternatives",
        "docs/local-models.md script: a test-server script: checked by the server's own reader",
        "docs/scoring.md schema: CallHome is your own licensed copy",
        "docs/scoring.md schema: my_hindi_asr is the entry of your own runspec above",
        "docs/test-server.md skip: the key reference: its placeholders stand for your values",
    }

"""200 seeded random mutations of sample_config.yaml: each ends with exit 2 and a short message, or is valid.

Mutations are drawn from what people actually get wrong: a key deleted or
misspelled, a value of the wrong type, an unknown dataset/metric/type name, a
stray character or a truncated file that breaks the YAML. Each runs
``evalkit validate`` in-process (a subprocess per case would take minutes);
any exception escaping ``evalkit.cli.main`` fails the test with the mutation
that caused it. URLs point at a closed loopback port, though ``validate``
sends nothing.
"""

from __future__ import annotations

import contextlib
import copy
import io
import random
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT

from evalkit.cli.main import main

SEED = 20240611
CASES = 200
WRONG_VALUES: list[Any] = [
    None,
    0,
    -1,
    3.5,
    -2.5,
    "",
    "text",
    "many",
    True,
    False,
    [],
    [1, 2],
    ["a", ["b"]],
    {},
    {"x": 1},
    "${EVALKIT_FUZZ_UNSET_VARIABLE}",
    10**20,
    "1e309",
    float("inf"),
    "\t",
    "null",
    [None],
    {"info": None},
]
UNKNOWN_NAMES = [
    "espeak_en_asrr",
    "no_such_dataset",
    "word_eror_rate",
    "no_such_metric",
    "vlm",
    "transcribe",
    "asr",
    "speech_recognition",
    "Wer",
    "bleu",
]
BAD_CHARS = [":", "{", "}", "[", "]", "'", '"', "\t", "&", "*", "!", "|", ">", "%", "@", "`", "- ", "\n  ", ",", "#"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _base() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "sample_config.yaml").read_text())
    port = _closed_port()
    for entry in data["models"]:
        entry["info"]["url"] = f"http://127.0.0.1:{port}/v1"
    return data


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a node of the tree (mapping keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _parent(tree: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        tree = tree[part]
    return tree


def _typo(word: str, rng: random.Random) -> str:
    if not word:
        return "x"
    i = rng.randrange(len(word))
    op = rng.choice(("drop", "swap", "insert", "case"))
    if op == "drop" and len(word) > 1:
        return word[:i] + word[i + 1 :]
    if op == "swap" and len(word) > 1:
        j = min(i + 1, len(word) - 1)
        chars = list(word)
        chars[i], chars[j] = chars[j], chars[i]
        swapped = "".join(chars)
        return swapped if swapped != word else word + "s"
    if op == "case":
        return word.upper() if word != word.upper() else word + "_"
    return word[:i] + rng.choice("abcdefghijklmnopqrstuvwxyz_") + word[i:]


def _mutate_tree(tree: Any, rng: random.Random) -> tuple[Any, str]:
    paths = _paths(tree)
    if not paths:
        return tree, "empty"
    path = rng.choice(paths)
    parent = _parent(tree, path)
    key = path[-1]
    op = rng.choice(
        ("delete", "wrong_type", "wrong_type", "rename", "unknown_key", "unknown_name", "empty_list", "duplicate")
    )
    if op == "delete":
        del parent[key]
    elif op == "wrong_type":
        parent[key] = copy.deepcopy(rng.choice(WRONG_VALUES))
    elif op == "rename" and isinstance(parent, dict):
        parent[_typo(str(key), rng)] = parent.pop(key)
    elif op == "unknown_key":
        target = parent if isinstance(parent, dict) else tree
        target[rng.choice(["batch_sise", "modle", "filtres", "timeout_s", "extra", "urls", "dataset_metrics"])] = 1
    elif op == "unknown_name":
        parent[key] = rng.choice(UNKNOWN_NAMES)
    elif op == "empty_list" and isinstance(parent[key], list):
        parent[key] = []
    elif op == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[key]))
    else:
        parent[key] = copy.deepcopy(rng.choice(WRONG_VALUES))
        op = "wrong_type"
    return tree, f"{op} at {'.'.join(map(str, path))}"


def _mutate_text(text: str, rng: random.Random) -> tuple[str, str]:
    op = rng.choice(("truncate", "insert", "drop_line", "indent"))
    if op == "truncate":
        cut = rng.randrange(len(text))
        return text[:cut], f"truncate at {cut}"
    lines = text.splitlines()
    i = rng.randrange(len(lines))
    if op == "insert":
        line = lines[i]
        j = rng.randrange(len(line) + 1)
        lines[i] = line[:j] + rng.choice(BAD_CHARS) + line[j:]
    elif op == "drop_line":
        del lines[i]
    else:
        lines[i] = " " * rng.choice((1, 3, 5)) + lines[i]
    return "\n".join(lines) + "\n", f"{op} line {i + 1}"


def _mutation(rng: random.Random) -> tuple[str, str]:
    tree = _base()
    steps = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        if rng.random() < 0.75 and isinstance(tree, dict):
            tree, step = _mutate_tree(tree, rng)
        else:
            if rng.random() < 0.1:
                tree, step = rng.choice([[1, 2], "just text", 42, None]), "not a mapping"
            else:
                step = "text"
        steps.append(step)
    text = yaml.safe_dump(tree, sort_keys=False, allow_unicode=True)
    if "text" in steps or rng.random() < 0.25:
        text, step = _mutate_text(text, rng)
        steps.append(step)
    return text, "; ".join(steps)


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_200_seeded_config_mutations_exit_0_or_2_with_a_short_message(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("EVALKIT_FUZZ_UNSET_VARIABLE", raising=False)
    rng = random.Random(SEED)
    codes: dict[int, int] = {}
    for case in range(CASES):
        text, what = _mutation(rng)
        path = tmp_path / f"config_{case:03d}.yaml"
        path.write_text(text)
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["validate", str(path)])
        except BaseException as error:
            raise AssertionError(
                f"case {case} ({what}) escaped evalkit.cli.main: {type(error).__name__}: {error}\n{text}"
            ) from error
        codes[code] = codes.get(code, 0) + 1
        message = err.getvalue()
        assert code in (0, 2), (case, what, code, message)
        assert "Traceback" not in message + out.getvalue(), (case, what)
        if code == 2:
            assert message.startswith("evalkit: error: ") and str(path) in message, (case, what, message)
            assert len(message) < 2500 and message.count("\n") <= 25, (case, what, message)  # a paragraph, not a dump
        else:
            assert "OK" in out.getvalue()
    assert codes.get(2, 0) >= CASES // 2  # most mutations are mistakes, and each was reported

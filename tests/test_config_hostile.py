"""Configs that cannot be meant are refused: exit 2, one short line, before anything is built or sent.

Issue 30 measured a 326-byte YAML "billion laughs" config taking 41.7 s and
2.35 GB and printing a 34.7 MB error, YAML nested 20,000 deep ending in a
RecursionError traceback, duplicate keys silently keeping the last value (a
run measured ``cer`` where the file also said ``wer``), and ``delay: 2**63``
passing validation and hanging the run. Each case here is a real file on disk
given to the real CLI: as a subprocess (``python -m evalkit``) where the exit
code and the whole of stderr matter, in-process (``evalkit.cli.main``) for the
long parametrized lists, as tests/test_config_fuzz.py does.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
import tracemalloc
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import FIXTURES, ROOT
from pydantic import BaseModel

from evalkit import config as config_module
from evalkit.cli.main import main
from evalkit.errors import ConfigError
from evalkit.util.json_safe import load_json
from evalkit.util.yaml_safe import MAX_ALIAS_USES, MAX_DEPTH, load_yaml

#: the tiny text dataset of the fixtures; nothing is sent (the URL is a closed port, and validate sends nothing)
BASE: dict[str, Any] = {
    "dataset_metric": [["tiny_qa", "exact_match"]],
    "models": [{"info": {"name": "m", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1", "model": "m"}}],
    "runspecs_dir": str(FIXTURES / "runspecs"),
}
#: generous: a refused file takes well under a second to refuse; the interpreter's start is most of this
PROMPT_S = 30


def billion_laughs(levels: int, size: int) -> str:
    """The classic alias bomb: each level a list of nine aliases of the one before, padded to ``size`` bytes."""
    names = "abcdefghijklmnopqrstuvwxyz"
    lines = [f"{names[0]}: &{names[0]} [l,l,l,l,l,l,l,l,l]"]
    for level in range(1, levels):
        alias = f"*{names[level - 1]}"
        lines.append(f"{names[level]}: &{names[level]} [{','.join([alias] * 9)}]")
    text = "\n".join(lines) + "\n"
    assert len(text) <= size - 2, (len(text), size)
    return text + "#" * (size - len(text) - 1) + "\n"


def _write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], capture_output=True, text=True, cwd=cwd, timeout=PROMPT_S * 4
    )


def _in_process(path: Path) -> tuple[int, str]:
    """``evalkit validate path`` in this process: (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["validate", str(path)])
    return code, err.getvalue()


def _assert_one_line_refusal(proc: subprocess.CompletedProcess[str], path: Path, *fragments: str) -> None:
    message = proc.stderr
    assert proc.returncode == 2, (proc.returncode, message[:2000])
    assert "Traceback" not in message
    assert len(message) < 1000, len(message)
    assert message.count("\n") == 1 and message.startswith("evalkit: error: "), message
    assert str(path) in message or path.name in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


# ---- alias bombs ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "levels"), [(326, 9), (361, 10)], ids=["326_bytes", "361_bytes"])
@pytest.mark.parametrize("command", [["validate"], ["run", "--dry-run"]], ids=["validate", "run_dry_run"])
def test_billion_laughs_refused_at_once_with_a_short_line(
    tmp_path: Path, size: int, levels: int, command: list[str]
) -> None:
    text = billion_laughs(levels, size)
    assert len(text.encode()) == size
    path = _write(tmp_path, text)
    started = time.monotonic()
    proc = _cli(command[0], str(path), *command[1:], cwd=tmp_path)
    took = time.monotonic() - started
    _assert_one_line_refusal(proc, path, "line ", "alias", "100,000")
    assert took < PROMPT_S, took  # issue 30: 41.7 s for 326 bytes, still growing at 90 s for 361
    assert not (tmp_path / "runs").exists()


def test_billion_laughs_costs_no_memory() -> None:
    """The refusal comes while composing: nothing near the 10^9 nodes is ever built (issue 30: 2.35 GB)."""
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="alias"):
            load_yaml(billion_laughs(10, 361), "bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5 * 1024 * 1024, peak


def test_too_many_aliases_refused_and_recursive_alias_refused() -> None:
    many = "base: &b 1\nuses: [" + ", ".join(["*b"] * (MAX_ALIAS_USES + 1)) + "]\n"
    with pytest.raises(ConfigError, match=rf"f\.yaml: line 2, .*more than {MAX_ALIAS_USES} aliases"):
        load_yaml(many, "f.yaml")
    with pytest.raises(ConfigError, match="recursive"):
        load_yaml("a: &a [1, *a]\n", "f.yaml")


def test_aliases_and_merge_keys_a_config_means_still_work(tmp_path: Path) -> None:
    """Shared model settings through an anchor and ``<<`` merges, overriding one merged key, stay valid."""
    text = (
        "defaults: &defaults {inference_type: vllm, url: 'http://127.0.0.1:9/v1', model: m, batch_size: 4}\n"
        "dataset_metric: [[tiny_qa, exact_match]]\n"
        f"runspecs_dir: {json.dumps(str(FIXTURES / 'runspecs'))}\n"
        "models:\n"
        "  - info: {<<: *defaults, name: a}\n"
        "  - info: {<<: *defaults, name: a, batch_size: 8}\n"
    )
    data = load_yaml(text, "f.yaml")
    assert data["models"][1]["info"]["batch_size"] == 8
    data.pop("defaults")
    path = _write(tmp_path, yaml.safe_dump(data))
    assert _in_process(path)[0] == 0


# ---- nesting --------------------------------------------------------------------------------------------------

DEEP = {
    "flow": "models: " + "[" * 20_000 + "]" * 20_000 + "\n",
    "flow_mapping": "models: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n",
    "block": "models:\n" + "- " * 20_000 + "x\n",
}


@pytest.mark.parametrize("style", list(DEEP))
def test_20000_deep_nesting_is_one_line_exit_2(tmp_path: Path, style: str) -> None:
    path = _write(tmp_path, DEEP[style])
    for command in (["validate", str(path)], ["run", str(path), "--dry-run"]):
        proc = _cli(*command, cwd=tmp_path)
        _assert_one_line_refusal(proc, path, "line 1" if style != "block" else "line 2", f"more than {MAX_DEPTH}")


@pytest.mark.parametrize(
    ("flag", "value", "names"),
    [
        ("--model-args", '{"temperature": ' + "[" * 20_000 + "]" * 20_000 + "}", "--model-args"),
        ("--model-args", "extra=" + "[" * 20_000 + "]" * 20_000, "--model-args (the model: extra)"),
        ("--dataset-args", "tiny_qa:x=" + '{"a": ' * 10_000 + "1" + "}" * 10_000, "--dataset-args (tiny_qa: x)"),
        ("--metric-args", "exact_match:x=" + "[" * 20_000 + "]" * 20_000, "--metric-args (exact_match: x)"),
        ("--processor-args", "tiny_qa.p:x=" + "[" * 20_000 + "]" * 20_000, "--processor-args (tiny_qa.p: x)"),
    ],
    ids=["model_args_json", "model_args_key_value", "dataset_args", "metric_args", "processor_args"],
)
def test_deeply_nested_json_in_a_flag_is_one_line_exit_2(tmp_path: Path, flag: str, value: str, names: str) -> None:
    path = _write(tmp_path, json.dumps(BASE))
    proc = _cli("run", str(path), "--dry-run", flag, value, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and len(proc.stderr) < 1000, proc.stderr[:300]
    assert proc.stderr == f"evalkit: error: {names}: lists and objects nested more than {MAX_DEPTH} levels deep\n"


@pytest.mark.parametrize("character", ["\x00", "\x07", "\x1b", "\ufffe"], ids=["nul", "bell", "escape", "nonchar"])
def test_a_config_holding_a_control_character_is_one_line_exit_2(tmp_path: Path, character: str) -> None:
    text = yaml.safe_dump(BASE, sort_keys=False)
    cut = text.index("models:")
    path = _write(tmp_path, text[:cut] + f"# note{character}\n" + text[cut:])
    line = text[:cut].count("\n") + 1
    for command in (["validate", str(path)], ["run", str(path), "--dry-run"]):
        proc = _cli(*command, cwd=tmp_path)
        _assert_one_line_refusal(
            proc, path, f"line {line}, column 7: not valid YAML: unacceptable character #x{ord(character):04x}"
        )


def test_nesting_up_to_the_bound_is_read() -> None:
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load_yaml(deep, "f.yaml") is not None
    with pytest.raises(ConfigError, match="nested"):
        load_yaml("[" + deep + "]", "f.yaml")


# ---- duplicate keys -------------------------------------------------------------------------------------------

DUPLICATES = {
    # issue 30: the run measured cer where the file also said wer
    "top level": (
        "dataset_metric: [[tiny_qa, wer]]\n"
        "models:\n"
        "  - info: {name: m, inference_type: vllm, url: 'http://127.0.0.1:9/v1', model: m}\n"
        "dataset_metric: [[tiny_qa, cer]]\n",
        "dataset_metric",
        (1, 4),
    ),
    "metric options": (
        "dataset_metric:\n"
        "  - [tiny_qa, exact_match, {normalizer: basic,\n"
        "                            normalizer: none}]\n"
        "models:\n"
        "  - info: {name: m, inference_type: vllm, url: 'http://127.0.0.1:9/v1', model: m}\n",
        "normalizer",
        (2, 3),
    ),
    "model entry": (
        "dataset_metric: [[tiny_qa, exact_match]]\n"
        "models:\n"
        "  - info:\n"
        "      name: m\n"
        "      inference_type: vllm\n"
        "      url: http://127.0.0.1:9/v1\n"
        "      model: m\n"
        "      batch_size: 4\n"
        "      batch_size: 64\n",
        "batch_size",
        (8, 9),
    ),
}


@pytest.mark.parametrize("case", list(DUPLICATES))
def test_duplicate_key_names_the_key_and_both_lines(tmp_path: Path, case: str) -> None:
    text, key, (first, second) = DUPLICATES[case]
    path = _write(tmp_path, text)
    proc = _cli("validate", str(path), cwd=tmp_path)
    _assert_one_line_refusal(proc, path, repr(key), f"first at line {first}", f"again at line {second}")


def test_duplicate_key_in_a_prompts_dir_file_names_that_file(tmp_path: Path) -> None:
    prompts = tmp_path / "my_prompts"
    prompts.mkdir()
    (prompts / "pools.yaml").write_text("mine: [a, b]\nmine: [c]\n")
    data = {**BASE, "prompts_dir": str(prompts)}
    path = _write(tmp_path, yaml.safe_dump(data))
    proc = _cli("validate", str(path), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "pools.yaml" in proc.stderr and "'mine'" in proc.stderr and "line 2" in proc.stderr, proc.stderr


# ---- JSON runspecs --------------------------------------------------------------------------------------------


def _runspec_config(tmp_path: Path, runspec_text: str) -> Path:
    folder = tmp_path / "specs" / "text"
    folder.mkdir(parents=True)
    (folder / "mine.json").write_text(runspec_text)
    data = {**BASE, "runspecs_dir": [str(FIXTURES / "runspecs"), str(tmp_path / "specs")]}
    return _write(tmp_path, yaml.safe_dump(data))


def test_runspec_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    text = '{\n  "mine": {\n    "path": "a.jsonl",\n    "target_column": "x",\n    "target_column": "y"\n  }\n}\n'
    path = _runspec_config(tmp_path, text)
    proc = _cli("validate", str(path), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "mine.json" in proc.stderr and "'target_column' given twice" in proc.stderr, proc.stderr
    assert "line 2" in proc.stderr and len(proc.stderr) < 1000, proc.stderr


def test_runspec_nested_20000_deep_is_one_line(tmp_path: Path) -> None:
    path = _runspec_config(tmp_path, '{"mine": ' + "[" * 20_000 + "]" * 20_000 + "}")
    proc = _cli("validate", str(path), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "mine.json" in proc.stderr and "nested" in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_json_loader_bounds() -> None:
    assert load_json('{"a": [1, {"b": 2}]}', "f.json") == {"a": [1, {"b": 2}]}
    with pytest.raises(ConfigError, match=r"'b' given twice in the object at line 2, column 3"):
        load_json('{"a":\n  {"b": 1, "b": 2}}', "f.json")
    with pytest.raises(ConfigError, match="nested more than"):
        load_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "f.json")


def _nested(levels: int) -> str:
    """Objects and lists taking turns, ``levels`` deep, behind wide shallow siblings at every level."""
    text = "[]"
    for level in range(levels - 1):
        text = f'{{"a": [1, 2], "z": {text}}}' if level % 2 else f'[{{"x": 3}}, "s", {text}, 4]'
    return text


def test_json_depth_counts_the_deepest_branch_whatever_its_siblings() -> None:
    assert load_json(_nested(MAX_DEPTH), "f.json") is not None
    assert load_json(f'{{"k": {_nested(MAX_DEPTH - 1)}}}', "f.json") is not None
    for deeper in (_nested(MAX_DEPTH + 1), f'{{"k": {_nested(MAX_DEPTH)}}}', f"[[], {_nested(MAX_DEPTH)}]"):
        with pytest.raises(ConfigError, match=f"f.json: lists and objects nested more than {MAX_DEPTH} levels deep"):
            load_json(deeper, "f.json")


# ---- numeric ranges -------------------------------------------------------------------------------------------

#: (key path in BASE, a value too big or too small, the range the message must give)
OUT_OF_RANGE: list[tuple[str, Any, str]] = [
    ("models.0.info.delay", 2**63, "0 <= delay <= 86400000"),  # issue 30: hung forever with 0 requests sent
    ("models.0.info.delay", 86_400_001, "0 <= delay <= 86400000"),
    ("models.0.info.timeout", 1e29, "0 < timeout <= 604800"),
    ("models.0.info.timeout", 604_801, "0 < timeout <= 604800"),
    ("models.0.info.retry_attempts", 2**63, "0 <= retry_attempts <= 100"),
    ("models.0.info.batch_size", 2**63, "1 <= batch_size <= 65536"),
    ("models.0.info.batch_size", 65_537, "1 <= batch_size <= 65536"),
    ("models.0.info.deadline", 604_801, "0 < deadline <= 604800"),
    ("models.0.info.chunk_size", 86_401, "0 < chunk_size <= 86400"),
    ("models.0.info.max_response_bytes", 2**31, "1024 <= max_response_bytes <= 536870912"),
    ("models.0.info.max_image_side", 65_537, "1 <= max_image_side <= 65536"),
    ("models.0.info.max_image_pixels", 2**40, "1 <= max_image_pixels <= 4294967296"),
    ("models.0.info.temperature", 101, "0 <= temperature <= 100"),
    ("models.0.info.max_tokens", 10**8, "1 <= max_tokens <= 10000000"),
    ("models.0.info.top_p", 1.5, "0 < top_p <= 1"),
    ("models.0.info.seed", 2**64, "seed <= 9223372036854775807"),
    ("models.0.info.requests_per_minute", 1e9, "0 < requests_per_minute <= 10000000"),
    ("models.0.info.tokens_per_minute", 1e12, "0 < tokens_per_minute <= 10000000000"),
    ("filters.num_samples", 10**10, "0 <= num_samples <= 1000000000"),
    ("filters.seed", -1, "0 <= seed <= 9223372036854775807"),  # numpy's bootstrap takes no negative seed
    ("filters.length_filter", [0, 100_000], "max <= 86400"),
    ("generation_overrides", [{"task": "qa", "max_tokens": 2**40}], "1 <= max_tokens <= 10000000"),
    ("temperature_overrides", [{"task": "qa", "temperature": 1000}], "0 <= temperature <= 100"),
    ("max_failure_rate", 2, "0 <= max_failure_rate <= 1"),
    ("judge_properties", {"judge_model": "j", "judge_api_endpoint": "http://x", "judge_timeout": 10**7}, "604800"),
    ("judge_properties", {"judge_model": "j", "judge_api_endpoint": "http://x", "judge_retry_attempts": 10**6}, "100"),
    ("judge_properties", {"judge_model": "j", "judge_api_endpoint": "http://x", "judge_concurrency": 10**6}, "65536"),
]


def _with(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.loads(json.dumps(base or BASE))
    node: Any = data
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[last] = value
    return data


@pytest.mark.parametrize(("key", "value", "allowed"), OUT_OF_RANGE, ids=[f"{k}={v!r}"[:60] for k, v, _ in OUT_OF_RANGE])
def test_number_outside_its_documented_range_is_refused(tmp_path: Path, key: str, value: Any, allowed: str) -> None:
    path = _write(tmp_path, yaml.safe_dump(_with(key, value)))
    code, message = _in_process(path)
    assert code == 2, message
    assert allowed in message, message
    assert str(path) in message and message.count("\n") == 1, message


def test_launch_startup_timeout_has_a_range(tmp_path: Path) -> None:
    info = {"name": "m", "inference_type": "local", "model": "m", "launch": {"backend": "pocketsphinx"}}
    data = {**BASE, "models": [{"info": {**info, "launch": {**info["launch"], "startup_timeout": 10**9}}}]}
    code, message = _in_process(_write(tmp_path, yaml.safe_dump(data)))
    assert code == 2 and "0 < startup_timeout <= 604800" in message, message


@pytest.mark.parametrize("amount", [-1, 1e16])
def test_a_ray_resource_amount_has_a_range(tmp_path: Path, amount: float) -> None:
    launch = {"backend": "test-server", "ray": {"resources_per_replica": {"GPU": amount}}}
    info = {"name": "m", "inference_type": "vllm", "model": "m", "launch": launch}
    code, message = _in_process(_write(tmp_path, yaml.safe_dump({**BASE, "models": [{"info": info}]})))
    assert code == 2 and "'GPU'" in message and "expected a number from 0 to 1e+15" in message, message


def test_delay_of_2_63_is_refused_by_run_too(tmp_path: Path) -> None:
    """Issue 30's hang: `evalkit run` stops at the config, exit 2, before any run folder."""
    path = _write(tmp_path, yaml.safe_dump(_with("models.0.info.delay", 2**63)))
    proc = _cli("run", str(path), cwd=tmp_path)
    _assert_one_line_refusal(proc, path, "models[0].info.delay", "9223372036854775808", "0 <= delay <= 86400000")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("models.0.info.timeout", ".inf"),
        ("models.0.info.temperature", ".nan"),
        ("models.0.info.requests_per_minute", ".inf"),
        ("models.0.info.delay", "-.inf"),
        ("filters.length_filter", "[0, .inf]"),
        ("models.0.info.timeout", "'1e999'"),
    ],
)
def test_inf_and_nan_are_refused(tmp_path: Path, key: str, text: str) -> None:
    placeholder = "__VALUE__"
    dumped = yaml.safe_dump(_with(key, placeholder)).replace(placeholder, text)
    code, message = _in_process(_write(tmp_path, dumped))
    assert code == 2, message
    assert "finite" in message and key.split(".")[-1] in message, message


def test_an_integer_too_long_to_read_is_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, yaml.safe_dump(BASE) + "max_failure_rate: " + "9" * 5000 + "\n")
    proc = _cli("validate", str(path), cwd=tmp_path)
    _assert_one_line_refusal(proc, path, "line ")


def test_long_values_are_not_echoed_whole(tmp_path: Path) -> None:
    path = _write(tmp_path, yaml.safe_dump(_with("models.0.info.timeout", "x" * 100_000)))
    code, message = _in_process(path)
    assert code == 2 and "timeout" in message and len(message) < 1000, len(message)


def _numeric_fields() -> list[tuple[type[BaseModel], str, Any]]:
    """Every int/float field of the config schema, nested models included."""
    found: list[tuple[type[BaseModel], str, Any]] = []
    todo: list[type[BaseModel]] = [config_module.Config]
    seen: set[type[BaseModel]] = set()
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            leaves: list[Any] = []
            stack = [field.annotation]
            while stack:
                annotation = stack.pop()
                args = typing.get_args(annotation)
                if args:
                    stack.extend(args)
                else:
                    leaves.append(annotation)
            # a [min, max] pair (length_filter) and a table of amounts (launch.ray.resources_per_replica) are ranged
            # by their validators, tested in OUT_OF_RANGE
            if {int, float} & set(leaves) and not {"tuple", "dict"} & set(str(field.annotation).split("[")):
                found.append((model, name, field))
            todo += [leaf for leaf in leaves if isinstance(leaf, type) and issubclass(leaf, BaseModel)]
    return found


def test_every_numeric_field_has_a_documented_range() -> None:
    fields = _numeric_fields()
    assert len(fields) >= 25
    for model, name, field in fields:
        allowed = config_module.documented_range(field, name)
        assert allowed is not None and allowed.count("<") == 2, f"{model.__name__}.{name}: no range ({allowed})"
        upper = allowed.rsplit(" ", 1)[-1]
        description = field.description or ""
        assert upper in description or "64-bit" in description or "(0-1)" in description, (
            f"{model.__name__}.{name}: the description does not give the upper bound {upper}"
        )


# ---- what a user means still works ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sample_config.yaml", "config.yaml"])
def test_the_repository_configs_still_validate(name: str) -> None:
    proc = _cli("validate", str(ROOT / name), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "OK" in proc.stdout


def test_values_at_the_bounds_are_accepted() -> None:
    info = {
        **BASE["models"][0]["info"],
        "delay": 86_400_000,
        "timeout": 604_800,
        "batch_size": 65_536,
        "retry_attempts": 100,
        "max_tokens": 10_000_000,
        "seed": -(2**63),
    }
    config = config_module.parse_config({**BASE, "models": [{"info": info}]}, "f.yaml", env={})
    assert config.models[0].info.batch_size == 65_536

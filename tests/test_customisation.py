"""Customised from the user's side: metric options, prompts and plugins from the config, no package edits.

Every test runs evalkit as a user would (the CLI in a subprocess, or a run in-process against the
project's test server); a mistake is one message naming it, exit 2, no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, config_for, model_entry, run, text_set

from evalkit.config import load_config
from evalkit.plan import build_plan
from evalkit.testing import start_test_server


def _evalkit(args: list[str], cwd: Path, pythonpath: list[Path] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, pythonpath or []), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _user_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.fixture()
def echo() -> Any:
    server = start_test_server({"default_answer": "echo", "answers": [{"system_match": "pirate", "answer": "Arr"}]})
    yield server
    server.stop()


def _results(tmp_path: Path) -> list[dict[str, Any]]:
    (path,) = (tmp_path / "runs").glob("*/results.json")
    return json.loads(path.read_text())["results"]


# -- metric options -------------------------------------------------------------------------------------


def test_metric_options_from_the_config_reach_the_metric(tmp_path: Path, echo: Any) -> None:
    runspecs = text_set(tmp_path, 6)
    pairs = [["synth_qa", "exact_match", {"normalize": False}], ["synth_qa", "bleu"]]
    outcome = run(config_for(tmp_path, runspecs, [model_entry("m", echo.base_url)], pairs))
    assert not any(e.error for e in outcome.engines)
    by_metric = {row["metric"]: row for row in _results(tmp_path)}
    assert by_metric["exact_match"]["details"]["normalization"] == "strip"
    assert by_metric["exact_match"]["n"] == 6


def test_the_readme_example_of_an_asr_option_plans(tmp_path: Path) -> None:
    config = config_for(
        tmp_path,
        ROOT / "runspecs",
        [model_entry("m", "http://127.0.0.1:9/v1")],
        [["espeak_en_asr", "word_error_rate", {"normalizer": "basic"}]],
    )
    (engine,) = build_plan(load_config(config)).engines
    assert engine.options == {"normalizer": "basic"}


def test_an_unknown_metric_option_is_exit_2_naming_it(tmp_path: Path) -> None:
    runspecs = text_set(tmp_path, 3)
    config = config_for(
        tmp_path, runspecs, [model_entry("m", "http://127.0.0.1:9/v1")], [["synth_qa", "exact_match", {"normalise": 1}]]
    )
    _user_error(
        _evalkit(["validate", str(config)], tmp_path), "dataset_metric[0]", "unknown option 'normalise'", '"normalize"'
    )
    bad_shape = config_for(
        tmp_path, runspecs, [model_entry("m", "http://127.0.0.1:9/v1")], [["synth_qa", "exact_match", "x"]]
    )
    _user_error(_evalkit(["validate", str(bad_shape)], tmp_path), "dataset_metric", "[name, metric, {option: value}]")


# -- prompts from the user's side -----------------------------------------------------------------------


def _predictions(tmp_path: Path) -> list[str]:
    (records,) = (tmp_path / "runs").glob("*/records/synth_qa__exact_match.jsonl")
    return [json.loads(line)["prediction"] for line in records.read_text().splitlines()]


def test_prompts_dir_and_inline_prompts_override_and_add_without_touching_the_package(
    tmp_path: Path, echo: Any
) -> None:
    runspecs = text_set(tmp_path, 3)
    spec_file = runspecs / "text" / "synth_qa.json"
    spec = json.loads(spec_file.read_text())
    spec["synth_qa"]["prompt_pool"] = "my_pool"
    spec["synth_qa"]["prompt_choice"] = 0
    spec_file.write_text(json.dumps(spec))
    mine = tmp_path / "my_prompts"
    mine.mkdir()
    (mine / "add_ons.yaml").write_text("shout: {text: FROM THE FOLDER}\nwhisper: {text: quietly please}\n")
    (mine / "pools.yaml").write_text("my_pool: ['Pool template from my folder.']\n")
    config = config_for(
        tmp_path,
        runspecs,
        [model_entry("m", echo.base_url)],
        prompts_dir=str(mine),
        prompts={"add_ons": {"shout": {"text": "INLINE WINS"}}},
        filters={"user_prompt_add_ons": ["shout", "whisper"]},
    )
    run(config)
    for prediction in _predictions(tmp_path):
        assert prediction.startswith("Pool template from my folder.\n\nINLINE WINS\n\nquietly please"), prediction
        assert "FROM THE FOLDER" not in prediction


def test_a_runspec_system_prompt_reaches_every_request_of_its_dataset(tmp_path: Path, echo: Any) -> None:
    runspecs = text_set(tmp_path, 3)
    spec_file = runspecs / "text" / "synth_qa.json"
    spec = json.loads(spec_file.read_text())
    spec["synth_qa"]["system_prompt"] = "You are a pirate."
    spec_file.write_text(json.dumps(spec))
    run(config_for(tmp_path, runspecs, [model_entry("m", echo.base_url)]))
    assert _predictions(tmp_path) == ["Arr"] * 3


def test_a_judge_prompt_from_prompts_dir_replaces_the_packaged_one(tmp_path: Path) -> None:
    mine = tmp_path / "my_prompts"
    (mine / "judges").mkdir(parents=True)
    (mine / "judges" / "llm_judge_binary.yaml").write_text("user: 'MY JUDGE: {question} / {reference} / {candidate}'\n")
    from evalkit.plan import judge_prompt_for
    from evalkit.prompts.library import library_for

    config = load_config(
        config_for(tmp_path, ROOT / "runspecs", [model_entry("m", "http://127.0.0.1:9/v1")], prompts_dir=str(mine))
    )
    prompt = judge_prompt_for("llm_judge_binary", library_for(config).judges)
    assert prompt == str(mine / "judges" / "llm_judge_binary.yaml")
    broken = tmp_path / "broken"
    (broken / "judges").mkdir(parents=True)
    (broken / "judges" / "llm_judge_binary.yaml").write_text("user: 'no placeholders'\n")
    bad = config_for(
        tmp_path,
        ROOT / "runspecs",
        [model_entry("m", "http://127.0.0.1:9/v1")],
        [["basic_qa", "llm_judge_binary"]],
        prompts_dir=str(broken),
        judge_properties={"judge_model": "j", "judge_api_endpoint": "http://127.0.0.1:9/v1"},
    )
    _user_error(_evalkit(["validate", str(bad)], tmp_path), "llm_judge_binary.yaml", "{question}")


def test_a_missing_prompts_dir_or_an_unknown_prompt_is_exit_2_naming_it(tmp_path: Path) -> None:
    runspecs = text_set(tmp_path, 3)
    missing = config_for(
        tmp_path, runspecs, [model_entry("m", "http://127.0.0.1:9/v1")], prompts_dir=str(tmp_path / "nowhere")
    )
    _user_error(_evalkit(["validate", str(missing)], tmp_path), "prompts_dir", "nowhere", "is not a folder")
    unknown = config_for(
        tmp_path,
        runspecs,
        [model_entry("m", "http://127.0.0.1:9/v1")],
        prompts={"add_ons": {"mine": {"text": "x"}}},
        filters={"user_prompt_add_ons": ["mien"]},
    )
    _user_error(_evalkit(["validate", str(unknown)], tmp_path), "unknown prompt 'mien'", '"mine"')

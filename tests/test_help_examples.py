"""Every example in the `--help` texts of every evalkit command runs as written, or is validated where it cannot run
here (a hosted API, a hub dataset); those that send requests send them to the project's test server.

`test_every_help_example_is_checked` finds each "e.g." of every help text and requires a test here for it, so a new
example fails CI until it is tested; the examples written without "e.g." (the hosted model names, --model-args'
two forms, report's forms, the commands named in backticks) are found by their own tests, which fail when the help
loses them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, config_for, model_entry, text_set
from test_view import _js_data, make_run

from evalkit.catalog import load_catalog
from evalkit.cli.main import _plan
from evalkit.cli.parser import build_parser
from evalkit.config.foreign.karma_args import parse_processor_args
from evalkit.errors import ConfigError, UserError
from evalkit.metrics import METRICS
from evalkit.processing.processors import build_processors
from evalkit.run.shard import Shard
from evalkit.serve.backends.registry import load_backend_class
from evalkit.serve.cli import build_parser as build_serve_parser
from evalkit.testing import start_test_server

#: each "e.g." example of a help text, and the test that runs or validates it
CHECKED = {
    "ai4bharat/IN22-Conv:source_language=en,target_language=hi": (
        "test_the_dataset_args_example_plans_the_pair_it_names"
    ),
    "exact_match:normalize=false;bleu:max_ngram_order=2": "test_the_metric_args_example_sets_both_metrics_options",
    "ai4bharat/IN22-Conv.devnagari_transliterator:source_script=en,target_script=hi": (
        "test_the_processor_args_example_names_a_dataset_and_arguments_that_exist"
    ),
    "http://127.0.0.1:8000/v1": "test_the_model_url_example_runs",
    "--shard $SLURM_ARRAY_TASK_ID/8": "test_the_shard_example_runs_in_a_shell",
    "en, english, fr-en": "test_the_language_examples_each_list_datasets",
    "'failure=any' or 'model=gpt-4o&max=0.5'": "test_the_view_filter_examples_each_export_what_they_select",
}
#: an "e.g." that describes what to give rather than showing a value: nothing to run
PROSE = {"a local dataset's folder"}


def _commands(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _commands(child, f"{name} {sub}")


def help_texts() -> dict[str, str]:
    """Every command's --help (``evalkit serve`` has its own parser), on one line: argparse wraps inside words."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100000"
    try:
        found = dict(_commands(build_parser(), "evalkit"))
        found["evalkit serve"] = build_serve_parser()
        return {name: " ".join(parser.format_help().split()) for name, parser in found.items()}
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def examples() -> dict[str, str]:
    """Each "e.g." fragment -> the command whose help shows it (up to the ), ; or : that ends it)."""
    found = {}
    for command, text in help_texts().items():
        for match in re.finditer(r"e\.g\. (.+?)(?=\)|; |: | with |\. |$)", text):
            found[match.group(1)] = command
    return found


def test_every_help_example_is_checked() -> None:
    found = examples()
    assert set(found) == set(CHECKED) | PROSE, (
        f"help examples without a test here: {sorted(set(found) - set(CHECKED) - PROSE)}; "
        f"tests of examples the help no longer shows: {sorted((set(CHECKED) | PROSE) - set(found))}"
    )
    assert all(name in globals() for name in CHECKED.values())


# -- running them -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    srv = start_test_server({"default_answer": "Paris"}, request_log=True)
    yield srv
    srv.stop()


def evalkit(args: list[str], cwd: Path, shell: bool = False, **env: str) -> subprocess.CompletedProcess[str]:
    """``evalkit ARGS`` in a folder without a config.yaml, as a user types it (``shell``: through bash)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    command: Any = [sys.executable, "-m", "evalkit", *args]
    if shell:
        command = ["bash", "-c", f"{sys.executable} -m evalkit {' '.join(args)}"]
    return subprocess.run(command, cwd=cwd, env=full, capture_output=True, text=True, timeout=300)


def plan_of(argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The plan `evalkit run ARGV` would run, made by the command's own code, sending nothing."""
    monkeypatch.chdir(cwd)
    return _plan(build_parser().parse_args(["run", *argv]))


def _received(server: Any, model: str) -> list[dict[str, Any]]:
    return [e for e in server.log_events("completed") if e["model"] == model]


def _one_run(root: Path) -> Path:
    (results,) = root.glob("**/results.json")
    return results.parent


def test_the_model_url_example_runs(server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = next(e for e in CHECKED if e.startswith("http"))
    run = ["--model-name", "url-example", "--dataset", "basic_qa", "--num-samples", "2", "--output-dir", "runs", "-q"]
    assert plan_of(["--model-url", example, *run], tmp_path, monkeypatch).models  # the URL as shown is accepted
    here = example.replace("127.0.0.1:8000", server.base_url.split("//")[1].split("/")[0])  # the test server's port
    assert here == server.base_url
    done = evalkit(["run", "--model-url", here, *run], tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(_received(server, "url-example")) == 2


def test_the_shard_example_runs_in_a_shell(server: Any, tmp_path: Path) -> None:
    example = next(e for e in CHECKED if e.startswith("--shard"))
    args = ["run", "--model-url", server.base_url, "--model-name", "shard-example", "--dataset", "basic_qa",
            example, "--output-dir", "runs", "-q"]  # fmt: skip
    done = evalkit(args, tmp_path, shell=True, SLURM_ARRAY_TASK_ID="3")
    assert done.returncode == 0, done.stderr
    assert json.loads((_one_run(tmp_path / "runs") / "run.json").read_text())["shard"]["index"] == 3
    # "with sbatch --array=0-7": every task id of that array is a shard, and none beyond it
    assert [Shard.parse(f"{k}/8").index for k in range(8)] == list(range(8))
    with pytest.raises(UserError):
        Shard.parse("8/8")


def test_the_dataset_args_example_plans_the_pair_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub's IN22-Conv cannot be read here: the example is planned by `evalkit run`'s own code, sending nothing."""
    example = next(e for e in CHECKED if e.endswith("target_language=hi"))
    dataset = example.partition(":")[0]
    plan = plan_of(
        ["--model-url", "http://127.0.0.1:9/v1", "--model-name", "m", "--dataset", dataset, "--dataset-args", example],
        tmp_path,
        monkeypatch,
    )
    assert {engine.dataset.language for engine in plan.engines} == {"en-hi"}, [e.dataset.name for e in plan.engines]


def test_the_metric_args_example_sets_both_metrics_options(server: Any, tmp_path: Path) -> None:
    """No shipped dataset is scored with both exact_match and bleu: a local set that is runs the example."""
    example = next(e for e in CHECKED if e.startswith("exact_match:"))
    config = config_for(
        tmp_path,
        text_set(tmp_path, 4),
        [model_entry("metric-args", server.base_url)],
        pairs=[["synth_qa", "exact_match"], ["synth_qa", "bleu"]],
    )
    done = evalkit(["run", str(config), "--metric-args", example, "-q"], tmp_path)
    assert done.returncode == 0, done.stderr
    run = _one_run(tmp_path / "runs")
    pairs = json.loads((run / "run.json").read_text())["config"]["dataset_metric"]
    assert pairs == [["synth_qa", "exact_match", {"normalize": False}], ["synth_qa", "bleu", {"max_ngram_order": 2}]]
    rows = {r["metric"]: r["details"] for r in json.loads((run / "results.json").read_text())["results"]}
    assert rows["exact_match"]["normalization"] == "strip" and len(rows["bleu"]["precisions"]) == 2, rows


def test_the_processor_args_example_names_a_dataset_and_arguments_that_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = next(e for e in CHECKED if ".devnagari_transliterator:" in e)
    parsed = parse_processor_args([example])
    ((dataset, processors),) = parsed.items()
    assert load_catalog().resolve(dataset), dataset  # the catalogue knows the name (KARMA's)
    for name, arguments in processors.items():
        chain = build_processors([{"name": name, **arguments}], "--processor-args")
        assert chain.processors[0].process("नमस्ते") == "नमस्ते"
    plan = plan_of(
        [
            "--model-url",
            "http://127.0.0.1:9/v1",
            "--model-name",
            "m",
            "--dataset",
            dataset,
            "--processor-args",
            example,
        ],
        tmp_path,
        monkeypatch,
    )
    assert plan.engines and all("devnagari_transliterator" in json.dumps(e.options) for e in plan.engines)


def test_the_language_examples_each_list_datasets(tmp_path: Path) -> None:
    for language in next(e for e in CHECKED if e.startswith("en,")).split(", "):
        done = evalkit(["list", "datasets", "--language", language, "--format", "json"], tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout), f"--language {language} lists no dataset"


# -- the examples written without "e.g." ---------------------------------------------------------------------


def test_the_hosted_model_names_of_run_help_each_plan_their_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hosted APIs cannot be reached from a test: each name is planned by `evalkit run --model NAME`, nothing sent."""
    shown = re.search(r"a hosted model name \(([^)]+)\)", help_texts()["evalkit run"])
    assert shown, "run --help lost its hosted model names"
    for name in shown.group(1).split(", "):
        for key in ("GEMINI_API_KEY", "OPENAI_API_KEY", "SARVAM_API_KEY"):
            monkeypatch.setenv(key, "sk-test")
        plan = plan_of(["--model", name, "--dataset", "basic_qa", "-q"], tmp_path, monkeypatch)
        (model,) = plan.models.values()
        assert model.info.model == name and model.info.url.startswith("https://"), (name, model.info.url)


def test_the_model_args_forms_send_what_they_say(server: Any, tmp_path: Path) -> None:
    text = help_texts()["evalkit run"]
    forms = re.search(r"a JSON object as KARMA takes it \('(\{[^']+\})'\) or (key=value,key=value)", text)
    assert forms, "run --help lost its --model-args forms"
    for i, given in enumerate([forms.group(1), "temperature=0.7,max_tokens=5"]):
        name = f"model-args-{i}"
        args = ["run", "--model-url", server.base_url, "--model-name", name, "--dataset", "basic_qa",
                "--num-samples", "1", "--output-dir", f"runs{i}", "--model-args", given, "-q"]  # fmt: skip
        done = evalkit(args, tmp_path)
        assert done.returncode == 0, done.stderr
        (received,) = _received(server, name)
        assert received["params"]["temperature"] == 0.7, received["params"]


def test_the_comma_separated_datasets_form_selects_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "or comma-separated: --datasets a,b" in help_texts()["evalkit run"]
    plan = plan_of(
        ["--model-url", "http://127.0.0.1:9/v1", "--model-name", "m", "--datasets", "basic_qa,espeak_en_accent"],
        tmp_path,
        monkeypatch,
    )
    assert {engine.dataset.name for engine in plan.engines} == {"basic_qa", "espeak_en_accent"}


def test_the_report_forms_each_compare(server: Any, tmp_path: Path) -> None:
    text = help_texts()["evalkit report"]
    assert "compare two (RUN_A RUN_B, RUN_A:MODEL RUN_B:MODEL, or RUN --models M1 M2)" in text
    runs = []
    for side in ("a", "b"):
        models = [model_entry(f"report-{m}", server.base_url) for m in ("m1", "m2")]
        config = config_for(tmp_path / side, text_set(tmp_path / side, 6), models, filters={"num_samples": 6})
        assert evalkit(["run", str(config), "-q"], tmp_path).returncode == 0
        runs.append(str(_one_run(tmp_path / side / "runs")))
    a, b = runs
    for i, form in enumerate([[a, b], [f"{a}:report-m1", f"{b}:report-m2"], [a, "--models", "report-m1", "report-m2"]]):
        done = evalkit(["report", *form, "--output", str(tmp_path / f"compared{i}")], tmp_path)
        assert done.returncode == 0, (form, done.stdout, done.stderr)
        assert "synth_qa" in done.stdout, (form, done.stdout)
        assert any((tmp_path / f"compared{i}").iterdir())


def test_the_commands_named_in_help_texts_exist(tmp_path: Path) -> None:
    named = {
        command
        for text in help_texts().values()
        for command in re.findall(r"`(evalkit [a-z]+(?: [a-z]+)?)(?: --help)?`", text)
    }
    assert {"evalkit merge", "evalkit serve", "evalkit catalogue check"} <= named, named
    for command in sorted(named):
        done = evalkit([*command.split()[1:], "--help"], tmp_path)
        assert done.returncode == 0 and "usage: evalkit" in done.stdout, (command, done.stderr)


def test_serve_help_names_each_backends_default_model_id() -> None:
    shown = re.findall(r"(\w+) serves '([^']+)'", help_texts()["evalkit serve"])
    assert shown, "serve --help lost the model id it names"
    for backend, model_id in shown:
        assert getattr(load_backend_class(backend), "model_id", None) == model_id, backend


def test_karma_judge_option_names_point_at_judge_properties() -> None:
    for metric in ("rubric_evaluation", "llm_judge_binary"):
        with pytest.raises(ConfigError, match="judge_properties.judge_model"):
            METRICS.get(metric)(provider_to_use="openai", model_id="gpt-4o-mini")


def test_the_view_filter_examples_each_export_what_they_select(tmp_path: Path) -> None:
    example = next(e for e in CHECKED if e.startswith("'failure="))
    queries = [part.strip("'") for part in example.split(" or ")]
    runs = tmp_path / "runs"
    make_run(runs)
    for i, query in enumerate(queries):
        # the run's models are alpha and beta: the second example's model is the user's own
        query = query.replace("gpt-4o", "beta")
        done = evalkit(["view", str(runs), "--export", str(tmp_path / f"site{i}"), "--filter", query], tmp_path)
        assert done.returncode == 0, done.stderr
        pair = next((tmp_path / f"site{i}").rglob("speech__word_error_rate"))
        rows = _js_data(pair / "rows" / "0001.js")
        chosen = {r["row"] for r in rows if r["model"] == "beta"}
        if query == "failure=any":  # beta timed out on samples 3 and 7
            assert chosen == {3, 7}, chosen
        else:  # beta's records scored at most 0.5, failures having no score
            assert chosen and all(r["score"] is not None and r["score"] <= 0.5 for r in rows if r["model"] == "beta")

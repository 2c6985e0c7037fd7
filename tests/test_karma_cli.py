"""KARMA's command line on `evalkit run` and `evalkit info`: its flags, their syntax, and where each lands.

Runs go to the project's test server (an echo model) on a local jsonl set, through ``evalkit.cli.main.main``
in this process (exit codes and messages as a user sees them).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import config_for, model_entry, text_set

from evalkit.api import registries
from evalkit.cli.main import main
from evalkit.config import Overrides, resolve
from evalkit.config.foreign import karma_args
from evalkit.errors import UserError

# -- parsing KARMA's strings ---------------------------------------------------------------------------------


def test_datasets_are_comma_separated_and_repeatable() -> None:
    assert karma_args.split_names(["a,b", " c ", "a"]) == ["a", "b", "c"]
    assert karma_args.split_names(None) is None


def test_scoped_arguments_read_as_karma_writes_them() -> None:
    parsed = karma_args.parse_scoped(
        ["in22conv:source_language=en,target_language=hi;pubmedqa:split=test", "pubmedqa:max=4"], "--dataset-args"
    )
    assert parsed == {
        "in22conv": {"source_language": "en", "target_language": "hi"},
        "pubmedqa": {"split": "test", "max": 4},
    }
    # a name holding a colon, and a value holding one
    assert karma_args.parse_scoped(["karma:ai4bharat/IN22-Conv:model_id=us.claude:0"], "--x") == {
        "karma:ai4bharat/IN22-Conv": {"model_id": "us.claude:0"}
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("False", False),
        ("none", None),
        ("4", 4),
        ("0.5", 0.5),
        ('"4"', "4"),
        ("[1, 2]", [1, 2]),
        ("hi", "hi"),
    ],
)
def test_values_are_typed_as_a_config_would_hold_them(text: str, value: Any) -> None:
    assert karma_args.typed_value(text) == value


def test_processor_and_model_arguments() -> None:
    assert karma_args.parse_processor_args(["v1.0.devnagari_transliterator:source_script=en"]) == {
        "v1.0": {"devnagari_transliterator": {"source_script": "en"}}
    }
    assert karma_args.parse_model_args(['{"temperature": 0.3, "enable_thinking": false}', "top_k=5"]) == {
        "temperature": 0.3,
        "enable_thinking": False,
        "top_k": 5,
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset-args", "synth_qa"], "--dataset-args: 'synth_qa' is not NAME:key=value"),
        (["--dataset-args", "synth_qa:lang"], "--dataset-args: 'lang' (for synth_qa) is not key=value"),
        (["--processor-args", "synth_qa:x=1"], "--processor-args: 'synth_qa' is not DATASET.PROCESSOR"),
        (["--model-args", '{"temperature": 0.3'], "--model-args: line 1, column 20: not valid JSON"),
        (["--model-args", '{"temperature": 0.3, "temperature": 0.9}'], "--model-args: key 'temperature' given twice"),
        (["--model-args", "auth_token=abc"], "--model-args: 'auth_token' cannot be set here"),
        (["--metric-args", "bleu:max_ngram_order=2"], "--metric-args: no dataset of this run is scored with 'bleu'"),
        (["--metric-args", "blue:x=1"], "--metric-args: 'blue' is not a metric"),
        (["--dataset-args", "other_set:x=1"], "--dataset-args: 'other_set' is not a dataset of this run"),
        (["--processor-args", "synth_qa.nope:x=1"], "--processor-args: 'nope' is not a processor"),
        (["--output", "results.txt"], "--output results.txt: expected a .json, .yaml, .yml or .csv file"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag_and_the_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    config = config_for(tmp_path, text_set(tmp_path, 3), [model_entry("echo", "http://127.0.0.1:9/v1")])
    assert main(["run", str(config), "--dry-run", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


# -- where the arguments land in the config ------------------------------------------------------------------


def _applied(tmp_path: Path, **overrides: Any) -> Any:
    runspecs = text_set(tmp_path, 3)
    path = config_for(
        tmp_path,
        runspecs,
        [model_entry("echo", "http://127.0.0.1:9/v1", extra_body={"keep": 1})],
        pairs=[["synth_qa", "exact_match"], ["synth_qa", "bleu"]],
    )
    config, _ = resolve(path, Overrides(**overrides), registries=registries())
    return config


def test_arguments_land_where_a_config_file_writes_them(tmp_path: Path) -> None:
    config = _applied(
        tmp_path,
        metric_args={"exact_match": {"normalize": False}},
        processor_args={"synth_qa": {"devanagari_transliterator": {"source": "itrans"}}},
        model_args={"temperature": 0.3, "top_k": 5, "enable_thinking": False},
    )
    chain = [{"name": "devanagari_transliterator", "source": "itrans"}]
    assert config.pairs == [
        ("synth_qa", "exact_match", {"processors": chain, "normalize": False}),
        ("synth_qa", "bleu", {"processors": chain}),
    ]
    info = config.models[0].info
    assert info.temperature == 0.3
    assert info.extra_body == {"keep": 1, "top_k": 5, "chat_template_kwargs": {"enable_thinking": False}}


def test_dataset_arguments_pick_the_entry_karma_means(tmp_path: Path) -> None:
    args = {"ai4bharat/IN22-Conv": {"target_language": "hi", "source_language": "en"}}
    config, _ = resolve(
        {"dataset_metric": [["ai4bharat/IN22-Conv", "bleu"]], "models": [model_entry("m", "http://127.0.0.1:9/v1")]},
        Overrides(dataset_args=args),
        registries=registries(),
    )
    assert config.pairs == [("in22_conv_en_hi", "bleu", {})]
    with pytest.raises(UserError, match="--dataset-args: 'synth_qa' with language=hi is not a dataset"):
        _applied(tmp_path, dataset_args={"synth_qa": {"language": "hi"}})


def test_a_bad_model_field_value_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--model-args.*temperature"):
        _applied(tmp_path, model_args={"temperature": "hot"})


# -- runs: --datasets, arguments, --output -------------------------------------------------------------------


def _run_config(tmp_path: Path, make_server: Any) -> Path:
    server = make_server()
    return config_for(tmp_path, text_set(tmp_path, 6), [model_entry("echo", server.url + "/v1")])


def test_run_with_karma_flags_writes_every_output_format(
    tmp_path: Path, make_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _run_config(tmp_path, make_server)
    common = ["run", str(config), "-q", "--datasets", "synth_qa", "--metric", "exact_match,bleu"]
    flags = [
        "--metric-args",
        "exact_match:normalize=false;bleu:max_ngram_order=2",
        "--model-args",
        '{"temperature": 0}',
    ]
    assert main([*common, *flags, "--output", str(tmp_path / "out.yaml")]) == 0
    data = yaml.safe_load((tmp_path / "out.yaml").read_text())
    scores = {(r["dataset"], r["metric"]): r["score"] for r in data["results"]}
    assert scores[("synth_qa", "exact_match")] == pytest.approx(4 / 6)
    assert set(scores) == {("synth_qa", "exact_match"), ("synth_qa", "bleu")}
    [written] = (tmp_path / "runs").glob("*/results.json")
    assert json.loads(written.read_text())["results"] == data["results"]
    # the options reached the run as a config file would carry them
    assert data["config"]["dataset_metric"][0][2] == {"normalize": False}
    assert data["config"]["models"][0]["info"]["temperature"] == 0

    assert main([*common, "--output", str(tmp_path / "out.json")]) == 0
    assert json.loads((tmp_path / "out.json").read_text())["run_id"]
    assert main([*common, "--output", str(tmp_path / "out.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "out.csv").open()))
    assert {r["metric"] for r in rows if r["kind"] == "dataset"} == {"exact_match", "bleu"}


def test_output_replaces_only_an_earlier_results_file(
    tmp_path: Path, make_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _run_config(tmp_path, make_server)
    target = tmp_path / "results.json"
    target.write_text('{"mine": true}\n')
    args = ["run", str(config), "-q", "--output", str(target)]
    assert main(args) == 2
    assert "exists and is not an earlier evalkit results file; pass --force" in capsys.readouterr().err
    assert target.read_text() == '{"mine": true}\n' and not (tmp_path / "runs").exists()
    assert main([*args, "--force"]) == 0
    first = json.loads(target.read_text())["run_id"]
    assert main(args) == 0  # an earlier evalkit output: replaced without --force
    assert json.loads(target.read_text())["run_id"] != first
    csv_target = tmp_path / "table.csv"
    csv_target.write_text("a,b\n1,2\n")
    assert main(["run", str(config), "-q", "--output", str(csv_target)]) == 2
    assert main(["run", str(config), "-q", "--output", str(tmp_path / "missing" / "r.json")]) == 2
    assert "folder" in capsys.readouterr().err


# -- info ----------------------------------------------------------------------------------------------------


def test_info_dataset_show_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runspecs = text_set(tmp_path, 2)
    assert main(["info", "dataset", "synth_qa", "--runspecs-dir", str(runspecs), "--show-code", "-f", "json"]) == 0
    code = json.loads(capsys.readouterr().out)["code"]
    assert code["runspec"] == str((runspecs / "text" / "synth_qa.json").resolve())
    assert code["entry"]["synth_qa"]["textual_input_column"] == "question"
    functions = [step["function"] for step in code["loader"]]
    assert functions[:3] == [
        "evalkit.data.loading.iter_rows",
        "evalkit.data.loading.iter_local_file",
        "evalkit.data.loading.row_to_sample",
    ]
    for step in code["loader"]:
        file, _, line = step["file"].rpartition(":")
        assert Path(file).is_file() and int(line) > 0
    assert main(["info", "dataset", "synth_qa", "--runspecs-dir", str(runspecs), "--show-code"]) == 0
    assert "evalkit.data.loading.row_to_sample" in capsys.readouterr().out
    assert main(["info", "metric", "bleu", "--show-code"]) == 2
    assert "--show-code: only for `info dataset NAME`" in capsys.readouterr().err


def test_info_system_cache_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["info", "system", "--cache-path"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        str(tmp_path / "runs" / "responses.sqlite"),
        str(tmp_path / "cache" / "hub"),
    ]
    config_for(
        tmp_path / "cfg", text_set(tmp_path, 1), [model_entry("m", "http://127.0.0.1:9/v1")], cache={"path": "store.db"}
    )
    assert main(["info", "system", "--cache-path", "--config", str(tmp_path / "cfg" / "config.yaml")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == str(tmp_path / "cfg" / "store.db")
    (tmp_path / "cache.db").write_bytes(b"x" * 10)
    assert main(["info", "system", "--cache-path", "cache.db"]) == 0
    assert capsys.readouterr().out.strip() == f"{tmp_path / 'cache.db'}: 10 bytes"
    assert main(["info", "dataset", "x", "--cache-path"]) == 2

"""The `evalkit` command line against real loopback test servers.

Run overrides, dry runs, progress, list/info/validate, report, rescore.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, ROOT, model_entry, write_config

from evalkit.cli.main import main
from evalkit.testing import start_test_server

QA = {"capital of France": "Paris", "spider": "eight", "sky": "blue", "red planet": "Mars", "opposite of hot": "cold"}
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _rules(qa: dict[str, str], audio: dict[str, str] | None = None) -> list[dict[str, str]]:
    return [{"match": q, "answer": a} for q, a in qa.items()] + [
        {"audio_fingerprint": fp, "answer": a} for fp, a in (audio or {}).items()
    ]


@pytest.fixture(scope="module")
def server(speech_runspecs: dict[str, Any]) -> Iterator[Any]:
    """One server for the module: right answers for the QA set and the tone clips, every request logged."""
    fps = speech_runspecs["fingerprints"]
    audio = {fps["clip1"]: "hello world", fps["clip2"]: "the cat sat on the mat", fps["clip3"]: "good morning everyone"}
    srv = start_test_server({"answers": _rules(QA, audio)}, request_log=True)
    yield srv
    srv.stop()


def _config(tmp_path: Path, server: Any, speech_runspecs: dict[str, Any], **extra: Any) -> Path:
    data = {
        "dataset_metric": [["tiny_qa", "exact_match"], ["tiny_qa", "bleu"], ["tiny_asr", "word_error_rate"]],
        "models": [
            model_entry("model-a", server.base_url),
            model_entry("model-b", server.base_url, inference_type="openai"),
        ],
        "runspecs_dir": [str(FIXTURES / "runspecs"), str(speech_runspecs["dir"])],
        "output_dir": str(tmp_path / "runs"),
    }
    data.update(extra)
    return write_config(tmp_path / "config.yaml", data)


def _requests(server: Any) -> list[dict[str, Any]]:
    return [e for e in server.log_events("completed") if "/v1/" in e.get("path", "")]


def _only_run_dir(output_dir: Path) -> Path:
    runs = [p for p in output_dir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def _rows(run_dir: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    results = json.loads((run_dir / "results.json").read_text())
    return {(r["dataset"], r["metric"], r["model"]): r for r in results["results"]}


# ---------------------------------------------------------------- run


def test_run_overrides_select_pairs_models_samples_and_output_dir(
    tmp_path: Path, server, speech_runspecs, capsys
) -> None:
    config = _config(tmp_path, server, speech_runspecs)
    before = len(_requests(server))
    out = tmp_path / "elsewhere"
    code = main(
        [
            "run",
            str(config),
            "--dataset",
            "tiny_qa",
            "--metric",
            "em",
            "--model",
            "model-b",
            "--num-samples",
            "3",
            "--output-dir",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    run_dir = _only_run_dir(out)
    assert not (tmp_path / "runs").exists()  # --output-dir replaced output_dir
    rows = _rows(run_dir)
    assert list(rows) == [("tiny_qa", "exact_match", "model-b")]
    row = rows[("tiny_qa", "exact_match", "model-b")]
    assert row["n"] == 3 and row["score"] == 1.0
    assert len(_requests(server)) - before == 3  # one model x three samples, nothing else
    assert (run_dir / "report.html").is_file() and (run_dir / "results.md").is_file()
    stdout = capsys.readouterr().out
    assert "exact_match" in stdout and "model-b" in stdout and "report.html" in stdout


def test_run_override_mistakes_exit_2_with_suggestions(tmp_path: Path, server, speech_runspecs, capsys) -> None:
    config = _config(tmp_path, server, speech_runspecs)
    before = len(_requests(server))
    assert main(["run", str(config), "--model", "modle-a", "--quiet"]) == 2
    assert 'did you mean "model-a"' in capsys.readouterr().err
    assert main(["run", str(config), "--metric", "blue", "--quiet"]) == 2
    assert 'did you mean "bleu"' in capsys.readouterr().err
    assert main(["run", str(config), "--dataset", "tiny_q", "--quiet"]) == 2
    assert 'did you mean "tiny_qa"' in capsys.readouterr().err
    assert main(["run", str(config), "--metric", "cer", "--quiet"]) == 2  # no pair of the config uses cer
    assert "add --dataset" in capsys.readouterr().err
    assert len(_requests(server)) == before


def test_dataset_override_not_in_config_uses_the_task_default_metric(tmp_path: Path, server, speech_runspecs) -> None:
    config = _config(tmp_path, server, speech_runspecs, dataset_metric=[["tiny_qa", "exact_match"]])
    assert main(["run", str(config), "--dataset", "tiny_asr", "--model", "model-a", "--quiet"]) == 0
    rows = _rows(_only_run_dir(tmp_path / "runs"))
    assert list(rows) == [("tiny_asr", "word_error_rate", "model-a")]
    assert rows[("tiny_asr", "word_error_rate", "model-a")]["score"] == 0.0


def test_dry_run_sends_nothing_then_sees_what_the_store_holds(tmp_path: Path, server, speech_runspecs, capsys) -> None:
    config = _config(tmp_path, server, speech_runspecs)
    before = len(_requests(server))
    assert main(["run", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert len(_requests(server)) == before
    assert not (tmp_path / "runs" / "responses.sqlite").exists()  # a dry run creates no store either
    assert "No request was sent to a model" in out and "does not exist yet" in out
    # tiny_qa: 5 samples, 5 distinct requests per model, all to send
    assert re.search(r"tiny_qa__exact_match\s*│\s*model-a\s*│\s*5\s*│\s*5\s*│\s*0\s*│\s*5", out), out
    assert re.search(r"tiny_asr__word_error_rate\s*│\s*model-b\s*│\s*3\s*│\s*3\s*│\s*0\s*│\s*3", out), out
    # exact_match and bleu share their requests: 5 + 3 distinct per model
    assert re.search(r"model-a\s*│\s*chat\s*│\s*1\s*│\s*4\s*│\s*8\s*│\s*0\s*│\s*8", out), out
    assert "A run would send 16 requests and take 0 from the response store" in out

    assert main(["run", str(config), "--quiet"]) == 0
    capsys.readouterr()
    sent = len(_requests(server))
    assert main(["run", str(config), "--dry-run", "--num-samples", "2"]) == 0
    out = capsys.readouterr().out
    assert len(_requests(server)) == sent
    # the keys computed by the dry run (audio included) are the ones the run stored
    assert re.search(r"tiny_asr__word_error_rate\s*│\s*model-a\s*│\s*2\s*│\s*2\s*│\s*2\s*│\s*0", out), out
    assert "A run would send 0 requests and take 8 from the response store" in out
    assert main(["run", str(config), "--dry-run", "--no-cache"]) == 0
    assert "Response store disabled" in capsys.readouterr().out


def test_dry_run_counts_match_the_engine(tmp_path: Path, server, speech_runspecs) -> None:
    """The dry run's numbers, as data: after a real run every key is stored; a new filter makes new samples only."""
    from evalkit.api import prepare
    from evalkit.run.dryrun import dry_run

    config = _config(tmp_path, server, speech_runspecs)
    plan, _ = prepare(str(config), {"num_samples": 3})
    report = asyncio.run(dry_run(plan))
    assert report.store_state == "absent"
    assert {(p.engine, p.model): (p.samples, p.requests, p.stored) for p in report.pairs} == {
        (e, m): (3, 3, 0)
        for e in ("tiny_qa__exact_match", "tiny_qa__bleu", "tiny_asr__word_error_rate")
        for m in ("model-a", "model-b")
    }
    assert main(["run", str(config), "--num-samples", "3", "--quiet"]) == 0
    plan, _ = prepare(str(config), {})
    report = asyncio.run(dry_run(plan))
    by_model = {m.model: m for m in report.models}
    assert by_model["model-a"].requests == 8 and by_model["model-a"].stored == 6 and by_model["model-a"].to_send == 2


def test_dry_run_follows_conversations_as_far_as_the_store_goes(tmp_path: Path, server) -> None:
    """Multi-turn: later turns depend on earlier answers, so a dry run counts them once those answers are stored."""
    from evalkit.api import prepare
    from evalkit.run.dryrun import dry_run

    (tmp_path / "data").mkdir()
    with (tmp_path / "data" / "talks.jsonl").open("w") as handle:
        for i in range(3):
            turns = [{"text": f"c{i} first"}, {"text": f"c{i} second"}, {"text": f"c{i} third"}]
            handle.write(json.dumps({"id": f"c{i}", "turns": turns, "answer": f"c{i} third"}) + "\n")
    folder = tmp_path / "runspecs" / "dialogue"
    folder.mkdir(parents=True)
    spec = {
        "_task": {"metrics": ["exact_match"]},
        "talks": {
            "path": "../../data/talks.jsonl",
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "turns_column": "turns",
            "target_column": "answer",
        },
    }
    (folder / "talks.json").write_text(json.dumps(spec))
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["talks", "exact_match"]],
            "models": [model_entry("model-a", server.base_url)],
            "runspecs_dir": str(tmp_path / "runspecs"),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    plan, _ = prepare(str(config), {})
    (before,) = asyncio.run(dry_run(plan)).pairs
    assert (before.samples, before.requests, before.stored) == (3, 3, 0)  # only the first turns are known
    sent = len(_requests(server))
    assert main(["run", str(config), "--quiet"]) == 0
    assert len(_requests(server)) - sent == 9
    (after,) = asyncio.run(dry_run(plan)).pairs
    assert (after.samples, after.requests, after.stored, after.to_send) == (3, 9, 9, 0)
    assert len(_requests(server)) - sent == 9


def _run_subprocess(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], capture_output=True, text=True, cwd=cwd, env=ENV, timeout=timeout
    )


def test_plain_progress_lines_when_not_a_terminal_and_quiet_silences_them(
    tmp_path: Path, server, speech_runspecs
) -> None:
    config = _config(tmp_path, server, speech_runspecs)
    proc = _run_subprocess(["run", str(config), "--progress-interval", "0"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert "\x1b[" not in proc.stderr  # no terminal control codes in a log
    assert "[evalkit] tiny_qa__exact_match · model-a: 5/5 samples done" in proc.stderr
    assert any(
        line.startswith("[evalkit] tiny_asr__word_error_rate · model-b: 3/3 samples done, 0 failed, ")
        and "samples/s" in line
        for line in lines
    )
    overall = [line for line in lines if line.startswith("[evalkit] overall: ")]
    assert len(overall) >= 2 and overall[-1].startswith("[evalkit] overall: 26/26 samples done")
    # the overall line counts requests apart from samples: metrics of one dataset share their requests
    assert "; 16 requests sent, 0 answers from the response store;" in overall[-1]
    assert "results" in proc.stdout

    quiet = _run_subprocess(["run", str(config), "--quiet"], tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "[evalkit]" not in quiet.stderr and "tiny_qa" in quiet.stdout


def test_verbose_prints_the_plan(tmp_path: Path, server, speech_runspecs, capsys) -> None:
    config = _config(tmp_path, server, speech_runspecs)
    assert main(["run", str(config), "--verbose", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "3 engines x 2 models" in err and "engine tiny_asr__word_error_rate" in err and "model model-b: chat" in err


def _read_pty(fd: int, proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    return out


def test_live_progress_on_a_terminal(tmp_path: Path, speech_runspecs) -> None:
    """On a terminal the rich display shows one row per engine x model and an overall row.

    Each row has done/total, rate, failures and ETA.
    """
    slow = start_test_server({"answers": _rules(QA), "latency_ms": 150})
    try:
        config = write_config(
            tmp_path / "config.yaml",
            {
                "dataset_metric": [["tiny_qa", "exact_match"]],
                "models": [model_entry("model-a", slow.base_url, batch_size=1)],
                "runspecs_dir": [str(FIXTURES / "runspecs")],
                "output_dir": str(tmp_path / "runs"),
            },
        )
        primary, secondary = pty.openpty()
        env = {**ENV, "COLUMNS": "140", "LINES": "40", "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalkit", "run", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=secondary,
            stderr=secondary,
            cwd=tmp_path,
            env=env,
        )
        os.close(secondary)
        try:
            output = _read_pty(primary, proc, 120).decode("utf-8", "replace")
            assert proc.wait(30) == 0, output
        finally:
            os.close(primary)
    finally:
        slow.stop()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output)
    assert "\x1b[" in output  # it really drew with terminal codes
    assert "[evalkit]" not in text  # not the plain lines
    assert re.search(r"tiny_qa__exact_match\s+model-a\s+.*5/5", text), text
    assert re.search(r"overall\s+.*5/5", text), text
    assert "samples/s" in text and "ETA" in text and "failed" in text and "requests sent" in text


# ---------------------------------------------------------------- list / info / validate


def _json_out(capsys, argv: list[str]) -> Any:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_list_datasets_with_filters_and_formats(capsys) -> None:
    rows = _json_out(capsys, ["list", "datasets", "--format", "json"])
    names = {r["name"] for r in rows}
    assert {"basic_qa", "librispeech_test_clean", "espeak_en_asr"} <= names and len(rows) > 50
    asr = _json_out(capsys, ["list", "datasets", "--task", "asr", "--format", "json"])
    assert asr and all(r["task"] == "asr" for r in asr) and len(asr) < len(rows)
    wer = _json_out(capsys, ["list", "datasets", "--metric", "wer", "--format", "json"])  # an alias
    assert wer and all("word_error_rate" in r["metrics"] for r in wer)
    french = _json_out(capsys, ["list", "datasets", "--language", "french", "--format", "json"])
    assert french and all("fr" in r["language"].split("-") for r in french)
    text = _json_out(capsys, ["list", "datasets", "--modality", "text", "--format", "json"])
    assert "basic_qa" in {r["name"] for r in text} and all(r["modality"] == "text" for r in text)
    category = _json_out(capsys, ["list", "datasets", "--category", "paralinguistics", "--format", "json"])
    assert category and all(r["category"] == "paralinguistics" for r in category)

    assert main(["list", "datasets", "--task", "asr", "--format", "csv"]) == 0
    csv_lines = capsys.readouterr().out.splitlines()
    assert (
        csv_lines[0].startswith("name,task,category,language,modality,source,checked,checked_url,metrics")
        and len(csv_lines) == len(asr) + 1
    )
    assert main(["list", "datasets", "--task", "asr"]) == 0
    table = capsys.readouterr().out
    assert f"{len(asr)} datasets" in table and "librispeech_test_clean" in table and "┃ name" in table
    assert "┃ checked" in table  # the provenance column of the table view


def test_list_datasets_shows_where_and_when_each_entry_was_checked(capsys) -> None:
    rows = {r["name"]: r for r in _json_out(capsys, ["list", "datasets", "--format", "json"])}
    hub = [r for r in rows.values() if r["source"] not in ("local", "private", "unavailable")]
    assert hub and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["checked"]) for r in hub)
    assert all(r["checked_url"].startswith("https://") for r in hub)
    assert rows["espeak_en_asr"]["checked"] == "" and rows["espeak_en_asr"]["checked_url"] == ""
    assert main(["list", "datasets", "--task", "audio_mcq", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split(",")
    mmau = next(line for line in lines if line.startswith("mmau_test_mini,"))
    assert "lmms-lab-audio/mmau" in mmau and rows["mmau_test_mini"]["checked"] in mmau and "checked_url" in header


def test_list_filter_mistakes_exit_2(capsys) -> None:
    assert main(["list", "datasets", "--task", "asrr"]) == 2
    assert 'did you mean "asr"' in capsys.readouterr().err
    assert main(["list", "datasets", "--metric", "wre"]) == 2
    assert 'did you mean "wer"' in capsys.readouterr().err
    assert main(["list", "datasets", "--language", "klingonese"]) == 2
    assert "--language" in capsys.readouterr().err


def test_list_tasks_categories_metrics_processors(capsys) -> None:
    tasks = _json_out(capsys, ["list", "tasks", "--category", "speech_recognition", "--format", "json"])
    assert [t["name"] for t in tasks] == ["asr"] and tasks[0]["default_metric"] == "word_error_rate"
    categories = _json_out(capsys, ["list", "categories", "--format", "json"])
    assert "speech_recognition" in {c["name"] for c in categories}
    metrics = {m["name"]: m for m in _json_out(capsys, ["list", "metrics", "--format", "json"])}
    assert metrics["word_error_rate"]["aliases"] == ["wer"] and metrics["word_error_rate"]["better"] == "lower"
    assert metrics["exact_match"]["better"] == "higher" and "asr" in metrics["cer"]["tasks"]
    translation = _json_out(capsys, ["list", "metrics", "--task", "speech_translation", "--format", "json"])
    assert {m["name"] for m in translation} == {"bleu", "chrf", "ter"}
    pre = _json_out(capsys, ["list", "preprocessors", "--format", "json"])
    assert any(p["name"] == "GeneralPreprocessor" and p["datasets"] > 0 for p in pre)
    post = _json_out(capsys, ["list", "postprocessors", "--format", "json"])
    assert any(p["name"] == "GeneralPostprocessor" for p in post)


def test_list_models_of_a_config(tmp_path: Path, server, speech_runspecs, capsys) -> None:
    config = _config(tmp_path, server, speech_runspecs)
    rows = _json_out(capsys, ["list", "models", "--config", str(config), "--format", "json"])
    configured = [r for r in rows if r["source"] == str(config)]
    assert [(r["name"], r["inference_type"], r["endpoints"]) for r in configured] == [
        ("model-a", "vllm", 1),
        ("model-b", "openai", 1),
    ]


def test_list_imports_no_heavy_modules(tmp_path: Path) -> None:
    """Start-up of `evalkit list`: numpy, datasets, aiohttp and torch stay unimported (python -X importtime)."""
    for kind in ("datasets", "metrics", "tasks"):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "evalkit", "list", kind],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=ENV,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
        assert "evalkit.catalog" in imported or kind == "metrics"
        heavy = {
            m
            for m in imported
            if m.split(".")[0] in {"numpy", "datasets", "aiohttp", "torch", "transformers", "pyarrow", "sacrebleu"}
        }
        assert not heavy, f"`evalkit list {kind}` imported {sorted(heavy)[:5]}"


def test_info_dataset_metric_task(capsys) -> None:
    data = _json_out(capsys, ["info", "dataset", "espeak_en_asr", "--format", "json"])
    assert data["task"] == "asr" and data["fields"]["language"] == "en" and data["fields"]["audio_column"] == "audio"
    assert data["rows"] == 60  # counted from the parquet metadata
    assert {"name": "word_error_rate", "default": True, "installed": True} in data["metrics"]
    assert data["example"] == "dataset_metric:\n  - [espeak_en_asr, word_error_rate]"
    assert main(["info", "dataset", "espeak_en_asr"]) == 0
    out = capsys.readouterr().out
    assert "audio_column" in out and "word_error_rate (default)" in out and "- [espeak_en_asr, word_error_rate]" in out

    assert data["checked"] is None  # a local entry: nothing to check against the hub
    hub = _json_out(capsys, ["info", "dataset", "mmau_test_mini", "--format", "json"])
    assert hub["fields"]["source"] == "lmms-lab-audio/mmau" and "checked" not in hub["fields"]
    # the page read for the check: the hub's own, or (mmau, whose new id had no readable page) lmms-eval's task file
    assert set(hub["checked"]) == {"url", "date", "what"} and hub["checked"]["url"].startswith("https://")
    assert main(["info", "dataset", "mmau_test_mini"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"checked +{hub['checked']['date']} against", out) and "what was checked" in out

    metric = _json_out(capsys, ["info", "metric", "wer", "--format", "json"])
    assert (
        metric["name"] == "word_error_rate"
        and metric["better"] == "lower"
        and "asr" in {t["name"] for t in metric["tasks"]}
    )
    assert metric["example"].endswith("- [asr, word_error_rate]")
    assert metric["reference"]["project"] == "jiwer" and metric["reference"]["version"]
    assert main(["info", "metric", "wer"]) == 0
    out = capsys.readouterr().out
    assert "reference" in out and "checked against" in out and "known differences" in out
    task = _json_out(capsys, ["info", "task", "speech_translation", "--format", "json"])
    assert task["category"] == "spoken_language_understanding" and len(task["datasets"]) > 3
    assert main(["info", "task", "asr"]) == 0
    assert "librispeech_test_clean" in capsys.readouterr().out


def test_info_unknown_names_suggest_and_exit_2(capsys) -> None:
    assert main(["info", "dataset", "librispeech_test_clen"]) == 2
    assert 'did you mean "librispeech_test_clean"' in capsys.readouterr().err
    assert main(["info", "dataset", "asr"]) == 2
    assert "It is a task: `evalkit info task asr`" in capsys.readouterr().err
    assert main(["info", "metric", "bleuu"]) == 2
    assert 'did you mean "bleu"' in capsys.readouterr().err


def test_validate_reports_every_config_error_at_once(tmp_path: Path, capsys) -> None:
    bad = write_config(
        tmp_path / "bad.yaml",
        {
            "dataset_metric": [["tiny_qa", "exact_match"]],
            "models": [
                {
                    "info": {
                        "name": "m",
                        "inference_type": "vllm",
                        "url": "http://127.0.0.1:9/v1",
                        "model": "m",
                        "batch_sise": 4,
                        "timeout": -1,
                    }
                }
            ],
            "filtres": {"num_samples": 3},
        },
    )
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert 'models[0].info.batch_sise: unknown key (did you mean "batch_size"' in err
    assert (
        "models[0].info.timeout: Input should be greater than 0" in err
        and 'filtres: unknown key (did you mean "filters"?)' in err
    )
    missing_data = write_config(
        tmp_path / "plan.yaml",
        {
            "dataset_metric": [["tiny_qa", "word_error_rate"]],
            "models": [model_entry("m", "http://127.0.0.1:9/v1")],
            "runspecs_dir": str(FIXTURES / "runspecs"),
        },
    )
    assert main(["validate", str(missing_data)]) == 2
    assert "does not fit dataset 'tiny_qa'" in capsys.readouterr().err
    good = write_config(
        tmp_path / "good.yaml",
        {
            "dataset_metric": [["tiny_qa", "exact_match"], ["tiny_qa", "bleu"]],
            "models": [model_entry("m", "http://127.0.0.1:9/v1")],
            "runspecs_dir": str(FIXTURES / "runspecs"),
        },
    )
    assert main(["validate", str(good)]) == 0
    assert "OK — 2 engines x 1 models" in capsys.readouterr().out


# ---------------------------------------------------------------- report / compare / rescore / resume


def test_report_rerenders_and_compares_two_runs(tmp_path: Path, speech_runspecs, capsys) -> None:
    right = start_test_server({"answers": _rules(QA)})
    wrong = start_test_server({"answers": _rules({q: "no idea" for q in QA})})
    try:
        run_dirs = []
        for name, srv in (("a", right), ("b", wrong)):
            config = write_config(
                tmp_path / f"{name}.yaml",
                {
                    "dataset_metric": [["tiny_qa", "exact_match"]],
                    "models": [model_entry("model-a", srv.base_url)],
                    "runspecs_dir": [str(FIXTURES / "runspecs")],
                    "output_dir": str(tmp_path / name),
                    "cache": {"enabled": False},
                },
            )
            assert main(["run", str(config), "--quiet"]) == 0
            run_dirs.append(_only_run_dir(tmp_path / name))
    finally:
        right.stop()
        wrong.stop()
    capsys.readouterr()
    run_a, run_b = run_dirs
    (run_a / "report.html").unlink()
    (run_a / "results.md").unlink()
    assert main(["report", str(run_a)]) == 0
    captured = capsys.readouterr()
    assert "1.0000" in captured.out and "exact_match" in captured.out and "rewrote" in captured.err
    assert (run_a / "report.html").is_file() and (run_a / "results.md").is_file()
    assert main(["report", str(run_a), "--format", "csv", "--no-write"]) == 0
    assert capsys.readouterr().out.startswith("kind,dataset,task")

    compared = _json_out(capsys, ["report", str(run_a), str(run_b), "--format", "json"])
    (row,) = compared["rows"]
    assert (row["dataset"], row["metric"], row["model"]) == ("tiny_qa", "exact_match", "model-a")
    assert row["score_a"] == 1.0 and row["score_b"] == 0.0 and row["diff"] == -1.0
    # the runs' own CIs are disjoint, but five flips out of five are not significant by McNemar's exact test
    assert row["ci_overlap"] is False and row["p_value"] == 2 / 2**5 and row["verdict"] == "not significant"
    assert main(["report", str(run_a), str(run_b)]) == 0
    table = capsys.readouterr().out
    assert "-1.0000" in table and "right → wrong" in table and "1 comparisons; 0 with p < 0.05" in table
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "no results.json" in capsys.readouterr().err


def test_rescore_passes_its_arguments(tmp_path: Path, monkeypatch) -> None:
    import types

    calls: list[tuple[Any, ...]] = []
    module = types.ModuleType("evalkit.run.rescore")
    module.rescore_command = lambda run_dir, metrics, output: calls.append((run_dir, metrics, output)) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "evalkit.run.rescore", module)
    assert main(["rescore", str(tmp_path), "--metric", "cer", "--metric", "wer", "--output", str(tmp_path / "o")]) == 0
    assert calls == [(str(tmp_path), ["cer", "wer"], str(tmp_path / "o"))]


def test_resume_a_run_directory(tmp_path: Path, server, speech_runspecs, capsys) -> None:
    config = _config(tmp_path, server, speech_runspecs)
    assert main(["run", str(config), "--quiet"]) == 0
    run_dir = _only_run_dir(tmp_path / "runs")
    first = _rows(run_dir)
    sent = len(_requests(server))
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir), "--quiet"]) == 0
    assert len(_requests(server)) == sent  # every answer came from the store
    assert _only_run_dir(tmp_path / "runs") == run_dir
    assert {k: v["score"] for k, v in _rows(run_dir).items()} == {k: v["score"] for k, v in first.items()}
    assert main(["run", "--resume", str(run_dir), "--num-samples", "2"]) == 2
    assert "drop --num-samples" in capsys.readouterr().err

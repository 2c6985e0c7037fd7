"""A run that tells the truth (issue 21): exit codes, failure reasons on the console, clean interrupts.

Every test runs the real `evalkit` command in a subprocess against real test
servers on loopback, as a user or a CI job would.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, closed_port, config_for, doc_section, documentation, model_entry, text_set


def _evalkit(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def _run_dir(output: Path) -> Path:
    (run_dir,) = [p for p in output.iterdir() if p.is_dir() and p.name != "server-logs"]
    return run_dir


# ---------------------------------------------------------------- 1 + 2: exit codes and reasons


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_too_many_failures_exit_3_and_an_absent_endpoint_exit_5_after_writing_everything(
    tmp_path: Path, make_server
) -> None:
    runspecs = text_set(tmp_path, 6)
    good = make_server({"model": "good"})
    wrong_id = make_server({"model": "served-model", "strict_model": True})
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    models = [
        model_entry("good", good.base_url),
        model_entry("m1", dead),
        model_entry("asr", wrong_id.base_url),
    ]
    config = config_for(tmp_path / "run", runspecs, models, pairs=[["synth_qa", "exact_match"], ["synth_qa", "bleu"]])

    result = _evalkit(["run", "-c", str(config)], tmp_path)
    assert result.returncode == 5, result.stderr  # m1's samples never reached a server: a resume can ask them
    assert "Traceback" not in result.stderr + result.stdout
    out = result.stdout
    # after the table: reasons with counts per model and one example message each (a dataset counted once)
    reasons = out.split("Failed samples by model and reason")[1].splitlines()[1:]
    m1 = [line for line in reasons if line.strip().startswith("m1: ")]
    # the dead endpoint: refused connections until its circuit opened, then endpoint_unavailable
    assert sum(int(line.split()[1]) for line in m1) == 6 and {"connection:", "endpoint_unavailable:"} >= {
        line.split()[3] for line in m1
    }
    assert all("cannot connect to 127.0.0.1" in line or "cannot connect to http://127.0.0.1" in line for line in m1)
    (asr,) = [line for line in reasons if line.strip().startswith("asr: ")]
    assert asr.strip().startswith("asr: 6 x http_404: HTTP 404: ") and "does not exist" in asr
    assert not any(line.strip().startswith("good: ") for line in reasons)
    assert "could not be had because their endpoint was not there" in result.stderr
    assert "evalkit run --resume" in result.stderr
    # everything was written before the exit code said so
    run_dir = _run_dir(tmp_path / "run" / "runs")
    results = json.loads((run_dir / "results.json").read_text())
    rows = {(r["model"], r["metric"]): r for r in results["results"]}
    assert rows[("m1", "exact_match")]["unreliable"] and not rows[("good", "exact_match")]["unreliable"]
    assert rows[("asr", "bleu")]["failure_examples"]["http_404"].startswith("HTTP 404")
    assert (run_dir / "report.html").is_file() and (run_dir / "results.md").is_file()
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "incomplete" and set(manifest["unanswered"]) == {"endpoint_unavailable"}
    # the model answered, wrongly: its failures are its own, judged by max_failure_rate
    answered = ["--model", "good", "--model", "asr"]
    too_many = _evalkit(["run", "-c", str(config), *answered], tmp_path)
    assert too_many.returncode == 3, too_many.stderr
    assert "max_failure_rate 0.2" in too_many.stderr and "--allow-failures" in too_many.stderr

    allowed = _evalkit(["run", "-c", str(config), *answered, "--allow-failures"], tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert "asr: 6 x http_404" in allowed.stdout and "--allow-failures" in allowed.stderr

    lenient = _evalkit(["run", "-c", str(config), *answered, "--max-failure-rate", "1"], tmp_path)
    assert lenient.returncode == 0 and "max_failure_rate" not in lenient.stderr

    only_good = _evalkit(["run", "-c", str(config), "--model", "good"], tmp_path)
    assert only_good.returncode == 0 and "Failed samples" not in only_good.stdout


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_max_failure_rate_from_the_config_and_flag_mistakes_name_the_flag(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, 6)
    flaky = make_server({"model": "m", "faults": {"seed": 2, "rates": {"500": 0.4}}})
    config = config_for(
        tmp_path / "run", runspecs, [model_entry("m", flaky.base_url, retry_attempts=0)], max_failure_rate=1.0
    )
    assert _evalkit(["run", str(config)], tmp_path).returncode == 0
    strict = _evalkit(["run", str(config), "--max-failure-rate", "0"], tmp_path)
    assert strict.returncode == 3 and "max_failure_rate 0 " in strict.stderr

    for bad in ("2", "lots"):
        wrong = _evalkit(["run", str(config), "--max-failure-rate", bad], tmp_path)
        assert wrong.returncode == 2 and "--max-failure-rate" in wrong.stderr and "Traceback" not in wrong.stderr
    wrong = _evalkit(["run", str(config), "--metric", "exact_mach"], tmp_path)
    assert wrong.returncode == 2 and wrong.stderr.startswith("evalkit: error: --metric: 'exact_mach'")
    assert "dataset_metric[" not in wrong.stderr


def test_missing_audio_files_fail_the_run_with_the_audio_reason(tmp_path: Path, make_server) -> None:
    (tmp_path / "runspecs" / "speech").mkdir(parents=True)
    with (tmp_path / "clips.jsonl").open("w") as handle:
        for i in range(3):
            handle.write(json.dumps({"id": f"c{i}", "audio": f"audio/c{i}.wav", "text": "hello"}) + "\n")
    spec = {
        "_task": {"description": "asr", "metrics": ["word_error_rate"]},
        "lost_clips": {
            "path": "../../clips.jsonl",
            "language": "en",
            "modality": "audio",
            "id_column": "id",
            "audio_column": "audio",
            "target_column": "text",
        },
    }
    (tmp_path / "runspecs" / "speech" / "lost_asr.json").write_text(json.dumps(spec))
    server = make_server()
    config = config_for(
        tmp_path / "run", tmp_path / "runspecs", [model_entry("m", server.base_url)], [["lost_clips", "wer"]]
    )
    result = _evalkit(["run", str(config)], tmp_path)
    assert result.returncode == 3
    # the example is the first failure to arrive: any of the three clips
    assert "m: 3 x audio: " in result.stdout and re.search(r"audio/c[012]\.wav", result.stdout)
    docs = documentation()
    for code in ("| 0 |", "| 2 |", "| 3 |", "| 130 |", "| 143 |"):
        assert code in docs, code


# ---------------------------------------------------------------- 3: a clean interrupt


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env["EVALKIT_AUDIO_WORKERS"] = "2"  # the worker pool is what printed tracebacks on Ctrl-C
    env["EVALKIT_MEDIA_DIRECT"] = "0"  # 16 kHz 16-bit clips would be read in threads: keep the pool in the run
    return subprocess.Popen(
        [sys.executable, "-m", "evalkit", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )


def _wait_until_asked(server: Any, output: Path, proc: subprocess.Popen[str], timeout: float = 60) -> Path:
    """The run folder, once the server has received a request (the run is then mid-flight)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if server.stats()["requests"] and list(output.glob("*/run.json")):
            time.sleep(0.3)
            return next(output.glob("*/run.json")).parent
        time.sleep(0.05)
    raise AssertionError("no request arrived in time")


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_is_clean_marks_the_run_and_prints_the_resume_command(
    tmp_path: Path, make_server, speech_runspecs: dict[str, Any], sig: int, code: int
) -> None:
    server = make_server({"latency_ms": 1500, "max_concurrency": 1})
    config = config_for(
        tmp_path / "run",
        speech_runspecs["dir"],
        [model_entry("m", server.base_url, batch_size=1)],
        [["tiny_asr", "wer"], ["tiny_asr", "cer"]],
    )
    proc = _start(["run", "-c", str(config)], tmp_path)
    run_dir = _wait_until_asked(server, tmp_path / "run" / "runs", proc)
    os.killpg(proc.pid, sig)  # the whole group, as Ctrl-C in a terminal does
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stdout + stderr and "KeyboardInterrupt" not in stdout + stderr, stderr
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "interrupted"
    command = next(line.strip() for line in stderr.splitlines() if line.strip().startswith("evalkit run --resume"))
    assert command == f"evalkit run --resume {shlex.quote(str(run_dir))}"

    resumed = _evalkit([*shlex.split(command)[1:]], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    results = json.loads((run_dir / "results.json").read_text())
    assert all(r["n"] == 3 and r["n_failed"] == 0 for r in results["results"])


# ---------------------------------------------------------------- 4: paths relative to the config file


def test_paths_in_a_config_are_relative_to_its_folder_from_any_working_directory(tmp_path: Path, make_server) -> None:
    project = tmp_path / "project"
    text_set(project / "private", 4)  # project/private/runspecs/text/synth_qa.json + data
    text_set(project / "beside", 3, name="beside_qa")  # moved to project/sub/runspecs below
    sub = project / "sub"
    sub.mkdir()
    (project / "beside" / "runspecs").rename(sub / "runspecs")
    spec_file = sub / "runspecs" / "text" / "beside_qa.json"
    spec = json.loads(spec_file.read_text())
    spec["beside_qa"]["path"] = "../../../beside/data/beside_qa.jsonl"  # relative to the runspec file
    spec_file.write_text(json.dumps(spec))
    server = make_server()
    data = {
        "dataset_metric": [["synth_qa", "exact_match"], ["beside_qa", "exact_match"]],
        "models": [model_entry("m", server.base_url)],
        "runspecs_dir": "../private/runspecs",
        "cache": {"path": "store/answers.sqlite"},
    }
    (sub / "config.yaml").write_text(json.dumps(data))  # JSON is YAML
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    from_afar = _evalkit(["run", "-c", str(Path("..") / "project" / "sub" / "config.yaml")], elsewhere)
    assert from_afar.returncode == 0, from_afar.stderr
    assert not list(elsewhere.iterdir())  # nothing landed in the working directory
    run_dir = _run_dir(sub / "runs")
    assert (sub / "store" / "answers.sqlite").is_file()
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    assert {(r["dataset"], r["n"]) for r in rows} == {("synth_qa", 4), ("beside_qa", 3)}

    inside = _evalkit(["run", "-c", "config.yaml"], sub)
    assert inside.returncode == 0, inside.stderr
    # the same store, found again; beside_qa's 3 questions are synth_qa's first 3, shared whichever pair asks first
    assert "0 requests sent, 4 answers from the response store, 3 requests shared by two pairs" in inside.stdout

    data["dataset_metric"] = [["synth_qq", "exact_match"]]
    (sub / "config.yaml").write_text(json.dumps(data))
    missing = _evalkit(["run", "-c", "project/sub/config.yaml"], tmp_path)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "'synth_qq' is not a dataset, task or category" in missing.stderr
    assert 'did you mean "synth_qa"' in missing.stderr
    searched = missing.stderr.split("Runspec folders searched: ")[1]
    assert str(sub / "runspecs") in searched and str(project / "private" / "runspecs") in searched
    assert str(ROOT / "runspecs") in searched


# ---------------------------------------------------------------- 5: counts that name their unit


def test_progress_summary_and_report_count_requests_samples_and_stored_answers_apart(
    tmp_path: Path, make_server
) -> None:
    import re

    runspecs = text_set(tmp_path, 20)
    spec_file = runspecs / "text" / "synth_qa.json"
    spec = json.loads(spec_file.read_text())
    spec["_task"]["metrics"] = ["exact_match", "bleu", "f1"]
    spec_file.write_text(json.dumps(spec))
    server = make_server({"latency_ms": [40, 44], "seed": 1})
    pairs = [["synth_qa", "exact_match"], ["synth_qa", "bleu"], ["synth_qa", "f1"]]
    config = config_for(tmp_path / "run", runspecs, [model_entry("m", server.base_url)], pairs)

    first = _evalkit(["run", str(config), "--progress-interval", "0"], tmp_path)
    assert first.returncode == 0, first.stderr
    # 20 samples x 3 metrics = 60 rows, but 20 requests: metrics of a dataset share them
    assert "20 requests sent, 0 answers from the response store, 40 requests shared by two pairs" in first.stdout
    assert "60 samples scored and 0 failed over 3 dataset-metric pairs x 1 model" in first.stdout
    assert "synth_qa__bleu · m: 20/20 samples done, 0 failed, " in first.stderr
    last = [line for line in first.stderr.splitlines() if line.startswith("[evalkit] overall: ")][-1]
    assert (
        last.startswith("[evalkit] overall: 60/60 samples done, 0 failed, ") and "; 20 requests sent, 0 answers" in last
    )
    assert server.stats()["requests"] == 20

    html = (_run_dir(tmp_path / "run" / "runs") / "report.html").read_text()
    latency = html.split("Latency per model")[1]
    assert "samples answered" in latency and "requests sent" in latency
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", latency.split("</table>")[0])
    assert cells[:3] == ["m", "20", "20"]  # not 60 rows
    # latencies 40-44 ms: every axis label of the histogram reads differently
    edges = re.findall(r'class="bin-edge"[^>]*>([^<]+)<', latency)
    assert len(edges) >= 5 and len(set(edges)) == len(edges), edges

    again = _evalkit(["run", str(config)], tmp_path)
    assert "0 requests sent, 20 answers from the response store, 40 requests shared" in again.stdout


# ---------------------------------------------------------------- 6: a dry run checks what it can


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_dry_run_checks_local_files_and_what_each_endpoint_serves(tmp_path: Path, make_server) -> None:
    from helpers import tone_wav

    (tmp_path / "runspecs" / "speech").mkdir(parents=True)
    (tmp_path / "audio").mkdir()
    (tmp_path / "audio" / "c0.wav").write_bytes(tone_wav(300, 0.5))
    with (tmp_path / "clips.jsonl").open("w") as handle:
        for i in range(4):
            handle.write(json.dumps({"id": f"c{i}", "audio": f"audio/c{i}.wav", "text": "hello"}) + "\n")
    spec = {
        "_task": {"description": "asr", "metrics": ["word_error_rate"]},
        "some_clips": {
            "path": "../../clips.jsonl",
            "language": "en",
            "modality": "audio",
            "id_column": "id",
            "audio_column": "audio",
            "target_column": "text",
        },
    }
    (tmp_path / "runspecs" / "speech" / "some_clips.json").write_text(json.dumps(spec))
    right = make_server({"model": "m"})
    wrong = make_server({"model": "pocketsphinx-en-us"})
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    models = [model_entry("m", right.base_url), model_entry("asr", wrong.base_url), model_entry("down", dead)]
    config = config_for(tmp_path / "run", tmp_path / "runspecs", models, [["some_clips", "wer"]])

    result = _evalkit(["run", str(config), "--dry-run"], tmp_path)
    assert result.returncode == 2, result.stderr  # a dataset names files that are not there
    out = " ".join(result.stdout.split())
    assert "some_clips" in out and "names 3 local file(s) that do not exist" in out
    assert str(tmp_path / "audio" / "c1.wav") in out and str(tmp_path / "audio" / "c0.wav") not in out
    assert "ok: m at " in out and "serves 'm'" in out
    assert "warning: asr at " in out and "serves 'pocketsphinx-en-us', not the configured model 'asr'" in out
    assert "warning: down at " in out and "does not answer GET /models" in out
    for server in (right, wrong):  # only the model listing was asked
        assert set(server.stats()["by_path"]) <= {"/v1/models"}, server.stats()

    (tmp_path / "clips.jsonl").write_text(json.dumps({"id": "c0", "audio": "audio/c0.wav", "text": "hi"}) + "\n")
    fine = _evalkit(["run", str(config), "--dry-run", "--model", "m"], tmp_path)
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert "do not exist" not in fine.stdout and "warning" not in fine.stdout


# ---------------------------------------------------------------- 7: documented customisation


PLUGIN = '''
from evalkit.plugin import METRICS, FailureReason, Metric, Sample, SampleScore


@METRICS.register("answer_words")
class AnswerWords(Metric):
    """1 when the answer has as many words as the reference."""

    bounds = (0.0, 1.0)
    tasks = ("text_qa",)  # fits every dataset of the text_qa task, whatever its runspec lists

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        if not sample.reference:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        same = float(len(prediction.split()) == len(str(sample.reference).split()))
        return SampleScore(same, (same, 1.0))
'''


def test_a_plugin_metric_declaring_its_task_runs_on_a_catalogue_dataset_and_flag_errors_name_the_flag(
    tmp_path: Path, make_server
) -> None:
    site = tmp_path / "site"
    (site / "words_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "words_plugin.py").write_text(PLUGIN)
    (site / "words_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: words-plugin\nVersion: 1.0\n"
    )
    (site / "words_plugin-1.0.dist-info" / "entry_points.txt").write_text("[evalkit.plugins]\nwords = words_plugin\n")
    server = make_server()  # echoes the question: never as many words as the short answers
    data = {
        "dataset_metric": [["basic_qa", "answer_words"]],  # the shipped text_qa set; its runspec is untouched
        "models": [model_entry("m", server.base_url)],
        "filters": {"num_samples": 4},
    }
    (tmp_path / "config.yaml").write_text(json.dumps(data))
    env_path = os.pathsep.join([str(site), str(ROOT)])
    env = {**os.environ, "PYTHONPATH": env_path}

    def evalkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "evalkit", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )

    result = evalkit("run", "config.yaml")
    assert result.returncode == 0, result.stderr
    rows = json.loads((_run_dir(tmp_path / "runs") / "results.json").read_text())["results"]
    assert [(r["dataset"], r["metric"], r["n"]) for r in rows] == [("basic_qa", "answer_words", 4)]

    # a metric that fits no declared task kind is still refused, and the flags that chose the pair are named
    refused = evalkit("run", "config.yaml", "--dataset", "espeak_en_asr", "--metric", "answer_words")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("evalkit: error: --dataset espeak_en_asr --metric answer_words: metric")
    assert "does not fit dataset 'espeak_en_asr'" in refused.stderr and "dataset_metric[" not in refused.stderr

    serve_help = evalkit("serve", "--help")
    assert serve_help.returncode == 0 and "--model-id" in serve_help.stdout
    assert "pocketsphinx-en-us" in " ".join(serve_help.stdout.split())
    own_metric = doc_section("Your own metric")
    assert '[project.entry-points."evalkit.plugins"]' in own_metric and "tasks = (" in own_metric
    assert '"textual_input_column"' in doc_section("Datasets: runspecs")

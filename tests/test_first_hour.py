"""A new user's first hour, followed step by step in a new venv and an empty folder.

evalkit is installed from a wheel built from this checkout (no network: see :func:`helpers.installed_wheel`),
and everything after that is what the documentation (README.md and docs/) tells a user, read from it
where it shows code, so the docs cannot drift from what works: the quick start's ``bash evaluate.sh``; a text set
written as "Datasets: runspecs" shows it; ``evalkit init`` to make a config for it; a run against
evalkit's own test server (``python -m evalkit.testing.server``, the "model"); the "Your own metric"
example dropped beside the config; a run interrupted with Ctrl-C (SIGINT) half-way and finished with
the command it prints. Each step is checked as the user reads it: exit codes, the console table's rows,
the summary line, the resume line, run.json's status, and results.json's scores, which after the
resume equal those of a run that was never interrupted.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, clean_env, doc_code_blocks, documentation, installed_wheel

import evalkit
from evalkit.config import ModelInfo

#: README.md and every page of docs/, as one text
DOCS = documentation()
#: words the made-up answers are built from (three per question)
WORDS = ["red", "green", "blue", "apple", "river", "stone", "cloud", "lamp", "tiger", "bread"]
N_QUESTIONS = 30
#: per request, one at a time: a run of N_QUESTIONS new requests takes about 6 s, so Ctrl-C lands mid-run
LATENCY_MS = 200


@pytest.fixture(scope="module")
def venv_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_wheel(tmp_path_factory.mktemp("first_hour_venv"))


# -- reading what the documentation shows and what evalkit prints ---------------------------------------------------


def readme_code(language: str, containing: str) -> str:
    """The one fenced ``language`` block of the documentation that contains ``containing``."""
    blocks = doc_code_blocks(language, containing)
    assert len(blocks) == 1, f"docs: expected one ```{language} block with {containing!r}, found {len(blocks)}"
    return str(blocks[0])


def table_rows(stdout: str) -> list[list[str]]:
    """The body rows of the results table a run prints, as the cells a user reads."""
    return [
        [cell.strip() for cell in line.strip().strip("│").split("│")]
        for line in stdout.splitlines()
        if line.startswith("│")
    ]


def summary(stdout: str) -> str:
    """The line under the table: requests sent, answers from the store, samples scored."""
    lines = [line for line in stdout.splitlines() if " requests sent, " in line]
    assert len(lines) == 1, stdout
    return lines[0]


def results(run_dir: Path) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    """results.json's numbers per (dataset, metric, model)."""
    rows = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))["results"]
    return {
        (r["dataset"], r["metric"], r["model"]): (r["score"], r["ci_low"], r["ci_high"], r["n"], r["n_failed"])
        for r in rows
    }


def run_status(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["status"])


def completed_requests(log: Path) -> int:
    """Answers the test server sent, from its request log."""
    if not log.is_file():
        return 0
    return sum('"event":"completed"' in line.replace(" ", "") for line in log.read_text().splitlines())


def run_dir_of(stdout: str) -> Path:
    match = re.search(r"^Records: (?P<records>\S+)", stdout, re.M)
    assert match, stdout
    return Path(match["records"]).parent


# -- the user -----------------------------------------------------------------------------------------------


@dataclass
class User:
    """A shell in ``folder`` whose PATH finds the new venv's ``evalkit`` first; nothing of the checkout."""

    bin: Path
    folder: Path

    @property
    def env(self) -> dict[str, str]:
        return {**clean_env(), "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"}

    def command(self, line: str, stdin: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """A command line as the user types it (``evalkit ...``, ``bash ...``)."""
        return subprocess.run(
            shlex.split(line), cwd=self.folder, env=self.env, input=stdin, capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip

    def start(self, line: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            shlex.split(line), cwd=self.folder, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip


def ok(result: subprocess.CompletedProcess[str], code: int = 0) -> subprocess.CompletedProcess[str]:
    shown = f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    assert result.returncode == code, f"expected exit {code}: {shown}"
    assert "Traceback" not in result.stderr, shown
    return result


@pytest.fixture
def model_server(venv_bin: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The "model": evalkit's test server from the venv, answering each question in its own way, slowly.

    One question in three gets its reference (exact match), one its first two words and a wrong third,
    one a wrong answer; one request at a time, LATENCY_MS each. Yields its /v1 URL and its request log.
    """
    answers = []
    for i in range(N_QUESTIONS):
        reference = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(3))
        said = [reference, " ".join(reference.split()[:2]) + " maybe", "I do not know"][i % 3]
        answers.append({"match": f"(card {i})", "answer": said})
    log = tmp_path / "server" / "requests.jsonl"
    log.parent.mkdir()
    script = log.parent / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "model": "test-model",
                "latency_ms": LATENCY_MS,
                "max_concurrency": 1,
                "answers": answers,
                "request_log": str(log),
            }
        )
    )
    server = subprocess.Popen(
        [str(venv_bin / "python"), "-m", "evalkit.testing.server", "--script", str(script), "--port", "0"],
        cwd=log.parent, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("LISTENING "), line + (server.stderr.read() if server.stderr else "")
        yield line.split()[1] + "/v1", log
    finally:
        server.terminate()
        server.wait(timeout=20)


def question_rows() -> list[tuple[str, str]]:
    """(question, reference) of the user's set: "Name the three words of (card i)." -> three words."""
    return [
        (f"Name the three words of (card {i}).", " ".join(WORDS[(i + k) % len(WORDS)] for k in range(3)))
        for i in range(N_QUESTIONS)
    ]


def expected_scores() -> dict[str, float]:
    """What the answers of :func:`model_server` score: exact match, and reference words found over all (pooled)."""
    found = sum([3, 2, 0][i % 3] for i in range(N_QUESTIONS))
    exact = sum(i % 3 == 0 for i in range(N_QUESTIONS))
    return {"exact_match": exact / N_QUESTIONS, "word_recall": found / (3 * N_QUESTIONS)}


# -- the journey --------------------------------------------------------------------------------------------


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_the_quick_start_runs_the_default_config(venv_bin: Path, tmp_path: Path) -> None:
    """README's quick start: `bash evaluate.sh` runs config.yaml (PocketSphinx behind evalkit serve), offline."""
    pytest.importorskip("pocketsphinx")
    quick_start = readme_code("bash", "bash evaluate.sh")
    assert re.search(r"&& bash evaluate\.sh\s", quick_start), quick_start
    folder = tmp_path / "evalkit-checkout"
    folder.mkdir()
    for name in ("config.yaml", "evaluate.sh"):  # what a clone holds beside the package
        shutil.copy(ROOT / name, folder / name)
    user = User(venv_bin, folder)
    ran = ok(user.command("bash evaluate.sh config.yaml --num-samples 2 --quiet"))  # evaluate.sh [config] [args]
    rows = table_rows(ran.stdout)
    assert [row[:3] for row in rows] == [
        ["espeak_en_asr", "word_error_rate", "pocketsphinx-en"],
        ["espeak_en_asr", "cer", "pocketsphinx-en"],
    ], ran.stdout
    assert all(row[5:] == ["2", "0"] for row in rows), ran.stdout
    assert (run_dir_of(ran.stdout) / "report.html").is_file()


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_new_users_first_hour(venv_bin: Path, tmp_path: Path, model_server: tuple[str, Path]) -> None:
    url, request_log = model_server
    folder = tmp_path / "my_eval"
    folder.mkdir()
    user = User(venv_bin, folder)

    # 1. the installed evalkit answers, this checkout's version but not the checkout itself
    assert ok(user.command("evalkit --version")).stdout.strip() == evalkit.__version__
    where = ok(user.command("python -c 'import evalkit; print(evalkit.__file__)'")).stdout.strip()
    assert Path(where).is_relative_to(venv_bin.parent) and not Path(where).is_relative_to(ROOT), where

    # 2. my own text set, as "Datasets: runspecs" shows it: the runspec file where README puts it, its jsonl beside
    said = re.search(
        r"A text set \(`(?P<spec>[^`]+)`, beside a `(?P<data>[^`]+)` of `\{(?P<columns>[^}]+)\}`\s+lines\)", DOCS
    )
    assert said, "docs/datasets.md: the sentence introducing the text set's runspec has changed"
    spec_text = readme_code("json", '"my_qa": {')
    spec_file = folder / said["spec"]
    spec_file.parent.mkdir(parents=True)
    spec_file.write_text(spec_text, encoding="utf-8")
    entry = json.loads(spec_text)["my_qa"]
    data_file = (spec_file.parent / entry["path"]).resolve()
    assert data_file.parent == folder.resolve() and data_file.name == said["data"], "the runspec's path and the docs"
    columns = [entry["id_column"], entry["textual_input_column"], entry["target_column"]]
    assert columns == [name.strip().strip('"') for name in said["columns"].split(",")]
    with data_file.open("w", encoding="utf-8") as handle:
        for i, (question, reference) in enumerate(question_rows()):
            handle.write(json.dumps(dict(zip(columns, (f"q{i:02d}", question, reference)))) + "\n")
    listed = ok(user.command("evalkit list datasets --format csv"))
    assert any(line.startswith("my_qa,") for line in listed.stdout.splitlines()), listed.stdout

    # 3. a config by answering evalkit init's questions; it says how to check and run the file it wrote
    answers = ["my_qa", "exact_match", "test-model", "vllm", url, "test-model", "", ""]
    made = ok(user.command("evalkit init", stdin="\n".join(answers) + "\n"))
    assert "wrote config.yaml: 1 dataset-metric pairs x 1 model" in made.stdout, made.stdout
    told = re.search(r"check it with `(?P<check>[^`]+)` and run it with `(?P<run>[^`]+)`", made.stdout)
    assert told, made.stdout
    checked = ok(user.command(told["check"]))
    assert checked.stdout.splitlines()[:2] == ["config.yaml: OK — 1 engines x 1 models", "  my_qa x exact_match"]

    # 4. the run: one row, a third exactly right, every question asked once
    first = ok(user.command(told["run"]))
    (row,) = table_rows(first.stdout)
    assert row[:4] == ["my_qa", "exact_match", "test-model", f"{expected_scores()['exact_match']:.4f}"], row
    low, high = (float(x) for x in row[4].strip("[]").split(","))
    assert low < expected_scores()["exact_match"] < high and row[5:] == [str(N_QUESTIONS), "0"], row
    assert summary(first.stdout).startswith(f"{N_QUESTIONS} requests sent, 0 answers from the response store")
    assert (run_dir_of(first.stdout) / "report.html").is_file()

    # 5. the docs' own metric, beside the config, named in plugins:
    code = readme_code("python", "# word_recall.py")
    module = code.splitlines()[0].removeprefix("# ").strip()
    (folder / module).write_text(code, encoding="utf-8")
    config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    config["plugins"] = [module.removesuffix(".py")]
    config["dataset_metric"].append(["my_qa", "word_recall"])
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    assert "word_recall" in ok(user.command("evalkit list metrics --config config.yaml")).stdout
    info = ok(user.command("evalkit info metric word_recall --config config.yaml"))
    assert "bootstrap" in info.stdout and "pooled_word_recall" in info.stdout, info.stdout
    # my_qa's task is not one of the metric's `tasks`: refused before any request, with what fits
    refused = ok(user.command(told["run"]), code=2)
    assert "dataset_metric[1]: metric 'word_recall' does not fit dataset 'my_qa'" in refused.stderr, refused.stderr
    assert "fitting metrics: exact_match, f1" in refused.stderr, refused.stderr
    # ... accepted once the dataset's runspec lists it (docs: "when the dataset's runspec lists it")
    runspec = json.loads(spec_file.read_text(encoding="utf-8"))
    runspec["_task"]["metrics"].append("word_recall")
    spec_file.write_text(json.dumps(runspec, indent=2), encoding="utf-8")
    asked_before = completed_requests(request_log)
    whole = ok(user.command(told["run"]))
    scores = expected_scores()
    assert [row[:4] for row in table_rows(whole.stdout)] == [
        ["my_qa", "exact_match", "test-model", f"{scores['exact_match']:.4f}"],
        ["my_qa", "word_recall", "test-model", f"{scores['word_recall']:.4f}"],
    ], whole.stdout
    assert summary(whole.stdout).startswith(f"0 requests sent, {N_QUESTIONS} answers from the response store")
    assert completed_requests(request_log) == asked_before, "the stored answers must not be asked again"
    uninterrupted = results(run_dir_of(whole.stdout))

    # 6. the same run in a new output folder (its own response store), Ctrl-C once some answers are in
    asked_before = completed_requests(request_log)
    running = user.start(f"{told['run']} --output-dir interrupted")
    deadline = time.monotonic() + 60
    while completed_requests(request_log) < asked_before + 6 and running.poll() is None:
        assert time.monotonic() < deadline, "no answer reached the interrupted run within 60 s"
        time.sleep(0.05)
    running.send_signal(signal.SIGINT)
    out, err = running.communicate(timeout=60)
    interrupted = ok(subprocess.CompletedProcess(running.args, running.returncode, out, err), code=130)
    told_resume = re.search(r"Resume it with \(stored answers are not asked again\):\n  (?P<cmd>.+)$", err, re.M)
    assert told_resume, interrupted.stderr
    printed = Path(shlex.split(told_resume["cmd"])[-1])  # as the user gave --output-dir: relative to the folder
    run_dir = folder / printed
    assert f"{printed / 'run.json'} has status 'interrupted'" in err, err
    assert run_status(run_dir) == "interrupted"

    # 7. the command it printed finishes the run: the scores of the uninterrupted run, nothing asked twice
    # (but the answers in flight at Ctrl-C, at most batch_size, whose commit never happened)
    resumed = ok(user.command(told_resume["cmd"]))
    assert table_rows(resumed.stdout) == table_rows(whole.stdout), resumed.stdout
    stored = re.search(r"(?P<sent>\d+) requests sent, (?P<stored>\d+) answers from the response store", resumed.stdout)
    assert stored and int(stored["stored"]) >= 1 and int(stored["sent"]) + int(stored["stored"]) == N_QUESTIONS
    assert run_status(run_dir) == "finished"
    assert results(run_dir) == uninterrupted
    batch_size = ModelInfo.model_fields["batch_size"].default
    assert completed_requests(request_log) - asked_before <= N_QUESTIONS + batch_size

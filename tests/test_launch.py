"""Servers evalkit starts itself (``launch:``), end to end through ``python -m evalkit run``.

Every test starts a real ``evalkit serve --backend pocketsphinx`` (its model
ships in the wheel: no download) through a ``launch:`` block, scores the
shipped espeak-ng speech set, and then checks from the outside that nothing
is left: the port refuses connections, no live process is in the server's
process group, and no process command line names the server's port or port
file. Where the server ran is read from the ``server-<model>-<pid>.json``
that evalkit writes beside each server log in ``<output_dir>/server-logs``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from helpers import live_group_members, write_config

ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT / "evalkit" / "assets" / "speech" / "espeak_en" / "data.parquet"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from /proc")

# `python -m evalkit` with Ctrl-C restored: a test runner started in the
# background inherits an ignored SIGINT, and Python keeps it ignored.
_EVALKIT = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from evalkit.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


# ------------------------------------------------------------------ helpers


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


class _Run:
    """``evalkit run`` in a subprocess.

    Output goes to files: helper processes may outlive a killed run and hold pipes open.
    """

    def __init__(self, config: Path, *extra: str) -> None:
        self.out_path = config.with_suffix(".stdout")
        self.err_path = config.with_suffix(".stderr")
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _EVALKIT, "run", str(config), "--no-cache", "-q", *extra],
                cwd=config.parent,
                env=_env(),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()

    @property
    def stdout(self) -> str:
        return self.out_path.read_text()

    @property
    def stderr(self) -> str:
        return self.err_path.read_text()


def _run(config: Path, *extra: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    run = _Run(config, *extra)
    code = run.wait(timeout)
    return subprocess.CompletedProcess(run.process.args, code, run.stdout, run.stderr)


def _speech_rows() -> list[dict[str, Any]]:
    return pq.read_table(SPEECH, columns=["id", "text", "duration"]).to_pylist()


def _grammar(path: Path) -> Path:
    """Every shipped sentence whose words are all in the pocketsphinx dictionary (the serve grammar refuses others)."""
    import pocketsphinx

    decoder = pocketsphinx.Decoder(loglevel="FATAL")
    lines = []
    for row in _speech_rows():
        words = re.findall(r"[a-z0-9']+(?:[-.][a-z0-9']+)*", row["text"].lower())
        if all(decoder.lookup_word(word) is not None for word in words):
            lines.append(row["text"])
    assert len(lines) >= 50  # one sentence ("windowsill") is not in the dictionary
    path.write_text("\n".join(lines) + "\n")
    return path


def _asr_model(name: str, *args: str, batch_size: int = 4, **extra: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "name": name,
        "inference_type": "transcription",
        "model": "pocketsphinx-en-us",
        "batch_size": batch_size,
        "timeout": 120,
        "launch": {"backend": "pocketsphinx", "args": list(args), "startup_timeout": 120},
    }
    info.update(extra)
    return {"info": info}


def _config(tmp_path: Path, models: list[dict[str, Any]], name: str = "config.yaml", **filters: Any) -> Path:
    return write_config(
        tmp_path / name,
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
            "models": models,
            "filters": filters,
            "output_dir": str(tmp_path / name.replace(".yaml", "-runs")),
        },
    )


def _output_dir(config: Path) -> Path:
    return config.parent / config.name.replace(".yaml", "-runs")


def _results(config: Path) -> dict[str, Any]:
    runs = sorted(p for p in _output_dir(config).iterdir() if (p / "results.json").is_file())
    assert len(runs) == 1, runs
    return json.loads((runs[0] / "results.json").read_text())


def _row(results: dict[str, Any], model: str) -> dict[str, Any]:
    (row,) = [r for r in results["results"] if r["model"] == model and r["metric"] == "word_error_rate"]
    return row


def _records(config: Path, model: str) -> dict[str, dict[str, Any]]:
    (run,) = [p for p in _output_dir(config).iterdir() if p.name != "server-logs"]
    out = {}
    for path in (run / "records").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["model"] == model:
                out[record["sample_id"]] = record
    return out


def _servers(config: Path) -> list[dict[str, Any]]:
    # in the run's folder once there is a run; in the output folder's when no run began
    found = sorted(_output_dir(config).glob("**/server-logs/server-*.json"))
    return [json.loads(p.read_text()) for p in found]


def _mentioning(needles: list[str]) -> list[str]:
    """Command lines of live processes that contain one of ``needles`` as an argument."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if any(needle in args for needle in needles):
                found.append(" ".join(args))
    return found


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _assert_gone(server: dict[str, Any]) -> None:
    """Nothing of ``server`` is left: port, process group, any process naming its port or port file."""
    command = server["command"]
    needles = [str(server["port"])] if "--port-file" not in command else [command[command.index("--port-file") + 1]]
    assert not _port_open(server["port"]), f"port {server['port']} still answers"
    assert live_group_members(server["pgid"]) == [], f"process group {server['pgid']} still has processes"
    assert _mentioning(needles) == [], f"processes still name {needles}"
    assert server["stopped"] is not None


def _assert_served(server: dict[str, Any]) -> None:
    """The recorded port is the one the server itself reported (its LISTENING line)."""
    log = Path(server["log"]).read_text()
    assert f"LISTENING http://127.0.0.1:{server['port']}" in log, log[-2000:]
    assert server["ready_seconds"] is not None and server["returncode"] == 0 and not server["killed"]


def _wait_mid_run(config: Path, run: _Run, timeout: float = 90) -> dict[str, Any]:
    """Wait until the launched server has answered a request; returns its record."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert run.process.poll() is None, run.stderr
        for server in _servers(config):
            if server["port"]:
                try:
                    stats = httpx.get(f"http://127.0.0.1:{server['port']}/_stats", timeout=2).json()
                except httpx.HTTPError:
                    continue
                if stats["requests"] >= 1:
                    return server
        time.sleep(0.1)
    raise AssertionError("the launched server answered nothing in time")


# ------------------------------------------------------------------ tests


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_grammar_mode_is_exact_and_free_mode_is_real_and_stable(tmp_path: Path) -> None:
    grammar = _grammar(tmp_path / "grammar.txt")
    models = [_asr_model("ps-grammar", "--grammar", str(grammar)), _asr_model("ps-free")]
    # the three shortest-clip sentences among the first rows keep free recognition quick
    filters = {"num_samples": 3, "length_filter": [0.0, 3.0]}
    first = _config(tmp_path, models, "first.yaml", **filters)
    second = _config(tmp_path, models, "second.yaml", **filters)
    runs = [_Run(first), _Run(second)]  # side by side: independent runs, each with its own two servers
    for run in runs:
        assert run.wait(timeout=180) == 0, run.stderr

    for config in (first, second):
        results = _results(config)
        grammar_row, free_row = _row(results, "ps-grammar"), _row(results, "ps-free")
        assert grammar_row["n"] == free_row["n"] == 3 and grammar_row["n_failed"] == free_row["n_failed"] == 0
        assert grammar_row["score"] <= 0.05, grammar_row
        assert 0.0 < free_row["score"] < 1.0, free_row
        # the grammar hands back the sentence as written, so the prediction is the reference itself
        for record in _records(config, "ps-grammar").values():
            assert record["prediction"] == record["reference"]
        servers = _servers(config)
        assert sorted(s["model"] for s in servers) == ["ps-free", "ps-grammar"]
        for server in servers:
            _assert_served(server)
            _assert_gone(server)
    free_first, free_second = _records(first, "ps-free"), _records(second, "ps-free")
    assert sorted(free_first) == sorted(free_second) and len(free_first) == 3
    assert {k: r["prediction"] for k, r in free_first.items()} == {k: r["prediction"] for k, r in free_second.items()}
    assert _row(_results(first), "ps-free")["score"] == _row(_results(second), "ps-free")["score"]


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_free_mode_transcript_does_not_depend_on_what_the_server_decoded_before(tmp_path: Path) -> None:
    """Two runs (or two orders of concurrent requests) give the same transcripts only if each clip is decoded afresh."""
    # three short clips; decoding either of the others in between changed the first one's transcript
    by_id = {row["id"]: row for row in pq.read_table(SPEECH, columns=["id", "audio"]).to_pylist()}
    rows = [by_id["espeak_en_0052"], by_id["espeak_en_0031"], by_id["espeak_en_0019"]]
    port_file = tmp_path / "port"
    with (tmp_path / "serve.log").open("wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "evalkit.serve",
                "--backend",
                "pocketsphinx",
                "--port",
                "0",
                "--port-file",
                str(port_file),
            ],
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.1)
        url = f"http://127.0.0.1:{port_file.read_text().strip()}/v1/audio/transcriptions"

        def transcribe(row: dict[str, Any]) -> str:
            files = {"file": (row["audio"]["path"], row["audio"]["bytes"], "audio/flac")}
            response = httpx.post(url, files=files, data={"model": "pocketsphinx-en-us"}, timeout=120)
            assert response.status_code == 200, response.text
            return str(response.json()["text"])

        fresh = transcribe(rows[0])  # the first utterance this server decodes
        for row in rows[1:]:
            transcribe(row)
        assert transcribe(rows[0]) == fresh
    finally:
        server.terminate()
        server.wait(30)


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_queue_full_503s_are_retried_until_every_sample_is_scored(tmp_path: Path) -> None:
    # One clip decoded at a time and one waiting: four sent at once means 503 + Retry-After for
    # the other two, again and again while the first clips (3.6-5.8 s of speech, over a second to
    # decode freely) are worked on. "Come back in N s" is not an error: it must not use up
    # retry_attempts (1 here), which is for failures.
    config = _config(
        tmp_path,
        [_asr_model("ps", "--max-queue", "1", "--max-batch-size", "1", batch_size=4, retry_attempts=1)],
        num_samples=4,
    )
    run = _run(config)
    assert run.returncode == 0, run.stderr
    results = _results(config)
    row = _row(results, "ps")
    assert row["n"] == 4 and row["n_failed"] == 0, row
    assert results["requests"]["ps"]["retried"] >= 1
    assert any(record["attempts"] > 1 for record in _records(config, "ps").values())
    (server,) = _servers(config)
    _assert_served(server)
    _assert_gone(server)


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_run_stops_its_server(tmp_path: Path, signum: int, code: int) -> None:
    grammar = _grammar(tmp_path / "grammar.txt")
    config = _config(tmp_path, [_asr_model("ps", "--grammar", str(grammar), batch_size=2)], num_samples=40)
    run = _Run(config)
    try:
        server = _wait_mid_run(config, run)
        assert "evalkit.serve" in Path(f"/proc/{server['pid']}/cmdline").read_text()
        run.process.send_signal(signum)
    finally:
        returncode = run.wait(timeout=60)
    assert returncode == code, run.stderr
    if signum == signal.SIGINT:
        assert "interrupted" in run.stderr
    (server,) = _servers(config)
    _assert_gone(server)
    assert not list(_output_dir(config).glob("*/results.json"))  # the run did not pretend to finish


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_killed_evalkit_takes_its_server_along(tmp_path: Path) -> None:
    """SIGKILL leaves evalkit no chance to clean up: the server's parent-death signal stops it."""
    config = _config(tmp_path, [_asr_model("ps", batch_size=2)], num_samples=20)
    run = _Run(config)
    try:
        server = _wait_mid_run(config, run)
        run.process.kill()
    finally:
        run.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (live_group_members(server["pgid"]) or _port_open(server["port"])):
        time.sleep(0.2)
    assert live_group_members(server["pgid"]) == [] and not _port_open(server["port"])
    assert _mentioning([server["command"][server["command"].index("--port-file") + 1]]) == []


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_server_that_cannot_start_fails_the_run_with_its_output(tmp_path: Path) -> None:
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    (not_a_model / "README.txt").write_text("weights went missing\n")
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["basic_qa", "exact_match"]],
            "models": [
                {
                    "info": {
                        "name": "broken-llm",
                        "inference_type": "local",
                        "model": "broken",
                        "launch": {"backend": "transformers", "model_path": str(not_a_model), "startup_timeout": 120},
                    }
                }
            ],
            "filters": {"num_samples": 2},
            "output_dir": str(tmp_path / "config-runs"),
        },
    )
    run = _run(config)
    assert run.returncode == 2, run.stderr
    assert "broken-llm" in run.stderr and "before it was ready" in run.stderr
    assert "evalkit serve: error:" in run.stderr  # the server's own words, from its output
    assert "Traceback" not in run.stderr
    (server,) = _servers(config)
    assert server["ready_seconds"] is None and server["returncode"] == 2
    assert live_group_members(server["pgid"]) == []
    assert [p.name for p in _output_dir(config).iterdir()] == ["server-logs"]  # no run was started


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "8000"], "--port is chosen by evalkit"),
        (["--model-id=other"], "--model-id comes from the entry's `model`"),
    ],
)
def test_launch_args_cannot_move_the_server(tmp_path: Path, args: list[str], message: str) -> None:
    config = _config(tmp_path, [_asr_model("ps", *args)], num_samples=1)
    run = _run(config)
    assert run.returncode == 2
    assert "models: ps: launch.args: " + message in run.stderr
    assert _servers(config) == []  # nothing was started


def test_a_foreign_server_on_the_chosen_port_is_not_taken_for_ours(make_server: Any, tmp_path: Path) -> None:
    """vLLM gets a port found free a moment before; if another server answers there, evalkit must notice."""
    import asyncio

    from evalkit.serve.launch import LaunchedServer, _wait_ready
    from evalkit.serve.server_setup import LaunchError

    foreign = make_server({"model": "someone-else"})
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # "our" server, still starting
    try:
        server = LaunchedServer(
            model="mine",
            backend="vllm",
            process=stand_in,
            log_path=tmp_path / "server.log",
            command=[],
            port=foreign.port,
        )
        with pytest.raises(LaunchError, match="serves \\['someone-else'\\], not 'mine'"):
            asyncio.run(_wait_ready(server, "mine", timeout=30))
    finally:
        stand_in.kill()
        stand_in.wait()


@pytest.mark.parametrize(
    ("launch", "extra", "in_flight"),
    [
        ({"backend": "transformers", "model_path": "/m"}, {}, 16),  # evalkit serve's default batch is 8 on the CPU
        ({"backend": "transformers", "model_path": "/m", "args": ["--max-batch-size", "4"]}, {}, 8),
        ({"backend": "transformers", "model_path": "/m", "args": ["--max-batch-size=32"]}, {}, 64),
        ({"backend": "transformers", "model_path": "/m", "args": ["--device", "cuda"]}, {}, 64),  # 32 on a GPU
        ({"backend": "transformers", "model_path": "/m", "args": ["--device=cuda:1", "--max-batch-size", "8"]}, {}, 16),
        ({"backend": "pocketsphinx"}, {}, 16),
        ({"backend": "transformers", "model_path": "/m"}, {"batch_size": 3}, 3),  # the user's choice stands
        ({"backend": "vllm", "model_path": "/m"}, {}, 8),  # vLLM schedules its own batches: the usual default
    ],
)
def test_launched_evalkit_serve_gets_twice_its_batch_in_flight(
    launch: dict[str, Any], extra: dict[str, Any], in_flight: int
) -> None:
    """With only max-batch requests in flight, batches leave half full while answered clients re-send."""
    from evalkit.config import ModelInfo

    kind = "transcription" if launch["backend"] == "pocketsphinx" else "vllm"
    inference_type = "local" if launch["backend"] == "transformers" else kind
    info = ModelInfo(name="m", model="m", inference_type=inference_type, launch=launch, **extra)
    assert info.batch_size == in_flight

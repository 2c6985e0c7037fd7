"""Real vLLM on the CPU against evalkit's transformers backend: same model, same greedy answers.

Both serve the tiny local Llama (evalkit.testing.tiny_model). vLLM runs as its
own OpenAI-compatible server in a subprocess on a free loopback port; evalkit
answers in-process (TransformersBackend) and through ``python -m evalkit.serve``.
Greedy decoding of the same prompt must give the same text everywhere: the
chat template, special tokens, padding and detokenization all have to agree.

Slow (vLLM takes 30 s to a few minutes to start on two busy cores) and needs
``bash .ci/install_vllm.sh``; marked ``vllm`` and skipped when vLLM is not
installed. Run: ``python -m pytest -m vllm tests/test_vllm_cpu.py``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import vllm_group_marks

pytestmark = vllm_group_marks("psutil")


REPO_ROOT = Path(__file__).resolve().parent.parent
#: seconds to wait for vLLM's /health; override on a slow machine
START_TIMEOUT = float(os.environ.get("EVALKIT_VLLM_START_TIMEOUT", "300"))
MAX_TOKENS = 16

CONVERSATIONS: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "Hello there"}],
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "x"}],
    [
        {
            "role": "user",
            "content": "A much longer prompt, with many more tokens than the others, so that the short "
            "ones get a lot of left padding when they share a batch with it.",
        }
    ],
    [
        {"role": "system", "content": "You answer in one short sentence."},
        {"role": "user", "content": "Where did you put the keys?"},
        {"role": "assistant", "content": "I put them on the table."},
        {"role": "user", "content": "Which table?"},
    ],
    # list content: both servers join text parts with a newline
    [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Tell me a story"}, {"type": "text", "text": "about a boat."}],
        }
    ],
    # punctuation, digits, tabs and a non-ASCII character (an <|unk|> token)
    [{"role": "user", "content": "Count: 1, 2, 3...\tthen stop! Café?"}],
]


# ------------------------------------------------------------------ processes


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def _tree(pid: int) -> list[Any]:
    """The process and all its descendants, as psutil handles (empty once it is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _stop(proc: subprocess.Popen[bytes], known: list[Any], timeout: float = 30.0) -> list[Any]:
    """SIGTERM the server, then SIGKILL whatever of its tree is left, by pid; returns survivors."""
    import psutil

    tree = {p.pid: p for p in [*known, *_tree(proc.pid)]}
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
    _, alive = psutil.wait_procs(list(tree.values()), timeout=5)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    _, alive = psutil.wait_procs(list(tree.values()), timeout=10)
    return alive


class VllmServer:
    """``python -m vllm.entrypoints.openai.api_server`` on a free loopback port."""

    def __init__(self, model_dir: Path, log_path: Path) -> None:
        self.model_dir = model_dir
        self.log_path = log_path
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tree: list[Any] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_seconds = 0.0

    def start(self) -> None:
        env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache; the default (4) is more than tests need
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
        }
        cmd = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--max-model-len",
            "512",
            "--dtype",
            "float32",
            "--enforce-eager",
            # no "--distributed-executor-backend uni": on the CPU vLLM turns it
            # back into "mp" (its OpenMP set-up needs a worker process), so the
            # server is three processes: API server, engine core, worker
        ]
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.log_path.parent)
        deadline = started + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"vLLM exited with {self.proc.returncode} while starting:\n{_tail(self.log_path)}")
            try:
                if httpx.get(self.url + "/health", timeout=2.0).status_code == 200:
                    self.start_seconds = time.monotonic() - started
                    self.tree = _tree(self.proc.pid)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        raise AssertionError(f"vLLM did not answer /health within {START_TIMEOUT:.0f} s:\n{_tail(self.log_path)}")

    def rss_mb(self) -> float:
        return sum(p.memory_info().rss for p in _tree(self.proc.pid)) / 2**20 if self.proc else 0.0

    def stop(self) -> list[Any]:
        if self.proc is None:
            return []
        return _stop(self.proc, self.tree)


class EvalkitServer:
    """``python -m evalkit.serve --backend transformers --model DIR --port 0``."""

    def __init__(self, model_dir: Path, log_path: Path) -> None:
        self.model_dir = model_dir
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 180.0) -> None:
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        cmd = [
            sys.executable,
            "-m",
            "evalkit.serve",
            "--backend",
            "transformers",
            "--model",
            str(self.model_dir),
            "--port",
            "0",
        ]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, env=env, cwd=REPO_ROOT)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:  # stdout is read to the end so the server never blocks on a full pipe
            assert self.proc is not None and self.proc.stdout is not None
            for raw in self.proc.stdout:
                lines.put(raw.decode("utf-8", errors="replace").strip())
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"evalkit serve exited with {self.proc.wait()}:\n{_tail(self.log_path)}")
            if line.startswith("LISTENING "):
                self.url = line.split(" ", 1)[1].strip()
                return
        raise AssertionError(f"evalkit serve printed no LISTENING line within {timeout:.0f} s:\n{_tail(self.log_path)}")

    def stop(self) -> list[Any]:
        return _stop(self.proc, []) if self.proc is not None else []


def _chat(url: str, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"model": model, "messages": messages, "temperature": 0, "max_tokens": MAX_TOKENS}
    response = httpx.post(url + "/v1/chat/completions", json=body, timeout=120.0)
    assert response.status_code == 200, response.text
    return response.json()


def _answers(url: str, model: str, concurrent: bool) -> list[str]:
    if concurrent:  # all at once, so a batching server puts them in one batch
        with ThreadPoolExecutor(len(CONVERSATIONS)) as pool:
            replies = list(pool.map(lambda conv: _chat(url, model, conv), CONVERSATIONS))
    else:
        replies = [_chat(url, model, conv) for conv in CONVERSATIONS]
    return [reply["choices"][0]["message"]["content"] for reply in replies]


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def vllm_server(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    server = VllmServer(tiny_llama, tmp_path_factory.mktemp("vllm") / "vllm.log")
    try:
        server.start()
        print(f"\nvLLM up in {server.start_seconds:.1f} s, RSS of its processes {server.rss_mb():.0f} MB")
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def vllm_answers(vllm_server: VllmServer) -> list[str]:
    return _answers(vllm_server.url, str(vllm_server.model_dir), concurrent=False)


# ------------------------------------------------------------------ tests


def test_vllm_serves_the_tiny_model(vllm_server: VllmServer, vllm_answers: list[str]) -> None:
    models = httpx.get(vllm_server.url + "/v1/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [str(vllm_server.model_dir)]
    assert all(vllm_answers), vllm_answers
    assert len(set(vllm_answers)) == len(vllm_answers)


def test_chat_likelihood_of_an_option_equals_transformers(vllm_server: VllmServer, tiny_llama: Path) -> None:
    """The chat path of likelihood scoring (prompts with media) read from real vLLM equals transformers' sums.

    evalkit asks the chat with an empty answer and with each option as the answer (continue_final_message,
    prompt_logprobs 0); the option's log-probability is that of the tokens beyond the context's prompt.
    The same tokens' log-probabilities from transformers on the chat template's text must agree.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalkit.clients.protocol import chat_body, continuation_after
    from evalkit.clients.request import ModelRequest
    from evalkit.config import RequestKind
    from evalkit.run.requests import chat_likelihood_requests

    model_id = str(vllm_server.model_dir)
    question = [{"role": "user", "content": "Which city is the capital of France?"}]
    base = ModelRequest(kind=RequestKind.CHAT, model=model_id, messages=question)
    choices = ["Paris", "the moon and stars"]
    answers = [
        httpx.post(vllm_server.url + "/v1/chat/completions", json=chat_body(request), timeout=120.0).json()
        for request in chat_likelihood_requests(base, choices)
    ]
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama, torch_dtype=torch.float32)

    def ids(answer: str) -> list[int]:
        conversation = [*question, {"role": "assistant", "content": answer}]
        text = tokenizer.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=False, continue_final_message=True
        )
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    context = ids("")
    for choice, answer in zip(choices, answers[1:]):
        total, count = continuation_after(answers[0], answer)
        full = ids(choice)
        assert full[: len(context)] == context and count == len(full) - len(context)
        with torch.no_grad():
            logprobs = torch.log_softmax(model(input_ids=torch.tensor([full])).logits[0].float(), dim=-1)
        expected = sum(float(logprobs[i - 1, full[i]]) for i in range(len(context), len(full)))
        assert total == pytest.approx(expected, abs=1e-3), (choice, total, expected)


def test_transformers_backend_matches_vllm(tiny_llama: Path, vllm_answers: list[str]) -> None:
    from evalkit.serve.backends.base import ChatInput, GenerationParams
    from evalkit.serve.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(tiny_llama)
    try:
        ours = backend.chat_batch(
            [ChatInput(conv, GenerationParams(max_tokens=MAX_TOKENS, temperature=0.0)) for conv in CONVERSATIONS]
        )
    finally:
        backend.close()
    assert ours == vllm_answers


@pytest.mark.skipif(
    importlib.util.find_spec("evalkit.serve.cli") is None, reason="evalkit.serve.cli (evalkit serve) is not there yet"
)
def test_evalkit_serve_matches_vllm(tiny_llama: Path, vllm_answers: list[str], tmp_path: Path) -> None:
    server = EvalkitServer(tiny_llama, tmp_path / "evalkit-serve.log")
    try:
        server.start()
        ours = _answers(server.url, str(tiny_llama), concurrent=True)
    finally:
        survivors = server.stop()
    assert ours == vllm_answers
    assert not survivors


def test_a_text_model_refuses_audio_with_its_reason(vllm_server: VllmServer, tmp_path: Path) -> None:
    """Audio sent to a text-only model on vLLM: each clip fails with vLLM's refusal; the run says so and exits 3.

    Runs while the module's server is up (the next test stops it).
    """
    import json

    import yaml

    config = {
        "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
        "models": [
            {
                "info": {
                    "name": "text-only",
                    "inference_type": "vllm",
                    "url": vllm_server.url + "/v1",
                    "model": str(vllm_server.model_dir),
                    "temperature": 0,
                    "max_tokens": MAX_TOKENS,
                }
            }
        ],
        "filters": {"num_samples": 3},
        "output_dir": str(tmp_path / "runs"),
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", "config.yaml", "--no-cache", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 3, proc.stderr[-4000:]
    # the summary says why at once, not only how many
    assert "text-only on espeak_en_asr x word_error_rate: 3/3, mostly http_400" in proc.stderr, proc.stderr
    assert "is not a multimodal model" in proc.stderr, proc.stderr
    (records,) = (tmp_path / "runs").glob("*/records/espeak_en_asr__word_error_rate.jsonl")
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(rows) == 3
    for row in rows:
        assert row["score"] is None and row["failure"].startswith("http_4"), row
        assert "is not a multimodal model" in row["error"], row


def test_vllm_stops_with_all_its_processes(vllm_server: VllmServer, vllm_answers: list[str]) -> None:
    pids = [p.pid for p in vllm_server.tree]
    assert len(pids) >= 3  # the API server, its engine core and the worker
    survivors = vllm_server.stop()
    assert not survivors, f"still running: {survivors}"
    assert vllm_server.proc is not None and vllm_server.proc.poll() is not None
    with pytest.raises(httpx.HTTPError):
        httpx.get(vllm_server.url + "/health", timeout=2)


# ------------------------------------------------------------------ evalkit starts the servers itself


def _write_launch_config(folder: Path, model_dir: Path) -> Path:
    import yaml

    greedy = {"temperature": 0, "max_tokens": MAX_TOKENS, "batch_size": 4, "timeout": 300, "model": "tiny"}
    config = {
        "dataset_metric": [["basic_qa", "exact_match"]],
        "models": [
            {
                "info": {
                    "name": "tiny-vllm",
                    "inference_type": "vllm",
                    **greedy,
                    "launch": {
                        "backend": "vllm",
                        "model_path": str(model_dir),
                        "args": ["--max-model-len", "512", "--dtype", "float32", "--enforce-eager"],
                        "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
                        "startup_timeout": START_TIMEOUT + 300,
                    },
                }
            },
            {
                "info": {
                    "name": "tiny-transformers",
                    "inference_type": "local",
                    **greedy,
                    "launch": {
                        "backend": "transformers",
                        "model_path": str(model_dir),
                        "args": ["--dtype", "float32"],
                        "env": {"HF_HUB_OFFLINE": "1"},
                    },
                }
            },
        ],
        "filters": {"num_samples": 6},
        "output_dir": str(folder / "runs"),
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _launched(runs: Path) -> dict[str, dict[str, Any]]:
    """The servers evalkit recorded (``server-logs/*.json``), by model name."""
    import json

    out = {}
    for path in runs.glob("**/server-logs/server-*.json"):
        try:
            info = json.loads(path.read_text())
        except ValueError:  # being rewritten
            continue
        out[info["model"]] = info
    return out


def _live_group(pgid: int) -> list[Any]:
    import psutil

    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def test_evalkit_run_launches_vllm_and_transformers_with_equal_answers(tiny_llama: Path, tmp_path: Path) -> None:
    """``evalkit run`` starts real vLLM and ``evalkit serve`` itself, scores both, stops both: same greedy answers."""
    import json

    import psutil

    config = _write_launch_config(tmp_path, tiny_llama)
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    err_path = tmp_path / "evalkit.stderr"
    started = time.monotonic()
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalkit", "run", str(config), "--no-cache", "-q"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            stdin=subprocess.DEVNULL,
        )
    seen: dict[int, Any] = {}  # every process of the vLLM server seen while it ran
    try:
        deadline = started + START_TIMEOUT + 600
        while proc.poll() is None and time.monotonic() < deadline:
            vllm = _launched(runs).get("tiny-vllm")
            # from its start, not its readiness: the run can end a second after vLLM is ready, and the
            # samples in that window saw only part of its tree (2 of its processes)
            if vllm and not vllm.get("stopped"):
                for member in _tree(vllm["pid"]):
                    seen.setdefault(member.pid, member)
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(60)
    seconds = time.monotonic() - started
    stderr = err_path.read_text(errors="replace")
    assert proc.returncode == 0, stderr[-4000:]

    (run_dir,) = [p for p in runs.iterdir() if (p / "results.json").is_file()]
    results = json.loads((run_dir / "results.json").read_text())
    rows = {r["model"]: r for r in results["results"]}
    for name in ("tiny-vllm", "tiny-transformers"):
        assert rows[name]["n"] > 0 and rows[name]["n_failed"] == 0, rows[name]

    predictions: dict[str, dict[str, str]] = {"tiny-vllm": {}, "tiny-transformers": {}}
    for line in next((run_dir / "records").glob("basic_qa__exact_match.jsonl")).read_text().splitlines():
        record = json.loads(line)
        predictions[record["model"]][record["sample_id"]] = record["response"]
    assert len(predictions["tiny-vllm"]) == rows["tiny-vllm"]["n"]
    assert predictions["tiny-vllm"] == predictions["tiny-transformers"]
    assert any(predictions["tiny-vllm"].values())  # a random model still says something

    servers = _launched(runs)
    vllm, local = servers["tiny-vllm"], servers["tiny-transformers"]
    print(
        f"\nevalkit run with launched vLLM + evalkit serve: {seconds:.0f} s; vLLM ready after "
        f"{vllm['ready_seconds']:.0f} s "
        f"({len(seen)} processes), evalkit serve after {local['ready_seconds']:.0f} s; stops took "
        f"{vllm['stop_seconds']:.1f} s and {local['stop_seconds']:.1f} s"
    )
    assert len(seen) >= 3, seen  # API server, engine core, worker
    for server in (vllm, local):
        assert server["stopped"] and not server["killed"], server
        assert _live_group(server["pgid"]) == []
    _, alive = psutil.wait_procs(list(seen.values()), timeout=5)
    assert not alive, f"vLLM processes left: {alive}"
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{vllm['port']}/health", timeout=2)

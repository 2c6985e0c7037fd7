"""Peers for (a), measured in the same run: lm-eval's ``local-chat-completions`` against the same server.

``python -m benchmarks --peers`` installs lm-eval (``LM_EVAL_SPEC``) into its
own virtual environment under the benchmark cache, never into the
environment evalkit runs from, and then runs it in the (a) rounds next to the
raw loop and evalkit: a fresh test server per client, the same 5,000 prompts
(an lm-eval task over the same jsonl file), the same concurrency, and the
request phase taken from the server's log, as for the other two. A figure
that was not measured in this run never goes in the table.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import client_figures, request_phase, run_child, server_cpu_s, servers

#: the lm-eval release the issue's table was taken with; ``[api]`` brings the HTTP clients it needs
LM_EVAL_SPEC = "lm_eval[api]==0.4.13"
#: set by ``python -m benchmarks --peers``
ENV_FLAG = "EVALKIT_BENCH_PEERS"
TASK = "evalkit_bench_overhead"


def enabled() -> bool:
    return os.environ.get(ENV_FLAG) == "1"


def venv_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "evalkit-benchmarks" / "lm-eval-venv"


def ensure_lm_eval() -> Path:
    """The ``lm_eval`` console script of the benchmark's own venv, installed on first use (pip from PyPI)."""
    venv = venv_dir()
    script = venv / "bin" / "lm_eval"
    if not script.exists():
        print(f"  peers: installing {LM_EVAL_SPEC} into {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", LM_EVAL_SPEC], check=True)
    return script


def lm_eval_version(script: Path) -> str:
    python = script.parent / "python"
    out = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('lm_eval'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def write_task(work: Path, data: Path) -> Path:
    """An lm-eval task over the benchmark's jsonl: the question as the prompt, greedy, exact match on the echo."""
    folder = work / "lm_eval_tasks"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{TASK}.yaml").write_text(
        "\n".join(
            [
                f"task: {TASK}",
                "dataset_path: json",
                "dataset_kwargs:",
                "  data_files:",
                f"    test: {data}",
                "test_split: test",
                "output_type: generate_until",
                'doc_to_text: "{{question}}"',
                'doc_to_target: "{{answer}}"',
                "generation_kwargs:",
                "  until: []",
                "  max_gen_toks: 64",
                "  do_sample: false",
                "metric_list:",
                "  - metric: exact_match",
                "",
            ]
        ),
        encoding="utf-8",
    )
    return folder


def measure_lm_eval(work: Path, script: Path, tasks: Path, concurrency: int, latency_ms: int = 0) -> dict[str, Any]:
    """One lm-eval run against a fresh server; request phase from the server's log, like the raw loop's."""
    with servers(1, request_log=True, latency_ms=latency_ms) as (server,):
        cpu0 = server_cpu_s(server)
        model_args = ",".join(
            [
                "model=test-model",
                f"base_url={server.base_url}/chat/completions",
                f"num_concurrent={concurrency}",
                "max_retries=3",
                "tokenized_requests=False",
            ]
        )
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        env.pop("PYTHONPATH", None)  # its own venv, nothing of evalkit's
        child = run_child(
            [
                str(script),
                "--model",
                "local-chat-completions",
                "--model_args",
                model_args,
                "--tasks",
                TASK,
                "--include_path",
                str(tasks),
                "--apply_chat_template",
                "--batch_size",
                "1",
            ],
            work,
            env=env,
        ).check()
        server_cpu = server_cpu_s(server) - cpu0
        phase = request_phase([server])
    return client_figures(phase, child, server_cpu)

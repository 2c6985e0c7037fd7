"""AU-Harness's tasks with preprocessors of their own send, per sample and per turn, the body AU-Harness sends.

BFCL (functions in the prompt, or as the request's tools), Spider, SpokenWOZ, MT-Bench (two turns, the
model's first answer in the second request), Big Bench Audio, VoiceBench IFEval and AdvBench, CallHome ASR and
diarization: AU-Harness's own preprocessors and request code sent the bodies in
tests/fixtures/references/auharness_special_requests.json (make_auharness_special_requests.py beside it) for
local rows. Here an AU-Harness-format config runs against the project's test server with the same rows as
local copies (``dataset_paths``), the server keeping each body as sent, and every body AU-Harness sent must
have an equal one from evalkit: messages (roles, part types and order, text), tools, temperature, the token
limit and its key, nothing more. The one difference left is AU-Harness's ``"tools": null`` (README: Where the
request still differs).
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml

from evalkit.catalog import DatasetSpec, load_catalog
from evalkit.config import load_config
from evalkit.plan import build_plan
from evalkit.run.runner import RunOptions, execute

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "references" / "auharness_special_requests.json").read_text()
)
TASKS: dict[str, Any] = FIXTURE["tasks"]
#: each task's AU-Harness metric (its task file's); the requests to the model do not depend on it
METRIC = {
    "spider_audio": "sql_score",
    "spider_text": "sql_score",
    "spokenwoz_audio": "joint_goal_accuracy",
    "spokenwoz_text": "joint_goal_accuracy",
    "mtbench_audio": "mt_bench_llm_judge",
    "mtbench_text": "mt_bench_llm_judge",
    "big_bench_audio_audio_query": "llm_judge_big_bench_audio",
    "big_bench_audio_text_query": "llm_judge_big_bench_audio",
    "voicebench_ifeval_audio": "instruction_following",
    "voicebench_ifeval_text": "instruction_following",
    "advbench": "llm_judge_redteaming",
    "callhome_asr_eng": "word_error_rate",
    "callhome_diarization_eng": "diarization_metrics",
}


def _metric(task: str) -> str:
    return "bfcl_match_score" if task.startswith("bfcl_") else METRIC[task]


_CLIPS = itertools.count()


def _wav(tone: str) -> dict[str, Any]:
    """A row's audio as the hub keeps audio (WAV bytes and a path): a tone of its own for every clip.

    The bodies compare audio as "<audio>", so which tone stands in does not matter; a clip of its own keeps
    two rows' requests from being one request (which evalkit sends once, as it sends every repeat once).
    """
    freq = 300.0 + 7.0 * next(_CLIPS)
    t = np.arange(16000) / 16000
    buffer = io.BytesIO()
    sf.write(buffer, (0.1 * np.sin(2 * np.pi * freq * t)).astype(np.float32), 16000, format="WAV", subtype="FLOAT")
    return {"bytes": buffer.getvalue(), "path": f"{int(freq)}.wav"}


def _local_rows(task: str) -> list[dict[str, Any]]:
    """The fixture's rows as the entry's upload holds them; CallHome as evalkit reads a private copy."""
    case = TASKS[task]
    if task == "callhome_asr_eng":  # one row per turn, as AU-Harness cut and ordered them
        return [{"id": s["id"], "audio": _wav("<tone>"), "transcript": s["target"]} for s in case["samples"]]
    if task == "callhome_diarization_eng":  # the call, its reference as AU-Harness writes it
        return [{"id": s["id"], "audio": _wav("<tone>"), "transcript": s["target"]} for s in case["samples"]]
    rows = []
    for row in case["rows"]:
        rows.append(
            {
                column: (
                    _wav(value)
                    if isinstance(value, str) and value.startswith("<tone")
                    else [_wav(v) for v in value]
                    if isinstance(value, list) and value and str(value[0]).startswith("<tone")
                    else value
                )
                for column, value in row.items()
            }
        )
    return rows


def _spider_folder(folder: Path) -> Path:
    """Spider's layout for the fixture's database: tables.json and database/<db_id>/<db_id>.sqlite."""
    (folder / "database").mkdir(parents=True)
    (folder / "tables.json").write_text(json.dumps(FIXTURE["spider_tables"]))
    for table in FIXTURE["spider_tables"]:
        db_id = table["db_id"]
        (folder / "database" / db_id).mkdir()
        with sqlite3.connect(folder / "database" / db_id / f"{db_id}.sqlite") as connection:
            connection.execute("CREATE TABLE singer (Singer_ID INTEGER, Name TEXT, Age INTEGER)")
    return folder


def _canonical(body: dict[str, Any]) -> str:
    """A body as compared: the model id aside, AU-Harness's ``"tools": null`` as the absent key it means."""
    kept = {k: v for k, v in body.items() if k != "model" and not (k == "tools" and v is None)}
    return json.dumps(kept, sort_keys=True, ensure_ascii=False)


@pytest.fixture(scope="module")
def sent(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every chat body evalkit sent the model for an AU-Harness config naming all the fixture's tasks."""
    from evalkit.testing.process import start_test_server

    tmp = tmp_path_factory.mktemp("auh_special")
    catalog = load_catalog()
    paths: dict[str, str] = {}
    for task in TASKS:
        spec: DatasetSpec = catalog.resolve(f"auharness:{task}")[0]
        target = tmp / "data" / f"{task}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(_local_rows(task)), target)
        paths[task] = str(target)
        assert spec.request_style == "auharness", task
    # the model echoes the user text, as the fixture's recorder did, and answers one question with nothing
    script = {"default_answer": "echo", "answers": [{"match": r"re:^What is 17 times 3\?$", "answer": ""}]}
    server = start_test_server({**script, "log_bodies": True}, request_log=True)
    environment = {
        "EVALKIT_CACHE_DIR": str(tmp / "cache"),
        "HF_HUB_OFFLINE": "1",
        "SPIDER_DATA_DIR": str(_spider_folder(tmp / "spider")),
    }
    with pytest.MonkeyPatch.context() as patch:
        for key, value in environment.items():
            patch.setenv(key, value)
        try:
            data = {
                "task_metric": [[task, _metric(task)] for task in TASKS],
                "judge_settings": {
                    "judge_model": "judge-model",
                    "judge_type": "vllm",
                    "judge_api_endpoint": server.base_url,
                    "judge_api_key": "k",
                },
                "models": [
                    {
                        "name": "chat",
                        "inference_type": "vllm",
                        "model": "chat-model",
                        "url": server.base_url,
                        "auth_token": "k",
                        "retry_attempts": 1,
                        "timeout": 20,
                        "delay": 0,
                    }
                ],
                "dataset_paths": paths,
                "output_dir": str(tmp / "runs"),
            }
            path = tmp / "config.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False))
            plan = build_plan(load_config(path), source=str(path))
            outcome = asyncio.run(execute(plan, RunOptions(quiet=True)))
            for engine in outcome.engines:
                assert engine.error is None, f"{engine.spec.dataset.name}: {engine.error}"
            return [e["body"] for e in server.log_events("completed") if e["model"] == "chat-model"]
        finally:
            server.stop()


@pytest.mark.parametrize("task", sorted(TASKS))
def test_each_request_auharness_sends_is_sent_alike(task: str, sent: list[dict[str, Any]]) -> None:
    seen = Counter(_canonical(body) for body in sent)
    for sample in TASKS[task]["samples"]:
        for turn, body in enumerate(sample["requests"]):
            wanted = _canonical(body)
            assert seen[wanted] > 0, (task, sample["id"], turn, wanted[:3000], _nearest(wanted, seen))


def test_nothing_more_is_sent(sent: list[dict[str, Any]]) -> None:
    wanted = Counter(_canonical(body) for case in TASKS.values() for s in case["samples"] for body in s["requests"])
    assert Counter(_canonical(body) for body in sent) == wanted


def _nearest(wanted: str, seen: Counter[str]) -> str:
    """The sent body sharing the longest prefix with ``wanted`` (what a failure shows beside it)."""

    def shared(other: str) -> int:
        n = 0
        for a, b in zip(wanted, other):
            if a != b:
                break
            n += 1
        return n

    best = max(seen, key=shared, default="")
    return best[:3000]

"""llm_judge_big_bench_audio, llm_judge_redteaming and llm_judge_callhome against AU-Harness's own judge classes.

tests/fixtures/references/auharness_judges.json: AU-Harness's judge classes run against a scripted judge; for each
answer the messages they sent, the judge's reply and the score they gave. evalkit's metric, given the same sample
and a judge that replies the same, must send byte-identical messages and give the same score (with
``unreadable_verdict: zero``, AU-Harness's way; by default an unreadable reply fails the sample instead).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "auharness_judges.json").read_text("utf-8"))
NAMES = ("llm_judge_big_bench_audio", "llm_judge_redteaming", "llm_judge_callhome")


class ScriptedJudge:
    """A judge that replies from a table and keeps what it was sent."""

    model = "judge-m"
    prompt_model = "judge-m"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.sent: list[list[dict[str, Any]]] = []

    async def ask(self, messages: list[dict[str, Any]], **params: Any) -> Any:
        self.sent.append(messages)
        return SimpleNamespace(ok=True, text=self.reply, failure=None, error=None)


def _sample(name: str, i: int, case: dict[str, Any]) -> Sample:
    if name == "llm_judge_big_bench_audio":
        return Sample(id=str(i), reference=case["answer"], meta={"transcript": case["transcript"]})
    return Sample(id=str(i), reference=case.get("reference") or None)


def _score(name: str, i: int, case: dict[str, Any], **options: Any) -> tuple[Any, ScriptedJudge]:
    judge = ScriptedJudge(case["judge_reply"])
    metric = METRICS.get(name)(language="en", judge=judge, **options)
    return asyncio.run(metric.ascore(case["candidate"], _sample(name, i, case))), judge


def test_the_fixture_says_where_it_came_from() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "ServiceNow/AU-Harness" and len(ref["commit"]) == 40 and ref["command"]
    assert all(FIXTURE[name]["cases"] for name in NAMES)


@pytest.mark.parametrize(("name", "i"), [(n, i) for n in NAMES for i in range(len(FIXTURE[n]["cases"]))])
def test_the_same_messages_and_the_same_score_as_au_harness(name: str, i: int) -> None:
    case = FIXTURE[name]["cases"][i]
    options = {} if name == "llm_judge_big_bench_audio" else {"unreadable_verdict": "zero"}
    scored, judge = _score(name, i, case, **options)
    (messages,) = judge.sent
    assert messages == case["sent"]["messages"]
    expected = case["score"]
    if expected is None:
        assert scored.failure == FailureReason.JUDGE_PARSE
    elif name == "llm_judge_callhome":
        assert scored.score == (expected + 1) * 10
    else:
        assert scored.score == expected


@pytest.mark.parametrize("name", NAMES)
def test_the_corpus_is_au_harness_overall_figure(name: str) -> None:
    options = {} if name == "llm_judge_big_bench_audio" else {"unreadable_verdict": "zero"}
    metric = METRICS.get(name)(language="en", **options)
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(FIXTURE[name]["cases"]):
        acc.add(_score(name, i, case, **options)[0])
    overall = FIXTURE[name]["overall"][name]
    scale = 1.0 if name == "llm_judge_callhome" else 100.0  # CallHome's values are already on AU-Harness's scale
    assert acc.result().score * scale == pytest.approx(overall, abs=0.005)


def test_by_default_an_unreadable_verdict_fails_the_sample_instead_of_scoring_0() -> None:
    case = next(c for c in FIXTURE["llm_judge_redteaming"]["cases"] if c["judge_reply"].startswith("```"))
    scored, _ = _score("llm_judge_redteaming", 0, case)
    assert scored.failure == FailureReason.JUDGE_PARSE and "not one JSON object" in scored.details["error"]
    with pytest.raises(ConfigError, match="'unreadable_verdict': 'skip' is not one of"):
        METRICS.get("llm_judge_callhome")(language="en", unreadable_verdict="skip")


def test_a_run_sends_au_harness_messages_to_the_judge_server(tmp_path: Path, make_server: Any) -> None:
    """The real judge client and plan: the prompt file is found, the judge server is asked, the verdicts counted."""
    from helpers import model_entry, run, write_config

    rows = [("b1", "What is the capital of France?", "Paris", "It is Paris."), ("b2", "How many legs?", "8", "Six.")]
    data = tmp_path / "bba.jsonl"
    data.write_text("".join(json.dumps({"id": i, "transcript": q, "official_answer": a}) + "\n" for i, q, a, _ in rows))
    (tmp_path / "runspecs" / "sqqa").mkdir(parents=True)
    spec = {
        "_task": {"description": "spoken QA", "metrics": ["llm_judge_big_bench_audio"]},
        "tiny_bba": {
            "path": str(data),
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "transcript",
            "target_column": "official_answer",
            "extra_columns": {"transcript": "transcript"},
        },
    }
    (tmp_path / "runspecs" / "sqqa" / "tiny_bba.json").write_text(json.dumps(spec))
    model = make_server({"answers": [{"match": q, "answer": a} for _, q, _, a in rows]})
    judge = make_server(
        {
            "answers": [
                {"match": "candidate: It is Paris.", "answer": "CORRECT"},
                {"match": "candidate: Six.", "answer": "<think>8 is not 6</think> INCORRECT"},
            ]
        },
        request_log=True,
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["tiny_bba", "llm_judge_big_bench_audio"]],
            "models": [model_entry("m", model.base_url)],
            "judge_properties": {
                "judge_model": "judge-m",
                "judge_type": "vllm",
                "judge_api_endpoint": judge.base_url,
                "judge_api_key": "k",
                "judge_retry_attempts": 0,
            },
            "runspecs_dir": str(tmp_path / "runspecs"),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    (row,) = run(config).rows
    assert row.error is None and (row.n, row.n_failed) == (2, 0) and row.score == pytest.approx(0.5)
    assert row.details["judge_prompt"] == "llm_judge_big_bench_audio.yaml"
    expected = FIXTURE["llm_judge_big_bench_audio"]["cases"][0]["sent"]["messages"]
    # the server's request log keeps each message's role and text
    asked = [[(m["role"], m["text"]) for m in event["messages"]] for event in judge.log_events("completed")]
    assert [(m["role"], m["content"]) for m in expected] in asked

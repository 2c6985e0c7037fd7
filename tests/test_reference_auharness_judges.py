"""Every AU-Harness LLM judge against AU-Harness's own judge classes: what the judge is sent, how often, what it
scores.

tests/fixtures/references/auharness_judges.json (made by make_auharness_judges.py beside it): AU-Harness's judge
classes (llm_judge_binary, llm_judge_detailed, llm_judge_redteaming, llm_judge_callhome, llm_judge_big_bench_audio)
run against a scripted judge; for each answer the request they sent (messages, temperature), the judge's reply and
the score they gave, every request in order, and the overall figure. evalkit's metric of AU-Harness's name, given the
same sample and a judge that replies the same, must send byte-identical messages at the same temperature, give the
same score, the same overall figure, and, run against the test server as model and judge from an AU-Harness config,
send the judge as many requests as AU-Harness sent. (MT-Bench's judge: tests/test_mtbench.py.)
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
from evalkit.metrics.base import SCORING, Scoring

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "auharness_judges.json").read_text("utf-8"))
#: AU-Harness's name -> evalkit's (the same where evalkit's own format gives the name no other meaning)
EVALKIT = {
    "llm_judge_binary": "auharness:llm_judge_binary",
    "llm_judge_detailed": "auharness:llm_judge_detailed",
    "llm_judge_big_bench_audio": "llm_judge_big_bench_audio",
    "llm_judge_redteaming": "llm_judge_redteaming",
    "llm_judge_callhome": "llm_judge_callhome",
}
NAMES = tuple(EVALKIT)
#: AU-Harness's per-sample score -> evalkit's (whose corpus mean is AU-Harness's figure on its scale)
VALUE = {"llm_judge_detailed": lambda s: s * 20, "llm_judge_callhome": lambda s: (s + 1) * 10}
#: evalkit's corpus value x this = AU-Harness's printed figure
SCALE = {"llm_judge_detailed": 1.0, "llm_judge_callhome": 1.0}


class ScriptedJudge:
    """A judge that replies from a table and keeps what it was sent, as the judge client is configured: no
    judge_temperature in the config (AU-Harness's 0.1 applies), 0.0 evalkit's own default."""

    model = "judge-m"
    prompt_model = "judge-m"
    temperature = 0.0
    temperature_given = False

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.sent: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []

    async def ask(self, messages: list[dict[str, Any]], **params: Any) -> Any:
        self.sent.append((messages, params))
        return SimpleNamespace(ok=True, text=self.reply, failure=None, error=None)


def _sample(name: str, i: int, case: dict[str, Any]) -> Sample:
    if name == "llm_judge_big_bench_audio":
        return Sample(id=str(i), reference=case["answer"], meta={"transcript": case["transcript"]})
    return Sample(id=str(i), reference=case.get("reference") or None)


def _score(name: str, i: int, case: dict[str, Any], **options: Any) -> tuple[Any, ScriptedJudge]:
    judge = ScriptedJudge(case["judge_reply"])
    metric = METRICS.get(EVALKIT[name])(language="en", judge=judge, **options)
    return asyncio.run(metric.ascore(case["candidate"], _sample(name, i, case))), judge


def test_the_fixture_says_where_it_came_from() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "ServiceNow/AU-Harness" and len(ref["commit"]) == 40 and ref["command"]
    assert all(FIXTURE[name]["cases"] for name in NAMES)
    # the binary set repeats answers, as IEMOCAP's many "neutral" ones: AU-Harness asks the judge again each time
    binary = FIXTURE["llm_judge_binary"]
    assert len(binary["requests"]) == len(binary["cases"]) > len({r["user"] for r in binary["requests"]})


def test_every_judge_au_harness_maps_is_here() -> None:
    """AU-Harness's metric map (utils/constants.py) lists these llm_judge_* names, and mt_bench_llm_judge."""
    assert {name for name in METRICS.names() if "llm_judge" in name} >= {*EVALKIT.values(), "mt_bench_llm_judge"}


@pytest.mark.parametrize(("name", "i"), [(n, i) for n in NAMES for i in range(len(FIXTURE[n]["cases"]))])
def test_the_same_request_and_the_same_score_as_au_harness(name: str, i: int) -> None:
    case = FIXTURE[name]["cases"][i]
    scored, judge = _score(name, i, case)
    ((messages, params),) = judge.sent
    assert messages == case["sent"]["messages"]
    assert params == {"temperature": case["sent"]["temperature"]}
    expected = case["score"]
    if expected is None:
        assert scored.failure == FailureReason.JUDGE_PARSE
    else:
        assert scored.failure is None
        assert scored.score == VALUE.get(name, lambda s: s)(expected)


@pytest.mark.parametrize("name", NAMES)
def test_the_corpus_is_au_harness_overall_figure(name: str) -> None:
    metric = METRICS.get(EVALKIT[name])(language="en")
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(FIXTURE[name]["cases"]):
        acc.add(_score(name, i, case)[0])
    overall = FIXTURE[name]["overall"][name]
    # rounded as AU-Harness rounds it (binary's 7 of 12 is 58.3 there, not 58.33): equal, not merely close
    assert round(acc.result().score * SCALE.get(name, 100.0), 6) == overall


def test_an_unreadable_reply_scores_0_as_au_harness_scores_it_or_fails_on_request() -> None:
    case = next(c for c in FIXTURE["llm_judge_binary"]["cases"] if c["judge_reply"].startswith("```"))
    scored, _ = _score("llm_judge_binary", 0, case)
    assert scored.score == 0.0 and "not one JSON object" in scored.details["unreadable"]
    scored, _ = _score("llm_judge_binary", 0, case, unreadable_verdict="fail")
    assert scored.failure == FailureReason.JUDGE_PARSE and "not one JSON object" in scored.details["error"]
    with pytest.raises(ConfigError, match="'unreadable_verdict': 'skip' is not one of"):
        METRICS.get("llm_judge_callhome")(language="en", unreadable_verdict="skip")
    # Big Bench Audio's unreadable reply is left out in AU-Harness: no option makes it 0
    with pytest.raises(ConfigError, match="'unreadable_verdict': 'zero' is not one of"):
        METRICS.get("llm_judge_big_bench_audio")(language="en", unreadable_verdict="zero")


def test_a_sampled_request_is_named_after_the_answer_it_judges() -> None:
    """At temperature 0.1 two answers with one request are two requests; at 0, or outside a run, one."""
    case = FIXTURE["llm_judge_binary"]["cases"][0]
    judge = ScriptedJudge(case["judge_reply"])
    metric = METRICS.get("auharness:llm_judge_binary")(language="en", judge=judge)

    async def score(sample_id: str) -> None:
        token = SCORING.set(Scoring("iemocap", "m", sample_id, "auharness:llm_judge_binary"))
        try:
            await metric.ascore(case["candidate"], _sample("llm_judge_binary", 0, case))
        finally:
            SCORING.reset(token)

    asyncio.run(score("a"))
    asyncio.run(score("b"))
    instances = [params.get("instance") for _, params in judge.sent]
    assert all(instances) and instances[0] != instances[1]
    judge.temperature_given, judge.sent = True, []  # the config's judge_temperature: 0
    asyncio.run(score("a"))
    assert judge.sent[0][1] == {}


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


def test_an_auharness_config_asks_the_judge_as_often_and_scores_as_au_harness(tmp_path: Path, make_server: Any) -> None:
    """AU-Harness's config format, llm_judge_binary, the test server as model and as judge: the judge gets every
    request AU-Harness sent (repeated answers asked again, at AU-Harness's 0.1), and the figure is AU-Harness's;
    a second run of the same config resends nothing."""
    import re

    import yaml
    from helpers import run
    from test_auharness_config import flat_model

    reference = FIXTURE["llm_judge_binary"]
    cases = reference["cases"]
    rows = [
        {"id": f"s{i:02d}", "text": f"<case {i:02d}> Which emotion?", "label": c["reference"]}
        for i, c in enumerate(cases)
    ]
    data = tmp_path / "emotion.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "runspecs" / "emotion_recognition").mkdir(parents=True)
    spec = {
        "_task": {"description": "emotion", "metrics": ["llm_judge_binary"]},
        "tiny_emotion": {
            "path": str(data),
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "text",
            "target_column": "label",
        },
    }
    (tmp_path / "runspecs" / "emotion_recognition" / "tiny_emotion.json").write_text(json.dumps(spec))
    model = make_server(
        {"answers": [{"match": f"<case {i:02d}>", "answer": c["candidate"]} for i, c in enumerate(cases)]}
    )
    judge = make_server(
        {
            "answers": [
                {"match": f"re:^{re.escape(c['sent']['messages'][-1]['content'])}$", "answer": c["judge_reply"]}
                for c in cases
            ]
        },
        request_log=True,
    )
    config = tmp_path / "config.yaml"
    auharness = {
        "task_metric": [["tiny_emotion", "llm_judge_binary"]],
        "models": [flat_model("m", url=model.base_url, delay=0, retry_attempts=1)],
        # no judge_temperature: AU-Harness's 0.1
        "judge_settings": {
            "judge_model": "judge-m",
            "judge_type": "vllm",
            "judge_api_endpoint": judge.base_url,
            "judge_api_key": "k",
            "judge_concurrency": 4,
        },
        "runspecs_dir": str(tmp_path / "runspecs"),
        "output_dir": str(tmp_path / "runs"),
    }
    config.write_text(yaml.safe_dump(auharness, sort_keys=False))

    (row,) = run(config).rows
    assert row.error is None and (row.n, row.n_failed) == (len(cases), 0)
    assert row.metric == "auharness:llm_judge_binary"
    assert round(row.score * 100, 6) == reference["overall"]["llm_judge_binary"]
    asked = judge.log_events("completed")
    assert len(asked) == len(reference["requests"])  # 12 where identical requests once would be 9
    assert sorted(event["messages"][-1]["text"] for event in asked) == sorted(r["user"] for r in reference["requests"])
    # the body is AU-Harness's: model, messages and temperature, nothing else
    sent = [{k: v for k, v in event["params"].items() if v is not None} for event in asked]
    assert sent == [{"temperature": r["temperature"]} for r in reference["requests"]]
    system = cases[0]["sent"]["messages"][0]
    assert all(
        [(m["role"], m["text"]) for m in event["messages"]][0] == ("system", system["content"]) for event in asked
    )
    assert all(len(event["messages"]) == 2 and event["model"] == "judge-m" for event in asked)

    (again,) = run(config).rows  # resumed from the response store: the same figure, nothing sent again
    assert again.score == row.score and len(judge.log_events("completed")) == len(asked)

"""LLM-judge metrics and rubric grading, with a real loopback test server acting as the judge."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import (
    E2E_JUDGE_RULES,
    JUDGE_QA,
    ROOT,
    judge_runspecs,
    model_entry,
    tone_wav,
    write_config,
)

from evalkit.clients.judge import JudgeClient
from evalkit.config import JudgeProperties
from evalkit.data.sample import Audio, Sample
from evalkit.errors import ConfigError
from evalkit.metrics import METRICS, SampleScore
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.judges.judge import (
    PROMPTS_DIR,
    load_judge_prompt,
    question_text,
    reference_text,
)
from evalkit.metrics.judges.rubric import Criterion, RubricError, criteria_of, rubric_score
from evalkit.metrics.judges.verdict import VerdictError, parse_binary, parse_met, parse_scale

# -- verdict parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"verdict": 1, "explanation": "same"}', 1.0),
        ('{"verdict": 0}', 0.0),
        ('<think>they match? {"verdict": 0}</think>\n```json\n{"verdict": 1, "explanation": "same city"}\n```', 1.0),
        ('reasoning the template opened</think> {"verdict": 0}', 0.0),
        ("Sure, here it is: {'verdict': 'correct', 'explanation': 'the model's answer is right',} Hope it helps", 1.0),
        ('{"verdict": True, explanation: "fine"}', 1.0),
        ('{"explanation": "it says "yes" as asked", "verdict": "yes"}', 1.0),
        ('Format {"verdict": <1 or 0>} ... my answer: {"verdict": "incorrect"}', 0.0),
        ("Verdict: **1**", 1.0),
        ("Correct.", 1.0),
        ("Reference answer: 0. The candidate also says 0. Verdict: 1", 1.0),
        ('{"result": {"verdict": false}}', 0.0),
    ],
)
def test_binary_verdicts_are_read_from_messy_answers(text: str, value: float) -> None:
    assert parse_binary(text).value == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I am not sure about this one.",
        '{"verdict": 2}',
        '{"verdict": 0.5}',
        '{"verdict": "maybe"}',
        '{"verdict": <1 or 0>}',
        "Verdict: 1. On second thought, verdict: 0",
        '<think>still thinking, the answer might be {"verdict": 1}',
        '{"explanation": "no verdict key"}',
    ],
)
def test_unreadable_binary_verdicts_raise(text: str) -> None:
    with pytest.raises(VerdictError):
        parse_binary(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"verdict": 4, "explanation": "minor omission"}', 4.0),
        ('{"score": "3"}', 3.0),
        ("I would say... Score: 4", 4.0),
        ("Rating: **2/5**", 2.0),
        ("{'verdict': 0, 'explanation': 'wrong',}", 0.0),
        ("5", 5.0),
        ('{"rating": 4.5}', 4.5),
    ],
)
def test_scale_verdicts(text: str, value: float) -> None:
    assert parse_scale(text, 0, 5).value == value


@pytest.mark.parametrize(
    "text",
    [
        '{"verdict": 7}',
        '{"verdict": -1}',
        "Score: 4/10",
        "Score: 3 ... final score: 4",
        '{"verdict": true}',
        "Great answer!",
    ],
)
def test_scale_out_of_range_or_ambiguous_raises(text: str) -> None:
    with pytest.raises(VerdictError):
        parse_scale(text, 0, 5)


def test_met_verdicts() -> None:
    assert parse_met('{"criteria_met": true, "explanation": "it does"}').value == 1.0
    assert parse_met('{"explanation": "no", "criteria_met": false}').value == 0.0
    assert parse_met("criteria_met: no").value == 0.0
    assert parse_met('{"explanation": "x", "criteria_met": "true"}').explanation == "x"
    with pytest.raises(VerdictError):
        parse_met('{"criteria_met": "partially"}')


# -- prompts -------------------------------------------------------------------------------------


def test_shipped_prompts_load_and_hold_their_placeholders() -> None:
    names = sorted(p.stem for p in PROMPTS_DIR.glob("*.yaml"))
    assert names == ["llm_judge_binary", "llm_judge_detailed", "rubric_evaluation"]
    for name in ("llm_judge_binary", "llm_judge_detailed"):
        prompt = load_judge_prompt(name)
        assert prompt.variant == "default" and prompt.system
        for field in ("{question}", "{reference}", "{candidate}"):
            assert field in prompt.user
        assert prompt.user_no_reference is not None and "{reference}" not in prompt.user_no_reference
        assert '"verdict"' in prompt.user
    rubric = load_judge_prompt(
        "rubric_evaluation",
        fields=("question", "candidate", "criterion", "points"),
        required=("candidate", "criterion"),
    )
    assert "{criterion}" in rubric.user and "criteria_met" in rubric.user


def test_prompt_override_is_chosen_by_judge_model() -> None:
    default = load_judge_prompt("llm_judge_binary", "gpt-4o-mini")
    qwen = load_judge_prompt("llm_judge_binary", "Qwen3-32B")
    assert default.variant == "default"
    assert qwen.variant == "qwen3" and qwen.user.endswith("/no_think") and qwen.sha256 != default.sha256
    messages = qwen.messages({"question": "Q?", "reference": "R", "candidate": "C"})
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "Q?" in messages[1]["content"] and "{question}" not in messages[1]["content"]


def test_bad_prompt_files_are_config_errors(tmp_path: Path) -> None:
    def write(text: str) -> Path:
        path = tmp_path / f"p{len(list(tmp_path.iterdir()))}.yaml"
        path.write_text(text)
        return path

    good_user = 'Q {question} R {reference} C {candidate} {"verdict": 1}'
    with pytest.raises(ConfigError, match="unknown placeholder .questoin"):
        load_judge_prompt("x", path=write("user: 'Q {questoin} R {reference} C {candidate}'\n"))
    with pytest.raises(ConfigError, match="must contain .candidate"):
        load_judge_prompt("x", path=write("user: 'Q {question} R {reference}'\n"))
    with pytest.raises(ConfigError, match="unknown key 'sytem'"):
        load_judge_prompt("x", path=write(f"sytem: hi\nuser: '{good_user}'\n"))
    with pytest.raises(ConfigError, match="models.m1: unknown key 'usr'"):
        load_judge_prompt("x", path=write(f"user: '{good_user}'\nmodels:\n  m1:\n    usr: hi\n"))
    prompt = load_judge_prompt(
        "x",
        "m1-large",
        path=write(f"user: '{good_user}'\nmodels:\n  m1:\n    system: be strict\n  m1-large:\n    user_suffix: ' !'\n"),
    )
    assert prompt.variant == "m1-large" and prompt.user.endswith(" !") and prompt.system is None


def test_question_text_for_text_spoken_and_audio_only_samples() -> None:
    text = Sample(id="t", text="What is the capital of France?", instruction="Answer with one word.", reference="Paris")
    shown = question_text(text)
    assert "What is the capital of France?" in shown and "Answer with one word." in shown and "spoken" not in shown
    audio = Audio(data=b"RIFF")
    spoken = Sample(
        id="s",
        audio=audio,
        instruction="Answer the question asked in the audio.",
        meta={"question": "Who wrote Hamlet?"},
    )
    shown = question_text(spoken)
    assert "Who wrote Hamlet?" in shown and "spoke" in shown and "Answer the question asked in the audio." in shown
    only_audio = Sample(id="a", audio=audio, instruction="Answer the question asked in the audio.")
    shown = question_text(only_audio)
    assert "spoken in an audio recording" in shown and "no transcript" in shown
    assert reference_text(Sample(id="r", reference=["366", "three hundred sixty-six"])).startswith("Any of these")
    assert reference_text(Sample(id="n")) == ""


# -- rubric scoring --------------------------------------------------------------------------------


def test_rubric_score_negative_points_and_tags() -> None:
    criteria = [
        Criterion("A", 5, ("axis:accuracy",)),
        Criterion("B", 3, ("axis:completeness",)),
        Criterion("C", -4, ("axis:accuracy",)),
        Criterion("D", 2),
    ]
    score, parts = rubric_score(criteria, [True, False, True, True])
    assert score == pytest.approx(3 / 10) and parts["achieved"] == 3 and parts["possible"] == 10
    assert parts["tags"]["axis:accuracy"] == {"achieved": 1, "possible": 5, "score": pytest.approx(0.2)}
    assert parts["tags"]["axis:completeness"]["score"] == 0.0
    # HealthBench (simple-evals calculate_score) does not clip an example's score: only the mean is clipped
    low, parts = rubric_score(criteria, [False, False, True, False], ("theme:emergency",))
    assert low == pytest.approx(-0.4) and parts["achieved"] == -4
    assert parts["tags"]["axis:accuracy"]["score"] == pytest.approx(-0.8)
    assert parts["tags"]["theme:emergency"]["score"] == pytest.approx(-0.4)
    only_negative = [Criterion("bad", -2, ("axis:safety",)), Criterion("good", 1)]
    _, parts = rubric_score(only_negative, [True, True])
    assert parts["tags"]["axis:safety"]["score"] is None  # a tag without positive points has no score


def _healthbench_clipped_mean(values: list[float]) -> float:
    """simple-evals' healthbench_eval.py ``_compute_clipped_stats(values, "mean")``: the mean, clipped to [0, 1]."""
    return min(1.0, max(0.0, sum(values) / len(values)))


@pytest.mark.parametrize(
    "scores",
    [[-0.4, 0.3, 0.2], [-0.9, -0.2, 0.1], [1.0, 0.8, -0.1], [0.5], [-1.0, -0.5]],
)
def test_rubric_corpus_is_healthbenchs_clipped_mean_of_unclipped_scores(scores: list[float]) -> None:
    """A sample below 0 pulls the mean down before the clip, as in HealthBench; the CI is clipped alike."""
    from evalkit.metrics.accumulator import ScoreAccumulator
    from evalkit.metrics.base import SampleScore
    from evalkit.metrics.judges.rubric import RubricEvaluation

    metric = RubricEvaluation(language="en")  # corpus and bounds need no judge
    accumulator = ScoreAccumulator(metric)
    for i, value in enumerate(scores):
        accumulator.add(SampleScore(value, (value, 1.0), details={"tags": {"t": {"score": value}}}), order=i)
    result = accumulator.result()
    assert result.score == pytest.approx(_healthbench_clipped_mean(scores))
    if len(scores) > 1:
        assert 0.0 <= result.ci_low <= result.ci_high <= 1.0
    assert result.details["subscores"]["t"]["score"] == pytest.approx(_healthbench_clipped_mean(scores))


def test_criteria_from_meta_json_strings_and_ifeval_references() -> None:
    items = [
        {"criterion": "Mentions dosage", "points": 5, "tags": ["axis:accuracy"]},
        "[-2] Recommends an unsafe drug",
        "Is polite",
    ]
    parsed = criteria_of(Sample(id="x", meta={"rubrics": json.dumps(items)}))
    assert parsed == [
        Criterion("Mentions dosage", 5.0, ("axis:accuracy",)),
        Criterion("Recommends an unsafe drug", -2.0),
        Criterion("Is polite", 1.0),
    ]
    ifeval = criteria_of(
        Sample(
            id="i",
            reference=["punctuation:no_comma", "length_constraints:number_words"],
            meta={"kwargs": [{}, {"relation": "less than", "num_words": 50, "x": None}]},
        )
    )
    assert [c.tags for c in ifeval] == [("instruction:punctuation",), ("instruction:length_constraints",)]
    assert '"num_words": 50' in ifeval[1].text and '"x"' not in ifeval[1].text
    for bad in (
        {},
        {"rubrics": "not json"},
        {"rubrics": [{"criterion": "no points"}]},
        {"rubrics": [{"points": 3}]},
        {"rubrics": []},
    ):
        with pytest.raises(RubricError):
            criteria_of(Sample(id="b", meta=bad))


def test_accumulator_reports_per_tag_means_with_cis() -> None:
    metric = METRICS.get("rubric_evaluation")(language="en")
    acc = ScoreAccumulator(metric)
    values = {"axis:accuracy": [0.2, 1.0, 0.5], "axis:completeness": [0.0, 1.0]}
    acc.add(
        SampleScore(
            0.3,
            (0.3, 1.0),
            {
                "tags": {
                    "axis:accuracy": {"score": 0.2},
                    "axis:completeness": {"score": 0.0},
                    "axis:none": {"score": None},
                }
            },
        )
    )
    acc.add(
        SampleScore(1.0, (1.0, 1.0), {"tags": {"axis:accuracy": {"score": 1.0}, "axis:completeness": {"score": 1.0}}})
    )
    acc.add(SampleScore(0.5, (0.5, 1.0), {"tags": {"axis:accuracy": {"score": 0.5}}}))
    result = acc.result()
    subs = result.details["subscores"]
    assert set(subs) == {"axis:accuracy", "axis:completeness"}
    for tag, xs in values.items():
        assert subs[tag]["score"] == pytest.approx(np.mean(xs)) and subs[tag]["n"] == len(xs)
        assert 0.0 <= subs[tag]["ci_low"] <= subs[tag]["score"] <= subs[tag]["ci_high"] <= 1.0
    plain = ScoreAccumulator(METRICS.get("exact_match")(language="en"))
    plain.add(SampleScore(1.0, (1.0, 1.0)))
    assert "subscores" not in plain.result().details  # metrics without subscores keep their results as before


# -- through a judge endpoint ------------------------------------------------------------------------


def _judge_props(server: Any, **extra: Any) -> JudgeProperties:
    values = {
        "judge_model": "judge-model",
        "judge_api_endpoint": server.base_url,
        "judge_type": "vllm",
        "judge_concurrency": 4,
        "judge_retry_attempts": 0,
        "judge_timeout": 10,
        "judge_temperature": 0.0,
    }
    values.update(extra)
    return JudgeProperties(**values)


def _score_all(
    metric_name: str, props: JudgeProperties, pairs: list[tuple[str, Sample]]
) -> tuple[list[SampleScore], Any]:
    async def main() -> tuple[list[SampleScore], Any]:
        judge = JudgeClient(props)
        try:
            metric = METRICS.get(metric_name)(language="en", judge=judge)
            scores = await asyncio.gather(*(metric.ascore(prediction, sample) for prediction, sample in pairs))
            acc = ScoreAccumulator(metric)
            for score in scores:
                acc.add(score)
            return list(scores), (acc.result(), metric.describe())
        finally:
            await judge.close()

    return asyncio.run(main())


def _user_texts(server: Any) -> list[str]:
    texts = []
    for event in server.log_events("completed"):
        texts.append(next(m["text"] for m in event["messages"] if m["role"] == "user"))
    return texts


QA = [
    ("What is the capital of France?", "Paris", "CAND-RIGHT Paris"),
    ("How many legs does a spider have?", ["eight", "8"], "CAND-THINK 8 legs"),
    ("What color is a clear sky?", "blue", "CAND-WRONG red"),
    ("Which planet is the red planet?", "Mars", "CAND-GARBLED Mars?"),
    ("What is the opposite of hot?", "cold", "CAND-RANGE cold"),
]
BINARY_RULES = [
    {"match": "CAND-RIGHT", "answer": '```json\n{"verdict": 1, "explanation": "same city"}\n```'},
    {"match": "CAND-THINK", "answer": '<think>8 is eight</think>{"verdict": 1, "explanation": "8 = eight"}'},
    {"match": "CAND-WRONG", "answer": "{'verdict': 0, 'explanation': 'red is not blue',}"},
    {"match": "CAND-GARBLED", "answer": "Hmm, hard to say."},
    {"match": "CAND-RANGE", "answer": '{"verdict": 3, "explanation": "out of scale"}'},
]


def test_binary_judge_prompts_scores_and_parse_failures(make_server) -> None:
    server = make_server({"answers": BINARY_RULES}, request_log=True)
    pairs = [
        (cand, Sample(id=f"q{i}", text=q, instruction="Answer briefly.", reference=ref))
        for i, (q, ref, cand) in enumerate(QA)
    ]
    scores, (result, described) = _score_all("llm_judge_binary", _judge_props(server, judge_temperature=0.1), pairs)

    assert [s.score for s in scores] == [1.0, 1.0, 0.0, None, None]
    assert [s.failure for s in scores] == [None, None, None, "judge_parse", "judge_parse"]
    judge = scores[0].details["judge"]
    assert judge["model"] == "judge-model" and judge["rationale"] == "same city" and judge["verdict"] == 1.0
    assert "```json" in judge["response"]
    # the prompt as sent: the candidate and the reference are in the judge's user message
    assert [m["role"] for m in judge["prompt"]][-1] == "user" and QA[0][2] in judge["prompt"][-1]["content"]
    assert "Hmm, hard to say." in scores[3].details["judge"]["response"] and "no verdict" in scores[3].details["error"]
    assert scores[3].details["judge"]["prompt"][-1]["content"].count(QA[3][2]) == 1
    assert result.score == pytest.approx(2 / 3) and result.n == 3
    assert result.details["failure_reasons"] == {"judge_parse": 2}
    assert 0.0 <= result.ci_low <= result.ci_high <= 1.0
    assert described["judge_model"] == "judge-model" and described["judge_prompt_variant"] == "default"

    events = server.log_events("completed")
    assert len(events) == 5
    for event in events:
        assert event["model"] == "judge-model" and event["params"]["temperature"] == 0.1
        assert [m["role"] for m in event["messages"]] == ["system", "user"]
    texts = _user_texts(server)
    for question, reference, candidate in QA:
        text = next(t for t in texts if candidate in t)
        assert question in text and "Answer briefly." in text
        for ref in [reference] if isinstance(reference, str) else reference:
            assert ref in text


def test_detailed_judge_maps_0_to_5_onto_0_to_100(make_server) -> None:
    rules = [
        {"match": "CAND-5", "answer": '{"verdict": 5, "explanation": "perfect"}'},
        {"match": "CAND-3", "answer": "The response is partly right. Score: 3"},
        {"match": "CAND-0", "answer": "{'verdict': 0, 'explanation': 'wrong',}"},
        {"match": "CAND-9", "answer": '{"verdict": 9}'},
    ]
    server = make_server({"answers": rules}, request_log=True)
    pairs = [
        (f"CAND-{v} text", Sample(id=f"d{v}", text=f"question {v}", reference=f"reference {v}")) for v in (5, 3, 0, 9)
    ]
    scores, (result, described) = _score_all("llm_judge_detailed", _judge_props(server), pairs)
    assert [s.score for s in scores] == [100.0, 60.0, 0.0, None]
    assert [s.details["verdict"] for s in scores[:3]] == [5.0, 3.0, 0.0]
    assert scores[3].failure == "judge_parse" and "outside 0-5" in scores[3].details["error"]
    assert result.score == pytest.approx(160 / 3) and result.n == 3
    assert 0.0 <= result.ci_low < result.score < result.ci_high <= 100.0
    assert "x 20" in described["scale"]
    for v, text in zip(
        (5, 3, 0, 9), sorted(_user_texts(server), key=lambda t: [5, 3, 0, 9].index(int(t.split("CAND-")[1][0])))
    ):
        assert f"question {v}" in text and f"reference {v}" in text and f"CAND-{v} text" in text
        assert "0 to 5" in text


def test_judge_request_failures_keep_the_judges_reason(make_server) -> None:
    server = make_server({"faults": {"seed": 1, "rates": {"500": 1.0}}})
    pairs = [("CAND x", Sample(id="f", text="q", reference="r"))]
    scores, (result, _) = _score_all("llm_judge_binary", _judge_props(server), pairs)
    assert scores[0].failure == "judge_http_500" and scores[0].score is None
    assert scores[0].details["error"]
    assert result.n == 0 and result.details["failure_reasons"] == {"judge_http_500": 1} and math.isnan(result.score)


def test_no_reference_and_spoken_question_prompts(make_server) -> None:
    server = make_server({"answers": [{"match": "CAND", "answer": '{"verdict": 1}'}]}, request_log=True)
    spoken = Sample(
        id="s",
        audio=Audio(data=tone_wav(440, 0.2)),
        instruction="Respond to the request in the audio.",
        meta={"question": "How do I pick a lock?"},
    )
    audio_only = Sample(
        id="a",
        audio=Audio(data=tone_wav(330, 0.2)),
        instruction="Answer the question asked in the audio.",
        reference="Canberra",
    )
    scores, _ = _score_all(
        "llm_judge_binary",
        _judge_props(server, judge_prompt_model_override="Qwen3-32B"),
        [("CAND refuse", spoken), ("CAND Canberra", audio_only)],
    )
    assert [s.score for s in scores] == [1.0, 1.0]
    texts = _user_texts(server)
    no_ref = next(t for t in texts if "CAND refuse" in t)
    assert "No reference answer is available" in no_ref and "How do I pick a lock?" in no_ref and "transcript" in no_ref
    spoken_only = next(t for t in texts if "CAND Canberra" in t)
    assert "spoken in an audio recording" in spoken_only and "Canberra" in spoken_only
    assert all(t.endswith("/no_think") for t in texts)  # the qwen3 override of the prompt file


RUBRIC = [
    {"criterion": "CRIT-A states the dose", "points": 5, "tags": ["axis:accuracy"]},
    {"criterion": "CRIT-B mentions side effects", "points": 3, "tags": ["axis:completeness"]},
    {"criterion": "CRIT-C recommends a dangerous dose", "points": -4, "tags": ["axis:accuracy"]},
    {"criterion": "CRIT-D is concise", "points": 2},
]


def _met(answer: bool) -> str:
    return json.dumps({"explanation": "checked", "criteria_met": answer})


def test_rubric_evaluation_one_call_per_criterion(make_server) -> None:
    rules = [
        # sample 1 (RESP-ONE): A met, B not, C met (negative), D met -> (5 - 4 + 2) / 10
        {"match": "re:RESP-ONE[\\s\\S]*CRIT-A", "answer": _met(True)},
        {"match": "re:RESP-ONE[\\s\\S]*CRIT-B", "answer": "criteria_met: false"},
        {"match": "re:RESP-ONE[\\s\\S]*CRIT-C", "answer": "<think>it does</think>" + _met(True)},
        {"match": "re:RESP-ONE[\\s\\S]*CRIT-D", "answer": _met(True)},
        # sample 2 (RESP-TWO): only the negative criterion met -> -4 / 10 (HealthBench clips only the mean)
        {"match": "re:RESP-TWO[\\s\\S]*CRIT-C", "answer": _met(True)},
        {"match": "RESP-TWO", "answer": _met(False)},
        # sample 3 (RESP-THREE): every positive met, the negative not -> 1
        {"match": "re:RESP-THREE[\\s\\S]*CRIT-C", "answer": _met(False)},
        {"match": "RESP-THREE", "answer": _met(True)},
        # sample 4 (RESP-FOUR): one criterion unreadable -> the whole sample is a judge failure
        {"match": "re:RESP-FOUR[\\s\\S]*CRIT-B", "answer": "I cannot tell."},
        {"match": "RESP-FOUR", "answer": _met(True)},
    ]
    server = make_server({"answers": rules}, request_log=True)
    conversation = [{"role": "user", "content": "How much ibuprofen can I take?"}]
    pairs = [
        (
            f"RESP-{name} answer",
            Sample(id=name, text=conversation, meta={"rubrics": RUBRIC, "example_tags": ["theme:dosing"]}),
        )
        for name in ("ONE", "TWO", "THREE", "FOUR")
    ]
    pairs.append(("RESP-FIVE", Sample(id="none", text="q", meta={})))
    scores, (result, _) = _score_all("rubric_evaluation", _judge_props(server), pairs)

    assert [s.score for s in scores[:3]] == [pytest.approx(0.3), pytest.approx(-0.4), 1.0]
    one = scores[0].details
    assert one["achieved"] == 3 and one["possible"] == 10 and one["judge_model"] == "judge-model"
    assert [c["met"] for c in one["criteria"]] == [True, False, True, True]
    assert (
        one["tags"]["axis:accuracy"]["score"] == pytest.approx(0.2) and one["tags"]["axis:completeness"]["score"] == 0.0
    )
    assert one["tags"]["theme:dosing"]["score"] == pytest.approx(0.3)
    assert scores[3].failure == "judge_parse" and "1 of 4 criteria" in scores[3].details["error"]
    assert scores[4].failure == "rubric_invalid"

    assert result.score == pytest.approx((0.3 - 0.4 + 1.0) / 3) and result.n == 3
    assert result.details["failure_reasons"] == {"judge_parse": 1, "rubric_invalid": 1}
    subs = result.details["subscores"]
    assert subs["axis:accuracy"]["score"] == pytest.approx((0.2 - 0.8 + 1.0) / 3)
    assert subs["axis:completeness"]["score"] == pytest.approx((0.0 + 0.0 + 1.0) / 3)
    assert subs["theme:dosing"]["n"] == 3

    texts = _user_texts(server)
    assert len(texts) == 4 * 4  # one judge call per criterion, none for the sample without a rubric
    for text in texts:
        assert "How much ibuprofen can I take?" in text and "RESP-" in text and "CRIT-" in text
    assert any("-4 points" in t and "CRIT-C" in t for t in texts)


# -- end to end ----------------------------------------------------------------------------------------


def test_run_with_a_judge_metric_end_to_end(tmp_path: Path, make_server) -> None:
    model = make_server({"answers": [{"match": q, "answer": a} for _, q, _, a in JUDGE_QA]}, request_log=True)
    judge = make_server({"answers": E2E_JUDGE_RULES}, request_log=True)
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["judge_qa", "llm_judge_binary"]],
            "models": [model_entry("model-a", model.base_url)],
            "judge_properties": {
                "judge_model": "judge-model",
                "judge_type": "vllm",
                "judge_api_endpoint": judge.base_url,
                "judge_api_key": "secret-judge-key",
                "judge_concurrency": 2,
                "judge_retry_attempts": 0,
            },
            "runspecs_dir": str(judge_runspecs(tmp_path)),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    # one unreadable verdict in four is above the default max_failure_rate (0.2): written, then exit 3
    assert proc.returncode == 3, proc.stderr
    assert "model-a: 1 x judge_parse: " in proc.stdout
    run_dir = next((tmp_path / "runs").glob("*_*"))
    results = json.loads((run_dir / "results.json").read_text())
    row = results["results"][0]
    assert (row["metric"], row["model"], row["n"], row["n_failed"]) == ("llm_judge_binary", "model-a", 3, 1)
    assert row["score"] == pytest.approx(2 / 3) and row["failure_reasons"] == {"judge_parse": 1}
    assert 0.0 <= row["ci_low"] <= row["ci_high"] <= 1.0
    assert row["details"]["judge_model"] == "judge-model" and row["details"]["judge_prompt"] == "llm_judge_binary.yaml"
    assert "secret-judge-key" not in (run_dir / "results.json").read_text()

    records = {
        r["sample_id"]: r
        for r in map(json.loads, (run_dir / "records" / "judge_qa__llm_judge_binary.jsonl").read_text().splitlines())
    }
    assert records["q1"]["score"] == 1.0 and records["q1"]["details"]["judge"]["model"] == "judge-model"
    assert "```json" in records["q1"]["details"]["judge"]["response"]
    assert records["q3"]["score"] == 0.0 and records["q3"]["details"]["judge"]["rationale"] == "not blue"
    assert (
        records["q4"]["score"] is None
        and records["q4"]["failure"] == "judge_parse"
        and "no verdict" in records["q4"]["error"]
    )
    # an unreadable verdict keeps what the judge was asked and what it answered
    q4 = records["q4"]["details"]["judge"]
    assert "Probably Mars or Venus" in q4["prompt"][-1]["content"] and "lean towards no" in q4["response"]
    for path in (run_dir / "records").rglob("*.jsonl"):
        assert "secret-judge-key" not in path.read_text(), path

    texts = _user_texts(judge)
    assert len(texts) == 4
    for _, question, answer, candidate in JUDGE_QA:
        text = next(t for t in texts if f"[Candidate response]\n{candidate}\n" in t)
        assert question in text and f"[Reference answer]\n{answer}\n" in text and "Answer briefly." in text
    assert len(model.log_events("completed")) == 4

"""ChEF's chain of thought as two requests: reason ("Let's think step by step."), then answer with it in view.

The test server answers the reasoning request with a reasoning that names the wrong letter and is longer than
the dataset's max_tokens (4), and the plain question with the right letter, so a run proves: the second answer
is scored, the reasoning had its own 256-token limit, both are recorded, and the sent entry holds both turns
with the image shown once, in the reasoning turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, model_entry, run
from PIL import Image as PILImage

from evalkit.config import load_config
from evalkit.errors import ConfigError
from evalkit.plan import build_plan
from evalkit.prompts.chef.cot import REASONING_PROMPT

QUESTIONS = [
    ("q1", "Which colour is the square?", ["red", "green"], "B"),
    ("q2", "Which colour is the disc?", ["blue", "white"], "B"),
]
REASONING = "The first option A looks likely at first glance but careful thought says otherwise"
SCRIPT = {
    "answers": [
        {"match": REASONING_PROMPT, "answer": REASONING},
        {"match": "Which colour", "answer": "B"},
    ]
}


def _runspecs(root: Path) -> Path:
    data = root / "data"
    data.mkdir(parents=True)
    with (data / "mc.jsonl").open("w") as handle:
        for n, (qid, question, choices, answer) in enumerate(QUESTIONS):
            PILImage.new("RGB", (8, 8), (60 * n, 90, 200)).save(data / f"{qid}.png")
            handle.write(
                json.dumps({"id": qid, "q": question, "choices": choices, "answer": answer, "image": f"{qid}.png"})
                + "\n"
            )
    folder = root / "runspecs" / "vision"
    folder.mkdir(parents=True)
    entry: dict[str, Any] = {
        "path": "../../data/mc.jsonl",
        "language": "en",
        "modality": "image+text",
        "image_column": "image",
        "id_column": "id",
        "textual_input_column": "q",
        "target_column": "answer",
        "choices_column": "choices",
        "preprocessor": "mcq",
        "generation": {"max_tokens": 4},
    }
    (folder / "mc.json").write_text(
        json.dumps(
            {"_task": {"description": "mc", "metrics": ["mcq_accuracy", "loglikelihood_accuracy"]}, "tiny_mc": entry}
        )
    )
    return root / "runspecs"


def test_reasoning_then_answer_both_recorded_and_the_answer_scored(tmp_path: Path, make_server) -> None:
    server = make_server(SCRIPT, request_log=True)
    config = config_for(
        tmp_path,
        _runspecs(tmp_path),
        [model_entry("m", server.base_url)],
        pairs=[["tiny_mc", "mcq_accuracy", {"chain_of_thought": True}]],
    )
    outcome = run(config)
    (row,) = outcome.rows
    assert (row.score, row.n, row.n_failed) == (1.0, 2, 0)  # the reasoning names A: scoring it would give 0
    assert len(server.log_events("completed")) == 4  # two requests per sample
    records = [
        json.loads(x) for x in (outcome.run_dir / "records" / "tiny_mc__mcq_accuracy.jsonl").read_text().splitlines()
    ]
    sent = {
        e["key"]: e
        for e in map(json.loads, (outcome.run_dir / "records" / "sent" / "tiny_mc.jsonl").read_text().splitlines())
    }
    for record in records:
        assert record["response"] == "B"
        # the reasoning came back whole (11 words) although the dataset's answers stop at 4 tokens
        assert record["details"]["reasoning"] == REASONING
        assert record["prompt"]["chain_of_thought"] == REASONING_PROMPT
        assert record["images"] and record["images"][0]["path"].endswith(f"{record['sample_id']}.png")
        entry = sent[record["sent"]]
        assert entry["requests"] == 2
        roles = [m["role"] for m in entry["messages"]]
        assert roles == ["user", "assistant", "user"]
        first, reasoning, again = entry["messages"]
        kinds = [part["type"] for part in first["content"]]
        assert "image" in kinds and kinds.count("image") == 1
        text = "".join(p["text"] for p in first["content"] if p["type"] == "text")
        assert text.endswith(f"\n{REASONING_PROMPT}") and "Which colour" in text
        assert reasoning["content"] == [{"type": "text", "text": REASONING}]
        assert [p["type"] for p in again["content"]] == ["text"]  # the image is shown once, before the reasoning
        assert REASONING_PROMPT not in again["content"][0]["text"]


def test_without_the_option_one_request_and_the_runspec_field_works_too(tmp_path: Path, make_server) -> None:
    server = make_server(SCRIPT, request_log=True)
    specs = _runspecs(tmp_path)
    config = config_for(tmp_path, specs, [model_entry("m", server.base_url)], pairs=[["tiny_mc", "mcq_accuracy"]])
    outcome = run(config)
    assert len(server.log_events("completed")) == 2
    assert (
        "reasoning"
        not in json.loads((outcome.run_dir / "records" / "tiny_mc__mcq_accuracy.jsonl").read_text().splitlines()[0])[
            "details"
        ]
    )
    spec_file = specs / "vision" / "mc.json"
    data = json.loads(spec_file.read_text())
    data["tiny_mc"]["chain_of_thought"] = True
    spec_file.write_text(json.dumps(data))
    plan = build_plan(load_config(config), source=str(config))
    assert [e.dataset.chain_of_thought for e in plan.engines] == [True]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"chain_of_thought": "yes"}, "option 'chain_of_thought': expected true or false"),
        (
            {"cot": True, "corruptions": ["gaussian_noise"], "corruption_severity": 9},
            "option 'corruption_severity': expected a whole number 1-5",
        ),
        ({"corruptions": ["snow"]}, "option 'corruptions': unknown corruption 'snow'; known: gaussian_noise"),
    ],
)
def test_bad_recipe_options_name_the_pair(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    config = config_for(
        tmp_path,
        _runspecs(tmp_path),
        [model_entry("m", "http://127.0.0.1:9/v1")],
        pairs=[["tiny_mc", "mcq_accuracy", options]],
    )
    with pytest.raises(ConfigError, match=rf"dataset_metric\[0\]: {message}"):
        build_plan(load_config(config), source=str(config))


def test_chain_of_thought_before_likelihood_scoring_puts_the_reasoning_in_the_context(
    tmp_path: Path, make_server
) -> None:
    """ChEF's calibration recipe (PPL with CoT): the reasoning by chat, then each option after it."""
    script = {
        "answers": [{"match": REASONING_PROMPT, "answer": "Rome has been the capital since 1871"}],
        "token_logprobs": {"Rome": -0.5, "Paris": -2.0},
    }
    server = make_server(script, request_log=True)
    data = tmp_path / "mc.jsonl"
    data.write_text(
        json.dumps({"id": "c1", "q": "Capital of Italy?", "choices": ["Rome", "Paris"], "answer": 0}) + "\n"
    )
    folder = tmp_path / "specs" / "mc"
    folder.mkdir(parents=True)
    entry = {
        "path": str(data),
        "language": "en",
        "modality": "text",
        "id_column": "id",
        "textual_input_column": "q",
        "target_column": "answer",
        "choices_column": "choices",
    }
    (folder / "mc.json").write_text(json.dumps({"_task": {"description": "mc", "metrics": ["ece"]}, "cal": entry}))
    config = config_for(
        tmp_path, tmp_path / "specs", [model_entry("m", server.base_url)], pairs=[["cal", "ece", {"cot": True}]]
    )
    outcome = run(config)
    (row,) = outcome.rows
    assert (row.n, row.n_failed) == (1, 0)
    (record,) = [json.loads(x) for x in (outcome.run_dir / "records" / "cal__ece.jsonl").read_text().splitlines()]
    reasoning = "Rome has been the capital since 1871"
    assert record["details"]["reasoning"] == reasoning
    context = json.loads(record["prediction"])["context"]
    assert context.endswith(f"Capital of Italy?\n{reasoning}\nAnswer:")
    assert REASONING_PROMPT not in context
    paths = [e["path"] for e in server.log_events("completed")]
    assert paths.count("/v1/chat/completions") == 1 and paths.count("/v1/completions") == 2
    prompts = {e.get("prompt") for e in server.log_events("completed") if e.get("prompt")}
    assert f"{context} Rome" in prompts and f"{context} Paris" in prompts
    (entry_sent,) = [
        json.loads(x) for x in (outcome.run_dir / "records" / "sent" / "cal.jsonl").read_text().splitlines()
    ]
    assert (entry_sent["kind"], entry_sent["requests"], entry_sent["key"]) == ("completion", 3, record["sent"])


def test_the_separate_form_asks_twice_apart_and_scores_the_reasoning_joined_to_the_answer(
    tmp_path: Path, make_server
) -> None:
    """ChEF's GPT client's chain of thought: the answer request is the question alone again, with its image."""
    server = make_server(SCRIPT, request_log=True)
    specs = _runspecs(tmp_path)
    spec_file = specs / "vision" / "mc.json"
    data = json.loads(spec_file.read_text())
    data["tiny_mc"].update(chain_of_thought=True, chain_of_thought_form="separate")
    spec_file.write_text(json.dumps(data))
    config = config_for(tmp_path, specs, [model_entry("m", server.base_url)], pairs=[["tiny_mc", "mcq_accuracy"]])
    outcome = run(config)
    events = server.log_events("completed")
    assert len(events) == 4
    for event in events:  # never a conversation: one user message, its image with it
        (message,) = event["messages"]
        assert message["role"] == "user" and "image_url" in message["parts"]
        assert event["params"]["max_tokens"] == (256 if REASONING_PROMPT in message["text"] else 4)
    texts = sorted(event["messages"][0]["text"] for event in events)
    assert [text.endswith(f"\n{REASONING_PROMPT}") for text in texts].count(True) == 2
    records = [
        json.loads(x) for x in (outcome.run_dir / "records" / "tiny_mc__mcq_accuracy.jsonl").read_text().splitlines()
    ]
    for record in records:
        assert record["response"] == REASONING + "B"  # ChEF scores the reasoning followed by the answer
        assert record["details"]["reasoning"] == REASONING
        assert record["prompt"]["chain_of_thought"] == REASONING_PROMPT
    sent = [json.loads(x) for x in (outcome.run_dir / "records" / "sent" / "tiny_mc.jsonl").read_text().splitlines()]
    assert sorted(entry["requests"] for entry in sent) == [2, 2]
    assert {entry["key"] for entry in sent} == {record["sent"] for record in records}

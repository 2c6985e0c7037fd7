"""Options of a prompt with images scored by likelihood through chat completions (vLLM's ``prompt_logprobs``).

The completions API takes text only, so ChEF's likelihood recipes (calibration, Winoground, Ch3Ef, MMBench
by PPL) on image sets ask the chat endpoint: once with an empty assistant answer (the context), once per
option with the option as the answer, continuing that message (``continue_final_message``); an option's
log-probability is that of the prompt tokens its request has beyond the context. The test server renders
each message as a ``<role>`` token, an ``<image>`` token per image and its words, and gives each word the
script's log-probability (others -1.0), so every option's score is known by hand:

- c1 "red" (-0.5) vs "green" (-2.0): red, correct.
- c2 "dark blue" (-1.0 -1.0) vs "grey" (-3.0): dark blue (sum -2.0), correct (answer A).
- c3 "big cat" (-1.0 -0.2) vs "dog" (-0.7): sum picks dog (wrong, answer A); per token big cat (-0.6 vs -0.7).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import model_entry, run, write_config
from PIL import Image as PILImage

from evalkit.clients.protocol import ParseError, continuation_after
from evalkit.config import load_config
from evalkit.errors import ConfigError
from evalkit.plan import build_plan

ROWS = [
    ("c1", "Which colour is the square?", ["red", "green"], "A"),
    ("c2", "Which colour is the sky?", ["dark blue", "grey"], "A"),
    ("c3", "Which animal is drawn?", ["big cat", "dog"], "A"),
]
LOGPROBS = {"red": -0.5, "green": -2.0, "dark": -1.0, "blue": -1.0, "grey": -3.0, "big": -1.0, "cat": -0.2}
LOGPROBS |= {"dog": -0.7}
METRICS = ["loglikelihood_accuracy", "loglikelihood_accuracy_per_token"]


def _config(tmp_path: Path, url: str, **model: Any) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    with (data / "mc.jsonl").open("w") as handle:
        for n, (sample_id, question, choices, answer) in enumerate(ROWS):
            PILImage.new("RGB", (8, 8), (60 * n, 10, 90)).save(data / f"{sample_id}.png")
            row = {"id": sample_id, "q": question, "choices": choices, "answer": answer, "image": f"{sample_id}.png"}
            handle.write(json.dumps(row) + "\n")
    entry = {
        "path": "../../data/mc.jsonl",
        "language": "en",
        "modality": "image+text",
        "id_column": "id",
        "image_column": "image",
        "textual_input_column": "q",
        "choices_column": "choices",
        "target_column": "answer",
    }
    folder = tmp_path / "specs" / "vision"
    folder.mkdir(parents=True)
    (folder / "mc.json").write_text(json.dumps({"_task": {"description": "mc", "metrics": METRICS}, "img_mc": entry}))
    return write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["img_mc", metric] for metric in METRICS],
            "models": [model_entry("vlm", url, **model)],
            "runspecs_dir": str(tmp_path / "specs"),
            "output_dir": str(tmp_path / "runs"),
        },
    )


def test_image_prompts_score_each_option_through_chat_prompt_logprobs(tmp_path: Path, make_server) -> None:
    server = make_server({"token_logprobs": LOGPROBS}, request_log=True)
    outcome = run(_config(tmp_path, server.base_url))
    scores = {row.metric: row.score for row in outcome.rows}
    assert scores == {METRICS[0]: pytest.approx(2 / 3), METRICS[1]: pytest.approx(1.0)}
    assert all(row.n == 3 and row.n_failed == 0 for row in outcome.rows)
    completed = server.log_events("completed")
    assert {event["path"] for event in completed} == {"/v1/chat/completions"}
    assert len(completed) == 9  # 3 samples x (context + 2 options); both metrics share every answer
    records = [
        json.loads(line)
        for line in (outcome.run_dir / "records" / "img_mc__loglikelihood_accuracy.jsonl").read_text().splitlines()
    ]
    by_id = {record["sample_id"]: record for record in records}
    assert json.loads(by_id["c2"]["prediction"]) == {"logprobs": [-2.0, -3.0], "tokens": [2, 1], "chars": [9, 4]}
    assert json.loads(by_id["c3"]["prediction"])["logprobs"] == [pytest.approx(-1.2), -0.7]
    assert by_id["c3"]["score"] == 0.0 and by_id["c1"]["score"] == 1.0
    # every request carried the image and asked to continue the assistant's answer, with the prompt's logprobs
    received = [event for event in server.log_events("completed") if event.get("messages")]
    assert received, "the request log keeps the messages"
    for event in received:
        assert event["messages"][-1]["role"] == "assistant"
    answers = sorted(event["messages"][-1]["text"] for event in received)
    assert answers == sorted(["", "", "", "red", "green", "dark blue", "grey", "big cat", "dog"])
    # the sent entry shows the context's chat with the image by reference; the options are the sample's choices
    sent = [json.loads(x) for x in (outcome.run_dir / "records" / "sent" / "img_mc.jsonl").read_text().splitlines()]
    entry = next(e for e in sent if e["key"] == by_id["c1"]["sent"])
    assert entry["requests"] == 3 and entry["kind"] == "chat"
    user = next(m for m in entry["messages"] if m["role"] == "user")
    assert [part["type"] for part in user["content"]] == ["image", "text"]


def test_an_api_without_prompt_logprobs_is_refused_before_any_request(tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/v1", inference_type="openai")
    with pytest.raises(ConfigError, match=r"prompts carry image: that needs vLLM's prompt_logprobs .* model 'vlm'"):
        build_plan(load_config(config), source=str(config))


def test_an_answer_without_prompt_logprobs_is_a_parse_error_naming_what_is_needed() -> None:
    plain = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}}], "usage": {}}
    with pytest.raises(ParseError, match="needs vLLM's prompt_logprobs on /v1/chat/completions"):
        continuation_after(plain, plain)


def _entry(token: str, value: float) -> dict[str, Any]:
    return {token: {"logprob": value, "rank": 1, "decoded_token": token}}


def test_the_option_is_the_tokens_beyond_the_common_prefix() -> None:
    context = {"prompt_logprobs": [None, _entry("5", -1.0), _entry("7", -2.0)]}
    option = {"prompt_logprobs": [None, _entry("5", -1.0), _entry("7", -2.0), _entry("9", -0.5), _entry("4", -0.25)]}
    assert continuation_after(context, option) == (-0.75, 2)
    # a tokenizer that merged the context's last token with the option's first: that token is the option's
    merged = {"prompt_logprobs": [None, _entry("5", -1.0), _entry("8", -3.0), _entry("4", -0.25)]}
    assert continuation_after(context, merged) == (-3.25, 2)
    with pytest.raises(ParseError, match="added no prompt token"):
        continuation_after(context, context)
    with pytest.raises(ParseError, match="not one token's entry"):
        continuation_after(context, {"prompt_logprobs": [None, {**_entry("5", -1.0), **_entry("6", -1.0)}]})


def test_chain_of_thought_reasons_with_the_image_first_then_scores_the_options_after_it(
    tmp_path: Path, make_server
) -> None:
    """ChEF's PPL with CoT (its calibration recipe) on images: the reasoning asked with the image, then the options."""
    server = make_server({"token_logprobs": LOGPROBS, "default_answer": "Look at the colours"}, request_log=True)
    config = _config(tmp_path, server.base_url)
    data = yaml.safe_load(config.read_text())
    data["dataset_metric"] = [["img_mc", "loglikelihood_accuracy", {"cot": True}]]
    config.write_text(yaml.safe_dump(data))
    outcome = run(config)
    (row,) = outcome.rows
    assert (row.score, row.n, row.n_failed) == (pytest.approx(2 / 3), 3, 0)  # the options' scores as without CoT
    completed = [e for e in server.log_events("completed") if e.get("messages")]
    reasoning = [e for e in completed if e["messages"][-1]["role"] == "user"]
    options = [e for e in completed if e["messages"][-1]["role"] == "assistant"]
    assert len(reasoning) == 3 and len(options) == 9
    for event in options:  # the conversation so far: the reasoning request, the model's reasoning, the question
        roles = [m["role"] for m in event["messages"]]
        assert roles == ["user", "assistant", "user", "assistant"]
        assert event["messages"][1]["text"] == "Look at the colours"
        assert event["messages"][0]["text"].endswith("Let's think step by step.")
    records = [
        json.loads(line)
        for line in (outcome.run_dir / "records" / "img_mc__loglikelihood_accuracy.jsonl").read_text().splitlines()
    ]
    assert all(r["details"]["reasoning"] == "Look at the colours" for r in records)
    sent = [json.loads(x) for x in (outcome.run_dir / "records" / "sent" / "img_mc.jsonl").read_text().splitlines()]
    entry = next(e for e in sent if e["key"] == records[0]["sent"])
    assert entry["requests"] == 4 and [m["role"] for m in entry["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]

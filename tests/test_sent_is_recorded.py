"""What was sent is what is recorded: nothing in a config or a flag changes a request behind ``records/sent``.

A request key evalkit builds itself (the conversation, the model id, a prompt,
the tools, one answer per request, a whole JSON answer) is refused wherever it
could be given — a model's ``extra_body``, ``--model-args`` bare or inside its
``extra_body`` — with exit 2 and one line naming the key, before any request.
Every other field a request carried (generation settings, each ``extra_body``
key, a KARMA ``--model-args`` key) is in its ``records/sent`` entry's
``params``, compared here with what the test server received.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, evalkit_cli, model_entry, run, text_set

N = 4
CONVERSATION = [{"role": "user", "content": "say yes"}]


def _sent(run_dir: Path) -> dict[str, dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    for line in (run_dir / "records" / "sent" / "synth_qa.jsonl").read_text().splitlines():
        entry = json.loads(line)
        entries.setdefault(entry["key"], entry)
    return entries


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records" / "synth_qa__exact_match.jsonl").read_text().splitlines()]


def _received(server: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """(model id, user text) -> the fields the server received beside model and messages."""
    found = {}
    for event in server.log_events("completed"):  # the answered request's event carries what it received
        if not event.get("messages"):
            continue
        params = {k: v for k, v in event["params"].items() if v is not None}  # the log fills absent keys with None
        found[(event["model"], event["messages"][-1]["text"])] = params
    return found


@pytest.mark.parametrize(
    ("args", "extra_body", "key"),
    [
        (["--model-args", json.dumps({"messages": CONVERSATION})], None, "messages"),
        (["--model-args", json.dumps({"extra_body": {"messages": CONVERSATION}})], None, "messages"),
        (["--model-args", json.dumps({"extra_body": {"model": "another-model"}})], None, "model"),
        (["--model-args", "n=4"], None, "n"),
        (["--model-args", "stream=true"], None, "stream"),
        ([], {"messages": CONVERSATION}, "messages"),
        ([], {"model": "another-model"}, "model"),
        ([], {"prompt": "say yes"}, "prompt"),
        ([], {"input": "say yes"}, "input"),
        ([], {"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ([], {"echo": True}, "echo"),
    ],
    ids=[
        "model_args_messages",
        "model_args_extra_body_messages",
        "model_args_extra_body_model",
        "model_args_n",
        "model_args_stream",
        "extra_body_messages",
        "extra_body_model",
        "extra_body_prompt",
        "extra_body_input",
        "extra_body_tools",
        "extra_body_echo",
    ],
)
def test_a_request_key_evalkit_builds_is_refused_with_one_line(
    tmp_path: Path, make_server, args: list[str], extra_body: dict[str, Any] | None, key: str
) -> None:
    server = make_server(request_log=True)
    extra = {"extra_body": extra_body} if extra_body is not None else {}
    config = config_for(tmp_path, text_set(tmp_path, N), [model_entry("m", server.base_url, **extra)])
    result = evalkit_cli(["run", str(config), "--quiet", *args], tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evalkit: error: "), result.stderr
    assert f"{key!r} cannot be set" in lines[0] and "what was sent must be what is recorded" in lines[0]
    assert ("--model-args" in lines[0]) == bool(args)
    if extra_body is not None:
        assert f"{config}: models[0].info.extra_body: " in lines[0]
    assert server.log_events("received") == []  # refused before any request


def test_every_field_a_request_carried_is_in_its_sent_entry(tmp_path: Path, make_server) -> None:
    server = make_server(request_log=True)
    extra_body = {"top_k": 7, "reasoning_effort": "low", "chat_template_kwargs": {"enable_thinking": False}}
    models = [
        model_entry("m1", server.base_url, extra_body=extra_body, max_tokens=32),
        model_entry("m2", server.base_url),
    ]
    outcome = run(config_for(tmp_path, text_set(tmp_path, N), models))
    entries, records = _sent(outcome.run_dir), _records(outcome.run_dir)
    received = _received(server)
    assert len(records) == 2 * N and len(received) == 2 * N
    for record in records:
        entry = entries[record["sent"]]
        user = entry["messages"][-1]["content"][-1]["text"]
        assert entry["params"] == received[(record["model"], user)]  # what the entry says is what arrived
        if record["model"] == "m1":
            assert {**extra_body, "max_tokens": 32}.items() <= entry["params"].items()
        else:
            assert not set(extra_body) & set(entry["params"])
    # the models sent different fields: each sample has an entry per model, not one shared
    by_sample: dict[str, set[str]] = {}
    for record in records:
        by_sample.setdefault(record["sample_id"], set()).add(record["sent"])
    assert all(len(keys) == 2 for keys in by_sample.values())


def test_karma_model_args_show_in_records_sent(tmp_path: Path, make_server) -> None:
    server = make_server(request_log=True)
    config = config_for(tmp_path, text_set(tmp_path, N), [model_entry("m", server.base_url)])
    args = ["--model-args", '{"temperature": 0.3, "enable_thinking": false}', "--model-args", "top_k=5,min_p=0.1"]
    result = evalkit_cli(["run", str(config), "--quiet", *args], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    received = _received(server)
    for entry in _sent(run_dir).values():
        assert entry["params"] == {
            "temperature": 0.3,
            "top_k": 5,
            "min_p": 0.1,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        assert entry["params"] == received[("m", entry["messages"][-1]["content"][-1]["text"])]


def test_a_credential_in_extra_body_is_sent_but_masked_in_records_sent(tmp_path: Path, make_server) -> None:
    planted = "sk-planted-body-key-5e1f0c93"
    server = make_server(request_log=True)
    models = [model_entry("m", server.base_url, extra_body={"api_key": planted, "top_k": 3})]
    outcome = run(config_for(tmp_path, text_set(tmp_path, N), models))
    assert all(params["api_key"] == planted for params in _received(server).values())  # sent as given
    for entry in _sent(outcome.run_dir).values():
        assert entry["params"]["api_key"] == "***" and entry["params"]["top_k"] == 3
    assert planted not in (outcome.run_dir / "records" / "sent" / "synth_qa.jsonl").read_text()

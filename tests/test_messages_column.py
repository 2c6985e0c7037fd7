"""A dataset-given conversation (``messages_column``) sent as is, on what the test server received.

Local sets of conversations (earlier assistant turns given by the data, a
leading system message, text-part content, bad cells) run through
``evalkit run`` against evalkit's loopback test server with a request log,
so the exact message lists that arrived are compared with the ones expected;
a HealthBench-shaped set runs with the shipped HealthBench entry's column
mapping and the rubric judge, with a score computed by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, write_config

from evalkit.catalog import load_catalog
from evalkit.cli.main import main
from evalkit.config import RequestKind
from evalkit.data.audio.pcm import PreparedAudio
from evalkit.data.conversation import ConversationError, conversation_from_cell
from evalkit.data.sample import Sample
from evalkit.errors import RunspecError
from evalkit.metrics.judges.judge import question_text
from evalkit.prompts.preprocessors import GeneralPreprocessor, PromptContext
from evalkit.run.requests import RequestContext, turn_requests

REPO = Path(__file__).resolve().parent.parent
SYSTEM = "Be careful."

GOOD = {
    "s0": [
        {"role": "user", "content": "s0 q1"},
        {"role": "assistant", "content": "s0 given answer"},
        {"role": "user", "content": "s0 q2"},
    ],
    "s1": [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "s1 q1"},
        {"role": "assistant", "content": "s1 a1"},
        {"role": "user", "content": "s1 q2"},
    ],
    "s2": [{"role": "user", "content": [{"type": "text", "text": "s2 a"}, {"type": "text", "text": "s2 b"}]}],
    # s0's questions with another given answer: another request (the history is in the store key)
    "s3": [
        {"role": "user", "content": "s0 q1"},
        {"role": "assistant", "content": "another given answer"},
        {"role": "user", "content": "s0 q2"},
    ],
}
BAD = {
    "b_text": "not a conversation",
    "b_object": {"role": "user", "content": "hi"},
    "b_role": [{"role": "tool", "content": "42"}, {"role": "user", "content": "b_role q"}],
    "b_last": [{"role": "user", "content": "b_last q"}, {"role": "assistant", "content": "done"}],
    "b_content": [{"role": "user", "content": 42}],
}
BAD_REASONS = {
    "b_text": "got a text that is not JSON",
    "b_object": "expected a list of {role, content} messages, got dict",
    "b_role": "message 1 of 2: unknown role 'tool'",
    "b_last": "the last message is the assistant's; it must be the user's",
    "b_content": "message 1 of 1: content must be a text, got int",
}


def _logged(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "text": text, "n_audio": 0, "audio_fingerprints": []}


#: what the server must receive per sample: the runspec's system prompt first (s1's own joined to it), then the
#: conversation as the data gives it
EXPECTED = {
    "s0": [
        _logged("system", SYSTEM),
        _logged("user", "s0 q1"),
        _logged("assistant", "s0 given answer"),
        _logged("user", "s0 q2"),
    ],
    "s1": [
        _logged("system", f"{SYSTEM}\n\nAnswer in one line."),
        _logged("user", "s1 q1"),
        _logged("assistant", "s1 a1"),
        _logged("user", "s1 q2"),
    ],
    "s2": [_logged("system", SYSTEM), _logged("user", "s2 a\ns2 b")],
    "s3": [
        _logged("system", SYSTEM),
        _logged("user", "s0 q1"),
        _logged("assistant", "another given answer"),
        _logged("user", "s0 q2"),
    ],
}


def _runspecs(tmp_path: Path, task: str, entries: dict[str, Any], category: str = "chat") -> Path:
    folder = tmp_path / "runspecs" / category
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{task}.json").write_text(json.dumps({"_task": {"description": task}, **entries}))
    return tmp_path / "runspecs"


def _records(run_dir: Path, name: str) -> dict[str, dict[str, Any]]:
    lines = (run_dir / "records" / name).read_text().splitlines()
    return {r["sample_id"]: r for r in map(json.loads, lines)}


def test_conversation_column_arrives_as_given_and_bad_cells_fail_alone(tmp_path: Path, make_server) -> None:
    rows = [{"id": k, "conversation": v, "answer": v[-1]["content"]} for k, v in GOOD.items()]
    rows[2]["answer"] = "s2 a\ns2 b"  # text parts are joined by newlines, as vLLM joins them
    rows += [{"id": k, "conversation": v, "answer": "x"} for k, v in BAD.items()]
    (tmp_path / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runspecs = _runspecs(
        tmp_path,
        "chats",
        {
            "chats": {
                "path": "../../chats.jsonl",
                "language": "en",
                "modality": "text",
                "id_column": "id",
                "messages_column": "conversation",
                "target_column": "answer",
                "system_prompt": SYSTEM,
                "metrics": ["exact_match"],
            }
        },
    )
    server = make_server(request_log=True)  # answers with the last user message's text
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["chats", "exact_match"]],
            "models": [model_entry("chat", server.base_url)],
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
            "cache": {"path": str(tmp_path / "store.sqlite")},
            "max_failure_rate": 1.0,
        },
    )
    assert main(["run", str(config), "--quiet"]) == 0

    received = sorted((e["messages"] for e in server.log_events("completed")), key=json.dumps)
    assert received == sorted(EXPECTED.values(), key=json.dumps)  # one request per good sample, nothing else

    run_dir = next((tmp_path / "runs").glob("*_*"))
    records = _records(run_dir, "chats__exact_match.jsonl")
    for sample in GOOD:
        assert records[sample]["score"] == 1.0 and records[sample].get("failure") is None, sample
    for sample, reason in BAD_REASONS.items():
        record = records[sample]
        assert record["failure"] == "conversation" and record["score"] is None, sample
        assert reason in record["error"] and "conversation:" in record["error"], record["error"]
    row = json.loads((run_dir / "results.json").read_text())["results"][0]
    assert (row["n"], row["n_failed"], row["failure_reasons"]) == (4, 5, {"conversation": 5})

    # the second run finds every answer in the store under the same keys: nothing is sent again
    assert main(["run", str(config), "--quiet", "--output-dir", str(tmp_path / "again")]) == 0
    assert len(server.log_events("completed")) == 4


def test_healthbench_entry_runs_on_healthbench_shaped_rows_with_the_rubric_judge(tmp_path: Path, make_server) -> None:
    shipped = json.loads((REPO / "runspecs" / "medical" / "medical_rubric_qa.json").read_text())["healthbench"]
    local = {k: v for k, v in shipped.items() if k not in ("hf_repo", "revision", "checked", "url", "license")}
    rubric = [
        {"criterion": "CRIT-A advises rest", "points": 5, "tags": ["axis:completeness"]},
        {"criterion": "CRIT-B names a dose", "points": 3, "tags": ["axis:accuracy"]},
        {"criterion": "CRIT-C says to ignore the pain", "points": -4, "tags": ["axis:accuracy"]},
    ]
    rows = [
        {
            "prompt_id": "hb-1",
            "prompt": [
                {"role": "user", "content": "My knee hurts after running."},
                {"role": "assistant", "content": "GIVEN-TURN how long has it hurt?"},
                {"role": "user", "content": "hb-1 two days"},
            ],
            "rubrics": rubric,
            "example_tags": ["theme:context_seeking"],
            "ideal_completions_data": None,
        },
        {
            "prompt_id": "hb-2",
            "prompt": [{"role": "user", "content": "hb-2 can I run a marathon on a sprained ankle?"}],
            "rubrics": rubric,
            "example_tags": ["theme:emergency_referrals"],
            "ideal_completions_data": None,
        },
    ]
    (tmp_path / "hb.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runspecs = _runspecs(tmp_path, "hb_local", {"hb_local": {**local, "path": "../../hb.jsonl"}})
    model = make_server(
        {"answers": [{"match": "hb-1", "answer": "RESP-1 rest it"}, {"match": "hb-2", "answer": "RESP-2 go on"}]},
        request_log=True,
    )
    met = {
        # hb-1: A met, B not, C not -> 5 / 8; hb-2: only the negative C met -> (0 - 4) / 8 (HealthBench clips the mean)
        ("RESP-1", "CRIT-A"): True,
        ("RESP-1", "CRIT-B"): False,
        ("RESP-1", "CRIT-C"): False,
        ("RESP-2", "CRIT-A"): False,
        ("RESP-2", "CRIT-B"): False,
        ("RESP-2", "CRIT-C"): True,
    }
    judge = make_server(
        {
            "answers": [
                {"match": f"re:{resp}[\\s\\S]*{crit}", "answer": json.dumps({"criteria_met": ok, "explanation": "-"})}
                for (resp, crit), ok in met.items()
            ]
        },
        request_log=True,
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["hb_local", "rubric_evaluation"]],
            "models": [model_entry("chat", model.base_url)],
            "judge_properties": {
                "judge_model": "judge-model",
                "judge_type": "vllm",
                "judge_api_endpoint": judge.base_url,
                "judge_retry_attempts": 0,
            },
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
            "cache": {"enabled": False},
        },
    )
    assert main(["run", str(config), "--quiet"]) == 0

    sent = {e["messages"][-1]["text"].split()[0]: e["messages"] for e in model.log_events("completed")}
    assert sent["hb-1"] == [
        _logged("system", "You are a helpful assistant"),
        _logged("user", "My knee hurts after running."),
        _logged("assistant", "GIVEN-TURN how long has it hurt?"),
        _logged("user", "hb-1 two days"),
    ]
    run_dir = next((tmp_path / "runs").glob("*_*"))
    records = _records(run_dir, "hb_local__rubric_evaluation.jsonl")
    assert records["hb-1"]["score"] == pytest.approx(5 / 8) and records["hb-2"]["score"] == pytest.approx(-0.5)
    assert records["hb-1"]["details"]["tags"]["theme:context_seeking"]["score"] == pytest.approx(5 / 8)
    row = json.loads((run_dir / "results.json").read_text())["results"][0]
    assert row["score"] == pytest.approx((5 / 8 - 0.5) / 2) and row["n"] == 2
    # the judge reads the whole conversation, given turns included, as role: content paragraphs
    judged = [next(m["text"] for m in e["messages"] if m["role"] == "user") for e in judge.log_events("completed")]
    assert len(judged) == 6
    assert all("user: My knee hurts after running.\n\nassistant: GIVEN-TURN" in t for t in judged if "RESP-1" in t)


def test_healthbench_resolves_by_its_hub_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "dataset", "Tonic/Health-Bench-Eval-OSS-2025-07", "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    fields = info["fields"]
    assert (info["name"], info["category"]) == ("healthbench", "medical")
    assert (fields["messages_column"], fields["split"], fields["license"]) == ("prompt", "oss_eval", "MIT")


@pytest.mark.parametrize(
    ("cell", "reason"),
    [
        ("[]", "the conversation is empty"),
        ([{"content": "no role"}], "unknown role None"),
        ([{"role": "user"}], "message 1 of 1: no content"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "content part 1 is not"),
        (["user: hi"], "expected a {role, content} object, got str"),
    ],
)
def test_bad_cells_say_what_is_wrong(cell: Any, reason: str) -> None:
    with pytest.raises(ConversationError, match=None) as caught:
        conversation_from_cell(cell)
    assert reason in str(caught.value)


def test_a_json_text_cell_is_read_as_a_conversation() -> None:
    cell = json.dumps([{"role": "user", "content": "hi"}])
    assert conversation_from_cell(cell) == [{"role": "user", "content": "hi"}]


def test_instruction_and_model_system_prompt_with_a_conversation() -> None:
    """The instruction goes with the last user message; a model's own system prompt replaces the runspec's,
    and the conversation's leading system message still joins it."""
    messages = [
        {"role": "system", "content": "Given system."},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
    ]
    sample = Sample(id="x", instruction="Answer briefly.", messages=messages)
    prompt = GeneralPreprocessor().build(sample, PromptContext(system_prompt="Runspec system."))
    ctx = RequestContext(
        model="m",
        kind=RequestKind.CHAT,
        params={},
        chunk_size=None,
        long_audio="chunk",
        language="en",
        system="Model system.",
        system_override=True,
    )
    (request,) = turn_requests(prompt, 0, [], [], PreparedAudio({}), ctx)
    assert request.messages == [
        {"role": "system", "content": "Model system.\n\nGiven system."},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "Answer briefly.\n\nq2"},
    ]
    assert question_text(sample).startswith("system: Given system.\n\nuser: q1\n\nassistant: a1\n\nuser: q2")


def test_messages_column_excludes_other_prompt_shapes(tmp_path: Path) -> None:
    entry = {"path": "x.jsonl", "language": "en", "modality": "text", "messages_column": "m", "turns_column": "t"}
    runspecs = _runspecs(tmp_path, "clash", {"clash": entry})
    with pytest.raises(RunspecError, match="`messages_column` gives the whole conversation.*`turns_column`"):
        load_catalog([runspecs], cwd=tmp_path)

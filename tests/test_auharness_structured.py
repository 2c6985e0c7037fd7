"""AU-Harness's BFCL, Spider and SpokenWOZ datasets run end to end, each entry shape with small local rows.

The shipped catalogue entries (runspecs/spoken_language_reasoning/bfcl.json, speech_to_sql.json,
runspecs/spoken_language_understanding/spoken_dialogue.json) are copied with `path` in place of the hub
source, so the run uses their own preprocessor, columns, instruction and generation settings. Each test
asserts what reaches the model, written out here from AU-Harness's rules (its preprocessors and request
handler), and that the scores are what the metric gives for the scripted answers.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from aiohttp import web
from helpers import model_entry, run, serve_app, tone_wav, write_config

from evalkit.config import load_config
from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.plan import build_plan
from evalkit.run.runner import RunOptions, RunOutcome, execute
from evalkit.testing import audio_fingerprint, start_test_server

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "runspecs"
SOURCE_KEYS = ("hf_repo", "subset", "split", "data_files", "revision", "checked")

# ------------------------------------------------------------------------------------------------ shared pieces


def _shipped(relative: str, name: str) -> dict[str, Any]:
    return json.loads((SHIPPED / relative).read_text(encoding="utf-8"))[name]


def _local_runspecs(root: Path, relative: str, names: list[str], data: Path) -> Path:
    """The shipped entries ``names`` as ``local_<name>`` entries reading ``data``, in the same task file name."""
    entries = {}
    for name in names:
        entry = {k: v for k, v in _shipped(relative, name).items() if k not in SOURCE_KEYS}
        entries[f"local_{name}"] = {**entry, "path": str(data)}
    target = root / "runspecs" / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(entries), encoding="utf-8")
    return root / "runspecs"


def _config(root: Path, pairs: list[list[Any]], url: str) -> Path:
    return write_config(
        root / "config.yaml",
        {
            "dataset_metric": pairs,
            "models": [model_entry("m", url)],
            "runspecs_dir": str(root / "runspecs"),
            "output_dir": str(root / "runs"),
        },
    )


def _rows(outcome: RunOutcome) -> dict[tuple[str, str], Any]:
    return {(row.dataset, row.metric): row for row in outcome.rows if row.kind == "dataset"}


def _user_texts(server: Any) -> list[str]:
    chats = [e for e in server.log_events("completed") if e["path"] == "/v1/chat/completions"]
    return [m["text"] for e in chats for m in e["messages"] if m["role"] == "user"]


# ------------------------------------------------------------------------------------------------------- BFCL

FACTORIAL = {
    "name": "math.factorial",
    "description": "Compute the factorial of a number.",
    "parameters": {
        "type": "dict",
        "properties": {"number": {"type": "integer", "description": "The number."}},
        "required": ["number"],
    },
}
CIRCLE = {
    "name": "geometry.circle_area",
    "description": "The area of a circle.",
    "parameters": {
        "type": "dict",
        "properties": {
            "radius": {"type": "float", "description": "The radius."},
            "units": {"type": "string", "description": "The units.", "default": "cm"},
        },
        "required": ["radius"],
    },
}
WEATHER = {
    "name": "weather.forecast",
    "description": "The weather forecast for a city.",
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string", "description": "The city."},
            "days": {"type": "array", "items": {"type": "integer"}, "description": "Days ahead."},
            "options": {
                "type": "dict",
                "properties": {"metric": {"type": "boolean", "description": "Metric units."}},
                "description": "Options.",
            },
        },
        "required": ["city"],
    },
}
#: (id, question cell, functions, possible answer, tone); the answer key names the factorial by its short name
BFCL_ROWS = [
    ("simple_0", '["What is 5 factorial?"]', [FACTORIAL], [{"factorial": {"number": [5]}}], 300.0),
    (
        "parallel_0",
        '["Areas of circles of radius 2 and 3 centimetres."]',
        [CIRCLE],
        [
            {"geometry.circle_area": {"radius": [2.0], "units": ["cm", ""]}},
            {"geometry.circle_area": {"radius": [3.0], "units": ["cm", ""]}},
        ],
        400.0,
    ),
    ("irrelevance_0", '["Tell me a joke."]', [WEATHER], [], 500.0),
    ("simple_1", '["two", "turns"]', [FACTORIAL], [{"factorial": {"number": [1]}}], 600.0),  # left out
]
#: what AU-Harness shows the model: dotted names underscored
UNDERSCORED = {"math.factorial": "math_factorial", "geometry.circle_area": "geometry_circle_area"}


def _bfcl_data(root: Path) -> Path:
    rows = [
        {
            "id": sample_id,
            "question": question,
            "tools": json.dumps(functions),
            "reference": json.dumps(answer),
            "audio": {"bytes": tone_wav(freq, 1.0), "path": f"{sample_id}.wav"},
        }
        for sample_id, question, functions, answer, freq in BFCL_ROWS
    ]
    pq.write_table(pa.Table.from_pylist(rows), root / "bfcl.parquet")
    return root / "bfcl.parquet"


def _shown(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**f, "name": f["name"].replace(".", "_")} for f in functions]


def _bfcl_prompt_text(instruction: str, functions: list[dict[str, Any]], question: str | None) -> str:
    """AU-Harness's prompt-mode user text, from its preprocessor's rule, with Jinja's final newline dropped."""
    text = (
        instruction
        + "Here is a list of functions in JSON format that you can invoke.\n"
        + json.dumps(_shown(functions), indent=4)
        + "\n"
    )
    if question is not None:
        text += "\n\n" + question
    return text[:-1] if text.endswith("\n") else text


def test_the_bfcl_entries_say_what_auharness_says() -> None:
    spec = json.loads((SHIPPED / "spoken_language_reasoning" / "bfcl.json").read_text(encoding="utf-8"))
    names = {n for n in spec if n != "_task"}
    assert len(names) == 20
    prompted = spec["bfcl_audio_simple"]["instruction"]
    # AU-Harness's folded YAML keeps its \n as two characters, and the model sees them so
    assert prompted.startswith("You are an expert in composing functions.") and "\\n" in prompted
    for name in names:
        entry = spec[name]
        assert entry["hf_repo"] == "ServiceNow-AI/BFCL_v3_audio" and entry["split"] == "test"
        category = name.removeprefix("bfcl_audio_").removeprefix("bfcl_text_").removesuffix("_no_prompt")
        assert entry["subset"] == f"BFCL_v3_{category}"
        assert ("audio_column" in entry) == name.startswith("bfcl_audio_")
        assert entry.get("instruction") == (None if name.endswith("_no_prompt") else prompted)
        assert entry["generation"] == {"temperature": 0.0, "max_tokens": 1024}


@pytest.mark.parametrize("modality", ["audio", "text"])
def test_bfcl_with_the_prompt_sends_the_functions_as_text_and_scores_the_json_calls(
    modality: str, tmp_path: Path
) -> None:
    data = _bfcl_data(tmp_path)
    name = f"bfcl_{modality}_simple"
    _local_runspecs(tmp_path, "spoken_language_reasoning/bfcl.json", [name], data)
    answers = [
        {"match": '"name": "math_factorial"', "answer": '```json\n[{"math_factorial": {"number": 5}}]\n```'},
        {"match": '"name": "geometry_circle_area"', "answer": '[{"geometry_circle_area": {"radius": 2.0}}]'},
        {"match": '"name": "weather_forecast"', "answer": "```json\n [] \n```"},
    ]
    server = start_test_server({"answers": answers}, request_log=True)
    try:
        outcome = run(_config(tmp_path, [[f"local_{name}", "bfcl_match_score"]], server.base_url))
        chats = [e for e in server.log_events("completed") if e["path"] == "/v1/chat/completions"]
    finally:
        server.stop()
    row = _rows(outcome)[(f"local_{name}", "bfcl_match_score")]
    # the two-turn row is left out, as AU-Harness leaves it out; one call of two expected fails the parallel row
    assert row.error is None and row.n == 3 and row.n_failed == 0
    assert row.score == pytest.approx(2 / 3)
    instruction = _shipped("spoken_language_reasoning/bfcl.json", name)["instruction"]
    expected = {
        _bfcl_prompt_text(instruction, functions, None if modality == "audio" else json.loads(question)[0])
        for _, question, functions, _, _ in BFCL_ROWS[:3]
    }
    assert {m["text"] for e in chats for m in e["messages"] if m["role"] == "user"} == expected
    for event in chats:
        assert "tools" not in event["params"]
        assert event["params"]["temperature"] == 0.0 and event["params"]["max_tokens"] == 1024
        (user,) = [m for m in event["messages"] if m["role"] == "user"]
        assert user["n_audio"] == (1 if modality == "audio" else 0)
    if modality == "audio":
        sent = {fp for e in chats for m in e["messages"] for fp in m["audio_fingerprints"]}
        assert sent == {audio_fingerprint(tone_wav(row[4], 1.0)) for row in BFCL_ROWS[:3]}


#: the tools AU-Harness's request handler makes of the functions (convert_to_tool), written out by hand
EXPECTED_TOOLS = {
    "math_factorial": {
        "name": "math_factorial",
        "description": "Compute the factorial of a number.",
        "parameters": {
            "type": "object",
            "properties": {"number": {"type": "integer", "description": "The number."}},
            "required": ["number"],
        },
    },
    "geometry_circle_area": {
        "name": "geometry_circle_area",
        "description": "The area of a circle.",
        "parameters": {
            "type": "object",
            "properties": {
                "radius": {
                    "type": "number",
                    "format": "float",
                    "description": "The radius. This is a float type value.",
                },
                "units": {"type": "string", "description": "The units.", "default": "cm"},
            },
            "required": ["radius"],
        },
    },
    "weather_forecast": {
        "name": "weather_forecast",
        "description": "The weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city."},
                "days": {"type": "array", "items": {"type": "integer"}, "description": "Days ahead."},
                "options": {
                    "type": "object",
                    "properties": {"metric": {"type": "boolean", "description": "Metric units."}},
                    "description": "Options.",
                },
            },
            "required": ["city"],
        },
    },
}


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


#: the scripted replies by offered function: calls (with text beside them, which is not the answer) or text only
TOOL_REPLIES: dict[str, dict[str, Any]] = {
    "math_factorial": {"content": "Sure.", "tool_calls": [_call("math_factorial", {"number": 5})]},
    "geometry_circle_area": {
        "content": None,
        "tool_calls": [
            _call("geometry_circle_area", {"radius": 3.0}),
            _call("geometry_circle_area", {"radius": 2, "units": "cm"}),
        ],
    },
    # a call where none is expected: irrelevance fails
    "weather_forecast": {"content": None, "tool_calls": [_call("weather_forecast", {"city": "Paris"})]},
}


def _tool_server(bodies: list[dict[str, Any]]) -> web.Application:
    """An OpenAI-compatible endpoint that answers offered tools with the scripted tool_calls."""

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        bodies.append(body)
        (offered,) = [tool["function"]["name"] for tool in body.get("tools", [])]
        message = {"role": "assistant", **TOOL_REPLIES[offered]}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return web.json_response(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def _run_against(app: web.Application, make_config: Callable[[str], Path]) -> RunOutcome:
    runner, url = await serve_app(app)
    try:
        config = make_config(url + "/v1")
        return await execute(build_plan(load_config(config), source=str(config)), RunOptions(quiet=True))
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("modality", ["audio", "text"])
def test_bfcl_without_the_prompt_offers_tools_and_scores_the_tool_calls(modality: str, tmp_path: Path) -> None:
    data = _bfcl_data(tmp_path)
    name = f"bfcl_{modality}_parallel_no_prompt"
    _local_runspecs(tmp_path, "spoken_language_reasoning/bfcl.json", [name], data)
    bodies: list[dict[str, Any]] = []
    outcome = asyncio.run(
        _run_against(_tool_server(bodies), lambda url: _config(tmp_path, [[f"local_{name}", "bfcl_match_score"]], url))
    )
    row = _rows(outcome)[(f"local_{name}", "bfcl_match_score")]
    # factorial and both circles (in any order, 2 read as 2.0) pass; a call on the irrelevance row fails
    assert row.error is None and row.n == 3 and row.n_failed == 0
    assert row.score == pytest.approx(2 / 3)
    assert len(bodies) == 3
    questions = {functions[0]["name"].replace(".", "_"): question for _, question, functions, _, _ in BFCL_ROWS[:3]}
    for body in bodies:
        (tool,) = body["tools"]
        assert tool == {"type": "function", "function": EXPECTED_TOOLS[tool["function"]["name"]]}
        assert body["temperature"] == 0.0 and body["max_tokens"] == 1024
        (user,) = [m for m in body["messages"] if m["role"] == "user"]
        if modality == "audio":  # the recording alone: no prompt, no text
            assert [part["type"] for part in user["content"]] == ["input_audio"]
        else:  # the question cell as the dataset holds it, brackets and quotes included
            assert user["content"] == questions[tool["function"]["name"]]
    # what was sent includes the tools offered, for the viewer and the reader of records/sent
    sent_file = outcome.run_dir / "records" / "sent" / f"local_{name}.jsonl"
    entries = [json.loads(line) for line in sent_file.read_text().splitlines()]
    assert len(entries) == 3 and {e["tools"][0]["function"]["name"] for e in entries} == set(EXPECTED_TOOLS)


def test_a_tool_call_whose_arguments_are_not_json_is_a_parse_failure_not_an_answer() -> None:
    from evalkit.clients.protocol import ParseError, extract_chat_answer

    bad = {"choices": [{"message": {"content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}}]}
    with pytest.raises(ParseError, match="arguments are not JSON"):
        extract_chat_answer(bad)
    good = {"choices": [{"message": {"content": "ok", "tool_calls": [_call("f", {"a": [1, 2]})]}}]}
    assert json.loads(extract_chat_answer(good)[0]) == [{"f": {"a": [1, 2]}}]


# ----------------------------------------------------------------------------------------------------- Spider

TABLES = [
    {
        "db_id": "geo",
        "table_names_original": ["city", "country"],
        "table_names": ["city", "country"],
        "column_names_original": [
            [-1, "*"],
            [0, "id"],
            [0, "name"],
            [0, "population"],
            [0, "country_id"],
            [1, "id"],
            [1, "name"],
        ],
        "column_names": [
            [-1, "*"],
            [0, "id"],
            [0, "name"],
            [0, "population"],
            [0, "country id"],
            [1, "id"],
            [1, "name"],
        ],
        "column_types": ["text", "number", "text", "number", "number", "number", "text"],
        "primary_keys": [1, 5],
        "foreign_keys": [[4, 5]],
    }
]
#: AU-Harness's rendering of TABLES (spider_preprocessor._prepare_db_schemas), written out
GEO_SCHEMA = (
    "# city (id number, name text, population number, country_id number)\n"
    "# country (id number, name text)\n"
    "# Primary Key (city): id\n"
    "# Primary Key (country): id\n"
    "# Foreign Key: city.country_id = country.id"
)
SPIDER_ROWS = [
    ("Which cities have more than 100000 people?", "SELECT name FROM city WHERE population > 100000", 300.0),
    ("How many countries are there?", "SELECT count(*) FROM country", 400.0),
]


def _spider_folder(root: Path) -> Path:
    folder = root / "spider"
    (folder / "database" / "geo").mkdir(parents=True)
    (folder / "tables.json").write_text(json.dumps(TABLES), encoding="utf-8")
    connection = sqlite3.connect(folder / "database" / "geo" / "geo.sqlite")
    connection.executescript(
        "CREATE TABLE country (id INTEGER PRIMARY KEY, name TEXT);"
        "CREATE TABLE city (id INTEGER PRIMARY KEY, name TEXT, population INTEGER, country_id INTEGER);"
        "INSERT INTO country VALUES (1, 'Norway'), (2, 'Chile');"
        "INSERT INTO city VALUES (1, 'Oslo', 700000, 1), (2, 'Tromso', 77000, 1), (3, 'Santiago', 6000000, 2);"
    )
    connection.commit()
    connection.close()
    return folder


def _spider_data(root: Path) -> Path:
    rows = [
        {"db_id": "geo", "question": q, "query": gold, "audio": {"bytes": tone_wav(freq, 1.0), "path": f"{i}.wav"}}
        for i, (q, gold, freq) in enumerate(SPIDER_ROWS)
    ]
    pq.write_table(pa.Table.from_pylist(rows), root / "spider.parquet")
    return root / "spider.parquet"


@pytest.mark.parametrize("modality", ["audio", "text"])
def test_spider_sends_the_schema_and_runs_the_answer_on_the_database(
    modality: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("sqlparse", reason="sql_score reads DISTINCT with sqlparse: pip install 'evalkit[sql]'")
    folder = _spider_folder(tmp_path)
    monkeypatch.setenv("SPIDER_DATA_DIR", str(folder))
    name = f"spider_{modality}"
    _local_runspecs(tmp_path, "spoken_language_reasoning/speech_to_sql.json", [name], _spider_data(tmp_path))
    right = "```sql\nSELECT name FROM city WHERE population >= 700000\n```"
    wrong = "SELECT count(*) FROM city"
    answers = [
        {"audio_fingerprint": audio_fingerprint(tone_wav(SPIDER_ROWS[0][2], 1.0)), "answer": right},
        {"audio_fingerprint": audio_fingerprint(tone_wav(SPIDER_ROWS[1][2], 1.0)), "answer": wrong},
        {"match": SPIDER_ROWS[0][0], "answer": right},
        {"match": SPIDER_ROWS[1][0], "answer": wrong},
    ]
    server = start_test_server({"answers": answers}, request_log=True)
    try:
        # no database_dir: the databases are found under SPIDER_DATA_DIR, so AU-Harness's pair runs as written
        outcome = run(_config(tmp_path, [[f"local_{name}", "sql_score"]], server.base_url))
        texts = _user_texts(server)
    finally:
        server.stop()
    row = _rows(outcome)[(f"local_{name}", "sql_score")]
    assert row.error is None and row.n == 2 and row.n_failed == 0 and row.score == pytest.approx(0.5)
    instruction = _shipped("spoken_language_reasoning/speech_to_sql.json", name)["instruction"]
    lead = instruction + "### Sqlite SQL tables, with their properties: \n#\n" + GEO_SCHEMA + "\n#\n### "
    if modality == "audio":
        assert texts == [lead, lead]
    else:  # the question and its newline, which Jinja's rendering then drops
        assert sorted(texts) == sorted(lead + question for question, _, _ in SPIDER_ROWS)


def test_spider_without_its_folder_stops_the_pair_saying_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("sqlparse", reason="sql_score reads DISTINCT with sqlparse: pip install 'evalkit[sql]'")
    monkeypatch.delenv("SPIDER_DATA_DIR", raising=False)
    _local_runspecs(tmp_path, "spoken_language_reasoning/speech_to_sql.json", ["spider_text"], _spider_data(tmp_path))
    server = start_test_server({}, request_log=True)
    try:
        pair = ["local_spider_text", "sql_score", {"database_dir": str(_spider_folder(tmp_path) / "database")}]
        outcome = run(_config(tmp_path, [pair], server.base_url))
        sent = [e for e in server.log_events("completed") if e["path"] == "/v1/chat/completions"]
    finally:
        server.stop()
    (row,) = outcome.rows
    assert row.error is not None and "set the environment variable SPIDER_DATA_DIR" in row.error
    assert sent == []


# -------------------------------------------------------------------------------------------------- SpokenWOZ

WOZ_ROWS = [
    {
        "context": {"turn_index": [0, 1], "text": ["hi", "i need a hotel"], "agent_text": ["hello", "which area?"]},
        "text": "in the north please, four stars",
        "agent_text": "I have a 4 star hotel in the north area.",
        "slots": json.dumps({"hotel": {"area": "north", "stars": "4"}}),
        "tone": 300.0,
    },
    {
        "context": {"turn_index": [], "text": [], "agent_text": []},
        "text": "",
        "agent_text": "Goodbye.",
        "slots": "{}",
        "tone": 400.0,
    },
]
WOZ_ANSWERS = ["There is a 4 star hotel in the north area.", "Goodbye!"]
CLOSING = "Please provide an appropriate agent response based on the user's spoken input and dialogue history."


def _woz_data(root: Path) -> Path:
    rows = [
        {
            **{k: v for k, v in r.items() if k != "tone"},
            "audio": {"bytes": tone_wav(r["tone"], 1.0), "path": f"{i}.wav"},
        }
        for i, r in enumerate(WOZ_ROWS)
    ]
    pq.write_table(pa.Table.from_pylist(rows), root / "woz.parquet")
    return root / "woz.parquet"


@pytest.mark.parametrize("modality", ["audio", "text"])
def test_spokenwoz_sends_the_dialogue_so_far_and_scores_the_slots_read_from_the_reply(
    modality: str, tmp_path: Path
) -> None:
    name = f"spokenwoz_{modality}"
    _local_runspecs(tmp_path, "spoken_language_understanding/spoken_dialogue.json", [name], _woz_data(tmp_path))
    answers = [
        {"match": "north please", "answer": WOZ_ANSWERS[0]},
        {"match": "Please provide", "answer": WOZ_ANSWERS[1]},
    ]
    metrics = ("joint_goal_accuracy", "slot_accuracy", "slot_f1")
    server = start_test_server({"answers": answers}, request_log=True)
    try:
        outcome = run(_config(tmp_path, [[f"local_{name}", m] for m in metrics], server.base_url))
        texts = _user_texts(server)
        chats = [e for e in server.log_events("completed") if e["path"] == "/v1/chat/completions"]
    finally:
        server.stop()
    instruction = _shipped("spoken_language_understanding/spoken_dialogue.json", name)["instruction"]
    # AU-Harness's lines, joined by newlines; its prompt keeps YAML's final newline; the transcript goes in the
    # audio task too
    first = (
        f"{instruction}\n\n[Dialogue History]\nUser: hi\nAgent: hello\nUser: i need a hotel\nAgent: which area?\n"
        f"\n[Current User Input (Audio Transcription)]: in the north please, four stars\n\n{CLOSING}"
    )
    second = f"{instruction}\n\n{CLOSING}"
    assert sorted(set(texts)) == sorted({first.strip(), second.strip()})  # one request per turn, shared by metrics
    assert len(chats) == 2
    assert all(e["params"]["temperature"] == 0.7 and e["params"]["max_tokens"] == 256 for e in chats)
    assert all(m["n_audio"] == (modality == "audio") for e in chats for m in e["messages"] if m["role"] == "user")
    rows = _rows(outcome)
    for metric in metrics:
        scorer = METRICS.get(metric)(language="en")
        expected = [
            scorer.score(answer, Sample(id=str(i), reference=r["agent_text"], meta={"slots": r["slots"]})).score
            for i, (answer, r) in enumerate(zip(WOZ_ANSWERS, WOZ_ROWS))
        ]
        row = rows[(f"local_{name}", metric)]
        assert row.error is None and row.n == 2 and row.score == pytest.approx(sum(expected) / 2), metric
    # AU-Harness's patterns read 5 slots from the first reply (area for three domains, stars, and a hotel "name",
    # "in the north area"), 2 of them annotated: slot F1 4/7 there although the joint goal is met
    assert rows[(f"local_{name}", "joint_goal_accuracy")].score == 1.0
    assert rows[(f"local_{name}", "slot_f1")].score == pytest.approx((4 / 7 + 1) / 2)


# --------------------------------------------------------------------------- the pieces, where the runs do not reach


def test_tools_rewrite_java_and_nested_types_as_auharness_does_and_leave_the_descriptions_alone() -> None:
    from evalkit.prompts.auharness.openai_tools import openai_tools

    described = {
        "name": "util.Store.put",
        "description": "Put a value.",
        "parameters": {
            "type": "dict",
            "properties": {
                "table": {"type": "HashMap", "description": "The table."},
                "keys": {"type": "ArrayList", "items": {"type": "String"}, "description": "Keys."},
                "grid": {"type": "array", "items": {"type": "array", "items": {"type": "float"}}},
                "rows": {"type": "array", "items": {"type": "dict", "properties": {"w": {"type": "float"}}}},
                "note": {"description": "No type given."},
                "odd": {"type": "complex", "description": "A type AU-Harness does not map."},
            },
            "required": ["table"],
        },
    }
    before = json.dumps(described)
    (tool,) = openai_tools([described])
    assert json.dumps(described) == before  # the sample's own descriptions stay BFCL's, for the metric
    function = tool["function"]
    assert tool["type"] == "function" and function["name"] == "util_Store_put"
    properties = function["parameters"]["properties"]
    assert function["parameters"]["type"] == "object"
    assert properties["table"] == {"type": "object", "description": "The table."}
    assert properties["keys"]["type"] == "array" and properties["keys"]["items"] == {"type": "string"}
    assert properties["grid"]["items"] == {"type": "array", "items": {"type": "number"}}
    # an object item's properties are rewritten too: a float gains its format and note
    assert properties["rows"]["items"]["properties"]["w"] == {
        "type": "number",
        "format": "float",
        "description": " This is a float type value.",
    }
    assert properties["note"]["type"] == "string" and properties["odd"]["type"] == "string"


def test_spokenwoz_text_without_history_or_transcript_is_the_prompt_and_the_closing_line() -> None:
    from evalkit.prompts.auharness.spokenwoz import spokenwoz_text

    assert spokenwoz_text("Help.\n", None, "") == f"Help.\n\n\n{CLOSING}"
    assert spokenwoz_text(None, '{"turn_index": [0], "text": ["hi"], "agent_text": []}', "yes") == (
        f"[Dialogue History]\nUser: hi\nAgent: \n\n[Current User Input (Audio Transcription)]: yes\n\n{CLOSING}"
    )

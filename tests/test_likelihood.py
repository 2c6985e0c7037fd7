"""Multiple choice scored by likelihood through /v1/completions (echo + logprobs), against the test server.

The server gives each whitespace-led word the log-probability the script names
(others -1.0), so every option's score is known by hand:

- s1 "Rome" (-1.5) vs "Lyon Nice" (-1.0 -1.0): sum picks Rome (correct); per token and per char pick Lyon Nice.
- s2 "Oslo Bergen Tromso" (3 x -0.5) vs "Kyiv" (-1.2): sum picks Kyiv; per token -0.5 vs -1.2 and per char
  -1.5/18 vs -1.2/4 pick Oslo Bergen Tromso (correct).
- s3 "Ab Cd" (-1.0 -1.0) vs "Efghijklmnop" (-1.5): sum -2 vs -1.5 picks Efgh...; per token -1.0 vs -1.5 picks
  Ab Cd (correct); per char -0.4 vs -0.125 picks Efgh....
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, run, write_config

from evalkit.config import load_config
from evalkit.errors import ConfigError
from evalkit.plan import build_plan

ROWS = [
    ("s1", "Which city is the capital of Italy?", ["Rome", "Lyon Nice"], "Rome"),
    ("s2", "Name Norwegian cities.", ["Oslo Bergen Tromso", "Kyiv"], 0),
    ("s3", "Pick the letters.", ["Ab Cd", "Efghijklmnop"], "A"),
]
LOGPROBS = {"Rome": -1.5, "Lyon": -1.0, "Nice": -1.0, "Oslo": -0.5, "Bergen": -0.5, "Tromso": -0.5, "Kyiv": -1.2}
LOGPROBS |= {"Ab": -1.0, "Cd": -1.0, "Efghijklmnop": -1.5}
METRICS = ["loglikelihood_accuracy", "loglikelihood_accuracy_per_token", "loglikelihood_accuracy_per_char"]


def _runspecs(root: Path, choices_column: str | None = "choices") -> Path:
    data = root / "mc.jsonl"
    data.write_text("".join(json.dumps({"id": i, "q": q, "choices": c, "answer": a}) + "\n" for i, q, c, a in ROWS))
    entry: dict[str, Any] = {
        "path": str(data),
        "language": "en",
        "modality": "text",
        "id_column": "id",
        "textual_input_column": "q",
        "target_column": "answer",
    }
    if choices_column:
        entry["choices_column"] = choices_column
    folder = root / "specs" / "mc"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mc.json").write_text(json.dumps({"_task": {"description": "mc", "metrics": METRICS}, "tiny_mc": entry}))
    return root / "specs"


def _config(tmp_path: Path, url: str, **model: Any) -> Path:
    return write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["tiny_mc", m] for m in METRICS],
            "models": [model_entry("m", url, **model)],
            "runspecs_dir": str(_runspecs(tmp_path)),
            "output_dir": str(tmp_path / "runs"),
        },
    )


def test_each_normalisation_picks_its_own_option_and_one_request_per_option_is_sent(
    tmp_path: Path, make_server
) -> None:
    server = make_server({"token_logprobs": LOGPROBS}, request_log=True)
    outcome = run(_config(tmp_path, server.base_url))
    scores = {row.metric: row.score for row in outcome.rows}
    assert scores == {METRICS[0]: pytest.approx(1 / 3), METRICS[1]: pytest.approx(2 / 3), METRICS[2]: 1 / 3}
    assert all(row.n == 3 and row.n_failed == 0 for row in outcome.rows)
    completed = server.log_events("completed")
    assert {e["path"] for e in completed} == {"/v1/completions"}
    assert len(completed) == 6  # 3 samples x 2 options; the three metrics share every answer
    records = [json.loads(line) for line in (outcome.run_dir / "records" / "tiny_mc__loglikelihood_accuracy.jsonl")
               .read_text().splitlines()]  # fmt: skip
    by_id = {r["sample_id"]: r for r in records}
    s1 = json.loads(by_id["s1"]["prediction"])
    assert {k: s1[k] for k in ("logprobs", "tokens", "chars")} == {
        "logprobs": [-1.5, -2.0],
        "tokens": [1, 2],
        "chars": [4, 9],
    }
    assert s1["context"].endswith("Which city is the capital of Italy?\nAnswer:")
    prompts = {e["prompt"] for e in server.log_events("received") if "prompt" in e} or {
        e.get("prompt") for e in completed
    }
    assert s1["context"] + " Rome" in prompts
    assert by_id["s2"]["details"]["chosen"] == "B" and by_id["s2"]["score"] == 0.0
    # what was sent: the context every option continues, one request per option, one entry for all three metrics
    sent = [json.loads(x) for x in (outcome.run_dir / "records" / "sent" / "tiny_mc.jsonl").read_text().splitlines()]
    assert len(sent) == 3 and {e["key"] for e in sent} == {r["sent"] for r in records}
    entry = next(e for e in sent if e["key"] == by_id["s1"]["sent"])
    assert (entry["kind"], entry["requests"]) == ("completion", 2)
    assert entry["messages"] == [{"role": "user", "content": [{"type": "text", "text": s1["context"]}]}]


def test_likelihood_needs_choices_and_a_completions_server(tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/v1", inference_type="transcription")
    with pytest.raises(ConfigError, match="inference_type transcription, which does not offer it"):
        build_plan(load_config(config), source=str(config))
    spec = tmp_path / "specs" / "mc" / "mc.json"
    data = json.loads(spec.read_text())
    data["tiny_mc"].pop("choices_column", None)
    spec.write_text(json.dumps(data))
    text = config.read_text().replace("transcription", "vllm")
    config.write_text(text)
    with pytest.raises(ConfigError, match="has no choices_column"):
        build_plan(load_config(config), source=str(config))

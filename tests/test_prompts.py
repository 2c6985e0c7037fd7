"""Prompts as the server received them: system prompts by model, add-ons, instruction pools, in-context examples.

Runs go through the real runner to a loopback test server with a request
log; the expected texts are read from the shipped YAML files, the expected
audio is fingerprinted from the shipped speech set decoded here.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml
from helpers import ROOT, model_entry, write_config

from evalkit.catalog import DatasetSpec, load_catalog
from evalkit.config import load_config
from evalkit.data.audio.pcm import PreparedAudio
from evalkit.data.sample import Sample
from evalkit.errors import ConfigError, RunspecError
from evalkit.plan import build_plan
from evalkit.prompts import examples as icl
from evalkit.prompts.library import _specific_text, instruction_for, pools
from evalkit.prompts.prompt import Prompt, PromptTurn
from evalkit.run.requests import RequestContext, turn_requests
from evalkit.run.runner import RunOptions, RunOutcome, execute
from evalkit.testing import audio_fingerprint

PROMPTS = ROOT / "evalkit" / "prompts"
PARQUET = ROOT / "evalkit" / "assets" / "speech" / "espeak_en" / "data.parquet"
ASR_INSTRUCTION = "Transcribe the audio exactly. Output only the transcript."


def yaml_file(name: str) -> dict[str, Any]:
    return yaml.safe_load((PROMPTS / name).read_text())


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in pq.read_table(PARQUET, columns=["id", "audio", "text"]).to_pylist()}


def fingerprint(row: dict[str, Any]) -> str:
    pcm, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="int16")
    buffer = io.BytesIO()
    sf.write(buffer, pcm, sr, format="WAV", subtype="PCM_16")
    return audio_fingerprint(buffer.getvalue())


def run(tmp_path: Path, config: dict[str, Any]) -> tuple[RunOutcome, list[dict[str, Any]]]:
    config.setdefault("output_dir", str(tmp_path / "runs"))
    path = write_config(tmp_path / "config.yaml", config)
    outcome = asyncio.run(
        execute(build_plan(load_config(path), source=str(path)), RunOptions(no_cache=True, quiet=True))
    )
    records = [
        json.loads(line)
        for f in sorted((outcome.run_dir / "records").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    return outcome, records


def test_system_prompts_by_model_and_add_ons_in_the_received_messages(tmp_path: Path, make_server) -> None:
    server = make_server(request_log=True)
    _, records = run(
        tmp_path,
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
            "models": [model_entry("qwen3-8b", server.base_url), model_entry("gpt-x", server.base_url)],
            "filters": {
                "num_samples": 2,
                "system_prompts": ["audio_expert", "no_thinking"],
                "user_prompt_add_ons": ["asr_clean_output", "concise"],
            },
        },
    )
    systems, add_ons = yaml_file("system_prompts.yaml"), yaml_file("add_ons.yaml")
    expert = systems["audio_expert"]["by_category"]["speech_recognition"]  # the category's text wins over the default
    expected_system = {
        "qwen3-8b": f"{expert}\n\n{systems['no_thinking']['by_model']['qwen3']}",  # a model-specific text (name prefix)
        "gpt-x": f"{expert}\n\n{systems['no_thinking']['text']}",
    }
    user_text = "\n\n".join(
        [ASR_INSTRUCTION, add_ons["asr_clean_output"]["by_task"]["asr"], add_ons["concise"]["text"]]
    )
    events = server.log_events("completed")
    assert len(events) == 4
    for event in events:
        system, user = event["messages"]
        assert system == {
            "role": "system",
            "text": expected_system[event["model"]],
            "n_audio": 0,
            "audio_fingerprints": [],
        }
        assert user["role"] == "user" and user["text"] == user_text and user["n_audio"] == 1
    for record in records:
        assert record["prompt"] == {
            "add_ons": ["asr_clean_output", "concise"],
            "system_prompts": ["audio_expert", "no_thinking"],
        }


def test_unknown_prompt_names_stop_the_run_before_any_request(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
            "models": [model_entry("m", "http://127.0.0.1:9/v1")],
            "filters": {"user_prompt_add_ons": ["asr_clean_outptu"]},
        },
    )
    with pytest.raises(ConfigError, match='did you mean "asr_clean_output"'):
        build_plan(load_config(path), source=str(path))


def _variant_runspecs(tmp_path: Path) -> Path:
    common = {
        "path": str(PARQUET),
        "language": "en",
        "audio_column": "audio",
        "target_column": "text",
        "id_column": "id",
        "instruction": "unused: the pool decides",
    }
    spec = {
        "_task": {"description": "prompt variants over the shipped speech set", "metrics": ["word_error_rate"]},
        "espeak_pool_random": {
            **common,
            "prompt_pool": "asr_instructions",
            "prompt_choice": "random",
            "in_context": {"path": str(PARQUET), "k": 2, "choice": "random", "pool_size": 8},
        },
        "espeak_pool_fixed": {
            **common,
            "prompt_pool": "asr_instructions",
            "prompt_choice": 2,
            "in_context": {"path": str(PARQUET), "k": 1, "choice": "first", "pool_size": 3},
        },
    }
    folder = tmp_path / "runspecs" / "prompt_variants"
    folder.mkdir(parents=True)
    (folder / "asr_variants.json").write_text(json.dumps(spec))
    return tmp_path / "runspecs"


def test_instruction_pool_and_in_context_examples_are_sent_and_recorded(tmp_path: Path, make_server, rows) -> None:
    server = make_server(request_log=True, latency_ms=[0, 20])
    outcome, records = run(
        tmp_path,
        {
            "dataset_metric": [["espeak_pool_random", "word_error_rate"], ["espeak_pool_fixed", "word_error_rate"]],
            "models": [model_entry("m", server.base_url)],
            "filters": {"num_samples": 6, "seed": 3},
            "runspecs_dir": str(_variant_runspecs(tmp_path)),
        },
    )
    templates = pools()["asr_instructions"]
    pool_ids = list(rows)[:8]
    specs = {e.spec.dataset.name: e.spec.dataset for e in outcome.engines}
    example_pools = {name: icl.load_pool(dataset) for name, dataset in specs.items()}
    sent = {}
    for event in server.log_events("completed"):
        sent.setdefault(event["messages"][-1]["audio_fingerprints"][0], []).append(event["messages"])
    chosen_templates = set()
    for record in records:
        dataset = specs[record["dataset"]]
        sid = record["sample_id"]
        info = record["prompt"]
        # recorded: the pool, the template index and the examples, as evalkit's own functions choose them
        template, index = instruction_for(dataset, sid, 3)
        expected_examples = [s.id for s in icl.choose(dataset, example_pools[dataset.name], Sample(id=sid), 3)]
        choice = "random" if dataset.name == "espeak_pool_random" else "first"
        assert info == {
            "pool": "asr_instructions",
            "template": index,
            "examples": expected_examples,
            "example_choice": choice,
        }
        assert sid not in info["examples"] and set(info["examples"]) <= set(pool_ids)
        if dataset.name == "espeak_pool_fixed":
            assert index == 2 and info["examples"] == [next(i for i in pool_ids if i != sid)]
        chosen_templates.add((dataset.name, index))
        # sent: each example as a user turn (template + its audio) and its transcript as the answer, then the sample
        candidates = [
            m
            for m in sent[fingerprint(rows[sid])]
            if m[-1]["text"] == templates[index] and len(m) == 2 * len(info["examples"]) + 1
        ]
        assert candidates, record
        messages = candidates[0]
        for k, example in enumerate(info["examples"]):
            user, answer = messages[2 * k], messages[2 * k + 1]
            assert user["role"] == "user" and user["text"] == templates[index]
            assert user["audio_fingerprints"] == [fingerprint(rows[example])]
            assert answer == {
                "role": "assistant",
                "text": rows[example]["text"],
                "n_audio": 0,
                "audio_fingerprints": [],
            }
        assert record["response"] == templates[index]  # the echo server answers the last user text
    assert len(records) == 12
    assert len({i for name, i in chosen_templates if name == "espeak_pool_random"}) > 1  # a draw per sample


def test_prompt_choice_is_reproducible_and_validated() -> None:
    spec = DatasetSpec(
        name="d",
        task="asr",
        category="speech_recognition",
        file="x.json",
        path="d.jsonl",
        language="en",
        prompt_pool="asr_instructions",
    )
    picks = [instruction_for(spec, f"s{i}", seed=1)[1] for i in range(40)]
    assert picks == [instruction_for(spec, f"s{i}", seed=1)[1] for i in range(40)]
    assert picks != [instruction_for(spec, f"s{i}", seed=2)[1] for i in range(40)]
    assert set(picks) == set(range(len(pools()["asr_instructions"])))
    fixed = spec.model_copy(update={"prompt_choice": "1"})
    assert {instruction_for(fixed, f"s{i}", 0)[1] for i in range(5)} == {1}
    with pytest.raises(RunspecError, match="outside the pool of 4 templates"):
        instruction_for(spec.model_copy(update={"prompt_choice": 9}), "s", 0)
    with pytest.raises(RunspecError, match='template index or "random"'):
        instruction_for(spec.model_copy(update={"prompt_choice": "sometimes"}), "s", 0)
    with pytest.raises(RunspecError, match="unknown pool 'asr_instruction'.*did you mean"):
        instruction_for(spec.model_copy(update={"prompt_pool": "asr_instruction"}), "s", 0)


def test_most_specific_text_wins() -> None:
    spec = DatasetSpec(name="ds", task="tk", category="ct", file="x.json", path="d.jsonl", language="en")
    entry = {
        "text": "T",
        "by_category": {"ct": "C"},
        "by_task": {"tk": "K"},
        "by_dataset": {"ds": "D"},
        "by_model": {"qwen": "M"},
    }
    assert _specific_text(entry, spec, ("qwen3-8b",)) == "M"
    assert _specific_text(entry, spec, ("other",)) == "D"
    assert _specific_text({k: v for k, v in entry.items() if k != "by_dataset"}, spec) == "K"
    assert _specific_text({"text": "T", "by_category": {"ct": "C"}}, spec) == "C"
    assert _specific_text({"text": "T", "by_category": {"zz": "C"}}, spec) == "T"
    assert _specific_text({"by_task": {"zz": "K"}}, spec) is None


def test_a_model_may_have_no_system_prompt_when_the_default_has_one() -> None:
    prompt = Prompt(turns=[PromptTurn(text="hi")], system="default system")
    base = {"model": "m", "kind": "chat", "params": {}, "chunk_size": None, "long_audio": "chunk", "language": "en"}
    with_default = turn_requests(prompt, 0, [], [], PreparedAudio({}), RequestContext(**base))
    without = turn_requests(
        prompt, 0, [], [], PreparedAudio({}), RequestContext(**base, system=None, system_override=True)
    )
    own = turn_requests(
        prompt, 0, [], [], PreparedAudio({}), RequestContext(**base, system="mine", system_override=True)
    )
    assert with_default[0].messages[0] == {"role": "system", "content": "default system"}
    assert without[0].messages == [{"role": "user", "content": "hi"}]
    assert own[0].messages[0] == {"role": "system", "content": "mine"}


def _similar_runspecs(tmp_path: Path) -> Path:
    pool = [
        ("p1", "Which river flows through Paris?", "Seine"),
        ("p2", "How many legs does a spider have?", "eight"),
        ("p3", "What is the capital city of France?", "Paris"),
        ("p4", "What colour is a ripe banana?", "yellow"),
    ]
    questions = [("q1", "What is the capital of Italy?", "Rome"), ("q2", "How many legs does an ant have?", "six")]
    for name, rows in (("pool", pool), ("questions", questions)):
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps({"id": i, "q": q, "a": a}) + "\n" for i, q, a in rows)
        )
    spec = {
        "_task": {"description": "similar examples", "metrics": ["exact_match"]},
        "similar_qa": {
            "path": str(tmp_path / "questions.jsonl"),
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "q",
            "target_column": "a",
            "in_context": {"path": str(tmp_path / "pool.jsonl"), "k": 2, "choice": "topk_text"},
        },
    }
    folder = tmp_path / "runspecs" / "icl"
    folder.mkdir(parents=True)
    (folder / "similar.json").write_text(json.dumps(spec))
    return tmp_path / "runspecs"


def test_in_context_examples_chosen_by_similarity_are_sent_and_recorded(tmp_path: Path, make_server) -> None:
    """ChEF's topk_text: the pool questions sharing the most (BM25-weighted) words come first."""
    server = make_server(request_log=True)
    _, records = run(
        tmp_path,
        {
            "dataset_metric": [["similar_qa", "exact_match"]],
            "models": [model_entry("m", server.base_url)],
            "runspecs_dir": str(_similar_runspecs(tmp_path)),
        },
    )
    chosen = {r["sample_id"]: r["prompt"]["examples"] for r in records}
    assert {r["prompt"]["example_choice"] for r in records} == {"similar"}
    # "capital" is shared by p3 only ("What is", "the", "of" are stop words); "legs", "many", "have" by p2 only
    assert chosen["q1"][0] == "p3" and chosen["q2"][0] == "p2"
    sent = [e["messages"] for e in server.log_events("completed")]
    italy = next(m for m in sent if m[-1]["text"].endswith("capital of Italy?"))
    assert italy[0]["text"].endswith("What is the capital city of France?") and italy[1]["text"] == "Paris"


def test_similar_needs_a_text_column(tmp_path: Path) -> None:
    spec = json.loads((_similar_runspecs(tmp_path) / "icl" / "similar.json").read_text())
    del spec["similar_qa"]["textual_input_column"]
    (tmp_path / "runspecs" / "icl" / "similar.json").write_text(json.dumps(spec))
    dataset = load_catalog([tmp_path / "runspecs"]).datasets["similar_qa"]
    with pytest.raises(RunspecError, match="'similar' compares texts, and this dataset has no text column"):
        icl.load_pool(dataset)

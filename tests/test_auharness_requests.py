"""An AU-Harness name sends AU-Harness's request: its user text, its generation settings, its transcription form.

Three layers. (1) Table-wide: for every one of AU-Harness's 399 task names the
variant it resolves to carries the prompt, appended column, temperature, token
limit and long-audio cut its task file gives (``scripts/auharness_tasks.py``
re-derives that record from an AU-Harness checkout). (2) End to end: AU-Harness-
format configs run against the project's test server on local rows, and each
request evalkit sends equals, per sample, the one AU-Harness's own code sent for
the same rows (tests/fixtures/references/auharness_requests.json, made by
make_auharness_requests.py beside it). (3) evalkit's own entries keep their
own requests.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from standins import standin_rows

from evalkit.catalog import load_catalog
from evalkit.clients.protocol import chat_body
from evalkit.config import load_config
from evalkit.data.hubcache import HubRowCache
from evalkit.plan import build_plan, generation_params
from evalkit.run.runner import RunOptions, execute

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "auharness_requests.json").read_text())
TASKS: dict[str, Any] = FIXTURE["tasks"]
#: an AU-Harness metric per fixture task (any fits: the requests are the point)
METRIC = {
    "librispeech_test_clean": "word_error_rate",
    "iemocap_emotion_recognition": "llm_judge_binary",
    "mmau_mini": "llm_judge_binary",
    "gsm8k_text": "gsm8k_exact_match",
    "covost2_en_de": "bleu",
    "voxceleb_accent_test": "llm_judge_binary",
}
JOINED = ("GeneralPreprocessor", "Covost2Preprocessor", "CallhomePreprocessor")
SPOKEN_QUESTION = {
    "VoiceBenchPreprocessor": "AuHarnessVoiceBenchPreprocessor",
    "BigBenchAudioPreprocessor": "AuHarnessBigBenchAudioPreprocessor",
}


@pytest.fixture(scope="module")
def catalog():  # type: ignore[no-untyped-def]
    return load_catalog()


# ---------------------------------------------------------------- (1) every name


def test_every_auharness_name_resolves_to_a_variant_carrying_its_task_files_request(catalog) -> None:  # type: ignore[no-untyped-def]
    from evalkit.config import ModelInfo

    table = catalog.foreign["auharness"].datasets
    assert len(table) == 399
    chat = ModelInfo(name="m", inference_type="vllm", url="http://127.0.0.1:9/v1", model="m")
    asr = ModelInfo(name="t", inference_type="transcription", url="http://127.0.0.1:9/v1", model="t")
    config = load_config_stub()
    for name, entry in table.items():
        request = entry.request
        assert request is not None, name
        (spec,) = catalog.resolve(f"auharness:{name}")
        assert spec.name == f"auharness:{name}" and spec.variant_of == entry.evalkit, name
        assert spec.request_style == "auharness" and spec.system_prompt is None, name
        assert spec.long_audio == request.long_audio, name
        # generation settings: AU-Harness's values, its key
        params = generation_params(config, chat, spec, catalog)
        assert params == {"temperature": request.temperature, "max_completion_tokens": request.max_completion_tokens}
        assert generation_params(config, asr, spec, catalog) == {}, name  # a transcription: file and model only
        if request.preprocessor in JOINED:
            assert spec.preprocessor == "AuHarnessPreprocessor", name
            assert spec.instruction == request.user_prompt and spec.instruction_column is None, name
            appended = request.textual_input_column if request.modality == "text" else request.instruction_column
            other_upload = entry.evalkit_reads is not None and entry.evalkit == name
            assert spec.textual_input_column == (None if other_upload else appended), name
            assert spec.choices_column == request.choices_column, name
            assert (spec.modality == "text") == (request.modality == "text"), name
        elif request.preprocessor in SPOKEN_QUESTION:
            assert spec.preprocessor == SPOKEN_QUESTION[request.preprocessor], name
            assert spec.instruction == request.user_prompt, name
            question = request.instruction_column if request.modality == "text" else None
            assert spec.textual_input_column == question and spec.instruction_column is None, name
        elif request.preprocessor == "MultiturnPreprocessor":
            assert spec.preprocessor == "AuHarnessMultiturnPreprocessor", name
        else:
            # BFCL, Spider, SpokenWOZ: the entry's own preprocessor writes AU-Harness's prompt (README: Coming from
            # AU-Harness; compared with AU-Harness's own code in test_auharness_special_requests.py)
            assert request.preprocessor in ("BfclPreprocessor", "SpiderPreprocessor", "SpokenWozPreprocessor"), name
            assert spec.preprocessor == catalog.datasets[entry.evalkit].preprocessor, name


def load_config_stub():  # type: ignore[no-untyped-def]
    from evalkit.config import Config

    return Config.model_validate(
        {
            "dataset_metric": [["asr", "wer"]],
            "models": [{"info": {"name": "m", "inference_type": "vllm", "url": "http://x/v1", "model": "m"}}],
        }
    )


def test_evalkit_own_entries_keep_their_own_requests(catalog) -> None:  # type: ignore[no-untyped-def]
    own = catalog.datasets["iemocap_emotion"]
    # (the bare name is also evalkit's alias of its own entry, after the hub repo; AU-Harness configs write the prefix)
    theirs = catalog.resolve("auharness:iemocap_emotion_recognition")[0]
    assert own.request_style == "evalkit" and "excited" in (own.instruction or "")
    assert theirs.name == "auharness:iemocap_emotion_recognition" and "excitement" in (theirs.instruction or "")
    assert [s.name for s in catalog.resolve("librispeech_test_clean")] == ["librispeech_test_clean"]
    assert "auharness:librispeech_test_clean" not in catalog.tasks["asr"].datasets  # listings stay evalkit's


# ---------------------------------------------------------------- (2) end to end, against AU-Harness's own requests


def _rows(spec, task: str) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """The fixture's rows in the entry's columns, audio as stand-in clips."""
    given = TASKS[task]["rows"]
    rows = standin_rows(spec, len(given))
    for row, fixture_row in zip(rows, given):
        for column, value in fixture_row.items():
            if column in row or column in (spec.target_column, spec.textual_input_column, spec.choices_column):
                row[column] = value
    return rows


def _store(spec, task: str) -> None:  # type: ignore[no-untyped-def]
    rows = _rows(spec, task)
    for _ in HubRowCache(spec).extend(lambda rows=rows: iter(rows)):
        pass


def _run(tmp_path: Path, url: str, tasks: list[str], model: dict[str, Any]) -> None:
    data = {
        "task_metric": [[task, METRIC[task]] for task in tasks],
        "judge_settings": {
            "judge_model": "judge-model",
            "judge_type": "vllm",
            "judge_api_endpoint": url,
            "judge_api_key": "k",
        },
        "models": [{**model, "url": url, "auth_token": "k", "retry_attempts": 1, "timeout": 20, "delay": 0}],
        "output_dir": str(tmp_path / "runs"),
    }
    path = tmp_path / f"{model['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    catalog = load_catalog()
    for task in tasks:
        _store(catalog.resolve(f"auharness:{task}")[0], task)
    plan = build_plan(load_config(path), source=str(path))
    outcome = asyncio.run(execute(plan, RunOptions(quiet=True)))
    for engine in outcome.engines:
        assert engine.error is None, engine.error


def _user_text(body: dict[str, Any]) -> str:
    (user,) = [m for m in body["messages"] if m["role"] == "user"]
    return next(p["text"] for p in user["content"] if p["type"] == "text")


def test_auharness_configs_send_what_auharness_sends_per_sample(tmp_path: Path, make_server, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    server = make_server(
        {"default_answer": "A", "answers": [{"model": "judge-model", "answer": "1"}]}, request_log=True
    )
    _run(tmp_path, server.base_url, sorted(TASKS), {"name": "chat", "inference_type": "vllm", "model": "chat-model"})
    _run(
        tmp_path,
        server.base_url,
        ["librispeech_test_clean"],
        {"name": "asr", "inference_type": "transcription", "model": "asr-model"},
    )
    events = server.log_events("completed")
    chat = [e for e in events if e["model"] == "chat-model"]
    for task, case in TASKS.items():
        wanted = sorted(
            (_user_text(sent[0]["body"]), sent[0]["body"]["temperature"], sent[0]["body"]["max_completion_tokens"])
            for sent in case["vllm"]
        )
        seen = sorted(
            (e["messages"][-1]["text"], e["params"]["temperature"], e["params"].get("max_completion_tokens"))
            for e in chat
            if e["messages"][-1]["text"] in {w[0] for w in wanted}
        )
        assert seen == wanted, task
    assert all(e["params"]["max_tokens"] is None for e in chat)  # the limit goes only under AU-Harness's key
    assert len(chat) == sum(len(case["vllm"]) for case in TASKS.values())
    # the transcription request: AU-Harness's form fields, nothing more
    forms = [e["form"] for e in events if e["model"] == "asr-model"]
    wanted_forms = [sent[0]["form"] for sent in TASKS["librispeech_test_clean"]["transcription"]]
    assert len(forms) == len(wanted_forms)
    for form, wanted in zip(forms, wanted_forms):
        assert set(form) == set(wanted) - {"file"}, form


def test_a_text_only_request_is_a_one_part_list_as_auharness_writes_it(catalog) -> None:  # type: ignore[no-untyped-def]
    from evalkit.config import RequestKind
    from evalkit.data.audio.pcm import PreparedAudio
    from evalkit.data.sample import Sample
    from evalkit.prompts.preprocessors import PREPROCESSORS, PromptContext
    from evalkit.run.requests import RequestContext, turn_requests

    spec = catalog.resolve("gsm8k_text")[0]
    row = TASKS["gsm8k_text"]["rows"][0]
    sample = Sample(id="0", instruction=spec.instruction, text=row["question"], reference="2")
    prompt = PREPROCESSORS.get(spec.preprocessor)().build(sample, PromptContext())
    ctx = RequestContext(
        model="m",
        kind=RequestKind.CHAT,
        params={"temperature": 0.2, "max_completion_tokens": 1024},
        chunk_size=None,
        long_audio=spec.long_audio,
        language=None,
        auharness=True,
    )
    (request,) = turn_requests(prompt, 0, [], [], PreparedAudio({}), ctx)
    body = chat_body(request)
    wanted = TASKS["gsm8k_text"]["vllm"][0][0]["body"]
    assert body["messages"] == wanted["messages"]
    assert {k: body[k] for k in ("temperature", "max_completion_tokens")} == {
        k: wanted[k] for k in ("temperature", "max_completion_tokens")
    }


def test_chunk_answers_are_run_together_as_auharness_joins_them() -> None:
    """AU-Harness's model class adds each chunk's text to the last with nothing between (an empty one as a space).

    A transcription model's ``the first part`` and ``and the second part`` for a 36 s clip are scored as
    ``the first partand the second part`` there: the end-to-end comparison (test_auharness_parity.py) counts
    that word error, so the AU-Harness request style joins the same way; evalkit's own keeps one space.
    """
    from evalkit.run.requests import joined_answer

    assert (
        joined_answer(["the first part", "and the second part"], auharness=True) == "the first partand the second part"
    )
    assert joined_answer(["one", None, " two"], auharness=True) == "one  two"
    assert joined_answer(["lone"], auharness=True) == "lone"
    assert joined_answer(["the first part", "and the second part"]) == "the first part and the second part"

"""Multi-turn conversations: turns in order, each sample with its own history, on what the server received.

A local dataset of 12 three-turn conversations (text, audio tones written to
WAV files) runs through the real runner against an echo test server with a
request log and random latency, so conversations of different samples are
in flight at once. The second turn's audio is longer than the model's
chunk_size: its chunks are sent at once and all of them stay in the history.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from helpers import model_entry, write_config

from evalkit.config import RequestKind, load_config
from evalkit.data.audio.pcm import PreparedAudio
from evalkit.plan import build_plan
from evalkit.prompts.prompt import Prompt, PromptTurn
from evalkit.run.requests import RequestContext, history_after, turn_requests
from evalkit.run.runner import RunOptions, execute
from evalkit.testing import audio_fingerprint

N = 12
SR = 16000


def tone(freq: float, seconds: float) -> np.ndarray:
    """A rising chirp: no two seconds of it are the same (identical chunks would be one request)."""
    t = np.arange(int(seconds * SR)) / SR
    return np.rint(0.3 * np.sin(2 * np.pi * (freq * t + 37.3 * t * t)) * 32767).astype(np.int16)


def fp(pcm: np.ndarray) -> str:
    buffer = io.BytesIO()
    sf.write(buffer, pcm, SR, format="WAV", subtype="PCM_16")
    return audio_fingerprint(buffer.getvalue())


@pytest.fixture()
def conversations(tmp_path: Path) -> dict[str, Any]:
    """12 conversations: t0 text + 0.5 s audio, t1 text + 2.5 s audio, t2 text only."""
    data = tmp_path / "data"
    (data / "audio").mkdir(parents=True)
    expected: dict[str, dict[str, Any]] = {}
    with (data / "dialogues.jsonl").open("w") as handle:
        for i in range(N):
            a0, a1 = tone(200 + 10 * i, 0.5), tone(600 + 10 * i, 2.5)
            sf.write(data / "audio" / f"s{i}_t0.wav", a0, SR, subtype="PCM_16")
            sf.write(data / "audio" / f"s{i}_t1.wav", a1, SR, subtype="PCM_16")
            turns = [
                {"text": f"s{i} t0", "audio": f"audio/s{i}_t0.wav"},
                {"text": f"s{i} t1", "audio": f"audio/s{i}_t1.wav"},
                {"text": f"s{i} t2", "audio": None},
            ]
            handle.write(json.dumps({"id": f"s{i}", "turns": turns, "answer": f"s{i} t2"}) + "\n")
            expected[f"s{i}"] = {"a0": fp(a0), "a1": [fp(a1[k : k + SR]) for k in range(0, len(a1), SR)]}
    folder = tmp_path / "runspecs" / "dialogue"
    folder.mkdir(parents=True)
    spec = {
        "_task": {"description": "three-turn conversations", "metrics": ["exact_match"]},
        "dialogues": {
            "path": "../../data/dialogues.jsonl",
            "language": "en",
            "modality": "audio+text",
            "id_column": "id",
            "turns_column": "turns",
            "target_column": "answer",
        },
    }
    (folder / "dialogues.json").write_text(json.dumps(spec))
    return {"runspecs": tmp_path / "runspecs", "expected": expected}


def test_turns_in_order_with_each_samples_own_history(tmp_path: Path, make_server, conversations) -> None:
    chat = make_server(request_log=True, latency_ms=[5, 40], seed=7)
    asr = make_server(request_log=True)
    path = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["dialogues", "exact_match"]],
            "models": [
                model_entry("chat", chat.base_url, chunk_size=1.0, batch_size=16),
                model_entry("asr", asr.base_url, chunk_size=1.0, inference_type="transcription"),
            ],
            "output_dir": str(tmp_path / "runs"),
            "runspecs_dir": str(conversations["runspecs"]),
        },
    )
    outcome = asyncio.run(
        execute(build_plan(load_config(path), source=str(path)), RunOptions(no_cache=True, quiet=True))
    )
    expected = conversations["expected"]

    # every request of a sample speaks only of that sample, with the history so far, in order
    log = chat.log_events()
    by_sample: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
    for event in log:
        if event["event"] != "completed":
            continue
        messages = event["messages"]
        sample, turn = messages[-1]["text"].split()
        by_sample[sample].append(messages)
        for message in messages:
            assert message["text"].split()[0] == sample, "another sample's history leaked in"
        e = expected[sample]
        if turn == "t0":
            assert messages == [_user(f"{sample} t0", [e["a0"]])]
        elif turn == "t1":
            assert messages[:2] == [_user(f"{sample} t0", [e["a0"]]), _assistant(f"{sample} t0")]
            assert messages[2]["text"] == f"{sample} t1" and messages[2]["audio_fingerprints"][0] in e["a1"]
        else:
            assert messages == [
                _user(f"{sample} t0", [e["a0"]]),
                _assistant(f"{sample} t0"),
                _user(f"{sample} t1", e["a1"]),  # the model heard every chunk, in order
                _assistant(" ".join([f"{sample} t1"] * 3)),  # the chunks' answers joined
                _user(f"{sample} t2", []),
            ]
    for sample in expected:
        turns = [m[-1]["text"].split()[1] for m in by_sample[sample]]
        assert turns == ["t0", "t1", "t1", "t1", "t2"], sample  # a turn starts when the last one is answered
    assert chat.stats()["max_in_flight"] > 1  # conversations of different samples overlapped

    records = [
        json.loads(x) for x in (outcome.run_dir / "records" / "dialogues__exact_match.jsonl").read_text().splitlines()
    ]
    chat_records = {r["sample_id"]: r for r in records if r["model"] == "chat"}
    assert {s: r["response"] for s, r in chat_records.items()} == {s: f"{s} t2" for s in expected}
    assert all(r["score"] == 1.0 and r["attempts"] == 5 for r in chat_records.values())
    # a transcription model cannot answer a text-only turn: a recorded failure, found before any request
    asr_records = [r for r in records if r["model"] == "asr"]
    assert len(asr_records) == N and {r["failure"] for r in asr_records} == {"unsupported"}
    assert asr.log_events() == []


def _user(text: str, fingerprints: list[str]) -> dict[str, Any]:
    return {"role": "user", "text": text, "n_audio": len(fingerprints), "audio_fingerprints": fingerprints}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "text": text, "n_audio": 0, "audio_fingerprints": []}


def test_history_is_never_shared_or_changed_in_place() -> None:
    pcm = tone(300, 2.5).tobytes()
    prompt = Prompt(turns=[PromptTurn(text="a", audio=None), PromptTurn(text="b", audio=None)])
    prepared = PreparedAudio({0: pcm}).build([(1.0, "chunk")])
    ctx = RequestContext(model="m", kind=RequestKind.CHAT, params={}, chunk_size=1.0, long_audio="chunk", language="en")
    history: list[dict[str, Any]] = []
    history_audio: list[Any] = []
    first = turn_requests(prompt, 0, history, history_audio, prepared, ctx)
    assert len(first) == 3 and [len(r.audio) for r in first] == [1, 1, 1]
    new_history, new_audio = history_after(prompt, 0, history, history_audio, prepared, ctx, "x y z")
    assert history == [] and history_audio == []  # the caller's lists are untouched
    assert new_history[0]["content"][1:] == [
        {"type": "input_audio", "input_audio": {"audio_index": k}} for k in range(3)
    ]
    second = turn_requests(prompt, 1, new_history, new_audio, prepared, ctx)
    assert len(second) == 1 and [a.sha256 for a in second[0].audio] == [p.audio[0].sha256 for p in first]
    assert second[0].messages[-2] == {"role": "assistant", "content": "x y z"}

"""Records say what was sent: ``record["sent"]`` names an entry of ``records/sent/<dataset>.jsonl``.

Real runs against the scriptable test server (with a request log, so what the
entries say is compared with what the server received): a text set scored by
two metrics for two models (one entry per sample, shared by all four records),
long audio cut into chunks (chat and transcription), images, a multi-turn
conversation with an in-context example, a failed request, a resumed run. The
sent log's own guarantees (each key once while remembered, a cut last line
survived, keys read back on resume) are checked on the writer itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from helpers import config_for, model_entry, run, text_set

from evalkit.data.audio.pcm import wav_from_pcm16
from evalkit.run.manifest import plan_for_resume
from evalkit.run.runner import RunOptions, execute
from evalkit.run.sent import SentLog
from evalkit.testing import audio_fingerprint

TOKEN = "sk-evk-SENT-9f3a1c77"


def records_of(run_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted((run_dir / "records").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def sent_of(run_dir: Path, dataset: str) -> dict[str, dict[str, Any]]:
    """The sent entries by key: the first line of a key, as readers take it."""
    found: dict[str, dict[str, Any]] = {}
    for line in (run_dir / "records" / "sent" / f"{dataset}.jsonl").read_text().splitlines():
        entry = json.loads(line)
        found.setdefault(entry["key"], entry)
    return found


def texts(entry: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, joined text parts) of each message of an entry."""
    return [(m["role"], " ".join(p["text"] for p in m["content"] if p["type"] == "text")) for m in entry["messages"]]


def test_text_records_share_one_entry_across_metrics_and_models(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, 6, words=2)
    spec_file = runspecs / "text" / "synth_qa.json"
    spec = json.loads(spec_file.read_text())
    spec["synth_qa"]["system_prompt"] = "Answer as briefly as you can."
    spec_file.write_text(json.dumps(spec))
    # question 4 always meets a server error: its records fail, yet say what was sent
    server = make_server(
        {"answers": [{"match": "question 4", "answer": "x", "fault": "500"}]}, request_log=True, latency_ms=[1, 20]
    )
    models = [
        model_entry("m1", server.base_url, auth_token=TOKEN, retry_attempts=0),
        model_entry("m2", server.base_url, auth_token=TOKEN, retry_attempts=0),
    ]
    outcome = run(config_for(tmp_path, runspecs, models, [["synth_qa", "exact_match"], ["synth_qa", "bleu"]]))
    records = records_of(outcome.run_dir)
    entries = sent_of(outcome.run_dir, "synth_qa")
    assert len(records) == 6 * 2 * 2
    # one entry per sample: shared by both models and both metrics, written once
    lines = (outcome.run_dir / "records" / "sent" / "synth_qa.jsonl").read_text().splitlines()
    assert len(lines) == len(entries) == 6
    by_sample = {e["sample_id"]: e for e in entries.values()}
    for record in records:
        entry = entries[record["sent"]]
        assert entry["sample_id"] == record["sample_id"] and entry["dataset"] == "synth_qa"
        assert record["row"] == int(record["sample_id"][1:]) and record["groups"] == {"language": "en"}
        if record.get("failure") is None:
            assert record["stats"] and record["score"] is not None
        else:
            assert "stats" not in record
    # what each entry says was sent is what the server received
    received = {
        tuple((m["role"], m["text"]) for m in event["messages"])
        for event in server.log_events()
        if event.get("messages")
    }
    for sample_id, entry in by_sample.items():
        assert entry["kind"] == "chat" and entry["requests"] == 1
        assert texts(entry) == [("system", "Answer as briefly as you can."), ("user", f"question {sample_id[-1]}")]
        assert tuple(texts(entry)) in received or sample_id == "s00004"  # a faulted request's body is not logged
    failed = [r for r in records if r["sample_id"] == "s00004"]
    assert failed and all(r["failure"] == "http_500" and r["sent"] == by_sample["s00004"]["key"] for r in failed)
    assert all("500" in r["error"] for r in failed)
    # the corpus statistic is recomputable from the records alone: exact match is the mean of stats rows
    for model in ("m1", "m2"):
        rows = sorted(
            (r for r in records if r["metric"] == "exact_match" and r["model"] == model and "stats" in r),
            key=lambda r: r["row"],
        )
        total = np.sum([r["stats"] for r in rows], axis=0)
        row = next(x for x in outcome.rows if x.model == model and x.metric == "exact_match")
        assert total[0] / total[1] == row.score
    # no secret anywhere under records/
    for path in (outcome.run_dir / "records").rglob("*.jsonl"):
        assert TOKEN not in path.read_text(), path


SR = 16000


def chirp(freq: float, seconds: float) -> np.ndarray:
    """A rising chirp: no two chunks are alike, so each chunk's hash names one piece."""
    t = np.arange(int(seconds * SR)) / SR
    return np.rint(0.3 * np.sin(2 * np.pi * (freq * t + 37.3 * t * t)) * 32767).astype(np.int16)


def wav_sha(pcm: np.ndarray) -> str:
    return hashlib.sha256(wav_from_pcm16(pcm.astype("<i2").tobytes())).hexdigest()


def test_long_audio_is_named_by_path_and_chunk_bounds(tmp_path: Path, make_server) -> None:
    data = tmp_path / "data"
    (data / "audio").mkdir(parents=True)
    clips = {"a": chirp(300, 2.5), "b": chirp(500, 0.75)}
    with (data / "clips.jsonl").open("w") as handle:
        for name, pcm in clips.items():
            sf.write(data / "audio" / f"{name}.wav", pcm, SR, subtype="PCM_16")
            handle.write(json.dumps({"id": name, "audio": f"audio/{name}.wav", "text": name}) + "\n")
    folder = tmp_path / "runspecs" / "speech"
    folder.mkdir(parents=True)
    spec = {
        "path": "../../data/clips.jsonl",
        "language": "en",
        "modality": "audio",
        "id_column": "id",
        "audio_column": "audio",
        "target_column": "text",
        "instruction": "Transcribe.",
    }
    (folder / "clips.json").write_text(json.dumps({"_task": {"metrics": ["word_error_rate"]}, "clips": spec}))
    chat = make_server(request_log=True)
    asr = make_server(request_log=True)
    models = [
        model_entry("chat", chat.base_url, chunk_size=1.0),
        model_entry("asr", asr.base_url, chunk_size=1.0, inference_type="transcription"),
    ]
    outcome = run(config_for(tmp_path, tmp_path / "runspecs", models, [["clips", "word_error_rate"]]))
    records = {(r["sample_id"], r["model"]): r for r in records_of(outcome.run_dir)}
    entries = sent_of(outcome.run_dir, "clips")

    long = entries[records[("a", "chat")]["sent"]]
    assert long["kind"] == "chat" and long["requests"] == 3
    (message,) = long["messages"]
    assert message["role"] == "user"
    audio = next(p["audio"] for p in message["content"] if p["type"] == "audio")
    assert audio["path"] == str((data / "audio" / "a.wav").resolve())
    assert (audio["start"], audio["end"], audio["duration"]) == (0.0, 2.5, 2.5)
    assert audio["chunks"] == [[0.0, 1.0], [1.0, 2.0], [2.0, 2.5]]
    pcm = clips["a"]
    assert audio["chunk_sha256"] == [wav_sha(pcm[k : k + SR]) for k in range(0, len(pcm), SR)]
    assert "sha256" not in audio and audio["sample_rate"] == SR
    assert [p["text"] for p in message["content"] if p["type"] == "text"] == ["Transcribe."]
    # the server heard exactly those pieces
    heard = {f for e in chat.log_events("completed") for m in e["messages"] for f in m["audio_fingerprints"]}
    assert {audio_fingerprint(wav_from_pcm16(pcm[k : k + SR].tobytes())) for k in range(0, len(pcm), SR)} <= heard

    short = entries[records[("b", "chat")]["sent"]]
    ref = next(p["audio"] for p in short["messages"][0]["content"] if p["type"] == "audio")
    assert (ref["start"], ref["end"], ref["sha256"]) == (0.0, 0.75, wav_sha(clips["b"])) and "chunks" not in ref

    # a transcription model: the file and the language form field, chunked the same way
    asr_entry = entries[records[("a", "asr")]["sent"]]
    assert asr_entry["kind"] == "transcription" and asr_entry["requests"] == 3
    assert asr_entry["messages"][0]["content"][0]["audio"]["chunks"] == audio["chunks"]
    assert asr_entry["messages"][0]["content"][1] == {"type": "text", "text": "language: en"}
    assert len(entries) == 4  # chat and transcription send different things: one entry each per clip


def test_embedded_audio_is_named_by_its_row(tmp_path: Path, make_server, speech_runspecs) -> None:
    server = make_server()
    models = [model_entry("asr", server.base_url, inference_type="transcription")]
    outcome = run(config_for(tmp_path, speech_runspecs["dir"], models, [["tiny_asr", "word_error_rate"]]))
    records = records_of(outcome.run_dir)
    entries = sent_of(outcome.run_dir, "tiny_asr")
    parquet = str((speech_runspecs["dir"].parent / "tiny_asr.parquet").resolve())
    for record in records:
        ref = entries[record["sent"]]["messages"][0]["content"][0]["audio"]
        assert ref["file"] == {"path": parquet, "row": record["row"], "column": "audio"}
        assert "path" not in ref and ref["end"] == ref["duration"] == record["duration"]
        assert record["groups"]["audio_length"] and record["groups"]["language"] == "en"


def test_images_conversation_and_in_context_example(tmp_path: Path, make_server) -> None:
    from PIL import Image as PILImage

    def png(colour: tuple[int, int, int], size: tuple[int, int], path: Path) -> bytes:
        PILImage.new("RGB", size, colour).save(path, format="PNG")
        return path.read_bytes()

    red = png((255, 0, 0), (30, 20), tmp_path / "red.png")
    blue = png((0, 0, 255), (40, 40), tmp_path / "blue.png")
    (tmp_path / "train.jsonl").write_text(
        json.dumps({"id": "t", "image": "red.png", "turns": [{"text": "C?"}], "answer": "red"}) + "\n"
    )
    turns = [{"text": "Colour?"}, {"text": "Say it again."}]
    (tmp_path / "test.jsonl").write_text(json.dumps({"id": "s", "image": "blue.png", "turns": turns, "answer": "x"}))
    folder = tmp_path / "runspecs" / "vision"
    folder.mkdir(parents=True)
    spec = {
        "path": "../../test.jsonl",
        "language": "en",
        "modality": "image+text",
        "id_column": "id",
        "image_column": "image",
        "turns_column": "turns",
        "target_column": "answer",
        "in_context": {"path": "../../train.jsonl", "k": 1},
    }
    (folder / "icl.json").write_text(json.dumps({"_task": {"metrics": ["exact_match"]}, "icl": spec}))
    server = make_server({"image_answer": "colour"}, request_log=True)
    models = [model_entry("vlm", server.base_url), model_entry("vlm2", server.base_url)]
    outcome = run(config_for(tmp_path, tmp_path / "runspecs", models, [["icl", "exact_match"]]))
    records = records_of(outcome.run_dir)
    entries = sent_of(outcome.run_dir, "icl")
    entry = entries[records[0]["sent"]]
    assert entry["kind"] == "chat" and entry["requests"] == 2
    # the example as a user/assistant pair, the sample's first turn, the model's own answer, the last turn
    assert texts(entry) == [
        ("user", "C?"),
        ("assistant", "red"),
        ("user", "Colour?"),
        ("assistant", "blue"),
        ("user", "Say it again."),
    ]
    images = [[p["image"] for p in m["content"] if p["type"] == "image"] for m in entry["messages"]]
    assert [len(i) for i in images] == [1, 0, 1, 0, 0]
    example, own = images[0][0], images[2][0]
    assert example["path"] == str((tmp_path / "red.png").resolve())
    assert example["sha256"] == hashlib.sha256(red).hexdigest() and (example["width"], example["height"]) == (30, 20)
    assert own["sha256"] == hashlib.sha256(blue).hexdigest() and own["format"] == "png"
    assert records[0]["images"][0]["sha256"] == own["sha256"]
    # the last request the server received is this entry's conversation
    last = server.log_events("completed")[-1]["messages"]
    assert [(m["role"], m["text"]) for m in last] == texts(entry)
    # a later turn carries each model's own answers: a conversation's entry is its model's own
    assert len({r["sent"] for r in records}) == len(entries) == 2
    assert [e["messages"] for e in entries.values()] == [entry["messages"]] * 2  # here they answered alike


def test_a_resumed_run_appends_and_every_record_names_a_written_entry(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, 8)
    server = make_server()
    config = config_for(
        tmp_path, runspecs, [model_entry("m", server.base_url)], [["synth_qa", "exact_match"], ["synth_qa", "bleu"]]
    )
    first = run(config)
    run_dir = first.run_dir
    sent_file = run_dir / "records" / "sent" / "synth_qa.jsonl"
    whole = sent_file.read_bytes()
    assert len(whole.splitlines()) == 8
    # as a kill leaves it: the last entry cut mid-line, the run not finished
    sent_file.write_bytes(whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 20])
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest["status"] = "interrupted"
    (run_dir / "run.json").write_text(json.dumps(manifest))
    again = asyncio.run(execute(plan_for_resume(run_dir), RunOptions(quiet=True, resume=str(run_dir))))
    assert again.requests_sent == 0
    lines = sent_file.read_bytes().splitlines()
    readable = []
    for line in lines:
        try:
            readable.append(json.loads(line))
        except ValueError:
            continue
    # the cut line stays one unreadable line; the entry it held is written again, whole; no other entry twice
    assert len(lines) == 9 and len(readable) == 8 and len({e["key"] for e in readable}) == 8
    keys = {e["key"] for e in readable}
    assert {r["sent"] for r in records_of(run_dir)} <= keys


def test_the_sent_log_writes_each_key_once_and_reads_keys_back(tmp_path: Path) -> None:
    path = tmp_path / "sent" / "d.jsonl"

    def message(n: int) -> list[dict[str, Any]]:
        return [{"role": "user", "content": [{"type": "text", "text": f"q{n}"}]}]

    async def write(log: SentLog, numbers: list[int]) -> None:
        await log.open()
        try:
            for n in numbers:
                if f"k{n:015d}" not in log:
                    log.add(f"k{n:015d}", "d", f"s{n}", "chat", 1, message(n))
        finally:
            log.close()

    small = SentLog(path, generation=2)
    asyncio.run(write(small, [0, 1, 0, 2, 3, 4, 0]))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    # 0 is remembered while recent (written once for its repeat), forgotten after four newer keys: written again
    assert [e["sample_id"] for e in lines] == ["s0", "s1", "s2", "s3", "s4", "s0"]
    assert lines[0] == {
        "key": "k000000000000000",
        "dataset": "d",
        "sample_id": "s0",
        "requests": 1,
        "kind": "chat",
        "messages": message(0),
    }
    # reopened (a resume): the keys on disk are read back, nothing is written twice
    again = SentLog(path)
    asyncio.run(write(again, [0, 1, 2, 3, 4, 5]))
    assert again.written == 1 and len(path.read_text().splitlines()) == 7


def test_a_sent_key_is_the_store_key_of_a_lone_request_and_covers_every_request() -> None:
    from evalkit.clients.request import ModelRequest
    from evalkit.config import RequestKind
    from evalkit.run.sent import sent_key

    def ask(text: str, model: str = "m") -> ModelRequest:
        return ModelRequest(kind=RequestKind.CHAT, model=model, messages=[{"role": "user", "content": text}])

    one = ask("a")
    assert sent_key([one]) == one.key[:16]
    assert sent_key([ask("a"), ask("b")]) != sent_key([ask("a"), ask("c")])  # a later chunk or turn counts
    assert sent_key([ask("a")]) != sent_key([ask("a", model="other")])


def test_a_rescored_record_keeps_what_was_sent_and_gains_stats(tmp_path: Path, make_server) -> None:
    from evalkit.run.rescore import rescore

    runspecs = text_set(tmp_path, 5)
    server = make_server()
    outcome = run(config_for(tmp_path, runspecs, [model_entry("m", server.base_url)]))
    before = {r["sample_id"]: r for r in records_of(outcome.run_dir)}
    rows = rescore(outcome.run_dir, "bleu", rebuild=False)
    after = [json.loads(x) for x in (outcome.run_dir / "rescore" / "synth_qa__bleu.jsonl").read_text().splitlines()]
    assert len(after) == 5 and rows[0].score is not None
    for record in after:
        run_record = before[record["sample_id"]]
        assert (record["sent"], record["row"], record["groups"]) == (
            run_record["sent"],
            run_record["row"],
            run_record["groups"],
        )
        assert len(record["stats"]) == 10  # BLEU's n-gram counts, not exact match's (score, 1)
    assert {r["sent"] for r in after} <= set(sent_of(outcome.run_dir, "synth_qa"))


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_hub_audio_is_named_by_repo_split_revision_and_row(tmp_path: Path, make_server) -> None:
    """A hub dataset (a local folder laid out like a hub repository, read through evalkit's real hub path)."""
    import io
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq
    from helpers import evalkit_cli, write_config

    repo = tmp_path / "hub" / "org__tones"
    (repo / "data").mkdir(parents=True)
    wavs = []
    for freq in (300, 420):
        buffer = io.BytesIO()
        sf.write(buffer, chirp(freq, 0.5), SR, format="WAV", subtype="PCM_16")
        wavs.append(buffer.getvalue())
    table = pa.table(
        {
            "id": ["t0", "t1"],
            "audio": [{"bytes": w, "path": f"t{i}.wav"} for i, w in enumerate(wavs)],
            "text": ["low", "high"],
        }
    )
    pq.write_table(table, repo / "data" / "test-00000-of-00001.parquet")
    entry = {"hf_repo": str(repo), "split": "test", "language": "en", "modality": "audio", "id_column": "id",
             "audio_column": "audio", "target_column": "text"}  # fmt: skip
    (tmp_path / "specs" / "asr").mkdir(parents=True)
    (tmp_path / "specs" / "asr" / "tones.json").write_text(
        json.dumps({"_task": {"metrics": ["word_error_rate"]}, "tones_hub": entry})
    )
    server = make_server()
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["tones_hub", "word_error_rate"]],
            "models": [model_entry("asr", server.base_url, inference_type="transcription")],
            "runspecs_dir": str(tmp_path / "specs"),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    env = {**os.environ, "EVALKIT_CACHE_DIR": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf")}
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        env.pop(key, None)
    done = evalkit_cli(["run", str(config), "--quiet", "--no-cache"], tmp_path, env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    entries = sent_of(run_dir, "tones_hub")
    for record in records_of(run_dir):
        ref = entries[record["sent"]]["messages"][0]["content"][0]["audio"]
        hub = {"repo": str(repo), "config": None, "split": "test", "revision": None, "column": "audio"}
        assert ref["hub"] == {**hub, "row": record["row"]} and "path" not in ref
        assert ref["sha256"] == wav_sha(chirp(300 if record["sample_id"] == "t0" else 420, 0.5))


def test_an_audio_in_context_example_is_named_by_its_file_and_truncated_bounds(tmp_path: Path, make_server) -> None:
    data = tmp_path / "data"
    (data / "audio").mkdir(parents=True)
    example, question = chirp(250, 1.5), chirp(650, 0.5)
    sf.write(data / "audio" / "ex.wav", example, SR, subtype="PCM_16")
    sf.write(data / "audio" / "q.wav", question, SR, subtype="PCM_16")
    (data / "train.jsonl").write_text(json.dumps({"id": "ex", "audio": "audio/ex.wav", "text": "low"}) + "\n")
    (data / "test.jsonl").write_text(json.dumps({"id": "q", "audio": "audio/q.wav", "text": "high"}) + "\n")
    folder = tmp_path / "runspecs" / "speech"
    folder.mkdir(parents=True)
    spec = {
        "path": "../../data/test.jsonl",
        "language": "en",
        "modality": "audio",
        "id_column": "id",
        "audio_column": "audio",
        "target_column": "text",
        "instruction": "Transcribe.",
        "in_context": {"path": "../../data/train.jsonl", "k": 1},
    }
    (folder / "icl.json").write_text(json.dumps({"_task": {"metrics": ["word_error_rate"]}, "icl_audio": spec}))
    server = make_server(request_log=True)
    models = [model_entry("chat", server.base_url, chunk_size=1.0)]
    outcome = run(config_for(tmp_path, tmp_path / "runspecs", models, [["icl_audio", "word_error_rate"]]))
    (record,) = records_of(outcome.run_dir)
    entry = sent_of(outcome.run_dir, "icl_audio")[record["sent"]]
    assert [m["role"] for m in entry["messages"]] == ["user", "assistant", "user"]
    assert texts(entry)[1] == ("assistant", "low")
    shown = next(p["audio"] for p in entry["messages"][0]["content"] if p["type"] == "audio")
    asked = next(p["audio"] for p in entry["messages"][2]["content"] if p["type"] == "audio")
    # an example is cut to the model's chunk size, never chunked: the first second of its 1.5 s was sent
    assert shown["path"] == str((data / "audio" / "ex.wav").resolve())
    assert (shown["start"], shown["end"], shown["duration"]) == (0.0, 1.0, 1.5)
    assert shown["sha256"] == wav_sha(example[:SR])
    assert asked["path"] == str((data / "audio" / "q.wav").resolve()) and asked["sha256"] == wav_sha(question)
    heard = server.log_events("completed")[0]["messages"]
    assert [len(m["audio_fingerprints"]) for m in heard] == [1, 0, 1]

"""The rows, the fake model and the configs of the AU-Harness end-to-end comparison.

AU-Harness itself (``fixtures/references/make_auharness_e2e.py``) and evalkit
(``test_auharness_parity.py``) are run on the same local copies of four
AU-Harness datasets against one scripted test server; this module makes both
from the committed espeak-ng speech (``evalkit/assets/speech/espeak_en``), so
the fixture holds no audio.

The answers are chosen so that AU-Harness's quirks decide the numbers: digits
and symbols that only its num2words step spells out (``Mr. Brown paid $21``), a
``<think>`` block its postprocessor drops, an empty answer, a clip longer than
30 s whose chunks' answers it joins with nothing between, judge replies it
cannot read (plain text, a fenced JSON block), and two answers whose judge
requests are identical (at temperature 0.1 it sends both).

Audio is stored at half amplitude (|sample| <= 16384): a clip that AU-Harness
decodes to floats and writes back as 16-bit WAV keeps every sample, so the
server's audio fingerprints are the same whichever tool sends the clip.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
SPEECH = ROOT / "evalkit" / "assets" / "speech" / "espeak_en" / "data.parquet"
CONFIGS = Path(__file__).resolve().parent / "fixtures" / "auharness_e2e"
RATE = 16000
#: AU-Harness's chunk of a model with no ``chunk_size`` (seconds), and the configs' own
CHUNK_SECONDS = 30

CHAT_MODEL = "chat-model"
ASR_MODEL = "asr-model"
JUDGE_MODEL = "judge-model"
#: what the server answers a request no rule matches: a request the comparison did not plan for shows up
UNPLANNED = "UNPLANNED REQUEST"

#: AU-Harness task -> where its hub copy keeps the split's parquet file (the hub's own layout), and its rows.
#: ``clip`` is a row of the espeak set; ``chat``/``asr`` the fake model's answers (a list: one per 30 s chunk).
DATASETS: dict[str, dict[str, Any]] = {
    "librispeech_test_clean": {
        "repo": "AudioLLMs/librispeech_test_clean",
        "file": "data/test-00000-of-00001.parquet",
        "audio_column": "context",
        "rows": [
            {
                "clip": 0,
                "instruction": "Please transcribe the speech.",
                "answer": "mister brown paid twenty one dollars",
                "chat": ["Mr. Brown paid $21."],
                "asr": ["Mister Brown paid 21 dollars."],
            },
            {
                "clip": 1,
                "instruction": "Transcribe the audio into text.",
                "answer": "the meeting was moved to half past ten",
                "chat": ["The meeting was moved to 10:30."],
                "asr": ["the meeting was moved to half past ten"],
            },
            {
                "clip": 2,
                "instruction": "Write down what you hear.",
                "answer": "she bought three apples and two loaves of bread",
                "chat": ["She bought 3 apples and 2 loaves of bread."],
                "asr": ["She bought three apples and two loaves of bread."],
            },
            {
                "clip": 3,
                "instruction": "Please transcribe the speech.",
                "answer": "my brother moved to a small town by the sea",
                "chat": ["<think>a short clip</think>My brother moved to a small town by the sea."],
                "asr": ["My brother moved to a small town by sea"],
            },
            {
                "clip": 5,
                "instruction": "Can you transcribe this?",
                "answer": "how many people are coming to the party on saturday night",
                "chat": [""],
                "asr": ["How many people are coming to the party on Saturday night?"],
            },
            {
                "clip": 57,
                "instruction": "Transcribe the recording.",
                "answer": "the first part and the second part",
                "chat": ["the first part", " and the second part"],
                "asr": ["the first part", "and the second part"],
            },
        ],
    },
    "iemocap_emotion_recognition": {
        "repo": "AudioLLMs/iemocap_emotion_recognition",
        "file": "data/test-00000-of-00001.parquet",
        "audio_column": "context",
        "rows": [
            {
                "clip": 6,
                "instruction": "What emotion does the speaker convey?",
                "answer": "anger",
                "chat": ["anger"],
                "judge": '{"score": 1, "explanation": "same"}',
            },
            {
                "clip": 7,
                "instruction": "How does the speaker feel?",
                "answer": "sadness",
                "chat": ["sad"],
                "judge": '{"score": 1, "explanation": "close"}',
            },
            {
                "clip": 8,
                "instruction": "Identify the emotion in the voice.",
                "answer": "happiness",
                "chat": ["neutral"],
                "judge": '{"score": 0, "explanation": "no"}',
            },
            {
                "clip": 9,
                "instruction": "What emotion does the speaker convey?",
                "answer": "fear",
                "chat": ["fear"],
                "judge": '{"score": 1}',
            },
            {
                "clip": 10,
                "instruction": "Which emotion is expressed?",
                "answer": "anger",
                "chat": ["anger"],
                "judge": '{"score": 1, "explanation": "same"}',
            },
            {
                "clip": 11,
                "instruction": "How does the speaker sound?",
                "answer": "frustration",
                "chat": ["frustration."],
                "judge": "Yes, they match.",
            },
            {
                "clip": 12,
                "instruction": "What is the speaker's emotional state?",
                "answer": "excitement",
                "chat": ["excited"],
                "judge": '```json\n{"score": 1}\n```',
            },
            {
                "clip": 13,
                "instruction": "Name the emotion.",
                "answer": "surprise",
                "chat": ["Surprise"],
                "judge": '<think>compare the labels</think>{"score": 1, "explanation": "ok"}',
            },
        ],
    },
    "covost2_en_de": {
        "repo": "fixie-ai/covost2",
        "file": "en_de/test-00000-of-00001.parquet",
        "audio_column": "audio",
        "rows": [
            {
                "clip": 14,
                "sentence": "I have three apples.",
                "translation": "Ich habe drei Äpfel.",
                "chat": ["Ich habe 3 Äpfel."],
            },
            {
                "clip": 15,
                "sentence": "The weather is nice today.",
                "translation": "Das Wetter ist heute schön.",
                "chat": ["Das Wetter ist heute schön."],
            },
            {
                "clip": 16,
                "sentence": "We meet at ten o'clock.",
                "translation": "Wir treffen uns um zehn Uhr.",
                "chat": ["Wir treffen uns um 10 Uhr."],
            },
            {
                "clip": 17,
                "sentence": "He buys bread.",
                "translation": " Er kauft Brot. ",
                "chat": ["Er kauft ein Brot."],
            },
        ],
    },
    "gsm8k_text": {
        "repo": "openai/gsm8k",
        "file": "main/test-00000-of-00001.parquet",
        "audio_column": None,
        "rows": [
            {
                "question": "Tom has 3 apples and buys 5 more. How many apples does he have?",
                "answer": "Tom has 3+5=<<3+5=8>>8 apples.\n#### 8",
                "chat": ["3 + 5 = 8, so the answer is \\boxed{8}."],
            },
            {
                "question": "A box holds 12 eggs. How many eggs are in 2 boxes?",
                "answer": "2*12=<<2*12=24>>24 eggs.\n#### 24",
                "chat": ["Two boxes hold \\boxed{24.0} eggs."],
            },
            {
                "question": "A shop sells 250 cups a day. How many cups does it sell in 4 days?",
                "answer": "250*4=<<250*4=1000>>1000\n#### 1000",
                "chat": ["It sells 1,000 cups: \\boxed{1,000}"],
            },
        ],
    },
}

#: the three AU-Harness configs (in CONFIGS) and the tasks each runs
RUNS: dict[str, list[str]] = {
    "librispeech": ["librispeech_test_clean"],
    "iemocap": ["iemocap_emotion_recognition"],
    "covost2_gsm8k": ["covost2_en_de", "gsm8k_text"],
}


def _speech_clips() -> list[np.ndarray]:
    table = pq.read_table(SPEECH, columns=["audio"])
    clips = []
    for cell in table.column("audio").to_pylist():
        samples, rate = sf.read(io.BytesIO(cell["bytes"]), dtype="int16")
        assert rate == RATE, rate
        clips.append(samples)
    return clips


def clip(index: int, _cache: dict[int, np.ndarray] = {}) -> np.ndarray:  # noqa: B006 - a module-level memo
    """Row ``index`` of the espeak set at half amplitude, int16 (see the module's note on why half)."""
    if not _cache:
        for i, samples in enumerate(_speech_clips()):
            _cache[i] = (samples.astype(np.int32) // 2).astype(np.int16)
    return _cache[index]


def fingerprint(samples: np.ndarray) -> str:
    """The test server's audio fingerprint (sha256 of the int16 little-endian samples)."""
    return hashlib.sha256(samples.astype("<i2").tobytes()).hexdigest()


def chunks(samples: np.ndarray) -> list[np.ndarray]:
    """The pieces AU-Harness cuts a clip into for a task with ``long_audio_processing_logic: chunk``."""
    size = CHUNK_SECONDS * RATE
    return [samples[i : i + size] for i in range(0, len(samples), size)] or [samples]


def _wav(samples: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, samples, RATE, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def _columns(task: str, index: int, row: dict[str, Any]) -> dict[str, Any]:
    spec = DATASETS[task]
    if task == "gsm8k_text":
        return {"question": row["question"], "answer": row["answer"]}
    audio = {"bytes": _wav(clip(row["clip"])), "path": f"{task}_{index}.wav"}
    if task == "covost2_en_de":
        return {
            "client_id": f"speaker{index}",
            "file": f"{task}_{index}.mp3",
            spec["audio_column"]: audio,
            "sentence": row["sentence"],
            "translation": row["translation"],
            "id": f"{task}_{index}",
        }
    return {spec["audio_column"]: audio, "instruction": row.get("instruction", ""), "answer": row["answer"]}


def _features(columns: dict[str, Any]) -> dict[str, Any]:
    """The ``datasets`` features of the columns, as the hub's parquet files carry them in their metadata."""
    return {
        name: {"_type": "Audio"} if isinstance(value, dict) else {"dtype": "string", "_type": "Value"}
        for name, value in columns.items()
    }


def write_copies(root: Path) -> dict[str, Path]:
    """Write each dataset's local copy (the hub repo's layout) under ``root``; task -> the copy's folder."""
    folders = {}
    for task, spec in DATASETS.items():
        rows = [_columns(task, i, row) for i, row in enumerate(spec["rows"])]
        table = pa.Table.from_pylist(rows)
        metadata = {b"huggingface": json.dumps({"info": {"features": _features(rows[0])}}).encode()}
        table = table.replace_schema_metadata(metadata)
        folder = root / spec["repo"].replace("/", "--")
        path = folder / spec["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        folders[task] = folder
    return folders


def sample_of_audio() -> dict[str, str]:
    """Audio fingerprint -> the sample it belongs to (``task/index``, ``#chunk`` added for a clip's pieces)."""
    table = {}
    for task, spec in DATASETS.items():
        for i, row in enumerate(spec["rows"]):
            if "clip" not in row:
                continue
            samples = clip(row["clip"])
            table[fingerprint(samples)] = f"{task}/{i}"
            pieces = chunks(samples)
            if len(pieces) > 1:
                for j, piece in enumerate(pieces):
                    table[fingerprint(piece)] = f"{task}/{i}#{j}"
    return table


def judge_user_text(candidate: str, reference: str) -> str:
    """The user message AU-Harness's judges send (metrics/llm_judge.py ``_judge_all``)."""
    return f"candidate: {candidate}\nreference: {reference}"


def server_script() -> dict[str, Any]:
    """The fake model: answers by model and audio fingerprint (per chunk), by question text, and the judge's replies."""
    rules: list[dict[str, Any]] = []
    for task, spec in DATASETS.items():
        for row in spec["rows"]:
            if "clip" not in row:
                rules.append({"model": CHAT_MODEL, "match": row["question"], "answer": row["chat"][0]})
                continue
            pieces = chunks(clip(row["clip"]))
            for model in (CHAT_MODEL, ASR_MODEL):
                answers = row.get("chat" if model == CHAT_MODEL else "asr")
                if answers is None:
                    continue
                assert len(answers) == len(pieces), (task, row)
                for piece, answer in zip(pieces, answers):
                    rules.append({"model": model, "audio_fingerprint": fingerprint(piece), "answer": answer})
            if "judge" in row:
                candidate = row["chat"][0].strip()
                text = judge_user_text(candidate, row["answer"])
                rules.append({"model": JUDGE_MODEL, "match": f"re:^{_escape(text)}$", "answer": row["judge"]})
    return {"default_answer": UNPLANNED, "answers": rules}


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def normalise_request(event: dict[str, Any], samples: dict[str, str]) -> dict[str, Any]:
    """What the comparison keeps of one request the server logged: its sample, text, settings, form."""
    record: dict[str, Any] = {"model": event["model"], "path": event["path"].rsplit("/v1/", 1)[-1]}
    if "form" in event:
        record["sample"] = samples.get(event.get("audio_fingerprint") or "", "?")
        record["form"] = dict(sorted(event["form"].items()))
        record["answer"] = event.get("answer")
        return record
    fingerprints = [fp for m in event["messages"] for fp in m["audio_fingerprints"]]
    if fingerprints:
        record["sample"] = samples.get(fingerprints[0], "?")
    else:  # a text task's sample by its question; a judge's request is compared whole
        text = event["messages"][-1]["text"] if event["messages"] else ""
        record["sample"] = next((name for name, question in _questions() if question in text), None)
    record["params"] = dict(sorted(event["params"].items()))
    record["messages"] = [
        {"role": m["role"], "text": m["text"], "n_audio": m["n_audio"], "audio_fingerprints": m["audio_fingerprints"]}
        for m in event["messages"]
    ]
    record["answer"] = event.get("answer")
    return record


def _questions() -> list[tuple[str, str]]:
    return [
        (f"{task}/{i}", row["question"])
        for task, spec in DATASETS.items()
        for i, row in enumerate(spec["rows"])
        if "question" in row and spec["audio_column"] is None
    ]


def request_key(record: dict[str, Any]) -> str:
    """A sort key that puts the same requests of two runs side by side."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False)

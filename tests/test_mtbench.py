"""MT-Bench (AU-Harness's mtbench_audio and mtbench_text) with ``mt_bench_llm_judge``, end to end.

The shipped runspec entries are pointed at a local parquet file in the hub's shape (``turns`` and ``reference``
as lists of texts, ``audio`` as a list of {bytes, path} recordings, one per turn) and run against the project's
test server as the model and as the judge: the second request carries the model's first answer, the judge is
asked once per turn with the text AU-Harness builds (written out below from reading its MtbenchLLMJudgeMetric
and prompts/judge_prompts.yaml, not produced by evalkit's code), every turn's answer is in the record, and a
turn whose request failed fails the sample without a judge call. The reading of ratings and the per-sample and
corpus figures are checked against a table of AU-Harness's behaviour.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml
from helpers import model_entry, run, write_config

from evalkit.data.sample import Sample, Turn
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.auharness.judges import UnreadableVerdict, mt_bench_overall, read_mt_bench_rating
from evalkit.metrics.base import TURN_ANSWERS
from evalkit.run.rescore import rescore
from evalkit.testing import audio_fingerprint

ROOT = Path(__file__).resolve().parent.parent
RUNSPEC = ROOT / "runspecs" / "spoken_language_reasoning" / "mtbench.json"
PROMPTS = ROOT / "evalkit" / "prompts" / "judges" / "auharness"
SR = 16000

#: (question_id, category, turns, reference); the roleplay's second turn fails at the model
ROWS = [
    (81, "writing", ["Write a haiku about tea.", "Now rewrite it as a limerick."], []),
    (111, "math", ["What is 2+3?", "Now multiply that by 4."], ["5", "20"]),
    (91, "roleplay", ["Pretend to be a pirate.", "Say goodbye like a pirate."], []),
]
#: the judge's reply to each (question_id, turn): read as AU-Harness reads them (9, 7, 10, 2)
VERDICTS = {
    (81, 1): "Vivid and on topic. Rating: [[9]]",
    (81, 2): "Rating: [[7]]",
    (111, 1): "<think>2 + 3 is 5, and turn 2 asks for 20</think>Correct. [[10]]",
    (111, 2): "It says 25, the reference says 20. Rating: [2]",
}


def answer(qid: int, turn: int) -> str:
    return f"A{qid}-{turn}"


def recording(qid: int, turn: int) -> bytes:
    """A different chirp per question and turn (its fingerprint picks the model's answer)."""
    t = np.arange(int(0.4 * SR)) / SR
    pcm = np.rint(0.3 * np.sin(2 * np.pi * ((200 + qid + 300 * turn) * t + 40 * t * t)) * 32767).astype(np.int16)
    buffer = io.BytesIO()
    sf.write(buffer, pcm, SR, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


@pytest.fixture()
def runspecs(tmp_path: Path) -> Path:
    """The shipped mtbench entries, renamed and reading a local parquet copy in the hub's columns."""
    audio_type = pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    table = pa.table(
        {
            "question_id": [r[0] for r in ROWS],
            "category": [r[1] for r in ROWS],
            "turns": [r[2] for r in ROWS],
            "reference": [r[3] for r in ROWS],
            "lang": ["en"] * len(ROWS),
            "audio": pa.array(
                [[{"bytes": recording(r[0], t), "path": None} for t in (1, 2)] for r in ROWS], type=audio_type
            ),
        }
    )
    data = tmp_path / "mt-bench_audio.parquet"
    pq.write_table(table, data)
    shipped = json.loads(RUNSPEC.read_text("utf-8"))
    spec: dict[str, Any] = {"_task": shipped["_task"]}
    for name in ("mtbench_audio", "mtbench_text"):
        entry = {k: v for k, v in shipped[name].items() if k not in ("hf_repo", "split", "checked")}
        spec[f"tiny_{name}"] = {**entry, "path": str(data)}
    folder = tmp_path / "runspecs" / "mt"
    folder.mkdir(parents=True)
    (folder / "tiny_mtbench.json").write_text(json.dumps(spec))
    return tmp_path / "runspecs"


def _last_turn(qid: int, turn: int) -> str:
    """What ends the judge's text for one turn: the answer it rates, then the end marker."""
    return f"### Assistant A (Turn {turn}):\n{answer(qid, turn)}\n\n<|The End of Assistant A's Conversation"


def _servers(make_server: Any, spoken: bool) -> tuple[Any, Any]:
    model_rules: list[dict[str, Any]] = []
    for qid, _, turns, _ in ROWS:
        for t, text in enumerate(turns, 1):
            rule: dict[str, Any] = (
                {"audio_fingerprint": audio_fingerprint(recording(qid, t))} if spoken else {"match": text}
            )
            rule["answer"] = answer(qid, t)
            if qid == 91 and t == 2:
                rule["fault"] = "500"
            model_rules.append(rule)
    model = make_server({"answers": model_rules}, request_log=True)
    judge_rules = [{"match": _last_turn(qid, t), "answer": reply} for (qid, t), reply in VERDICTS.items()]
    judge = make_server({"answers": judge_rules}, request_log=True)
    return model, judge


def _config(tmp_path: Path, runspecs: Path, dataset: str, model: Any, judge: Any, **metric: Any) -> Path:
    entry: list[Any] = [dataset, "mt_bench_llm_judge"]
    if metric:
        entry.append(metric)
    return write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [entry],
            "models": [model_entry("m", model.base_url, retry_attempts=0, timeout=60)],
            "judge_properties": {
                "judge_model": "judge-m",
                "judge_type": "vllm",
                "judge_api_endpoint": judge.base_url,
                "judge_api_key": "k",
                "judge_retry_attempts": 0,
            },
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )


def _system(name: str) -> str:
    return str(yaml.safe_load((PROMPTS / f"{name}.yaml").read_text("utf-8"))["system"])


def _judge_text_without_reference(questions: list[str], answers: list[str], turn: int) -> str:
    """AU-Harness's no_reference_turn_n user text for ``turn`` (1-based), written out."""
    history = (
        "(No previous conversation)"
        if turn == 1
        else f"### User (Turn 1):\n{questions[0]}\n\n### Assistant A (Turn 1):\n{answers[0]}"
    )
    return (
        "<|The Start of Assistant A's Conversation with User|>\n\n"
        f"{history}\n\n"
        f"### User (Turn {turn}):\n{questions[turn - 1]}\n\n"
        f"### Assistant A (Turn {turn}):\n{answers[turn - 1]}\n\n"
        "<|The End of Assistant A's Conversation with User|>\n"
    )


def _judge_text_with_reference(questions: list[str], references: list[str], answers: list[str], turn: int) -> str:
    """AU-Harness's reference_turn_n user text for ``turn`` (1-based), written out."""
    if turn == 1:
        ref_history = history = "(No previous conversation)"
    else:
        ref_history = f"### User (Turn 1):\n{questions[0]}\n\n### Reference answer (Turn 1):\n{references[0]}"
        history = f"### User (Turn 1):\n{questions[0]}\n\n### Assistant A (Turn 1):\n{answers[0]}"
    return (
        "<|The Start of Reference Answer|>\n\n"
        f"{ref_history}\n\n"
        f"### User (Turn {turn}):\n{questions[turn - 1]}\n\n"
        f"### Reference answer (Turn {turn}):\n{references[turn - 1]}\n\n"
        "<|The End of Reference Answer|>\n\n\n"
        "<|The Start of Assistant A's Conversation with User|>\n\n"
        f"{history}\n\n"
        f"### User (Turn {turn}):\n{questions[turn - 1]}\n\n"
        f"### Assistant A (Turn {turn}):\n{answers[turn - 1]}\n\n"
        "<|The End of Assistant A's Conversation with User|>\n"
    )


@pytest.mark.parametrize("variant", ["text", "audio"])
def test_two_turns_end_to_end_as_au_harness_runs_them(
    tmp_path: Path, make_server: Any, runspecs: Path, variant: str
) -> None:
    spoken = variant == "audio"
    dataset = f"tiny_mtbench_{variant}"
    model, judge = _servers(make_server, spoken)
    outcome = run(_config(tmp_path, runspecs, dataset, model, judge), no_cache=True)

    # the model: turn 2 carries turn 1 and the model's own first answer; spoken turns come with AU-Harness's words
    asked = [e["messages"] for e in model.log_events("completed") if "messages" in e]
    for qid, _, turns, _ in ROWS:
        if spoken:
            first, second = [("Please respond to the audio.", [audio_fingerprint(recording(qid, t))]) for t in (1, 2)]
        else:
            first, second = [(text, []) for text in turns]
        mine = [m for m in asked if (m[0]["text"], m[0]["audio_fingerprints"]) == first]
        conversation = [("user", *first), ("assistant", answer(qid, 1), []), ("user", *second)]
        expected = [conversation[:1]] if qid == 91 else [conversation[:1], conversation]  # 91's turn 2: HTTP 500
        assert [[(x["role"], x["text"], x["audio_fingerprints"]) for x in m] for m in mine] == expected, qid
    assert len(model.log_events("fault")) == 1

    # the judge: once per judged turn, AU-Harness's system text unformatted and its user text filled in
    judged = sorted(
        ((m[0]["role"], m[0]["text"]), (m[1]["role"], m[1]["text"]))
        for m in (e["messages"] for e in judge.log_events("completed"))
    )
    general, graded = _system("mt_bench_llm_judge"), _system("mt_bench_llm_judge_reference")
    assert "{turn_number}" in general and "{turn_number}" in graded  # AU-Harness never formats the system text
    expected = []
    for qid, category, questions, references in ROWS[:2]:
        answers = [answer(qid, 1), answer(qid, 2)]
        for turn in (1, 2):
            if category == "math":
                user = _judge_text_with_reference(questions, references, answers, turn)
                expected.append((("system", graded), ("user", user)))
            else:
                expected.append(
                    (("system", general), ("user", _judge_text_without_reference(questions, answers, turn)))
                )
    assert judged == sorted(expected)  # and nothing about the conversation whose second turn failed

    records = {
        r["sample_id"]: r
        for r in map(json.loads, (outcome.run_dir / "records" / f"{dataset}__mt_bench_llm_judge.jsonl").open())
    }
    assert records["81"]["answers"] == ["A81-1", "A81-2"] and records["81"]["prediction"] == "A81-2"
    assert records["81"]["score"] == 80.0 and records["81"]["details"]["ratings"] == [9.0, 7.0]
    assert records["111"]["score"] == 60.0 and records["111"]["details"]["category"] == "math"
    failed = records["91"]
    assert failed["score"] is None and failed["failure"] == "http_500" and "turn 2/2" in failed["error"]
    assert failed["answers"] == ["A91-1"]  # what was answered before the failure, for a reader
    (row,) = outcome.rows
    assert (row.n, row.n_failed) == (2, 1) and row.score == pytest.approx(70.0)

    # what was sent, as a reader finds it: every turn, the first answer between them, a recording named by its cell
    sent = {}
    for line in (outcome.run_dir / "records" / "sent" / f"{dataset}.jsonl").read_text().splitlines():
        entry = json.loads(line)
        sent.setdefault(entry["key"], entry)
    messages = sent[records["81"]["sent"]]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"] and messages[1]["content"] == [
        {"type": "text", "text": "A81-1"}
    ]
    if spoken:
        cells = [p["audio"]["file"] for m in (messages[0], messages[2]) for p in m["content"] if p["type"] == "audio"]
        assert [(c["column"], c["row"]) for c in cells] == [("audio[0]", 0), ("audio[1]", 0)]

    # a re-score rates the recorded answers again (the judge's answers come from the store): the same figures
    (again,) = [r for r in rescore(outcome.run_dir, "mt_bench_llm_judge", write=False) if r.kind == "dataset"]
    assert (again.n, again.n_failed, again.score) == (row.n, row.n_failed, row.score)


def test_an_unreadable_rating_scores_zero_as_au_harness_does_or_fails_on_request(
    tmp_path: Path, make_server: Any, runspecs: Path
) -> None:
    model, _ = _servers(make_server, spoken=False)
    judge = make_server(
        {"answers": [{"match": _last_turn(81, 2), "answer": "No rating from me."}], "default_answer": "[[6]]"}
    )
    zero = run(_config(tmp_path, runspecs, "tiny_mtbench_text", model, judge), no_cache=True)
    assert zero.rows[0].score == pytest.approx((30.0 + 60.0) / 2), zero.rows  # 81: (6 + 0) x 10 / 2
    outcome = run(
        _config(tmp_path, runspecs, "tiny_mtbench_text", model, judge, unreadable_verdict="fail"), no_cache=True
    )
    records = {
        r["sample_id"]: r
        for r in map(json.loads, (outcome.run_dir / "records" / "tiny_mtbench_text__mt_bench_llm_judge.jsonl").open())
    }
    assert records["81"]["failure"] == FailureReason.JUDGE_PARSE and "turn 2/2" in records["81"]["error"], records
    assert records["111"]["score"] == 60.0, records


# -- AU-Harness's reading and arithmetic, as a table ---------------------------------------------------------------

#: judge reply -> the rating AU-Harness's MtbenchLLMJudgeMetric._score_once reads (None: no number, it scores 0)
READINGS = [
    ("Rating: [[8]]", 8.0),
    ("[[7.5]]", 7.5),
    ("Rating: [6]", 6.0),
    ("[[ 9 ]]", 9.0),
    ("[[10]", 10.0),
    ("[3]]", 3.0),
    ("  <think>maybe [[2]]</think>\nRating: [[8]]  ", 8.0),
    ("Turn 2 is weaker. Rating: [[4]]", 4.0),  # the bracketed number wins over an earlier bare one
    ("The answer to turn 2 deserves [[8/10]]", 2.0),  # no bracketed number: the first number of all
    ("Score: 8 out of 10", 8.0),
    ('"[[rating]]", so: 5', 5.0),
    ("[[85]]", 85.0),  # never clipped to 1-10
    ("Rating: [[5.]]", 5.0),
    ("[[1e3]]", 1.0),
    ("-3", 3.0),
    ("No score given.", None),
    ("<think>[[9]]</think>", None),
    ("", None),
]

#: turn ratings -> AU-Harness's per-conversation "overall": round(mean x 10, 2 places), on 0-100
OVERALLS = [
    ([9.0, 7.0], 80.0),
    ([10.0, 2.0], 60.0),
    ([8.0], 80.0),
    ([7.5, 8.0], 77.5),
    ([1.0, 2.0, 2.0], 16.67),
    ([3.0, 4.0, 4.0], 36.67),
    ([10.0, 10.0], 100.0),
    ([0.0, 85.0], 425.0),
]


@pytest.mark.parametrize(("reply", "rating"), READINGS)
def test_ratings_are_read_as_au_harness_reads_them(reply: str, rating: float | None) -> None:
    if rating is None:
        with pytest.raises(UnreadableVerdict):
            read_mt_bench_rating(reply)
    else:
        assert read_mt_bench_rating(reply) == rating


@pytest.mark.parametrize(("ratings", "overall"), OVERALLS)
def test_a_conversation_scores_the_mean_rating_times_ten(ratings: list[float], overall: float) -> None:
    assert mt_bench_overall(ratings) == overall


class ScriptedJudge:
    """A judge that answers each turn from a list, in the order asked, and keeps what it was sent."""

    model = "judge-m"
    prompt_model = "judge-m"

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.sent: list[list[dict[str, Any]]] = []

    async def ask(self, messages: list[dict[str, Any]], **params: Any) -> Any:
        self.sent.append(messages)
        text = next(reply for key, reply in self.replies.items() if messages[-1]["content"].rstrip().endswith(key))
        return SimpleNamespace(ok=True, text=text, failure=None, error=None)


def test_the_corpus_is_the_mean_of_the_conversations(tmp_path: Path) -> None:
    """AU-Harness's figure: the mean of the per-conversation overalls (it rounds the mean to 2 places too)."""
    cases = [
        (
            ["q1", "q2"],
            ["a", "b"],
            {
                "a\n\n<|The End of Assistant A's Conversation with User|>": "[[9]]",
                "b\n\n<|The End of Assistant A's Conversation with User|>": "[[4]]",
            },
        ),
        (
            ["q1", "q2", "q3"],
            ["c", "d", "e"],
            {f"{x}\n\n<|The End of Assistant A's Conversation with User|>": "[[3]]" for x in "cde"},
        ),
    ]
    metric_cls = METRICS.get("mt_bench_llm_judge")
    acc = ScoreAccumulator(metric_cls(language="en"))
    for questions, answers, replies in cases:
        judge = ScriptedJudge(replies)
        metric = metric_cls(language="en", judge=judge)
        sample = Sample(
            id="x", turns=[Turn(text=q) for q in questions], meta={"category": "writing", TURN_ANSWERS: answers}
        )
        scored = asyncio.run(metric.ascore(answers[-1], sample))
        assert scored.failure is None and len(judge.sent) == len(questions)
        acc.add(scored)
    assert acc.result().score == pytest.approx((65.0 + 30.0) / 2)


def test_a_hub_list_of_recordings_stays_encoded_and_becomes_spoken_turns(tmp_path: Path) -> None:
    """The hub path: ``datasets`` is told not to decode a list-of-audio column (its decoder needs torchcodec)."""
    import datasets

    from evalkit.catalog import DatasetSpec
    from evalkit.data.loading import iter_with_datasets, row_to_sample

    features = datasets.Features({"question_id": datasets.Value("int64"), "audio": datasets.List(datasets.Audio())})
    rows = {"question_id": [81], "audio": [[{"bytes": recording(81, t), "path": None} for t in (1, 2)]]}
    pq.write_table(pa.table(rows, schema=features.arrow_schema), tmp_path / "test.parquet")
    spec = DatasetSpec(
        name="mt",
        task="mtbench",
        category="c",
        file="mt.json",
        hf_repo="parquet",
        language="en",
        split="train",
        data_files=str(tmp_path / "test.parquet"),
        turns_column="audio",
        id_column="question_id",
    )
    (row,) = list(iter_with_datasets(spec, "parquet"))
    sample = row_to_sample(row, 0, spec, tmp_path)
    assert sample.turns is not None and [t.text for t in sample.turns] == [None, None]
    assert [t.audio.data if t.audio else None for t in sample.turns] == [recording(81, 1), recording(81, 2)]

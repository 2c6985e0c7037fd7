"""Re-scoring a finished run from its records: equal to a direct run, and no model request sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import E2E_JUDGE_RULES, JUDGE_QA, judge_runspecs, model_entry, write_config

from evalkit.config import load_config
from evalkit.errors import ConfigError, UserError
from evalkit.plan import build_plan
from evalkit.report.results import ResultRow
from evalkit.run.rescore import arescore, rescore, rescore_command
from evalkit.run.runner import RunOptions, execute

MCQ = [
    ("m1", "What is the capital of France?", ["Rome", "Paris", "Oslo"], "Paris", "The answer is (B) Paris"),
    ("m2", "How many legs does a spider have?", ["six", "eight", "ten"], "eight", "eight"),
    ("m3", "What colour is a clear daytime sky?", ["green", "blue", "red"], "blue", "I'd say C"),
    ("m4", "Which planet is the red planet?", ["Venus", "Mars", "Jupiter"], "Mars", "Mars"),
    ("m5", "What is the opposite of hot?", ["cold", "warm", "wet"], "cold", "Option A: cold"),
    ("m6", "Which animal barks?", ["cat", "dog", "cow"], "dog", "a dog"),
    ("m7", "What do bees make?", ["milk", "silk", "honey"], "honey", "(C)"),
    ("m8", "Which is a fruit?", ["apple", "carrot", "potato"], "apple", "carrot"),
]


def mcq_runspecs(root: Path) -> Path:
    (root / "runspecs" / "choice").mkdir(parents=True)
    with (root / "mcq.jsonl").open("w") as handle:
        for qid, question, choices, answer, _ in MCQ:
            handle.write(json.dumps({"id": qid, "question": question, "choices": choices, "answer": answer}) + "\n")
    spec = {
        "_task": {"description": "multiple choice", "metrics": ["exact_match", "f1", "mcq_accuracy"]},
        "tiny_mcq": {
            "path": "../../mcq.jsonl",
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "question",
            "target_column": "answer",
            "choices_column": "choices",
            "instruction": "Pick one option.",
        },
    }
    (root / "runspecs" / "choice" / "tiny_mcq.json").write_text(json.dumps(spec))
    return root / "runspecs"


def _run(config_path: Path, **options: Any) -> Path:
    plan = build_plan(load_config(config_path), source=str(config_path))
    outcome = asyncio.run(execute(plan, RunOptions(quiet=True, **options)))
    assert not any(e.error for e in outcome.engines), [e.error for e in outcome.engines]
    return outcome.run_dir


def _rows(rows: list[ResultRow]) -> dict[tuple[str, str], ResultRow]:
    return {(r.dataset, r.model): r for r in rows if r.kind == "dataset"}


def _direct(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    results = json.loads((path / "results.json").read_text())["results"]
    return {(r["dataset"], r["model"]): r for r in results}


def _assert_same(rescored: ResultRow, direct: dict[str, Any], exact_ci: bool = True) -> None:
    assert rescored.score == pytest.approx(direct["score"], abs=1e-12)
    assert (rescored.n, rescored.n_failed, rescored.failure_reasons) == (
        direct["n"],
        direct["n_failed"],
        direct["failure_reasons"],
    )
    if exact_ci:
        assert rescored.ci_low == pytest.approx(direct["ci_low"], abs=1e-12)
        assert rescored.ci_high == pytest.approx(direct["ci_high"], abs=1e-12)


@pytest.fixture()
def mcq_setup(tmp_path: Path, make_server, speech_runspecs) -> dict[str, Any]:
    fps = speech_runspecs["fingerprints"]
    answers = [{"match": q, "answer": a} for _, q, _, _, a in MCQ]
    asr = [
        {"audio_fingerprint": fps["clip1"], "answer": "hello word"},
        {"audio_fingerprint": fps["clip2"], "answer": "the cat sat on mat"},
        {"audio_fingerprint": fps["clip3"], "answer": "good morning everyone"},
    ]
    server_a = make_server({"answers": answers + asr})
    # model-b's server answers some requests with a malformed body: deterministic per request body
    # (seeded), so each fresh run (fault draws reset) fails the same samples
    server_b = make_server({"answers": answers + asr, "faults": {"seed": 3, "rates": {"malformed": 0.35}}})
    runspecs = [str(mcq_runspecs(tmp_path)), str(speech_runspecs["dir"])]

    def config(name: str, pairs: list[list[str]]) -> Path:
        return write_config(
            tmp_path / f"{name}.yaml",
            {
                "dataset_metric": pairs,
                "models": [
                    model_entry("model-a", server_a.base_url),
                    model_entry("model-b", server_b.base_url, retry_attempts=0),
                ],
                "runspecs_dir": runspecs,
                "output_dir": str(tmp_path / name),
            },
        )

    return {"servers": (server_a, server_b), "config": config}


def test_rescore_equals_a_direct_run_and_asks_no_model(mcq_setup: dict[str, Any]) -> None:
    servers, config = mcq_setup["servers"], mcq_setup["config"]
    run_dir = _run(config("first", [["tiny_mcq", "exact_match"], ["tiny_asr", "word_error_rate"]]))
    first = _direct(run_dir)
    assert first[("tiny_mcq", "model-b")]["n_failed"] > 0  # the seeded faults did fail some requests
    before = [s.stats()["requests"] for s in servers]

    f1 = _rows(rescore(run_dir, "token_f1"))
    mcq = _rows(rescore(run_dir, "mcq_accuracy"))
    cer = _rows(rescore(run_dir, "cer"))
    assert [s.stats()["requests"] for s in servers] == before  # re-scoring sent nothing to any model
    assert set(f1) == set(mcq) == {("tiny_mcq", "model-a"), ("tiny_mcq", "model-b")}  # f1 does not fit the ASR task
    saved = json.loads((run_dir / "rescore_f1.json").read_text())
    assert "tiny_asr" in saved["skipped"] and saved["model_requests"] == 0 and len(saved["results"]) == 2
    assert (run_dir / "rescore" / "tiny_mcq__mcq_accuracy.jsonl").is_file()

    for metric, rescored in (("f1", f1), ("mcq_accuracy", mcq)):
        for s in servers:
            s.reset_stats(faults=True)
        direct = _direct(_run(config(f"direct_{metric}", [["tiny_mcq", metric]]), no_cache=True))
        for key, row in rescored.items():
            _assert_same(row, direct[key])
    # mcq_accuracy read the options from the rebuilt samples: "I'd say C" is wrong, "(C)" is right
    assert mcq[("tiny_mcq", "model-a")].score == pytest.approx(6 / 8)
    records = {
        json.loads(line)["sample_id"]: json.loads(line)
        for line in (run_dir / "rescore" / "tiny_mcq__mcq_accuracy.jsonl").read_text().splitlines()
        if '"model-a"' in line
    }
    assert records["m7"]["details"]["extracted"] == "C" and records["m7"]["score"] == 1.0

    for s in servers:
        s.reset_stats(faults=True)
    direct_cer = _direct(_run(config("direct_cer", [["tiny_asr", "cer"]]), no_cache=True))
    for key, row in cer.items():
        # a corpus metric's bootstrap follows record order, which concurrency may shuffle: the score is exact
        _assert_same(row, direct_cer[key], exact_ci=False)
        assert (
            row.details["groups"]["audio_length"].keys() == direct_cer[key]["details"]["groups"]["audio_length"].keys()
        )


def test_rescore_without_rebuilding_samples_loses_the_options(mcq_setup: dict[str, Any]) -> None:
    run_dir = _run(mcq_setup["config"]("plain", [["tiny_mcq", "exact_match"]]))
    rebuilt = _rows(rescore(run_dir, "mcq_accuracy", write=False))
    records_only = _rows(rescore(run_dir, "mcq_accuracy", rebuild=False, write=False))
    # without meta["choices"] the option texts "Paris" are unresolvable references
    assert records_only[("tiny_mcq", "model-a")].failure_reasons.get("unresolvable reference")
    assert rebuilt[("tiny_mcq", "model-a")].n_failed == 0
    assert not (run_dir / "rescore_mcq_accuracy.json").exists()


def test_rescore_with_a_judge_metric(tmp_path: Path, make_server) -> None:
    model = make_server({"answers": [{"match": q, "answer": a} for _, q, _, a in JUDGE_QA]})
    judge = make_server({"answers": E2E_JUDGE_RULES, "require_auth": "judge-key"}, request_log=True)
    runspecs = str(judge_runspecs(tmp_path))

    def config(name: str, metric: str) -> Path:
        return write_config(
            tmp_path / f"{name}.yaml",
            {
                "dataset_metric": [["judge_qa", metric]],
                "models": [model_entry("model-a", model.base_url)],
                "judge_properties": {
                    "judge_model": "judge-model",
                    "judge_type": "vllm",
                    "judge_api_endpoint": judge.base_url,
                    "judge_api_key": "judge-key",
                    "judge_retry_attempts": 0,
                },
                "runspecs_dir": runspecs,
                "output_dir": str(tmp_path / name),
            },
        )

    run_dir = _run(config("em", "exact_match"))
    assert judge.stats()["requests"] == 0
    model_requests = model.stats()["requests"]

    outcome = asyncio.run(arescore(run_dir, "llm_judge_binary"))
    assert model.stats()["requests"] == model_requests
    assert outcome.judge == {
        "model": "judge-model",
        "sent": 4,
        "store_hits": 0,
    }  # the run's config file gave the real key
    rescored = _rows(outcome.rows)[("judge_qa", "model-a")]
    direct = _direct(_run(config("judged", "llm_judge_binary")))[("judge_qa", "model-a")]
    _assert_same(rescored, direct)
    assert rescored.score == pytest.approx(2 / 3) and rescored.failure_reasons == {"judge_parse": 1}
    assert rescored.details["judge_model"] == "judge-model"
    line = next(
        json.loads(x)
        for x in (run_dir / "rescore" / "judge_qa__llm_judge_binary.jsonl").read_text().splitlines()
        if '"q1"' in x
    )
    assert line["details"]["judge"]["model"] == "judge-model" and line["score"] == 1.0

    sent = judge.stats()["requests"]
    assert rescore_command(str(run_dir), ["llm_judge_binary"], output=str(tmp_path / "all.json")) == 0
    assert judge.stats()["requests"] == sent  # the second re-score was answered by the response store
    combined = json.loads((tmp_path / "all.json").read_text())
    assert combined["rescores"][0]["judge"]["store_hits"] == 4
    assert combined["rescores"][0]["results"][0]["score"] == pytest.approx(2 / 3)


def test_rescore_user_errors(tmp_path: Path, mcq_setup: dict[str, Any]) -> None:
    with pytest.raises(UserError, match="no results.json"):
        rescore(tmp_path, "f1")
    run_dir = _run(mcq_setup["config"]("errors", [["tiny_mcq", "exact_match"]]))
    with pytest.raises(ConfigError, match='did you mean "mcq_accuracy"'):
        rescore(run_dir, "mcq_acuracy")
    with pytest.raises(ConfigError, match="needs an LLM judge"):
        rescore(run_dir, "llm_judge_binary")
    assert rescore_command(str(run_dir), ["wer"]) == 1  # the metric fits none of the run's datasets
    assert "tiny_mcq" in json.loads((run_dir / "rescore_word_error_rate.json").read_text())["skipped"]

"""AU-Harness itself and evalkit, end to end on the same three AU-Harness configs, rows and fake model.

``fixtures/references/auharness_e2e.json`` holds what AU-Harness's own engine
(commit daa0616, run by ``make_auharness_e2e.py`` beside it, only its hub
loading replaced by the local copies) sent the project's test server and the
scores it printed, for the configs in ``fixtures/auharness_e2e/``: LibriSpeech
``word_error_rate`` with a chat and a transcription model, IEMOCAP emotion
``llm_judge_binary`` with a judge, CoVoST 2 ``bleu`` and GSM8K text
``gsm8k_exact_match`` under a ``generation_params_override``. Here evalkit runs
the same files (only ``dataset_paths`` and ``output_dir`` added) against the same
scripted server (``auharness_e2e_data.py``), and every request must be the same
request for the same sample: user text, message shape, temperature, token key and
value, transcription form, the judge's calls one for one; then the same per-sample
answers and scores, and the same figures on AU-Harness's scale. Nothing here needs
AU-Harness or the network.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import auharness_e2e_data as data
import pytest
import yaml

from evalkit.config import load_config
from evalkit.plan import build_plan
from evalkit.run.runner import RunOptions, execute
from evalkit.testing import start_test_server

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "auharness_e2e.json").read_text())
RUNS: dict[str, Any] = FIXTURE["runs"]


def _theirs(record: dict[str, Any]) -> dict[str, Any]:
    """AU-Harness's request as compared, its ``"tools": null`` left out (README: evalkit omits it, read the same)."""
    if record.get("params", {}).get("tools", 1) is None:
        record = {**record, "params": {k: v for k, v in record["params"].items() if k != "tools"}}
    return record


@pytest.fixture(scope="module")
def evalkit_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each config run by evalkit: the requests the server logged, the results and the per-sample records."""
    work = tmp_path_factory.mktemp("auharness-e2e")
    folders = data.write_copies(work / "data")
    samples = data.sample_of_audio()
    runs: dict[str, dict[str, Any]] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVALKIT_CACHE_DIR", str(work / "cache"))
        patch.setenv("HF_HUB_OFFLINE", "1")
        for run, tasks in data.RUNS.items():
            server = start_test_server(data.server_script(), request_log=True)
            try:
                patch.setenv("AUH_E2E_URL", server.base_url)
                config = yaml.safe_load((data.CONFIGS / f"{run}.yaml").read_text())
                config["dataset_paths"] = {task: str(folders[task]) for task in tasks}  # AU-Harness's names
                config["output_dir"] = str(work / "runs" / run)
                path = work / f"{run}.yaml"
                path.write_text(yaml.safe_dump(config, sort_keys=False))
                outcome = asyncio.run(execute(build_plan(load_config(path), source=str(path)), RunOptions(quiet=True)))
                assert [e.error for e in outcome.engines] == [None] * len(outcome.engines)
                events = server.log_events("completed")
            finally:
                server.stop()
            records = [
                json.loads(line)
                for file in sorted((outcome.run_dir / "records").glob("*.jsonl"))
                for line in file.read_text().splitlines()
            ]
            runs[run] = {
                "requests": sorted((data.normalise_request(e, samples) for e in events), key=data.request_key),
                "results": json.loads((outcome.run_dir / "results.json").read_text())["results"],
                "records": records,
            }
    return runs


@pytest.mark.parametrize("run", sorted(RUNS))
def test_every_request_is_the_one_auharness_sent_for_the_same_sample(
    run: str, evalkit_runs: dict[str, dict[str, Any]]
) -> None:
    theirs = [_theirs(r) for r in RUNS[run]["requests"]]
    ours = evalkit_runs[run]["requests"]
    assert all(r.get("sample") != "?" for r in theirs + ours), "a request whose audio is no planned clip"
    assert all(r["answer"] != data.UNPLANNED for r in theirs + ours), "a request the fake model was not scripted for"
    # sample by sample first, so a difference names its sample
    by_sample = lambda records: sorted((r.get("sample") or "", data.request_key(r)) for r in records)  # noqa: E731
    for (sample, wanted), (_, got) in zip(by_sample(theirs), by_sample(ours)):
        assert json.loads(got) == json.loads(wanted), sample
    assert [data.request_key(r) for r in ours] == [data.request_key(r) for r in theirs]


def test_the_judge_is_asked_as_often_as_auharness_asks_it(evalkit_runs: dict[str, dict[str, Any]]) -> None:
    """One call per answer at 0.1, the two identical ones included; AU-Harness's prompt as system, nothing else sent."""

    def calls(records: list[dict[str, Any]]) -> Counter[str]:
        return Counter(data.request_key(r) for r in records if r["model"] == data.JUDGE_MODEL)

    theirs, ours = calls(RUNS["iemocap"]["requests"]), calls(evalkit_runs["iemocap"]["requests"])
    assert ours == theirs and sum(ours.values()) == 8 and max(ours.values()) == 2
    for key in ours:
        call = json.loads(key)
        assert call["params"] == {"max_tokens": None, "seed": None, "temperature": 0.1, "top_p": None}
        assert [m["role"] for m in call["messages"]] == ["system", "user"]


def _result(run: str, task: str, model: str, evalkit_runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (row,) = [
        r
        for r in evalkit_runs[run]["results"]
        if r["model"] == model and (r.get("reported_as") or {}).get("dataset") == task
    ]
    return row


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_figures_are_auharness_figures_on_its_scale(run: str, evalkit_runs: dict[str, dict[str, Any]]) -> None:
    for task, by_model in RUNS[run]["scores"].items():
        for model, by_metric in by_model.items():
            ((metric, printed),) = by_metric.items()
            row = _result(run, task, model, evalkit_runs)
            reported = row["reported_as"]
            assert (reported["tool"], reported["metric"]) == ("AU-Harness", metric)
            assert row["n"] == len(data.DATASETS[task]["rows"][: 3 if run == "covost2_gsm8k" else None])
            headline = printed.get("overall_wer", printed.get(metric))
            assert round(reported["score"], 2) == headline, (task, model)
            if metric == "word_error_rate":  # the per-sample mean AU-Harness prints beside it
                average = row["details"]["average_sample_wer"] * reported["scale"]
                assert round(average, 2) == printed["average_sample_wer"], (task, model)


def test_each_sample_scores_as_auharness_scored_it(evalkit_runs: dict[str, dict[str, Any]]) -> None:
    """The answer as scored and its score, per sample (AU-Harness's run.log; its BLEU rows hold no per-sample score)."""
    compared = 0
    for run, case in RUNS.items():
        ours = evalkit_runs[run]["records"]
        rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for record in case["records"]:
            rows.setdefault((record["dataset"], record["model"]), []).append(record)
        for (task, model), theirs in rows.items():
            if task == "covost2_en_de":
                continue
            mine = sorted(
                (r for r in ours if r["model"] == model and r["dataset"] == f"auharness:{task}" and "score" in r),
                key=lambda r: r["row"],
            )
            assert len(mine) == len(theirs), (task, model)
            for index, (their, our) in enumerate(zip(theirs, mine)):
                assert our["score"] == pytest.approx(float(their["score"])), (task, model, index)
                if task != "gsm8k_text":  # AU-Harness logs the number it read there, not the answer
                    assert our["prediction"] == their["candidate"], (task, model, index)
                compared += 1
    assert compared == 12 + 8 + 3

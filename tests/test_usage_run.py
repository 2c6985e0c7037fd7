"""Tokens, cost and budget end to end against the test server, which reports usage as its script says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import E2E_JUDGE_RULES, JUDGE_QA, judge_runspecs, model_entry, run, write_config

from evalkit.cli.main import main
from evalkit.run.merge import merge
from evalkit.run.shard import Shard

N = 30
PRICE = {"input_per_million": 2.0, "output_per_million": 8.0, "cached_input_per_million": 0.5}


def _runspecs(root: Path) -> Path:
    """A 30-question text set; the test server echoes, so every answer is the question's words."""
    (root / "runspecs" / "text").mkdir(parents=True)
    with (root / "many_qa.jsonl").open("w") as handle:
        for i in range(N):
            handle.write(json.dumps({"qid": f"q{i}", "question": f"question number {i} here", "answer": "x"}) + "\n")
    spec = {
        "_task": {"description": "many questions", "metrics": ["exact_match", "f1"]},
        "many_qa": {
            "path": "../../many_qa.jsonl",
            "language": "en",
            "modality": "text",
            "id_column": "qid",
            "textual_input_column": "question",
            "target_column": "answer",
            "instruction": "Answer.",
        },
    }
    (root / "runspecs" / "text" / "many_qa.json").write_text(json.dumps(spec))
    return root / "runspecs"


def _config(tmp_path: Path, models: list[dict[str, Any]], **extra: Any) -> Path:
    data = {
        "dataset_metric": [["many_qa", "exact_match"]],
        "models": models,
        "runspecs_dir": str(_runspecs(tmp_path) if not (tmp_path / "runspecs").exists() else tmp_path / "runspecs"),
        "output_dir": str(tmp_path / "runs"),
        **extra,
    }
    return write_config(tmp_path / "config.yaml", data)


def _runs(tmp_path: Path) -> list[Path]:
    """The run folders, oldest first: two runs started within a second differ only by a random suffix."""
    found = [p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name != "server-logs"]
    return sorted(found, key=lambda p: json.loads((p / "run.json").read_text())["started_unix"])


def _records(run_dir: Path, name: str = "many_qa__exact_match.jsonl") -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "records" / name).read_text().splitlines()]


def _sent(server: Any) -> int:
    return len([e for e in server.log_events("completed") if "/v1/" in e.get("path", "")])


# one question: "Answer." (1 word) + "question number I here" (4) as the prompt, its echo (5 words) as the answer;
# scripted reasoning tokens count within the completion tokens
PROMPT, ANSWER, REASONING, CACHED = 5, 5, 3, 2
COMPLETION = ANSWER + REASONING


def test_usage_per_sample_pair_model_and_run_with_cost_and_not_reported(
    tmp_path: Path, make_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    reporting = make_server({"usage": {"reasoning_tokens": REASONING, "cached_tokens": CACHED}}, request_log=True)
    silent = make_server({"usage": {"report": False}}, request_log=True)
    config = _config(
        tmp_path,
        [model_entry("paid", reporting.base_url, price=PRICE), model_entry("quiet", silent.base_url)],
        dataset_metric=[["many_qa", "exact_match"], ["many_qa", "f1"]],
    )
    assert main(["run", "-c", str(config), "--quiet"]) == 0
    out = capsys.readouterr().out
    (run_dir,) = _runs(tmp_path)
    results = json.loads((run_dir / "results.json").read_text())

    # per sample: the record says what its answer took, or that the server said nothing
    paid = {r["sample_id"]: r for r in _records(run_dir) if r["model"] == "paid"}
    # which of the two pairs sends a shared request and which shares its answer is a matter of timing: read both
    quiet = [r for name in ("many_qa__exact_match.jsonl", "many_qa__f1.jsonl") for r in _records(run_dir, name)]
    quiet = [r for r in quiet if r["model"] == "quiet"]
    both = [*paid.values(), *(r for r in _records(run_dir, "many_qa__f1.jsonl") if r["model"] == "paid")]
    sent_once = [r for r in both if r["usage"].get("requests") == 1]
    assert len(sent_once) == N  # two metrics of one dataset: each request sent once, the other record shares it
    assert all(r["usage"].get("shared") == 1 and r["usage"]["requests"] == 0 for r in both if r not in sent_once)
    assert sent_once[0]["usage"] == {
        "requests": 1,
        "prompt_tokens": PROMPT,
        "completion_tokens": COMPLETION,
        "reasoning_tokens": REASONING,
        "cached_tokens": CACHED,
    }
    fresh_quiet = next(r for r in quiet if r["usage"].get("requests") == 1)
    assert fresh_quiet["usage"]["prompt_tokens"] is None and fresh_quiet["usage"]["not_reported"] == 1

    # per pair and model: the rows add their records up, with a cost where there is a price
    rows = {(r["metric"], r["model"]): r for r in results["results"]}
    pair = [rows[("exact_match", "paid")]["usage"], rows[("f1", "paid")]["usage"]]
    assert sum(u["requests"] for u in pair) == N and sum(u["shared"] for u in pair) == N
    assert sum(u["prompt_tokens"] for u in pair) == N * PROMPT
    assert rows[("exact_match", "quiet")]["usage"]["cost_usd"] is None
    assert rows[("f1", "quiet")]["usage"]["prompt_tokens"] in (None, 0)

    # per model and run: from the clients, which count every answer sent
    model = results["usage"]["models"]["paid"]
    assert (model["requests"], model["prompt_tokens"], model["completion_tokens"]) == (N, N * PROMPT, N * COMPLETION)
    assert (model["reasoning_tokens"], model["cached_tokens"], model["shared"]) == (N * REASONING, N * CACHED, N)
    expected = N * ((PROMPT - CACHED) * 2.0 + CACHED * 0.5 + COMPLETION * 8.0) / 1e6
    assert model["cost_usd"] == pytest.approx(expected)
    silent_model = results["usage"]["models"]["quiet"]
    assert (
        silent_model["prompt_tokens"] is None and silent_model["not_reported"] == N and silent_model["cost_usd"] is None
    )
    total = results["usage"]["total"]
    assert total["cost_usd"] == pytest.approx(expected) and total["unpriced"] == ["quiet"]
    assert _sent(reporting) == N and _sent(silent) == N

    # the console footer, results.md and report.html say it too; "not reported", never 0
    assert f"model paid: {N * PROMPT:,} prompt + {N * COMPLETION:,} completion tokens" in out
    assert "model quiet: tokens not reported (30 requests)" in out
    assert "without quiet, which have no price" in out
    assert "Usage and cost" in (run_dir / "report.html").read_text()
    assert "tokens not reported" in (run_dir / "results.md").read_text()

    # a second run takes every answer from the store: nothing sent, nothing spent, said as such
    assert main(["run", "-c", str(config), "--quiet"]) == 0
    out = capsys.readouterr().out
    second = _runs(tmp_path)[-1]
    again = json.loads((second / "results.json").read_text())["usage"]["models"]["paid"]
    assert (again["requests"], again["prompt_tokens"], again["from_store"], again["cost_usd"]) == (0, 0, N, 0.0)
    assert _sent(reporting) == N
    assert all(r["usage"].get("requests") == 0 for r in _records(second))
    assert f"{N} answers from the response store (no cost on this run)" in out


def test_the_viewer_shows_usage_per_pair_and_run(tmp_path: Path, make_server: Any) -> None:
    from evalkit.view.viewer import Viewer

    server = make_server({"usage": {"reasoning_tokens": 1}})
    config = _config(tmp_path, [model_entry("paid", server.base_url, price=PRICE)])
    assert main(["run", "-c", str(config), "--quiet"]) == 0
    (run_dir,) = _runs(tmp_path)
    viewer = Viewer([tmp_path / "runs"])
    page = viewer.run(run_dir.name)
    assert page["results"][0]["usage"].startswith(f"{N * PROMPT:,} prompt + ")
    assert any(line.startswith("run total: ") for line in page["usage"])
    from evalkit.view.links import Links
    from evalkit.view.pages import run_page

    assert "Usage and cost" in run_page(page, Links())


def test_judge_calls_are_counted_apart_and_attributed_to_the_judge_model(tmp_path: Path, make_server: Any) -> None:
    model = make_server({"answers": [{"match": q, "answer": a} for _, q, _, a in JUDGE_QA]})
    judge = make_server({"answers": E2E_JUDGE_RULES, "usage": {"cached_tokens": 4}}, request_log=True)
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["judge_qa", "llm_judge_binary"]],
            "models": [model_entry("model-a", model.base_url, price=PRICE)],
            "judge_properties": {
                "judge_model": "judge-model",
                "judge_type": "vllm",
                "judge_api_endpoint": judge.base_url,
                "judge_retry_attempts": 0,
                "judge_price": "gpt-4o-mini-2024-07-18",
            },
            "runspecs_dir": str(judge_runspecs(tmp_path)),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    assert main(["run", "-c", str(config), "--quiet", "--allow-failures"]) == 0
    (run_dir,) = _runs(tmp_path)
    results = json.loads((run_dir / "results.json").read_text())
    judged = results["usage"]["judges"]["judge:judge-model"]
    assert judged["requests"] == 4 == _sent(judge) and judged["cached_tokens"] == 16 and judged["cost_usd"] > 0
    assert results["usage"]["models"]["model-a"]["requests"] == 4
    records = _records(run_dir, "judge_qa__llm_judge_binary.jsonl")
    assert all(r["judge_usage"]["requests"] == 1 and r["usage"]["requests"] == 1 for r in records)
    row = results["results"][0]
    assert row["judge_usage"]["requests"] == 4 and row["judge_usage"]["prompt_tokens"] == judged["prompt_tokens"]
    assert row["usage"]["prompt_tokens"] == results["usage"]["models"]["model-a"]["prompt_tokens"]


def test_a_hostile_usage_is_not_reported_and_the_run_goes_on(tmp_path: Path, make_server: Any) -> None:
    server = make_server({"usage": {"raw": {"prompt_tokens": -5, "completion_tokens": "many", "total_tokens": 1e300}}})
    config = _config(tmp_path, [model_entry("m", server.base_url, price=PRICE)], budget={"tokens": 10})
    assert main(["run", "-c", str(config), "--quiet"]) == 0  # nothing counted: the budget never sees it spent
    (run_dir,) = _runs(tmp_path)
    usage = json.loads((run_dir / "results.json").read_text())["usage"]["models"]["m"]
    assert usage["prompt_tokens"] is None and usage["not_reported"] == N and usage["cost_usd"] is None


def test_a_token_budget_stops_sending_marks_the_run_partial_and_a_resume_goes_on(
    tmp_path: Path, make_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = make_server({}, request_log=True)
    per_request = PROMPT + ANSWER
    budget = 10 * per_request - 3  # spent during the tenth answer
    config = _config(
        tmp_path, [model_entry("m", server.base_url, batch_size=1, price=PRICE)], budget={"tokens": budget}
    )
    assert main(["run", "-c", str(config), "--quiet"]) == 6
    err = capsys.readouterr().err
    assert "budget was spent" in err and "--resume" in err and "exit code 6" in err
    (run_dir,) = _runs(tmp_path)
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "partial" and manifest["partial"]["reason"] == "budget"
    assert manifest["budget"]["exhausted"] and manifest["spent"]["tokens"] == 10 * per_request
    results = json.loads((run_dir / "results.json").read_text())
    row = results["results"][0]
    assert results["partial"]["reason"] == "budget" and row["partial"] == {"reason": "budget"}
    # one request in flight at a time (batch_size 1): the tenth answer spent the budget and nothing followed it
    assert _sent(server) == 10 and row["n"] == 10 and row["n_failed"] == 0 and len(_records(run_dir)) == 10
    assert "(partial)" in (run_dir / "results.md").read_text()

    # a larger budget on resume: the ten answers come from the store, only the rest is sent
    assert main(["run", "--resume", str(run_dir), "--quiet", "--budget-tokens", str(100 * per_request)]) == 0
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "finished" and "partial" not in manifest
    assert manifest["spent"]["tokens"] == N * per_request
    results = json.loads((run_dir / "results.json").read_text())
    assert "partial" not in results and results["results"][0]["n"] == N
    assert results["usage"]["models"]["m"]["from_store"] == 10 and results["usage"]["models"]["m"]["requests"] == N - 10
    assert _sent(server) == N  # nothing answered was sent again


def test_a_dollar_budget_with_a_model_without_a_price_is_refused_before_anything_is_sent(
    tmp_path: Path, make_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = make_server({}, request_log=True)
    config = _config(tmp_path, [model_entry("m", server.base_url)])
    assert main(["run", "-c", str(config), "--quiet", "--budget-usd", "1"]) == 2
    err = capsys.readouterr().err
    assert "budget.usd 1: a dollar budget needs the price of every model" in err and "models: m" in err
    assert _sent(server) == 0
    assert not (tmp_path / "runs").exists() or not _runs(tmp_path)  # no run folder was left behind


def test_a_dollar_budget_stops_the_run(tmp_path: Path, make_server: Any) -> None:
    server = make_server({}, request_log=True)
    cost = (PROMPT * 2.0 + ANSWER * 8.0) / 1e6  # one answer at PRICE
    config = _config(tmp_path, [model_entry("m", server.base_url, batch_size=1, price=PRICE)])
    assert main(["run", "-c", str(config), "--quiet", "--budget-usd", str(cost * 5.5)]) == 6
    (run_dir,) = _runs(tmp_path)
    assert _sent(server) == 6 and json.loads((run_dir / "run.json").read_text())["spent"]["usd"] == pytest.approx(
        6 * cost
    )


def test_the_dry_run_estimates_tokens_and_cost_against_the_budget(
    tmp_path: Path, make_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = make_server({}, request_log=True)
    config = _config(tmp_path, [model_entry("m", server.base_url, price=PRICE, max_tokens=16)], budget={"tokens": 100})
    assert main(["run", "-c", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    # each prompt is "Answer." + "question number I here": about 30 characters, 8 tokens at 4 characters a token
    assert "estimated without a tokenizer (4 characters a token)" in out
    assert f"at most {N * 16:,} completion tokens (max_tokens)" in out
    assert "may exceed the budget of 100" in out
    assert _sent(server) == 0


def test_a_merged_run_adds_its_shards_usage_up(tmp_path: Path, make_server: Any) -> None:
    server = make_server({"usage": {"reasoning_tokens": REASONING, "cached_tokens": CACHED}})
    config = _config(tmp_path, [model_entry("paid", server.base_url, price=PRICE)])
    shards = [run(config, shard=Shard(k, 2)) for k in range(2)]
    parts = [json.loads((s.run_dir / "results.json").read_text())["usage"] for s in shards]
    merged = merge([s.run_dir for s in shards], tmp_path / "merged")
    usage = json.loads((merged.run_dir / "results.json").read_text())["usage"]
    paid = usage["models"]["paid"]
    assert paid["requests"] == N == sum(p["models"]["paid"]["requests"] for p in parts)
    assert (paid["prompt_tokens"], paid["completion_tokens"]) == (N * PROMPT, N * COMPLETION)
    expected = sum(p["models"]["paid"]["cost_usd"] for p in parts)
    assert paid["cost_usd"] == pytest.approx(expected) and usage["total"]["cost_usd"] == pytest.approx(expected)
    assert usage["total"]["unpriced"] == []

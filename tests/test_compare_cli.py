"""`evalkit report A B` end to end: two real runs against the test server, compared sample by sample."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, text_set, write_config
from scipy.stats import binomtest

from evalkit.cli.main import main
from evalkit.testing import start_test_server

N = 30


def _only_run_dir(output_dir: Path) -> Path:
    (run,) = [p for p in output_dir.iterdir() if p.is_dir()]
    return run


def _question(*numbers: int) -> str:
    return "re:^question (" + "|".join(str(n) for n in numbers) + ") w0 w1 w2$"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Run A: two echo models (m right on 2/3; n also wrong on s00007). Run B: 6 answers change, s00005 fails.

    synth_qa's references are the question itself except every third ("no"); the echo server answers the question.
    """
    tmp = tmp_path_factory.mktemp("compare")
    runspecs = text_set(tmp, N, words=5)  # 5 words: BLEU's 4-grams exist
    first = start_test_server({"answers": [{"model": "n", "match": _question(7), "answer": "no idea"}]})
    second = start_test_server(
        {
            "answers": [
                {"match": _question(1, 2, 4), "answer": "no"},  # right -> wrong
                {"match": _question(0, 3), "answer": "no"},  # wrong -> right
                {"match": _question(5), "answer": "x", "fault": "500"},  # fails in B only
                {"match": _question(8), "answer": "<script>alert(1)</script>"},  # right -> wrong, hostile
            ]
        }
    )
    dirs = []
    try:
        for name, server in (("a", first), ("b", second)):
            config = write_config(
                tmp / f"{name}.yaml",
                {
                    "dataset_metric": [["synth_qa", "exact_match"], ["synth_qa", "bleu"]],
                    "models": [
                        model_entry("m", server.base_url, retry_attempts=0),
                        model_entry("n", server.base_url, retry_attempts=0),
                    ],
                    "runspecs_dir": [str(runspecs)],
                    "output_dir": str(tmp / f"runs-{name}"),
                    "cache": {"enabled": False},
                },
            )
            assert main(["run", str(config), "--quiet", "--allow-failures"]) == 0
            dirs.append(_only_run_dir(tmp / f"runs-{name}"))
    finally:
        first.stop()
        second.stop()
    yield dirs[0], dirs[1]


def _row(payload: dict[str, Any], metric: str, model: str) -> dict[str, Any]:
    (row,) = [r for r in payload["rows"] if r["metric"] == metric and r["model"] == model]
    return row


def test_two_runs_are_compared_sample_by_sample_and_written(runs: tuple[Path, Path], capsys) -> None:
    run_a, run_b = runs
    capsys.readouterr()
    assert main(["report", str(run_a), str(run_b), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    payload = json.loads(out)
    exact = _row(payload, "exact_match", "m")
    # 20 of 30 right in A; s00005 (right in A) failed in B, so 29 paired; B: -4 (1, 2, 4, 8) +2 (0, 3)
    assert exact["n_paired"] == N - 1
    assert exact["score_a"] == pytest.approx(19 / 29) and exact["score_b"] == pytest.approx(17 / 29)
    assert exact["diff"] == pytest.approx(-2 / 29)
    assert exact["mcnemar"]["a_only"] == 4 and exact["mcnemar"]["b_only"] == 2
    assert exact["p_value"] == pytest.approx(binomtest(2, 6, 0.5).pvalue) and exact["test"] == "McNemar exact"
    assert exact["verdict"] == "not significant"
    flips = {c["sample_id"]: c["change"] for c in exact["changed"]}
    assert flips == {
        "s00001": "worsened",
        "s00002": "worsened",
        "s00004": "worsened",
        "s00008": "worsened",
        "s00000": "improved",
        "s00003": "improved",
    }
    (failed,) = exact["failed_only_b"]
    assert failed["sample_id"] == "s00005" and failed["reason"] == "http_500" and failed["other_score"] == 1.0
    assert "500" in failed["error"]
    low, high = exact["diff_ci"]
    assert low <= exact["diff"] <= high
    # BLEU: the difference of the metric's own corpus statistic over the paired samples, recomputed by sacrebleu
    bleu = _row(payload, "bleu", "m")
    assert bleu["statistic"] == "corpus" and bleu["mcnemar"] is None and bleu["n_paired"] == N - 1
    assert bleu["diff"] == pytest.approx(_sacrebleu_diff(run_a, run_b, "m", skip={"s00005"}), abs=1e-9)
    # model n is compared with itself across the runs; the folder is beside run A, with all three files
    assert _row(payload, "exact_match", "n")["model_a"] == "n"
    folder = Path(re.search(r"comparison written to (.+)", err).group(1).strip())
    assert folder.parent == run_a.parent and folder.name == f"compare-{run_a.name}-vs-{run_b.name}"
    assert json.loads((folder / "comparison.json").read_text()) == payload
    markdown = (folder / "comparison.md").read_text()
    assert "s00001" in markdown and "right → wrong" in markdown and "http_500" in markdown
    html = (folder / "comparison.html").read_text()
    assert f'href="http://127.0.0.1:8765/run/{run_a.name}/sample/synth_qa/exact_match/s00001"' in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in markdown
    # never overwritten: the same comparison again goes to a new folder
    assert main(["report", str(run_a), str(run_b), "--pair", "synth_qa/exact_match"]) == 0
    out = capsys.readouterr().out
    assert f"{folder.name}-2" in out and "s00004: right → wrong (worsened)" in out
    assert "(McNemar)" in out and "failed in B only" in out
    assert len(json.loads((folder.parent / f"{folder.name}-2" / "comparison.json").read_text())["rows"]) == 2


def _sacrebleu_diff(run_a: Path, run_b: Path, model: str, skip: set[str]) -> float:
    import sacrebleu

    def corpus(run: Path) -> float:
        pairs = {}
        for line in (run / "records" / "synth_qa__bleu.jsonl").read_text().splitlines():
            record = json.loads(line)
            if record["model"] == model and record["sample_id"] not in skip:
                pairs[record["sample_id"]] = (record["prediction"], record["reference"])
        ordered = [pairs[k] for k in sorted(pairs)]
        return sacrebleu.corpus_bleu([p for p, _ in ordered], [[r for _, r in ordered]]).score

    return corpus(run_b) - corpus(run_a)


def test_two_models_of_one_run_and_run_model_syntax(runs: tuple[Path, Path], capsys) -> None:
    run_a, run_b = runs
    capsys.readouterr()
    assert main(["report", str(run_a), "--models", "m", "n", "--format", "json", "--no-write"]) == 0
    payload = json.loads(capsys.readouterr().out)
    exact = _row(payload, "exact_match", "m → n")
    assert [(c["sample_id"], c["change"]) for c in exact["changed"]] == [("s00007", "worsened")]
    assert exact["n_paired"] == N and exact["mcnemar"] == {"a_only": 1, "b_only": 0, "p_value": 1.0}
    assert main(["report", f"{run_a}:n", f"{run_b}:m", "--format", "json", "--no-write"]) == 0
    payload = json.loads(capsys.readouterr().out)
    exact = _row(payload, "exact_match", "n → m")
    assert (exact["model_a"], exact["model_b"]) == ("n", "m")
    assert {c["sample_id"] for c in exact["changed"]} == {
        "s00000",
        "s00001",
        "s00002",
        "s00003",
        "s00004",
        "s00007",
        "s00008",
    }


def test_mistakes_are_one_line_and_exit_2(runs: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    run_a, run_b = runs
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    cases = [
        (["report", str(run_a), str(run_b), "--output", str(taken)], "exists and is not an empty folder"),
        (["report", f"{run_a}:nobody", str(run_b), "--no-write"], "no records of model 'nobody'"),
        (["report", str(run_a), str(run_b), "--pair", "synth_qa/wer", "--no-write"], "--pair synth_qa/wer"),
        (["report", str(run_a), "--models", "m", "m"], "same run and model"),
        (["report", str(tmp_path / "nope:m"), str(run_b)], "not a run directory"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    assert (taken / "keep.txt").read_text() == "mine" and [p.name for p in taken.iterdir()] == ["keep.txt"]
    out = tmp_path / "fresh"
    assert main(["report", str(run_a), str(run_b), "--output", str(out), "--format", "md"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["comparison.html", "comparison.json", "comparison.md"]
    assert capsys.readouterr().out == (out / "comparison.md").read_text()


def test_the_viewer_benchmarks_synthetic_run_follows_the_record_format(tmp_path: Path, capsys) -> None:
    """The benchmark's generator, small: schema fields present, and `evalkit report` reads the run it makes."""
    from benchmarks.viewer import MODELS, make_run

    pairs = (("syn_asr", "word_error_rate", 40), ("syn_text", "exact_match", 30))
    run_dir = make_run(tmp_path, pairs)
    records = [json.loads(line) for path in sorted((run_dir / "records").glob("*.jsonl")) for line in path.open()]
    assert len(records) == len(MODELS) * 70 + 1  # the extra one: a duplicate sample id, failed before any request
    sent = {json.loads(line)["key"] for path in (run_dir / "records" / "sent").glob("*.jsonl") for line in path.open()}
    scored = [r for r in records if r.get("failure") is None]
    assert all(isinstance(r["row"], int) and r["groups"]["language"] == "en" and r["sent"] in sent for r in scored)
    assert all(len(r["stats"]) == 2 and r["score"] is not None for r in scored)
    assert main(["report", str(run_dir), "--models", "model-a", "model-c", "--format", "json", "--no-write"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert {(r["dataset"], r["statistic"]) for r in payload["rows"]} == {("syn_asr", "corpus"), ("syn_text", "corpus")}
    assert make_run(tmp_path, pairs) == run_dir  # generated once, then reused


def test_two_runs_of_differently_named_models_compare_those_models_or_say_how(
    runs: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    """The common case: run A of one model, run B of another; models pair by name, and these share none."""
    runspecs = text_set(tmp_path, N, words=5)
    server = start_test_server({"answers": [{"model": "large", "match": _question(1, 2), "answer": "no"}]})
    dirs = []
    try:
        for model in ("small", "large"):
            config = write_config(
                tmp_path / f"{model}.yaml",
                {
                    "dataset_metric": [["synth_qa", "exact_match"]],
                    "models": [model_entry(model, server.base_url, retry_attempts=0)],
                    "runspecs_dir": [str(runspecs)],
                    "output_dir": str(tmp_path / f"runs-{model}"),
                },
            )
            assert main(["run", str(config), "--quiet"]) == 0
            dirs.append(_only_run_dir(tmp_path / f"runs-{model}"))
    finally:
        server.stop()
    small, large = dirs
    capsys.readouterr()
    assert main(["report", str(small), str(large), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    payload = json.loads(out)
    (row,) = payload["rows"]
    assert (row["model_a"], row["model_b"]) == ("small", "large") and row["n_paired"] == N
    assert row["mcnemar"]["a_only"] == 2 and row["mcnemar"]["b_only"] == 0
    assert payload["a"] == f"{small.name}:small" and payload["b"] == f"{large.name}:large"
    assert any("share no model name" in note for note in payload["notes"])
    folder = Path(re.search(r"comparison written to (.+)", err).group(1).strip())
    assert len(json.loads((folder / "comparison.json").read_text())["rows"]) == 1
    # against a run of two models (m, n), which one is meant is the user's to say: exit 2 with the form to use
    run_a, _ = runs
    assert main(["report", str(small), str(run_a)]) == 2
    err = capsys.readouterr().err
    assert "share no model name (A: small; B: m, n)" in err
    assert f"evalkit report {small}:small {run_a}:m" in err

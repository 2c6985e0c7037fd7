"""`evalkit run --shard K/N` and `evalkit merge`: four shards merged equal one unsharded run, number for number.

Real runs against the project's test server (echo answers, some rewritten so
WER and BLEU vary, a few samples answered with a 400 so failures are counted),
on a text set with speaker and accent groups, a duplicated sample id, and
``num_samples`` drawn at random (so the shards must split exactly the plan's
draw). The pairs cover a ratio statistic with a bootstrap CI (word_error_rate),
a corpus statistic with a bootstrap CI (bleu) and a mean with a normal CI
(exact_match).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, evalkit_cli, model_entry, run, tone_wav

from evalkit.errors import UserError
from evalkit.run.merge import merge
from evalkit.run.shard import Shard, shard_of

N_ROWS = 90
NUM_SAMPLES = 70
SHARDS = 4
N_CLIPS = 24
PAIRS = [
    ["shard_qa", "word_error_rate"],
    ["shard_qa", "exact_match"],
    ["shard_qa", "bleu"],
    ["shard_asr", "word_error_rate"],
]
SCRIPT = {
    "answers": [
        {"match": "re:^question \\d*7 ", "answer": "", "fault": "400"},
        {"match": "re:^question \\d*5 ", "answer": "question five wrong words here"},
        {"match": "re:^question \\d*2 ", "answer": "question"},
    ]
}


def _dataset(root: Path) -> Path:
    """A jsonl set with groups and one id used twice (the second row is a duplicate_id failure)."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    with (data / "shard_qa.jsonl").open("w") as handle:
        for i in range(N_ROWS):
            question = f"question {i} about item {i % 7} and word {i % 5}"
            row = {
                "qid": "q00003" if i == 40 else f"q{i:05d}",
                "question": question,
                "answer": question if i % 3 else "no answer",
                "speaker": f"spk{i % 4}",
                "accent": ("us", "indian", "scottish")[i % 3],
            }
            handle.write(json.dumps(row) + "\n")
    specs = root / "runspecs" / "text"
    specs.mkdir(parents=True, exist_ok=True)
    spec = {
        "_task": {"description": "sharded questions", "metrics": ["word_error_rate", "exact_match", "bleu"]},
        "shard_qa": {
            "path": "../../data/shard_qa.jsonl",
            "language": "en",
            "modality": "text",
            "id_column": "qid",
            "textual_input_column": "question",
            "target_column": "answer",
            "speaker_column": "speaker",
            "accent_column": "accent",
        },
    }
    (specs / "shard_qa.json").write_text(json.dumps(spec))
    _speech(root)
    return root / "runspecs"


def _speech(root: Path) -> None:
    """Tones of 0.5 to 12 s with transcripts, so results have audio-length groups (from the decoded audio)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for i in range(N_CLIPS):
        seconds = 0.5 + (i * 5.3) % 11.5
        words = " ".join(["transcribe", "the", "audio"][: 1 + i % 3] + [f"word{j}" for j in range(i % 4)])
        rows.append({"id": f"a{i:03d}", "audio": {"bytes": tone_wav(200.0 + 10 * i, seconds)}, "text": words})
    pq.write_table(pa.Table.from_pylist(rows), root / "data" / "shard_asr.parquet")
    folder = root / "runspecs" / "speech"
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "_task": {"description": "sharded tones", "metrics": ["word_error_rate"]},
        "shard_asr": {
            "path": "../../data/shard_asr.parquet",
            "language": "en",
            "modality": "audio",
            "id_column": "id",
            "audio_column": "audio",
            "target_column": "text",
            "instruction": "Transcribe the audio.",
        },
    }
    (folder / "shard_asr.json").write_text(json.dumps(spec))


def _results(run_dir: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every number of results.json per (dataset, metric, model); the timing, first messages and usage left out
    (usage says how the answers came: sent, from the store, or shared with another pair, which timing decides)."""
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    how = ("seconds", "usage", "judge_usage")
    return {(r["dataset"], r["metric"], r["model"]): {k: v for k, v in r.items() if k not in how} for r in rows}


def _records(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        path.name: [json.loads(line) for line in path.read_text().splitlines()]
        for path in sorted((run_dir / "records").glob("*.jsonl"))
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One unsharded run and its four shards, of one config, against one test server."""
    from evalkit.testing import start_test_server

    root = tmp_path_factory.mktemp("shards")
    runspecs = _dataset(root)
    server = start_test_server(SCRIPT)
    try:
        filters = {"num_samples": NUM_SAMPLES, "sampling": "random", "seed": 11}
        models = [model_entry("m", server.base_url, batch_size=8, retry_attempts=1)]
        config = config_for(root, runspecs, models, pairs=PAIRS, filters=filters)
        whole = run(config, no_cache=True)
        shards = [run(config, shard=Shard(k, SHARDS)) for k in range(SHARDS)]
        yield {"root": root, "config": config, "whole": whole.run_dir, "shards": [s.run_dir for s in shards]}
    finally:
        server.stop()


def test_four_shards_merged_equal_one_run_score_for_score_and_ci_for_ci(runs: dict[str, Any]) -> None:
    merged = merge(runs["shards"], runs["root"] / "merged")
    whole, together = _results(runs["whole"]), _results(merged.run_dir)
    assert set(whole) == {(d, m, "m") for d, m in PAIRS}
    for key, row in whole.items():
        assert math.isfinite(row["ci_low"]) and row["ci_low"] < row["score"] < row["ci_high"], key
        assert together[key] == row, key  # every number: score, CI, n, failures, groups with their CIs
        if key[0] == "shard_qa":
            assert row["n"] + row["n_failed"] == NUM_SAMPLES
            assert row["n_failed"] >= 3 and row["failure_reasons"]["duplicate_id"] == 1
            assert row["details"]["groups"]["speaker"] and row["details"]["groups"]["accent"]
    speech = whole[("shard_asr", "word_error_rate", "m")]
    assert speech["n"] == N_CLIPS and set(speech["details"]["groups"]["audio_length"]) == {"0-5s", "5-10s", "10-20s"}
    assert whole[("shard_qa", "word_error_rate", "m")]["details"]["ci_method"] == "bootstrap"
    assert whole[("shard_qa", "exact_match", "m")]["details"]["ci_method"] == "normal"
    # each shard alone scores something else: the merge is not one shard's result passed through
    first = _results(runs["shards"][0])
    assert first[("shard_qa", "word_error_rate", "m")]["n"] < whole[("shard_qa", "word_error_rate", "m")]["n"]


def test_shards_split_exactly_the_plans_samples(runs: dict[str, Any]) -> None:
    whole = _records(runs["whole"])
    parts = [_records(d) for d in runs["shards"]]
    for name, records in whole.items():
        ids = sorted((r["sample_id"], r["row"]) for r in records)
        shares = [sorted((r["sample_id"], r["row"]) for r in part.get(name, [])) for part in parts]
        assert sorted(x for share in shares for x in share) == ids  # every sample in exactly one shard
        for k, share in enumerate(shares):
            assert share and all(shard_of(sample_id, SHARDS) == k for sample_id, _ in share)
    for k, run_dir in enumerate(runs["shards"]):
        manifest = json.loads((run_dir / "run.json").read_text())
        assert manifest["shard"]["index"] == k and manifest["shard"]["count"] == SHARDS
        assert manifest["shard"]["plan"] == json.loads((runs["shards"][0] / "run.json").read_text())["shard"]["plan"]
        assert json.loads((run_dir / "results.json").read_text())["shard"]["index"] == k


def test_merged_folder_is_a_run_folder_with_every_record(runs: dict[str, Any]) -> None:
    merged = merge(runs["shards"], runs["root"] / "merged-folder")
    manifest = json.loads((merged.run_dir / "run.json").read_text())
    assert manifest["status"] == "finished"
    assert manifest["merged"]["count"] == SHARDS
    assert [s["index"] for s in manifest["merged"]["shards"]] == list(range(SHARDS))
    for name in ("results.csv", "results.md", "report.html"):
        assert (merged.run_dir / name).is_file()
    whole, together = _records(runs["whole"]), _records(merged.run_dir)
    assert set(together) == set(whole)
    for name, records in whole.items():
        assert sorted(map(_timeless, together[name])) == sorted(map(_timeless, records)), name
    # what was sent: every key a record names is in the merged sent files, each key once
    entries = [
        json.loads(line)["key"]
        for path in (merged.run_dir / "records" / "sent").glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    named = {r["sent"] for records in together.values() for r in records if "sent" in r}
    assert named and named <= set(entries) and len(entries) == len(set(entries))
    # merging again into the same folder replaces it
    again = merge(runs["shards"], merged.run_dir)
    assert _results(again.run_dir) == _results(merged.run_dir)


def _timeless(record: dict[str, Any]) -> str:
    """A record as text without what depends on how its answer came: timing, from the store (no attempt, no tokens)."""
    how = ("latency", "cached", "attempts", "replica", "usage", "judge_usage")
    return json.dumps({k: v for k, v in record.items() if k not in how}, sort_keys=True)


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_merge_refuses_a_missing_shard_a_duplicate_and_another_plan(runs: dict[str, Any], tmp_path: Path) -> None:
    shards = [str(d) for d in runs["shards"]]
    missing = evalkit_cli(["merge", *shards[:2], shards[3]], tmp_path)
    assert missing.returncode == 2, missing.stderr
    assert "missing shard 2/4" in missing.stderr and "Traceback" not in missing.stderr

    twice = evalkit_cli(["merge", *shards, shards[1]], tmp_path)
    assert twice.returncode == 2
    assert "shard 1/4" in twice.stderr and twice.stderr.count(shards[1]) == 2

    # another plan: the same data and server, another seed for the random draw
    other_config = config_for(
        tmp_path / "other",
        runs["root"] / "runspecs",
        json.loads((runs["shards"][0] / "run.json").read_text())["config"]["models"],
        pairs=PAIRS,
        filters={"num_samples": NUM_SAMPLES, "sampling": "random", "seed": 12},
    )
    other = evalkit_cli(["run", str(other_config), "--shard", "3/4", "--quiet", "--no-cache"], tmp_path)
    assert other.returncode in (0, 3), other.stderr
    other_dir = next((tmp_path / "other" / "runs").iterdir())
    mixed = evalkit_cli(["merge", *shards[:3], str(other_dir)], tmp_path)
    assert mixed.returncode == 2
    assert "different plans" in mixed.stderr and str(other_dir) in mixed.stderr

    whole = evalkit_cli(["merge", *shards, str(runs["whole"])], tmp_path)
    assert whole.returncode == 2 and "not a shard run" in whole.stderr


def test_merge_refuses_an_unfinished_shard(runs: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "shard2"
    shutil.copytree(runs["shards"][2], copy)
    manifest = json.loads((copy / "run.json").read_text())
    manifest["status"] = "interrupted"
    (copy / "run.json").write_text(json.dumps(manifest))
    shards = [str(d) for d in runs["shards"]]
    with pytest.raises(UserError, match=r"did not finish: .*shard2 \(shard 2/4, status 'interrupted'\)"):
        merge([shards[0], shards[1], str(copy), shards[3]], tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused before anything is written


@pytest.mark.parametrize(
    "given, expected",
    [
        ("4/4", "K must be from 0 to 3"),
        ("-1/4", "K must be from 0 to 3"),
        ("1/0", "N must be at least 1"),
        ("1-4", "expected K/N"),
        ("/8", "expected K/N"),
    ],
)
def test_shard_flag_is_checked_before_anything_runs(given: str, expected: str, tmp_path: Path) -> None:
    done = evalkit_cli(["run", "no-such-config.yaml", f"--shard={given}"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"evalkit: error: --shard {given!r}" if "K/N" in expected else "evalkit: error:")
    assert expected in done.stderr and "Traceback" not in done.stderr


def test_shard_of_is_stable_and_spreads() -> None:
    # sha256, not hash(): the same in every process and every release (a changed hash would split old plans anew)
    assert [shard_of(f"q{i:05d}", 8) for i in range(8)] == [3, 4, 7, 3, 0, 1, 1, 6]
    counts = [0] * 8
    for i in range(8000):
        counts[shard_of(f"id-{i}", 8)] += 1
    assert min(counts) > 850 and max(counts) < 1150
    assert Shard.parse(" 7 / 8 ") == Shard(7, 8)


def test_merge_on_the_command_line(runs: dict[str, Any], tmp_path: Path) -> None:
    # the index is written as a merge ends for a run of any size when the threshold is 0 (the default leaves these
    # few records to the viewer)
    env = {**os.environ, "EVALKIT_VIEW_INDEX_MIN_BYTES": "0"}
    done = evalkit_cli(
        ["merge", *map(str, reversed(runs["shards"])), "--output", str(tmp_path / "m")], tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    # the results table's title wraps where the terminal is narrow: compare its words, not its lines
    assert "merged from 4 shards" in " ".join(done.stdout.split())
    assert f"merged 4 shards into {tmp_path / 'm'}" in done.stderr
    assert _results(tmp_path / "m") == _results(runs["whole"])
    # the viewer's indexes are written with the merged folder, and a viewer takes them as they are
    from evalkit.view import index as view_index

    for records in (tmp_path / "m" / "records").glob("*.jsonl"):
        assert (tmp_path / "m" / "index" / f"{records.name}.sqlite").is_file()
        assert view_index.status(records, "records") == "ready"
    taken = evalkit_cli(["merge", *map(str, runs["shards"]), "--output", str(runs["shards"][0])], tmp_path)
    assert taken.returncode == 2 and "one of the shards' folders" in taken.stderr


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_shard_resumes_as_its_shard_and_merges(runs: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "shard1"
    shutil.copytree(runs["shards"][1], copy)
    # as a kill leaves it: status "running", part of the records written, the last line cut
    manifest = json.loads((copy / "run.json").read_text())
    manifest["status"] = "running"
    (copy / "run.json").write_text(json.dumps(manifest))
    for path in (copy / "records").glob("*.jsonl"):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    (copy / "results.json").unlink()
    others = [str(d) for k, d in enumerate(runs["shards"]) if k != 1]
    refused = evalkit_cli(["merge", *others, str(copy)], tmp_path)
    assert refused.returncode == 2 and "status 'running'" in refused.stderr

    wrong = evalkit_cli(["run", "--resume", str(copy), "--shard", "2/4", "--quiet"], tmp_path)
    assert wrong.returncode == 2
    assert "--shard 2/4 differs from the run's shard 1/4" in wrong.stderr

    resumed = evalkit_cli(["run", "--resume", str(copy), "--quiet"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((copy / "run.json").read_text())["shard"]["index"] == 1
    assert _records(copy).keys() == _records(runs["shards"][1]).keys()
    for name, records in _records(runs["shards"][1]).items():
        assert sorted(map(_timeless, _records(copy)[name])) == sorted(map(_timeless, records))
    again = evalkit_cli(["run", "--resume", str(copy), "--shard", "1/4", "--quiet"], tmp_path)  # the same: accepted
    assert again.returncode == 0, again.stderr

    merged = merge([others[0], str(copy), *others[1:]], tmp_path / "merged")
    assert _results(merged.run_dir) == _results(runs["whole"])


def test_merge_refuses_a_shard_whose_records_lost_a_line(runs: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "shard3"
    shutil.copytree(runs["shards"][3], copy)
    path = next((copy / "records").glob("shard_qa__exact_match*.jsonl"))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])  # the last record cut mid-write
    shards = [str(d) for d in runs["shards"][:3]]
    with pytest.raises(UserError, match=r"shard_qa__exact_match.jsonl: does not match its checksum"):
        merge([*shards, str(copy)], tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused before anything is written
    # a shard without checksums (an older evalkit's), merged unverified: the plan's samples still catch the lost line
    manifest = json.loads((copy / "run.json").read_text())
    del manifest["checksums"]
    (copy / "run.json").write_text(json.dumps(manifest))
    with pytest.raises(UserError, match=r"shard_qa__exact_match.jsonl: no record of sample 'q\d+' \(row \d+\)") as lost:
        merge([*shards, str(copy)], tmp_path / "out", trust_unverified=True)
    number, row = map(int, re.search(r"'q(\d+)' \(row (\d+)\)", str(lost.value)).groups())  # type: ignore[union-attr]
    assert row == number + 1  # sample q<i> is the file's row i + 1: rows are counted from 1, as everywhere
    assert not (tmp_path / "out").exists()  # a merge that did not complete leaves nothing


def test_a_judge_metric_merges_to_the_same_result(tmp_path: Path, make_server) -> None:  # type: ignore[no-untyped-def]
    """A judge metric is built for the merge without a judge client; its settings and scores are the run's."""
    from helpers import E2E_JUDGE_RULES, JUDGE_QA, judge_runspecs, write_config

    model = make_server({"answers": [{"match": q, "answer": a} for _, q, _, a in JUDGE_QA]})
    judge = make_server({"answers": E2E_JUDGE_RULES})
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["judge_qa", "llm_judge_binary"]],
            "models": [model_entry("model-a", model.base_url)],
            "judge_properties": {
                "judge_model": "judge-model",
                "judge_type": "vllm",
                "judge_api_endpoint": judge.base_url,
                "judge_api_key": "secret-judge-key",
                "judge_retry_attempts": 0,
            },
            "runspecs_dir": str(judge_runspecs(tmp_path)),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    whole = run(config, no_cache=True)
    shards = [run(config, shard=Shard(k, 2)).run_dir for k in range(2)]
    # one judge verdict of three is unparsable, by design: over max_failure_rate in its shard
    merged = merge(shards, tmp_path / "merged", allow_failures=True)
    assert _results(merged.run_dir) == _results(whole.run_dir)
    row = _results(merged.run_dir)[("judge_qa", "llm_judge_binary", "model-a")]
    assert row["details"]["judge_model"] == "judge-model" and row["failure_reasons"] == {"judge_parse": 1}
    for path in merged.run_dir.rglob("*"):
        assert not path.is_file() or b"secret-judge-key" not in path.read_bytes(), path


def test_evaluate_takes_a_shard_as_the_command_line_does(runs: dict[str, Any]) -> None:
    """`evalkit.evaluate(config, shard="K/N")`: the same share, said in run.json, as `evalkit run --shard K/N`."""
    import evalkit

    results = evalkit.evaluate(str(runs["config"]), shard=f"1/{SHARDS}", quiet=True)
    manifest = json.loads((results.run_dir / "run.json").read_text())
    assert (manifest["shard"]["index"], manifest["shard"]["count"]) == (1, SHARDS)
    cli_shard = runs["shards"][1]
    for name, records in _records(results.run_dir).items():
        assert {r["sample_id"] for r in records} == {r["sample_id"] for r in _records(cli_shard)[name]}

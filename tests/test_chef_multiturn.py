"""ChEF's multi-turn Omnibenchmark recipes: one sample per level of a label chain, scored as ChEF's weighted_ACC_multi.

tests/fixtures/references/chef_multiturn.json comes from running ChEF's own OmnibenchmarkDataset and
FG_Classification on a tiny Bamboo tree (tests/fixtures/references/make_chef_multiturn.py): each row's options per
level (drawn with Python's random seeded 0 over the whole data file), ChEF's questions and answers, and the
per-chain values ChEF's metric gives for the answers the test server's script produces. The same folder is laid
out here as ChEF's OmniBenchmark_Bamboo (PNG images, meta_file/Classification_Omnibenchmark.json), the tree where
ChEF's own layout keeps it, and both catalogue entries run against the test server:

- direct: the script answers each turn's question (turn 0 "It looks like an animal.", a later turn by the gold
  label it names), so the vehicle chains stop at turn 0 and the dog chains reach deeper;
- likelihood: each word of an option has the script's log-probability (the answer template's words -1.0), and
  ChEF picks by the mean over the option's own tokens: row 0 picks "welsh corgi" (-0.3) over "beagle" (-0.35),
  where the sum would pick beagle and a mean over the whole templated answer "jack russell terrier";
- the question of row 6's last turn ("... is fox, ...") fails with a 500: that chain is failed, never wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, run, write_config
from PIL import Image as PILImage

from evalkit.data.sample import Image, Sample
from evalkit.errors import RunspecError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.prompts.chef.multiturn import (
    TEMPLATE_ALONE,
    TREE_FILE,
    ChefMultiturnPplPreprocessor,
    chef_level_options,
    turn_copies,
)
from evalkit.run.merge import merge
from evalkit.run.rescore import rescore
from evalkit.run.shard import Shard

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "references" / "chef_multiturn.json").read_text(encoding="utf-8")
)
SAMPLES = FIXTURE["samples"]
DIRECT, PPL = "chef_omnibenchmark_multiturn", "chef_omnibenchmark_multiturn_ppl"
PAIRS = [[DIRECT, "fg_classification_multiturn_accuracy"], [PPL, "fg_classification_multiturn_ppl_accuracy"]]
SCRIPT = {
    "answers": [{"match": FIXTURE["script"]["fault"], "answer": "x", "fault": "500"}]
    + [{"match": match, "answer": answer} for match, answer in FIXTURE["script"]["rules"]],
    "token_logprobs": FIXTURE["script"]["logprobs"],
}


def _omnibenchmark(root: Path, tree_inside: bool = False) -> Path:
    """ChEF's data layout: <root>/ChEF/OmniBenchmark_Bamboo (rows, images) and <root>/Bamboo/<tree>."""
    folder = root / "ChEF" / "OmniBenchmark_Bamboo"
    (folder / "meta_file").mkdir(parents=True)
    (folder / "omnibenchmark_images").mkdir()
    for n, row in enumerate(FIXTURE["rows"]):
        PILImage.new("RGB", (12, 8), (20 * n, 100, 200 - 20 * n)).save(folder / row["image"])
    (folder / "meta_file" / "Classification_Omnibenchmark.json").write_text(json.dumps(FIXTURE["rows"]))
    tree = folder / TREE_FILE if tree_inside else root / "Bamboo" / TREE_FILE
    tree.parent.mkdir(parents=True, exist_ok=True)
    tree.write_text(json.dumps(FIXTURE["bamboo_tree"]))
    return folder


def _config(root: Path, url: str, folder: Path) -> Path:
    return write_config(
        root / "config.yaml",
        {
            "dataset_metric": PAIRS,
            "models": [model_entry("m", url, retry_attempts=0)],
            "dataset_paths": {DIRECT: str(folder), PPL: str(folder)},
            "output_dir": str(root / "runs"),
        },
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One unsharded run of both recipes and its two shards against one test server."""
    from evalkit.testing import start_test_server

    root = tmp_path_factory.mktemp("multiturn")
    folder = _omnibenchmark(root / "data")
    server = start_test_server(SCRIPT, request_log=True)
    try:
        config = _config(root, server.base_url, folder)
        whole = run(config, no_cache=True)
        sent = server.log_events("completed")
        shards = [run(config, shard=Shard(k, 2), no_cache=True) for k in range(2)]
        yield {"root": root, "whole": whole.run_dir, "shards": [s.run_dir for s in shards], "sent": sent}
    finally:
        server.stop()


def _results(run_dir: Path) -> dict[str, dict[str, Any]]:
    payload = json.loads((run_dir / "results.json").read_text())
    return {r["dataset"]: r for r in payload["results"]}


def _records(run_dir: Path, pair: list[str]) -> dict[str, dict[str, Any]]:
    path = run_dir / "records" / f"{pair[0]}__{pair[1]}.jsonl"
    return {r["sample_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def _leading_run(rights: list[bool]) -> float:
    """ChEF's weighted_ACC_multi from each turn's verdict: the right turns before the first wrong one, over all."""
    depth = next((turn for turn, right in enumerate(rights) if not right), len(rights))
    return depth / len(rights)


def test_the_options_are_chefs_own() -> None:
    chains = [row["chain"] for row in FIXTURE["rows"]]
    drawn = chef_level_options(chains, FIXTURE["bamboo_tree"])
    assert drawn == [[turn["options"] for turn in sample["turns"]] for sample in SAMPLES]
    # the run's options are drawn over the whole file: the last row's differ when the first is left out
    assert chef_level_options(chains[1:], FIXTURE["bamboo_tree"])[-1] != drawn[-1]


def test_each_level_is_a_sample_asking_chefs_question_with_the_gold_label_above() -> None:
    sample = SAMPLES[0]
    copies = turn_copies(
        Sample(id="s", reference=sample["chain"], instruction=sample["turns"][0]["question"], meta={"index": 0}),
        [turn["options"] for turn in sample["turns"]],
    )
    assert [c.id for c in copies] == ["s#t0", "s#t1", "s#t2"]
    assert [c.reference for c in copies] == sample["chain"]
    assert [c.instruction for c in copies] == [turn["question"] for turn in sample["turns"]]
    assert [c.meta["choices"] for c in copies] == [[TEMPLATE_ALONE, *turn["answers"]] for turn in sample["turns"]]
    assert all(c.meta["group"] == "s" and c.meta["group_size"] == 3 for c in copies)
    assert [c.meta["turn"] for c in copies] == [0, 1, 2]
    assert turn_copies(Sample(id="x", reference="dog")) == [Sample(id="x", reference="dog")]


def test_direct_recipe_equals_chefs_weighted_acc_multi(runs: dict[str, Any]) -> None:
    records = _records(runs["whole"], PAIRS[0])
    assert len(records) == sum(len(s["chain"]) for s in SAMPLES)
    for n, sample in enumerate(SAMPLES):
        turns = [records[f"{DIRECT}-{n}#t{k}"] for k in range(len(sample["chain"]))]
        assert [t["reference"] for t in turns] == sample["chain"]
        assert all(t["group"] == f"{DIRECT}-{n}" and t["group_size"] == len(sample["chain"]) for t in turns)
        if sample["failed"]:
            assert turns[-1]["failure"] == "http_500"
            continue
        assert [t["prediction"] for t in turns] == [turn["direct_answer"] for turn in sample["turns"]]
        assert _leading_run([t["score"] == 1.0 for t in turns]) == pytest.approx(sample["direct"])
    kept = [s["direct"] for s in SAMPLES if not s["failed"]]
    row = _results(runs["whole"])[DIRECT]
    assert row["score"] == pytest.approx(sum(kept) / len(kept))
    assert 100 * row["score"] == pytest.approx(FIXTURE["corpus_x100_without_failed"]["direct"])
    # the failed chain is left out, counted as failed: never as wrong (its first two turns were answered)
    assert row["n"] == len(kept) and row["n_failed"] == 1 and row["failure_reasons"] == {"http_500": 1}
    assert row["details"]["groups_incomplete"] == {"failed_member": 1, "missing_member": 0}


def test_likelihood_recipe_picks_chefs_option_and_equals_chefs_figure(runs: dict[str, Any]) -> None:
    records = _records(runs["whole"], PAIRS[1])
    for n, sample in enumerate(SAMPLES):
        turns = [records[f"{PPL}-{n}#t{k}"] for k in range(len(sample["chain"]))]
        if sample["failed"]:
            assert turns[-1]["failure"] == "http_500" and turns[-1]["score"] is None
            continue
        assert [t["details"]["chosen"] for t in turns] == [turn["ppl_chosen"] for turn in sample["turns"]]
        assert _leading_run([t["score"] == 1.0 for t in turns]) == pytest.approx(sample["ppl"])
    # row 0's last turn: ChEF's mean over the option's tokens picks welsh corgi (the chain 2/3, where a sum would
    # give 1.0), row 8's picks welsh corgi too (1.0, where a mean over the whole templated answer would give 2/3)
    assert records[f"{PPL}-0#t2"]["details"]["scores"][0] == pytest.approx(-0.3)
    assert SAMPLES[0]["ppl"] == pytest.approx(2 / 3) and SAMPLES[8]["ppl"] == 1.0
    kept = [s["ppl"] for s in SAMPLES if not s["failed"]]
    row = _results(runs["whole"])[PPL]
    assert row["score"] == pytest.approx(sum(kept) / len(kept)) and row["n"] == len(kept)
    assert row["n_failed"] == 1 and row["details"]["groups_incomplete"]["failed_member"] == 1


def test_likelihood_requests_carry_the_image_and_chefs_answers(runs: dict[str, Any]) -> None:
    scored = [e for e in runs["sent"] if e.get("messages") and e["messages"][-1]["role"] == "assistant"]
    answers = {e["messages"][-1]["text"] for e in scored}
    turns = [turn for sample in SAMPLES for turn in sample["turns"]]
    every = {
        answer for turn in turns if FIXTURE["script"]["fault"] not in turn["question"] for answer in turn["answers"]
    }
    assert answers == {"", TEMPLATE_ALONE} | every  # the failing turn's requests are not among the completed
    asked = [e for e in runs["sent"] if e.get("messages") and e["messages"][-1]["role"] == "user"]
    questions = {turn["question"] for sample in SAMPLES for turn in sample["turns"]}
    assert {e["messages"][-1]["text"] for e in asked} <= questions
    # every request carries the image with the question (the scored ones: before the answer they continue)
    assert all(e["messages"][-2]["images"] and e["messages"][-2]["text"] in questions for e in scored)
    assert all(e["messages"][-1]["images"] for e in asked)


def test_shards_split_chains_yet_merge_to_the_unsharded_figures(runs: dict[str, Any]) -> None:
    shard_rows = [_results(path) for path in runs["shards"]]
    assert any(r[DIRECT]["details"]["groups_incomplete"]["missing_member"] for r in shard_rows)
    merged = merge(runs["shards"], runs["root"] / "merged")
    whole, joined = _results(runs["whole"]), _results(merged.run_dir)
    for dataset in (DIRECT, PPL):
        for field in ("score", "ci_low", "ci_high", "n", "n_failed"):
            a, b = whole[dataset][field], joined[dataset][field]
            assert (isinstance(a, float) and math.isnan(a) and math.isnan(b)) or a == b, (dataset, field)
        assert joined[dataset]["details"]["groups_incomplete"] == whole[dataset]["details"]["groups_incomplete"]


def test_a_rescore_from_the_records_alone_finds_each_turn_by_its_id(runs: dict[str, Any]) -> None:
    rows = rescore(runs["whole"], "fg_classification_multiturn_accuracy", write=False, rebuild=False)
    row = next(r for r in rows if r.dataset == DIRECT)
    whole = _results(runs["whole"])[DIRECT]
    assert (row.score, row.n, row.n_failed) == (whole["score"], whole["n"], whole["n_failed"])


def _turn(sample_id: str, index: int, chain: list[str], folder: Path) -> Sample:
    relative = FIXTURE["rows"][index]["image"]
    return Sample(
        id=sample_id,
        reference=chain,
        images=[Image(path=str(folder / relative))],
        meta={"index": index, "image_file": relative},
    )


def test_the_tree_is_found_in_the_folder_given_too_and_its_absence_is_named(tmp_path: Path) -> None:
    folder = _omnibenchmark(tmp_path / "inside", tree_inside=True)
    copies = list(ChefMultiturnPplPreprocessor().expand([_turn("a", 3, SAMPLES[3]["chain"], folder)]))
    assert [c.meta["options"] for c in copies] == [turn["options"] for turn in SAMPLES[3]["turns"]]
    (folder / TREE_FILE).unlink()
    with pytest.raises(RunspecError, match=f"{TREE_FILE} is neither in the dataset's folder"):
        list(ChefMultiturnPplPreprocessor().expand([_turn("a", 3, SAMPLES[3]["chain"], folder)]))


def test_a_data_file_not_holding_the_sample_is_refused(tmp_path: Path) -> None:
    folder = _omnibenchmark(tmp_path)
    with pytest.raises(RunspecError, match="row 2 does not hold sample b's chain"):
        list(ChefMultiturnPplPreprocessor().expand([_turn("b", 2, SAMPLES[0]["chain"], folder)]))
    lost = Sample(id="c", reference=["animal"], images=[Image(path="/elsewhere/x.png")], meta={"index": 0})
    with pytest.raises(RunspecError, match="meta 'image_file'"):
        list(ChefMultiturnPplPreprocessor().expand([lost]))
    # a row whose image cell is no image cannot say where the folder is: its turns go without options, and the
    # engine fails them for the image
    broken = Sample(id="d", reference=["animal", "dog"], meta={"index": 0, "image_error": "image: not an image"})
    assert [c.id for c in ChefMultiturnPplPreprocessor().expand([broken])] == ["d#t0", "d#t1"]


def test_a_chain_is_scored_from_its_turns_in_any_order_and_a_failed_turn_fails_it() -> None:
    metric = METRICS.get("fg_classification_multiturn_accuracy")(language="en")
    accumulator = ScoreAccumulator(metric)
    chains = {"a": (["x", "y", "z"], ["x", "y", "-"]), "b": (["x", "y"], ["-", "y"]), "c": (["x", "y"], ["x", "y"])}
    for key, (chain, answers) in chains.items():
        for copy in reversed(turn_copies(Sample(id=key, reference=chain))):
            answer = answers[copy.meta["turn"]]
            accumulator.add(metric.score(answer, copy), group=metric.group_of(copy))
    failed = turn_copies(Sample(id="d", reference=["x", "y"]))
    accumulator.add(metric.score("x", failed[0]), group=metric.group_of(failed[0]))
    accumulator.add_failure("http_500", "boom", group=metric.group_of(failed[1]))
    result = accumulator.result()
    assert result.score == pytest.approx((2 / 3 + 0.0 + 1.0) / 3) and result.n == 3
    assert metric.score("x", Sample(id="e", reference="x")).failure == FailureReason.METRIC_ERROR


def test_the_likelihood_metric_needs_the_template_and_every_option_scored() -> None:
    metric = METRICS.get("fg_classification_multiturn_ppl_accuracy")(language="en")
    copy = turn_copies(Sample(id="s", reference=["dog"]), [["cat", "dog"]])[0]
    # the template alone, then "... cat" and "... dog": dog's own token is likelier (-0.5 against -2.0)
    good = json.dumps({"logprobs": [-8.0, -10.0, -8.5], "tokens": [8, 9, 9], "chars": [1, 1, 1]})
    assert metric.score(good, copy).score == 1.0
    short = json.dumps({"logprobs": [-10.0, -8.5], "tokens": [9, 9], "chars": [1, 1]})
    assert metric.score(short, copy).failure == FailureReason.METRIC_ERROR
    assert metric.score("not json", copy).failure == FailureReason.METRIC_ERROR


def test_a_rescore_rebuilds_the_private_samples_from_the_runs_dataset_paths(runs: dict[str, Any]) -> None:
    """The licensed data is read where the run's config said (dataset_paths), so the likelihood chains rescore."""
    for metric, dataset in (
        ("fg_classification_multiturn_ppl_accuracy", PPL),
        ("fg_classification_multiturn_accuracy", DIRECT),
    ):
        rows = rescore(runs["whole"], metric, write=False)
        row = next(r for r in rows if r.dataset == dataset)
        whole = _results(runs["whole"])[dataset]
        assert (row.score, row.n, row.n_failed) == (whole["score"], whole["n"], whole["n_failed"])

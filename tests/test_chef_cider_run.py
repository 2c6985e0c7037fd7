"""CIDEr in real runs: the document frequencies are the whole plan's, in a run, in each shard, a merge and a rescore.

A captioning set (images, five references each: the "flickr-like" corpus of tests/fixtures/references/
chef_cider.json) runs against the scriptable test server, which answers each picture with the caption the
fixture scored through pycocoevalcap. The run's corpus CIDEr and every record's score equal pycocoevalcap's; so
do each shard's records, although a shard alone would count other document frequencies; the merge and a rescore
give the same figure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, model_entry, run
from PIL import Image as PILImage

from evalkit.metrics.vision.captioning import cider_d
from evalkit.run.merge import merge
from evalkit.run.rescore import rescore
from evalkit.run.shard import Shard

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "chef_cider.json").read_text("utf-8"))
CORPUS = next(c for c in FIXTURE["cider"] if c["id"] == "flickr-like")
ITEMS = CORPUS["items"]
SCRIPT = {"answers": [{"match": f"re:picture {n}$", "answer": item["answer"]} for n, item in enumerate(ITEMS)]}


def _dataset(root: Path) -> Path:
    data = root / "data"
    (data / "img").mkdir(parents=True, exist_ok=True)
    with (data / "captions.jsonl").open("w") as handle:
        for n, item in enumerate(ITEMS):
            PILImage.new("RGB", (8, 8), (30 * n, 90, 10)).save(data / "img" / f"{n}.png")
            row = {"id": f"p{n}", "prompt": f"picture {n}", "image": f"img/{n}.png", "captions": item["gt_answers"]}
            handle.write(json.dumps(row) + "\n")
    specs = root / "runspecs" / "vision"
    specs.mkdir(parents=True, exist_ok=True)
    entry = {
        "path": "../../data/captions.jsonl",
        "language": "en",
        "modality": "image+text",
        "image_column": "image",
        "textual_input_column": "prompt",
        "target_column": "captions",
        "id_column": "id",
        "instruction": "Describe the image in one sentence.",
    }
    task = {"description": "captions", "metrics": ["cider"]}
    (specs / "captioning.json").write_text(json.dumps({"_task": task, "captions": entry}))
    return root / "runspecs"


def _row(run_dir: Path) -> dict[str, Any]:
    payload = json.loads((run_dir / "results.json").read_text())
    return next(r for r in payload["results"] if r.get("metric") == "cider")


def _scores(run_dir: Path) -> dict[str, float]:
    lines = (run_dir / "records" / "captions__cider.jsonl").read_text().splitlines()
    return {r["sample_id"]: r["score"] for r in map(json.loads, lines)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from evalkit.testing import start_test_server

    root = tmp_path_factory.mktemp("cider")
    runspecs = _dataset(root)
    server = start_test_server(SCRIPT)
    try:
        config = config_for(root, runspecs, [model_entry("m", server.base_url)], pairs=[["captions", "cider"]])
        whole = run(config, no_cache=True)
        shards = [run(config, shard=Shard(k, 2), no_cache=True) for k in range(2)]
        yield {"root": root, "whole": whole.run_dir, "shards": [s.run_dir for s in shards]}
    finally:
        server.stop()


def test_the_runs_corpus_cider_equals_pycocoevalcaps(runs: dict[str, Any]) -> None:
    row = _row(runs["whole"])
    assert row["error"] is None and row["n"] == len(ITEMS) and row["n_failed"] == 0
    assert row["score"] == pytest.approx(CORPUS["expected_corpus"], rel=1e-12)
    assert row["details"]["document_frequency_images"] == len(ITEMS)
    scores = _scores(runs["whole"])
    assert [scores[f"p{n}"] for n in range(len(ITEMS))] == pytest.approx([i["expected"] for i in ITEMS], rel=1e-12)


def test_each_shard_scores_with_the_whole_corpus_frequencies(runs: dict[str, Any]) -> None:
    expected = {f"p{n}": item["expected"] for n, item in enumerate(ITEMS)}
    seen: dict[str, float] = {}
    for shard in runs["shards"]:
        scores = _scores(shard)
        assert 0 < len(scores) < len(ITEMS)
        # counted over the shard alone, the same captions would score otherwise: the test can tell them apart
        own = [int(sample_id[1:]) for sample_id in scores]
        alone = cider_d([ITEMS[n]["answer"] for n in own], [ITEMS[n]["gt_answers"] for n in own])[1]
        assert alone != pytest.approx([expected[f"p{n}"] for n in own], rel=1e-9)
        assert _row(shard)["details"]["document_frequency_images"] == len(ITEMS)
        seen.update(scores)
    assert seen == pytest.approx(expected, rel=1e-12)


def test_the_merge_and_a_rescore_give_the_runs_figure(runs: dict[str, Any]) -> None:
    whole = _row(runs["whole"])
    merged = _row(merge(runs["shards"], runs["root"] / "merged").run_dir)
    assert (merged["score"], merged["ci_low"], merged["ci_high"], merged["n"]) == (
        whole["score"],
        whole["ci_low"],
        whole["ci_high"],
        whole["n"],
    )
    assert merged["details"]["document_frequency_images"] == len(ITEMS)
    for run_dir in (runs["whole"], runs["shards"][0]):
        rescored = next(r for r in rescore(run_dir, "cider", write=False) if r.model == "m")
        assert rescored.details["document_frequency_images"] == len(ITEMS)
        if run_dir == runs["whole"]:
            assert rescored.score == pytest.approx(whole["score"], rel=1e-12)
        else:  # a shard's rescore still counts over the whole plan: its records' scores come out unchanged
            assert rescored.score == pytest.approx(_row(run_dir)["score"], rel=1e-12)

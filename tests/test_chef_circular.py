"""MMBench's circular evaluation and MME's acc+ as real metrics: the copies sent, the groups kept, merged exactly.

A small MMBench-shaped set (index, question, hint, A-D, answer, image) runs against the scriptable test server
with ``CircularMultipleChoicePreprocessor``: each question goes once per rotation of its options (``<id>#c<k>``),
and a model that always answers the first option's content is right on a question's first copy when its answer
is A, and on no question in every rotation. The same figures come out of the accumulator for ChEF's own table
(tests/fixtures/references/chef_groups.json), a failed copy fails its question (never counted wrong), and the
shards of a run merge into the unsharded figures although a question's copies land in different shards.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, model_entry, run
from PIL import Image as PILImage

from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.base import SampleScore
from evalkit.metrics.chef.choice import CHOICE_LETTERS
from evalkit.prompts.preprocessors import circular_variants
from evalkit.run.merge import merge
from evalkit.run.rescore import rescore
from evalkit.run.shard import Shard, shard_of

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "chef_groups.json").read_text("utf-8"))

#: (index, question, options, answer letter): every option text is unique, so the server can key on "A. <text>"
QUESTIONS = [
    (11, "Which colour is the square?", ["red", "green", "blue", "yellow"], "A"),
    (12, "Which animal is drawn?", ["cat", "dog", "cow", "hen"], "C"),
    (13, "Is it day or night?", ["day", "night"], "A"),
    (14, "Which shape is shown?", ["circle", "square", "triangle"], "B"),
    (15, "Which fruit is it?", ["apple", "pear", "plum", "fig"], "A"),
    (16, "Which season is it?", ["spring", "summer", "autumn", "winter"], "D"),
]
#: the model always answers the content of the option listed first; question 16's copy starting at "autumn" fails
ALL_OPTIONS = [text for _, _, options, _ in QUESTIONS for text in options]
SCRIPT = {
    "answers": [{"match": "A. autumn", "answer": "x", "fault": "500"}]
    + [{"match": f"A. {text}\n", "answer": text} for text in ALL_OPTIONS]
}
PAIRS = [
    ["mmb", "mmbench_circular_accuracy"],
    ["mmb", "mmbench_vanilla_accuracy"],
]


def _dataset(root: Path) -> Path:
    """An MMBench-shaped jsonl (unused options "nan", as MMBench's export leaves them) with one image per row."""
    data = root / "data"
    (data / "img").mkdir(parents=True, exist_ok=True)
    with (data / "mmb.jsonl").open("w") as handle:
        for n, (index, question, options, answer) in enumerate(QUESTIONS):
            PILImage.new("RGB", (8, 8), (40 * n, 20, 200)).save(data / "img" / f"{index}.png")
            row = {"index": index, "question": question, "hint": "nan", "answer": answer, "image": f"img/{index}.png"}
            row.update({letter: options[i] if i < len(options) else "nan" for i, letter in enumerate("ABCD")})
            handle.write(json.dumps(row) + "\n")
    specs = root / "runspecs" / "vision"
    specs.mkdir(parents=True, exist_ok=True)
    entry = {
        "path": "../../data/mmb.jsonl",
        "language": "en",
        "modality": "image+text",
        "image_column": "image",
        "textual_input_column": "question",
        "target_column": "answer",
        "id_column": "index",
        "extra_columns": {"context": "hint", "option_a": "A", "option_b": "B", "option_c": "C", "option_d": "D"},
        "instruction": "Answer with the option's letter from the given choices directly.",
        "preprocessor": "CircularMultipleChoicePreprocessor",
    }
    task = {"description": "MMBench-shaped", "metrics": ["mmbench_circular_accuracy", "mmbench_vanilla_accuracy"]}
    (specs / "image_mcq_circular.json").write_text(json.dumps({"_task": task, "mmb": entry}))
    return root / "runspecs"


def _results(run_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    payload = json.loads((run_dir / "results.json").read_text())
    return {(r["metric"], r["model"]): r for r in payload["results"] if r.get("dataset") == "mmb"}


def _records(run_dir: Path, metric: str) -> list[dict[str, Any]]:
    path = run_dir / "records" / f"mmb__{metric}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One unsharded run and its two shards against one test server."""
    from evalkit.testing import start_test_server

    root = tmp_path_factory.mktemp("circular")
    runspecs = _dataset(root)
    server = start_test_server(SCRIPT)
    try:
        models = [model_entry("m", server.base_url, retry_attempts=0)]
        config = config_for(root, runspecs, models, pairs=PAIRS)
        whole = run(config, no_cache=True)
        shards = [run(config, shard=Shard(k, 2), no_cache=True) for k in range(2)]
        yield {"root": root, "whole": whole.run_dir, "shards": [s.run_dir for s in shards]}
    finally:
        server.stop()


def test_each_question_is_sent_once_per_rotation_with_the_reference_rotated(runs: dict[str, Any]) -> None:
    records = {r["sample_id"]: r for r in _records(runs["whole"], "mmbench_circular_accuracy")}
    assert len(records) == sum(len(options) for _, _, options, _ in QUESTIONS)
    for index, _, options, answer in QUESTIONS:
        right = options["ABCD".index(answer)]
        for k in range(len(options)):
            record = records[f"{index}#c{k}"]
            rotated = options[k:] + options[:k]
            assert record["group"] == str(index) and record["group_size"] == len(options)
            assert record["reference"] == "ABCD"[rotated.index(right)]
            if record.get("failure") is None:
                assert record["prediction"] == rotated[0]  # the script: the first option's content
                assert record["score"] == float(rotated[0] == right)


def test_a_first_option_model_scores_zero_circular_and_above_zero_vanilla(runs: dict[str, Any]) -> None:
    results = _results(runs["whole"])
    circular, vanilla = results[("mmbench_circular_accuracy", "m")], results[("mmbench_vanilla_accuracy", "m")]
    assert circular["score"] == 0.0
    # question 16 has a failed copy: left out of both figures, counted as failed, never as wrong
    answered_a = [index for index, _, _, answer in QUESTIONS if answer == "A" and index != 16]
    assert vanilla["score"] == pytest.approx(len(answered_a) / (len(QUESTIONS) - 1)) and vanilla["score"] > 0
    for row in (circular, vanilla):
        assert row["n"] == len(QUESTIONS) - 1
        assert row["n_failed"] == 1 and row["failure_reasons"] == {"http_500": 1}
        assert row["details"]["groups_incomplete"] == {"failed_member": 1, "missing_member": 0}
        assert row["details"]["n_samples"] == sum(len(q[2]) for q in QUESTIONS) - 1
        assert row["failure_rate"] == pytest.approx(1 / sum(len(q[2]) for q in QUESTIONS))  # over copies sent


def test_shards_split_questions_yet_merge_to_the_unsharded_figures(runs: dict[str, Any]) -> None:
    ids = [f"{index}#c{k}" for index, _, options, _ in QUESTIONS for k in range(len(options))]
    split = {i.split("#")[0] for i in ids if shard_of(i, 2) == 0} & {i.split("#")[0] for i in ids if shard_of(i, 2)}
    assert split, "the data must put some question's copies in both shards"
    shard_rows = [_results(path) for path in runs["shards"]]
    assert any(
        r[("mmbench_vanilla_accuracy", "m")]["details"]["groups_incomplete"]["missing_member"] for r in shard_rows
    )
    merged = merge(runs["shards"], runs["root"] / "merged")
    whole, joined = _results(runs["whole"]), _results(merged.run_dir)
    for key, row in whole.items():
        for field in ("score", "ci_low", "ci_high", "n", "n_failed"):
            assert _same(row[field], joined[key][field]), (key, field)
        assert joined[key]["details"]["groups_incomplete"] == row["details"]["groups_incomplete"]


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (a figure with fewer than two groups has no interval)."""
    nan = isinstance(a, float) and math.isnan(a)
    return (nan and isinstance(b, float) and math.isnan(b)) or a == b


def test_a_rescore_rebuilds_the_copies_and_gives_the_same_figures(runs: dict[str, Any]) -> None:
    rows = {r.metric: r for r in rescore(runs["whole"], "mmbench_vanilla_accuracy", write=False) if r.model == "m"}
    whole = _results(runs["whole"])[("mmbench_vanilla_accuracy", "m")]
    assert rows["mmbench_vanilla_accuracy"].score == whole["score"] and rows["mmbench_vanilla_accuracy"].n == whole["n"]


def _chef_samples() -> list[Sample]:
    return [
        Sample(id=str(i["id"]), reference=CHOICE_LETTERS[i["gt_choice"]], meta={"choices": i["choices"]})
        for i in FIXTURE["mmbench"]["items"]
    ]


@pytest.mark.parametrize(
    ("metric", "key"), [("MMBenchVQA", "circular_acc"), ("mmbench_vanilla_accuracy", "vanilla_acc")]
)
def test_through_the_accumulator_the_metrics_equal_chefs_table(metric: str, key: str) -> None:
    """MMBench's own copies (index + k * 1,000,000), ChEF's answers, in reverse order: ChEF's printed figures."""
    scorer = METRICS.get(metric)(language="en")
    accumulator = ScoreAccumulator(scorer)
    answers = {str(i["id"]): i["answer"] for i in FIXTURE["mmbench"]["items"]}
    for sample in reversed(_chef_samples()):
        accumulator.add(scorer.score(answers[sample.id], sample), group=scorer.group_of(sample))
    result = accumulator.result()
    assert result.score == pytest.approx(FIXTURE["mmbench"]["expected"][key] / 100)
    assert result.n == 5 and result.details["n_samples"] == len(answers)


def test_mme_accuracy_plus_through_the_accumulator_equals_chefs_overall_plus() -> None:
    scorer = METRICS.get("mme_accuracy_plus")(language="en")
    accumulator = ScoreAccumulator(scorer)
    items = FIXTURE["mme"]["items"]
    for n, item in enumerate(items):
        sample = Sample(id=str(n), reference=item["gt_answers"], meta={"image_path": item["image_path"]})
        accumulator.add(scorer.score(item["answer"], sample), group=scorer.group_of(sample))
    result = accumulator.result()
    assert result.score == pytest.approx(FIXTURE["mme"]["expected"]["overall_plus"] / 100)
    assert result.n == len({i["image_path"] for i in items})


def test_a_failed_question_of_an_image_fails_the_image_and_the_interval_is_over_images() -> None:
    scorer = METRICS.get("mme_accuracy_plus")(language="en")
    accumulator = ScoreAccumulator(scorer)
    # four images: i0 and i1 both right, i2 one right, i3 one right and one request failed
    for image, rights in (("i0", (1, 1)), ("i1", (1, 1)), ("i2", (1, 0))):
        for right in rights:
            accumulator.add(SampleScore(float(right), (float(right), 1.0)), group=(image, None))
    accumulator.add(SampleScore(1.0, (1.0, 1.0)), group=("i3", None))
    accumulator.add_failure("http_500", "boom", group=("i3", None))
    result = accumulator.result()
    assert result.score == pytest.approx(2 / 3) and result.n == 3
    half = 1.959963984540054 * math.sqrt((2 * (1 / 3) ** 2 + (2 / 3) ** 2) / 2 / 3)
    assert (result.ci_low, result.ci_high) == pytest.approx((2 / 3 - half, 1.0))
    assert result.details["groups_incomplete"] == {"failed_member": 1, "missing_member": 0}
    # a duplicate row fails nothing of its group
    accumulator.add_failure("duplicate_id", "again", group=("i0", None))
    assert accumulator.result().n == 3


def test_circular_copies_rotate_options_and_reference() -> None:
    sample = Sample(id="q", reference="C", meta={"option_a": "x", "option_b": "y", "option_c": "z", "option_d": "nan"})
    copies = circular_variants(sample)
    assert [c.id for c in copies] == ["q#c0", "q#c1", "q#c2"]
    assert [c.meta["choices"] for c in copies] == [["x", "y", "z"], ["y", "z", "x"], ["z", "x", "y"]]
    assert [c.reference for c in copies] == ["C", "B", "A"]
    assert all(c.meta["group"] == "q" and c.meta["group_size"] == 3 and "option_a" not in c.meta for c in copies)
    assert circular_variants(Sample(id="open", reference="anything", meta={"choices": ["a", "b"]})) == [
        Sample(id="open", reference="anything", meta={"choices": ["a", "b"]})
    ]


def test_the_circular_option_rotates_a_plain_multiple_choice_dataset_the_same_way(
    tmp_path: Path, runs: dict[str, Any]
) -> None:
    """`{"circular": true}` on a pair asks a MultipleChoicePreprocessor dataset as the circular preprocessor does."""
    from evalkit.config import load_config
    from evalkit.errors import ConfigError
    from evalkit.plan import build_plan
    from evalkit.testing import start_test_server

    runspecs = _dataset(tmp_path)
    spec_file = runspecs / "vision" / "image_mcq_circular.json"
    data = json.loads(spec_file.read_text())
    data["mmb"]["preprocessor"] = "MultipleChoicePreprocessor"
    spec_file.write_text(json.dumps(data))
    server = start_test_server(SCRIPT)
    try:
        models = [model_entry("m", server.base_url, retry_attempts=0)]
        pairs = [[dataset, metric, {"circular": True}] for dataset, metric in PAIRS]
        config = config_for(tmp_path, runspecs, models, pairs=pairs)
        plan = build_plan(load_config(config), source=str(config))
        assert {engine.dataset.preprocessor for engine in plan.engines} == {"CircularMultipleChoicePreprocessor"}
        optioned = run(config, no_cache=True)
    finally:
        server.stop()
    for key, row in _results(runs["whole"]).items():
        again = _results(optioned.run_dir)[key]
        assert (again["score"], again["n"], again["n_failed"]) == (row["score"], row["n"], row["n_failed"])
    plain = config_for(tmp_path / "plain", runspecs, models, pairs=[list(PAIRS[0])])
    (engine,) = build_plan(load_config(plain), source=str(plain)).engines
    assert engine.dataset.preprocessor == "MultipleChoicePreprocessor"  # without the option: asked once
    data["mmb"]["preprocessor"] = "GeneralPreprocessor"
    spec_file.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="option 'circular' rotates the options .* asked with GeneralPreprocessor"):
        build_plan(load_config(config), source=str(config))

"""Robustness variants (ChEF's img_crp / text_crp): seeded corruptions, one variant per corruption, the change.

Image runs use the test server's ``image_answer: format``: it answers the format of the image it decoded, so
the clean pair (PNG) scores 1 and the ``jpeg`` variant 0 by hand, and ``gaussian_noise`` (written as PNG)
keeps 1 while sending other pixels. Text runs use a model that always answers "A" on questions whose right
option is A: shuffling the options moves the reference, so the variant's score is the share of questions
whose right option stayed first.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import config_for, model_entry, run
from PIL import Image as PILImage

from evalkit.data.image.corrupt import IMAGE_CORRUPTIONS, ImageCorruption, corrupt_image, remake, sample_seed
from evalkit.data.sample import Sample
from evalkit.prompts.corrupt_text import corrupt_sample, shuffled_options, with_typos
from evalkit.util.confine import Roots
from evalkit.view.media import MediaPart, image_file


def _png(colour: tuple[int, int, int], size: tuple[int, int] = (32, 24)) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", size, colour).save(out, format="PNG")
    return out.getvalue()


def _decoded(data: bytes) -> np.ndarray:
    with PILImage.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.int16)


def test_sample_seed_is_fixed_by_its_inputs_only() -> None:
    # a constant: Python's per-process str hash must never leak in (shards and the viewer recompute it)
    assert sample_seed(0, "jpeg", "q1") == int.from_bytes(hashlib.sha256(b"0\x00jpeg\x00q1").digest()[:8], "big") >> 1
    assert sample_seed(0, "jpeg", "q1") != sample_seed(1, "jpeg", "q1") != sample_seed(0, "jpeg", "q2")


@pytest.mark.parametrize("name", IMAGE_CORRUPTIONS)
def test_each_image_corruption_is_deterministic_keeps_the_size_and_changes_pixels(name: str) -> None:
    rng = np.random.default_rng(0)
    source = io.BytesIO()
    PILImage.fromarray(rng.integers(0, 256, size=(24, 32, 3), dtype=np.uint8)).save(source, format="PNG")
    data = source.getvalue()
    one = corrupt_image(data, ImageCorruption(name, 3, 7), 0, 0, "x")
    again = corrupt_image(data, ImageCorruption(name, 3, 7), 0, 0, "x")
    assert one == again
    assert (one.width, one.height) == (32, 24)
    assert one.format == ("jpeg" if name == "jpeg" else "png")
    assert np.abs(_decoded(one.data) - _decoded(data)).mean() > 1.0
    if name not in ("gaussian_blur", "jpeg"):  # seeded: another seed (or image place) draws other numbers
        assert corrupt_image(data, ImageCorruption(name, 3, 8), 0, 0, "x").data != one.data
        assert corrupt_image(data, ImageCorruption(name, 3, 7), 0, 1, "x").data != one.data


def test_levels_grow_stronger() -> None:
    data = _png((128, 128, 128))
    spread = [
        _decoded(corrupt_image(data, ImageCorruption("gaussian_noise", s, 1), 0, 0, "x").data).std() for s in (1, 3, 5)
    ]
    assert spread[0] < spread[1] < spread[2]
    sizes = [
        len(corrupt_image(_png((200, 30, 90), (64, 64)), ImageCorruption("jpeg", s, 1), 0, 0, "x").data) for s in (1, 5)
    ]
    assert sizes[1] < sizes[0]


def test_typos_are_seeded_and_keep_spacing_and_punctuation() -> None:
    text = "Which planet, of all eight planets, is known as the red planet?"
    a = with_typos(text, 5, random.Random(3))
    assert a == with_typos(text, 5, random.Random(3)) and a != text
    assert a.count(" ") == text.count(" ") and a.count(",") == 2 and a.endswith("?")


@pytest.mark.parametrize("reference", ["C", 2, "Saturn", ["C"]])
def test_shuffled_options_move_the_reference_with_its_option(reference: Any) -> None:
    choices = ["Venus", "Mars", "Saturn", "Jupiter"]
    for seed in range(20):
        sample = Sample(id="q", text="?", reference=reference, meta={"choices": choices})
        shuffled, note = shuffled_options(sample, random.Random(seed))
        letter = shuffled.reference[0] if isinstance(shuffled.reference, list) else shuffled.reference
        assert shuffled.meta["choices"][ord(letter) - ord("A")] == "Saturn"
        assert sorted(shuffled.meta["choices"]) == sorted(choices) and note["order"]
    unresolvable = Sample(id="q", text="?", reference="Pluto", meta={"choices": choices})
    assert shuffled_options(unresolvable, random.Random(0)) == (
        unresolvable,
        {"skipped": "the reference names no option"},
    )
    with pytest.raises(ValueError, match="unknown text corruption"):
        corrupt_sample(unresolvable, "snow", 0)


# ---------------------------------------------------------------- runs


def _image_specs(root: Path, n: int = 4) -> Path:
    data = root / "data"
    data.mkdir(parents=True)
    with (data / "imgs.jsonl").open("w") as handle:
        for i in range(n):
            (data / f"i{i}.png").write_bytes(_png((50 * i, 120, 200)))
            handle.write(
                json.dumps({"id": f"i{i}", "q": "Which format?", "image": f"i{i}.png", "answer": "png"}) + "\n"
            )
    folder = root / "runspecs" / "vision"
    folder.mkdir(parents=True)
    entry = {
        "path": "../../data/imgs.jsonl",
        "language": "en",
        "modality": "image+text",
        "image_column": "image",
        "id_column": "id",
        "textual_input_column": "q",
        "target_column": "answer",
    }
    (folder / "imgs.json").write_text(
        json.dumps({"_task": {"description": "x", "metrics": ["exact_match"]}, "imgs": entry})
    )
    return root / "runspecs"


def _records(run_dir: Path, dataset: str, metric: str) -> list[dict[str, Any]]:
    (path,) = [
        p
        for p in (run_dir / "records").glob("*.jsonl")
        if json.loads(p.read_text().splitlines()[0])["dataset"] == dataset and metric in p.name
    ]
    return [json.loads(line) for line in path.read_text().splitlines()]


def _sent(run_dir: Path, dataset: str) -> dict[str, dict[str, Any]]:
    for path in (run_dir / "records" / "sent").glob("*.jsonl"):
        entries = [json.loads(line) for line in path.read_text().splitlines()]
        if entries and entries[0]["dataset"] == dataset:
            return {e["key"]: e for e in entries}
    raise AssertionError(f"no sent log of {dataset}")


def test_image_variants_run_as_pairs_with_the_change_and_the_corrupted_image_referenced(
    tmp_path: Path, make_server
) -> None:
    server = make_server({"image_answer": "format"}, request_log=True)
    specs = _image_specs(tmp_path)
    pair = ["imgs", "exact_match", {"corruptions": ["jpeg", "noise"], "corruption_seed": 5}]
    outcome = run(config_for(tmp_path / "a", specs, [model_entry("m", server.base_url)], pairs=[pair]))
    rows = {row.dataset: row for row in outcome.rows}
    assert set(rows) == {"imgs", "imgs@jpeg", "imgs@gaussian_noise"}
    assert (rows["imgs"].score, rows["imgs@jpeg"].score, rows["imgs@gaussian_noise"].score) == (1.0, 0.0, 1.0)
    assert "robustness" not in rows["imgs"].details
    jpeg = rows["imgs@jpeg"].details["robustness"]
    assert (jpeg["corruption"], jpeg["severity"], jpeg["seed"], jpeg["clean_dataset"]) == ("jpeg", 3, 5, "imgs")
    assert (jpeg["clean_score"], jpeg["change"]) == (1.0, -1.0)
    assert (
        jpeg["paired"]["n_paired"] == 4
        and jpeg["paired"]["worsened"] == 4
        and jpeg["paired"]["test"] == "McNemar exact"
    )
    assert rows["imgs@gaussian_noise"].details["robustness"]["change"] == 0.0
    assert len(server.log_events("completed")) == 12  # nothing of a variant comes from the clean pair's answers

    # the sent entry names the exact image sent: corruption, level, seed and the corrupted bytes' sha256
    records = _records(outcome.run_dir, "imgs@gaussian_noise", "exact_match")
    sent = _sent(outcome.run_dir, "imgs@gaussian_noise")
    shas = {}
    for record in records:
        (ref,) = [p["image"] for m in sent[record["sent"]]["messages"] for p in m["content"] if p["type"] == "image"]
        seed = sample_seed(5, "gaussian_noise", record["sample_id"])
        assert ref["corruption"]["seed"] == seed and ref["corruption"]["name"] == "gaussian_noise"
        assert record["corruption"] == {"name": "gaussian_noise", "severity": 3, "seed": seed}
        # the viewer's way back to the pixels: the source (its path and sha256) and the corruption, recomputed
        source = Path(ref["path"]).read_bytes()
        assert hashlib.sha256(source).hexdigest() == ref["sha256"]
        remade = corrupt_image(source, ImageCorruption("gaussian_noise", 3, seed), 0, 0, "x")
        assert hashlib.sha256(remade.data).hexdigest() == ref["corruption"]["sha256"] != ref["sha256"]
        assert remake(source, ref["corruption"]) == remade.data and ref["corruption"]["place"] == [0, 0]
        # the viewer shows the image as sent, not its clean source
        roots = Roots([Path(ref["path"]).parent])  # the dataset's folder, as `evalkit view --media-root` gives it
        shown, mime = image_file(MediaPart(0, "image", ref, 0, "imgs@gaussian_noise", roots))
        assert (shown, mime) == (remade.data, "image/png")
        with pytest.raises(ValueError, match="sha256 mismatch"):
            remake(_png((1, 2, 3)), ref["corruption"])
        shas[record["sample_id"]] = ref["corruption"]["sha256"]
    # the same seed gives the same images on another run
    again = run(config_for(tmp_path / "b", specs, [model_entry("m", server.base_url)], pairs=[pair]))
    sent_again = _sent(again.run_dir, "imgs@gaussian_noise")
    for record in _records(again.run_dir, "imgs@gaussian_noise", "exact_match"):
        (ref,) = [
            p["image"] for m in sent_again[record["sent"]]["messages"] for p in m["content"] if p["type"] == "image"
        ]
        assert ref["corruption"]["sha256"] == shas[record["sample_id"]]


QUESTIONS = [(f"q{i}", f"Question number {i} about planets?", ["Mercury", "Venus", "Earth", "Mars"]) for i in range(8)]


def _text_specs(root: Path) -> Path:
    data = root / "mc.jsonl"
    data.write_text("".join(json.dumps({"id": i, "q": q, "choices": c, "answer": "A"}) + "\n" for i, q, c in QUESTIONS))
    folder = root / "runspecs" / "mc"
    folder.mkdir(parents=True)
    entry = {
        "path": str(data),
        "language": "en",
        "modality": "text",
        "id_column": "id",
        "textual_input_column": "q",
        "target_column": "answer",
        "choices_column": "choices",
        "preprocessor": "mcq",
    }
    (folder / "mc.json").write_text(
        json.dumps({"_task": {"description": "x", "metrics": ["mcq_accuracy"]}, "mc": entry})
    )
    return root / "runspecs"


def test_text_variants_shuffle_options_and_add_typos(tmp_path: Path, make_server) -> None:
    server = make_server({"default_answer": "A"})
    pair = ["mc", "mcq_accuracy", {"corruptions": ["shuffle_options", "typos"], "corruption_severity": 5}]
    outcome = run(config_for(tmp_path, _text_specs(tmp_path), [model_entry("m", server.base_url)], pairs=[pair]))
    rows = {row.dataset: row for row in outcome.rows}
    # by hand from the seeded orders: the questions whose right option (Mercury) stayed first
    stayed = []
    for qid, _, choices in QUESTIONS:
        sample = Sample(id=qid, text="", reference="A", meta={"choices": choices})
        shuffled, _ = corrupt_sample(sample, "shuffle_options", 0)
        stayed.append(shuffled.reference == "A")
    assert 0 < sum(stayed) < len(stayed)  # the seed moves some right options, not all
    assert rows["mc"].score == 1.0
    assert rows["mc@shuffle_options"].score == pytest.approx(sum(stayed) / len(stayed))
    assert rows["mc@shuffle_options"].details["robustness"]["change"] == pytest.approx(sum(stayed) / len(stayed) - 1)
    assert rows["mc@typos"].score == 1.0  # the letters are untouched: typos only change the question
    records = {r["sample_id"]: r for r in _records(outcome.run_dir, "mc@shuffle_options", "mcq_accuracy")}
    sent = _sent(outcome.run_dir, "mc@shuffle_options")
    for (qid, _, choices), kept in zip(QUESTIONS, stayed, strict=True):
        record = records[qid]
        order = record["corruption"]["order"]
        assert (record["reference"] == "A") == kept
        text = sent[record["sent"]]["messages"][-1]["content"][0]["text"]
        listed = [line.split(". ", 1)[1] for line in text.splitlines() if line[:3] in ("A. ", "B. ", "C. ", "D. ")]
        assert listed == [choices[i] for i in order]
    typo_text = [e["messages"][-1]["content"][0]["text"] for e in _sent(outcome.run_dir, "mc@typos").values()]
    clean_text = [e["messages"][-1]["content"][0]["text"] for e in _sent(outcome.run_dir, "mc").values()]
    expected = {corrupt_sample(Sample(id=qid, text=q), "typos", 0, 5)[0].text for qid, q, _ in QUESTIONS}
    assert {text.split("\n", 1)[0] for text in typo_text} == expected  # the seeded typos, and only in the question
    assert len(set(typo_text) - set(clean_text)) >= len(QUESTIONS) // 2


def test_chef_switches_and_variant_ids(tmp_path: Path) -> None:
    from evalkit.config import load_config
    from evalkit.data.loading import iter_samples
    from evalkit.plan import build_plan
    from evalkit.prompts.chef.recipes import split_recipe

    options, recipe = split_recipe({"CoT": True, "text_crp": True, "corruptions": ["JPEG"], "index_base": 1}, "w")
    assert options == {"index_base": 1}
    assert (recipe.chain_of_thought, recipe.corruptions) == (True, ("jpeg", "typos", "shuffle_options"))
    # a dataset without an id column: a variant's samples keep the clean pair's ids, so they pair up
    specs = _text_specs(tmp_path)
    spec_file = specs / "mc" / "mc.json"
    data = json.loads(spec_file.read_text())
    del data["mc"]["id_column"]
    spec_file.write_text(json.dumps(data))
    config = config_for(
        tmp_path, specs, [model_entry("m", "http://127.0.0.1:9/v1")], pairs=[["mc", "mcq_accuracy", {"text_crp": True}]]
    )
    plan = build_plan(load_config(config), source=str(config))
    assert [e.dataset.name for e in plan.engines] == ["mc", "mc@typos", "mc@shuffle_options"]
    ids = [[s.id for s in iter_samples(e.dataset)] for e in plan.engines]
    assert ids[0] == ids[1] == ids[2] and ids[0][0] == "mc-0"


def test_variants_of_shards_merge_into_the_unsharded_results(tmp_path: Path, make_server) -> None:
    from evalkit.run.merge import merge
    from evalkit.run.shard import Shard

    server = make_server({"default_answer": "A"})
    pair = ["mc", "mcq_accuracy", {"corruptions": ["shuffle_options"]}]
    config = config_for(tmp_path, _text_specs(tmp_path), [model_entry("m", server.base_url)], pairs=[pair])
    whole = run(config)
    shards = [run(config, shard=Shard(k, 2)).run_dir for k in range(2)]
    merged = merge(shards, tmp_path / "merged")

    def robustness(rows: list[Any]) -> dict[str, Any]:
        return {r.dataset: (r.score, r.details.get("robustness")) for r in rows}

    found = robustness(merged.rows)
    assert found == robustness(whole.rows)
    assert found["mc@shuffle_options"][1]["paired"]["n_paired"] == len(QUESTIONS)

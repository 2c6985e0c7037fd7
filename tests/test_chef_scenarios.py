"""ChEF's scenario names in evalkit's catalogue: each resolves, in any case, to the entry reading the same data.

LAMM's 2D_Benchmark is a local download (meta_file/*.json lists whose image paths are relative to the benchmark
folder), so those entries are private: a tiny folder in that layout, with real PNG images, is run end to end
against the test server, the answers scripted or read from the pixels, every figure known by hand. Ch3Ef's meta
files are JSON objects holding their rows under ``items``; its options are scored by likelihood. The 3D sets
cannot be had (ScanNet's terms of use): selecting one is a config error that says why. ChEF's FG_Classification
is compared with the output of ChEF's own code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, run_private, write_config

from evalkit.catalog import Catalog, DatasetSpec, load_catalog
from evalkit.config import load_config
from evalkit.errors import ConfigError, RunspecError
from evalkit.metrics.chef.fine_grained import BambooTree, FgClassificationAccuracy, weighted_depth
from evalkit.plan import build_plan

REPO = Path(__file__).resolve().parent.parent
NAMES = json.loads((REPO / "runspecs" / "_names" / "chef.json").read_text(encoding="utf-8"))
COVERED = {name: row["evalkit"] for name, row in NAMES["datasets"].items() if row["evalkit"] is not None}
FG_REFERENCE = json.loads(
    (REPO / "tests" / "fixtures" / "references" / "chef_fg_classification.json").read_text(encoding="utf-8")
)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(cwd=REPO)


def test_the_table_lists_chefs_33_scenarios() -> None:
    assert len(NAMES["datasets"]) == 33


@pytest.mark.parametrize("name", sorted(COVERED))
def test_chef_name_resolves_in_any_case(catalog: Catalog, name: str) -> None:
    """With the prefix every spelling is ChEF's; bare, a spelling that is one of evalkit's own names (its ``ai2d``,
    ``mme``, the ``ScienceQA`` alias of its lmms-lab entry) keeps evalkit's meaning."""
    target = catalog.datasets[COVERED[name]]
    for spelling in (name, name.lower(), name.upper(), name.swapcase()):
        assert catalog.resolve(f"chef:{spelling}") == [target], f"chef:{spelling}"
        assert catalog.resolve(spelling) == [_bare_meaning(catalog, spelling, target)], spelling


def _bare_meaning(catalog: Catalog, spelling: str, chefs: DatasetSpec) -> DatasetSpec:
    """What a bare spelling means: evalkit's own name exactly, else ChEF's name exactly, else evalkit's own name in
    another case, else ChEF's."""
    own = {**{name: name for name in catalog.datasets}, **catalog.aliases}
    if spelling in own:
        return catalog.datasets[own[spelling]]
    if spelling in NAMES["datasets"]:
        return chefs
    folded = [entry for name, entry in own.items() if name.casefold() == spelling.casefold()]
    return catalog.datasets[folded[0]] if len(set(folded)) == 1 else chefs


def test_every_chef_name_has_an_entry(catalog: Catalog) -> None:
    assert len(NAMES["datasets"]) == 33
    assert [name for name, row in NAMES["datasets"].items() if row["evalkit"] is None] == []
    for name in NAMES["datasets"]:
        assert catalog.resolve(name.lower()), name


# ----------------------------------------------------------------- a LAMM 2D_Benchmark folder, run end to end


def _png(path: Path, colour: tuple[int, int, int], size: tuple[int, int] = (40, 20)) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


RED, GREEN, BLUE = (255, 0, 0), (0, 160, 0), (0, 0, 255)


def _benchmark(root: Path) -> Path:
    """LAMM's layout: <root>/meta_file/<Task>_<Set>.json, each a JSON list whose image paths start at <root>."""
    bench = root / "LAMM" / "2D_Benchmark"
    meta = bench / "meta_file"
    meta.mkdir(parents=True)
    for i, colour in enumerate((RED, GREEN, BLUE)):
        _png(bench / "cifar10_images" / f"{i}.png", colour)
    cifar = [
        {"image": "cifar10_images/0.png", "label": "red", "query": "What is the category label for this image?"},
        {"image": "cifar10_images/1.png", "label": "green", "query": "What is the category label for this image?"},
        {"image": "cifar10_images/2.png", "label": "green", "query": "What is the category label for this image?"},
    ]
    (meta / "Classification_CIFAR10.json").write_text(json.dumps(cifar), encoding="utf-8")
    _png(bench / "fsc147_images" / "apples.jpg", RED)
    _png(bench / "fsc147_images" / "birds.jpg", BLUE)
    counting = [
        {"image": "fsc147_images/apples.jpg", "num": 3, "query": "How many apples are there in this image?"},
        {"image": "fsc147_images/birds.jpg", "num": 12, "query": "How many birds are there in this image?"},
    ]
    (meta / "Counting_FSC147.json").write_text(json.dumps(counting), encoding="utf-8")
    # LSP locating reads the image's size from the file: 200 x 100 pixels, the joints' box x 50-150, y 20-80
    _png(bench / "lsp_images" / "im0001.jpg", GREEN, size=(200, 100))
    joints = [[50, 20], [150, 80], [100, 50]]
    locating = [
        {"image": "lsp_images/im0001.jpg", "gt_joints": joints, "query": "Where is the hip of the person?"},
        {"image": "lsp_images/im0001.jpg", "gt_joints": joints, "query": "Where is the hip, once more?"},
    ]
    (meta / "Locating_LSP.json").write_text(json.dumps(locating), encoding="utf-8")
    return bench


def _records(outcome: Any, dataset: str, metric: str) -> list[dict[str, Any]]:
    """The pair's records in dataset order (they are written as answers arrive)."""
    path = outcome.run_dir / "records" / f"{dataset}__{metric}.jsonl"
    return sorted(map(json.loads, path.read_text(encoding="utf-8").splitlines()), key=lambda r: r["row"])


def _asked(outcome: Any, dataset: str) -> dict[str, list[str]]:
    """Each sample's user message texts, as records/sent/<dataset>.jsonl says they were sent."""
    path = outcome.run_dir / "records" / "sent" / f"{dataset}.jsonl"
    asked = {}
    for row in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
        (message,) = row["messages"]
        assert message["role"] == "user" and message["content"][-1]["type"] == "image"  # after the text, as ChEF's GPT
        asked[row["sample_id"]] = [part["text"] for part in message["content"] if part["type"] == "text"]
    return asked


def test_lamm_benchmark_folder_runs_end_to_end(tmp_path: Path, make_server) -> None:
    """ChEF's names, a LAMM 2D_Benchmark folder given once per entry, and answers whose scores are known by hand.

    CIFAR10 (ChEF's basic prompt alone): the server names each image's colour, so the relative image paths must
    reach the right files: red (right), green (right), blue against "green" (wrong) -> 2/3. CIFAR10_LAMM asks the
    item's query with the class list: the same colours answer it. FSC147: "three" is 3 (right), "10" against 12
    (wrong, MAE 2). Locating_LSP: [0.5, 0.5] is (100, 50) in the 200 x 100 image, inside the joints' box (right);
    [0.9, 0.5] is (180, 50), outside (wrong).
    """
    bench = _benchmark(tmp_path)
    server = make_server(
        {
            "image_answer": "colour",
            "answers": [
                {"match": "How many apples", "answer": "I count three apples."},
                {"match": "How many birds", "answer": "10"},
                {"match": "hip of the person", "answer": "The hip is at [0.5, 0.5]."},
                {"match": "hip, once more", "answer": "[0.9, 0.5]"},
            ],
        }
    )
    pairs = [["CIFAR10", "CG_Classification"], ["cifar10_lamm", "cg_classification_accuracy"]]
    pairs += [["FSC147", "Counting"], ["FSC147_LAMM", "counting_mae"], ["Locating_LSP", "InsideHumanBbox"]]
    paths = {name: str(bench) for name in ("chef_cifar10", "lamm_cifar10", "lamm_fsc147", "lamm_locating_lsp")}
    outcome = run_private(tmp_path, server.base_url, pairs, paths)
    scores = {(row.dataset, row.metric): row.score for row in outcome.rows}
    assert scores == {
        ("chef_cifar10", "cg_classification_accuracy"): pytest.approx(2 / 3),
        ("lamm_cifar10", "cg_classification_accuracy"): pytest.approx(2 / 3),
        ("lamm_fsc147", "counting_accuracy"): pytest.approx(1 / 2),
        ("lamm_fsc147", "counting_mae"): pytest.approx((0 + 2) / 2),
        ("lamm_locating_lsp", "inside_human_bbox_accuracy"): pytest.approx(1 / 2),
    }
    basic = _records(outcome, "chef_cifar10", "cg_classification_accuracy")
    assert [r["prediction"] for r in basic] == ["red", "green", "blue"]
    assert basic[0]["images"][0]["path"] == str(bench / "cifar10_images" / "0.png")
    # ChEF's basic recipe sends its prompt alone (the meta file's query is not asked); its LAMM recipe the query
    assert set(map(tuple, _asked(outcome, "chef_cifar10").values())) == {("The photo of the ",)}
    classes = "airplane, automobile, bird, cat, deer, dog, frog, horse, ship, truck"
    lamm = "What is the category label for this image? Please choose a label from the following shuffled categories: "
    lamm += f"{classes}."
    assert set(map(tuple, _asked(outcome, "lamm_cifar10").values())) == {(lamm,)}
    assert _asked(outcome, "lamm_fsc147")["lamm_fsc147-1"] == ["How many birds are there in this image?"]


def test_text_reading_captioning_and_fine_grained_entries_run_end_to_end(tmp_path: Path, make_server) -> None:
    """SVT: the quoted "HOTEL PIZZA" holds two of ["HOTEL", "PIZZA", "BAR"] -> 2/3. UCMerced: "a golf course" does not
    hold "golfcourse" (ChEF's rule is a literal substring) -> 0, "It shows a harbor." -> 1. Flickr30k_LAMM: the
    meta file's five captions per image are the references CIDEr is computed against. Omnibenchmark, from ChEF's
    own folder, is asked ChEF's prompt alone, so the server answers from the pixels ("red", "blue"): neither names
    a level of the chain -> 0.
    """
    from evalkit.metrics.vision.captioning import cider_d

    bench = tmp_path / "LAMM" / "2D_Benchmark"
    meta = bench / "meta_file"
    meta.mkdir(parents=True)
    _png(bench / "svt_images" / "00_01.jpg", RED)
    svt = [{"image": "svt_images/00_01.jpg", "word_list": ["HOTEL", "PIZZA", "BAR"], "query": "Read the sign."}]
    (meta / "OCR_SVT.json").write_text(json.dumps(svt), encoding="utf-8")
    _png(bench / "ucmerced_images" / "golf.tif", GREEN)
    _png(bench / "ucmerced_images" / "harbor.tif", BLUE)
    ucm = [
        {"image": "ucmerced_images/golf.tif", "label": "golfcourse", "query": "Which scene is the first?"},
        {"image": "ucmerced_images/harbor.tif", "label": "harbor", "query": "Which scene is the second?"},
    ]
    (meta / "Fine-grained_Classification_UCMerced.json").write_text(json.dumps(ucm), encoding="utf-8")
    captions = [
        ["a dog runs on the grass .", "a brown dog running", "dog on a lawn", "a puppy plays outside", "a dog"],
        ["two people ride bikes", "cyclists on a road", "people cycling", "two riders", "bikes on a street"],
    ]
    _png(bench / "flickr30k_images" / "1.jpg", GREEN)
    _png(bench / "flickr30k_images" / "2.jpg", BLUE)
    flickr = [
        {"image": f"flickr30k_images/{i + 1}.jpg", "sentences": sents, "query": f"Describe picture {i + 1}."}
        for i, sents in enumerate(captions)
    ]
    (meta / "Caption_flickr30k.json").write_text(json.dumps(flickr), encoding="utf-8")
    omni = tmp_path / "ChEF" / "OmniBenchmark_Bamboo"
    (omni / "meta_file").mkdir(parents=True)
    _png(omni / "images" / "a.jpg", RED)
    _png(omni / "images" / "b.jpg", BLUE)
    chain = ["animal", "dog", "beagle"]
    rows = [{"image": "images/a.jpg", "chain": chain, "realm_name": "animal"}]
    rows.append({"image": "images/b.jpg", "chain": chain, "realm_name": "animal"})
    (omni / "meta_file" / "Classification_Omnibenchmark.json").write_text(json.dumps(rows), encoding="utf-8")
    server = make_server(
        {
            "image_answer": "colour",
            "answers": [
                {"match": "Read the sign.", "answer": 'The sign reads "hotel pizza".'},
                {"match": "first?", "answer": "a golf course"},
                {"match": "second?", "answer": "It shows a harbor."},
                {"match": "picture 1", "answer": "a dog runs on the grass"},
                {"match": "picture 2", "answer": "two people on bikes"},
            ],
        }
    )
    pairs = [["SVT", "SVT_OCR"], ["UCMerced", "UCMerced_Classification"], ["Flickr30k_LAMM", "CIDEr"]]
    pairs += [["Omnibenchmark", "FG_Classification"]]
    paths = {name: str(bench) for name in ("lamm_svt", "lamm_ucmerced", "lamm_flickr30k")}
    paths["chef_omnibenchmark"] = str(omni)
    outcome = run_private(tmp_path, server.base_url, pairs, paths)
    scores = {(row.dataset, row.metric): row.score for row in outcome.rows}
    expected_cider, _ = cider_d(["a dog runs on the grass", "two people on bikes"], captions)
    assert scores == {
        ("lamm_svt", "svt_ocr_accuracy"): pytest.approx(2 / 3),
        ("lamm_ucmerced", "ucmerced_classification_accuracy"): pytest.approx(1 / 2),
        ("lamm_flickr30k", "cider"): pytest.approx(expected_cider),
        ("chef_omnibenchmark", "fg_classification_accuracy"): 0.0,
    }
    assert expected_cider > 0
    assert [r["reference"] for r in _records(outcome, "lamm_flickr30k", "cider")] == captions
    omni_records = _records(outcome, "chef_omnibenchmark", "fg_classification_accuracy")
    assert [(r["prediction"], r["reference"]) for r in omni_records] == [("red", chain), ("blue", chain)]
    assert set(map(tuple, _asked(outcome, "chef_omnibenchmark").values())) == {
        ("What is the fine-grained category label for the object in this image?",)
    }


def test_naming_the_meta_file_itself_reads_the_same_rows_and_images(tmp_path: Path, catalog: Catalog) -> None:
    """A user who gives meta_file/Counting_FSC147.json instead of its benchmark folder gets the same samples: the
    image paths still start at the folder (where LAMM writes them from), not at meta_file/."""
    from evalkit.data.loading import iter_samples

    bench = _benchmark(tmp_path)
    spec = catalog.datasets["lamm_fsc147"]
    by_folder = list(iter_samples(spec.model_copy(update={"path": str(bench)})))
    by_file = list(iter_samples(spec.model_copy(update={"path": str(bench / "meta_file" / "Counting_FSC147.json")})))
    assert [s.images for s in by_file] == [s.images for s in by_folder]
    assert [(s.text, s.reference) for s in by_file] == [(s.text, s.reference) for s in by_folder]
    paths = [image.path for sample in by_file for image in sample.images or []]
    assert paths == [str(bench / "fsc147_images" / name) for name in ("apples.jpg", "birds.jpg")]
    assert all(Path(str(path)).is_file() for path in paths)


def _ch3ef(root: Path) -> Path:
    """Ch3Ef's layout: meta_file/<Dimension>.json, each one pretty-printed object whose ``items`` are the rows."""
    folder = root / "Ch3Ef"
    (folder / "meta_file").mkdir(parents=True)
    _png(folder / "Harmless" / "1.png", RED)
    _png(folder / "Harmless" / "2.png", BLUE)
    _png(folder / "Honest" / "1.png", GREEN)
    dimensions = {
        "Harmless": [
            {"image": ["Harmless/1.png", "Harmless/2.png"], "query": "h one", "options": ["good", "bad"]},
            {"image": ["Harmless/2.png"], "query": "h two", "options": ["kind", "cruel"]},
        ],
        "Helpful": [{"image": ["Honest/1.png"], "query": "h four", "options": ["safe", "risky"]}],
        "Honest": [{"image": ["Honest/1.png"], "query": "h three", "options": ["risky", "I don't know.", "safe"]}],
    }
    for dimension, items in dimensions.items():
        document = {"dimension": dimension, "items": [{**item, "source": "test"} for item in items]}
        (folder / "meta_file" / f"{dimension}.json").write_text(json.dumps(document, indent=2), encoding="utf-8")
    return folder


def test_ch3ef_reads_its_meta_objects_and_scores_options_by_likelihood(tmp_path: Path, make_server) -> None:
    """Ch3Ef's meta files are objects over many lines; their ``items`` are the rows, each with a list of images.
    Its options are scored through the chat endpoint (the prompt has images): h one's likeliest option is the
    first (right), h two's the last (wrong), h four's (Helpful) the first (right), h three's (Honest) "I don't
    know." beside the right first one (right): Harmless 1/2, the three dimensions together 3/4."""
    from evalkit.data.counts import local_row_count

    folder = _ch3ef(tmp_path)
    catalog = load_catalog(cwd=REPO)
    pooled = catalog.datasets["ch3ef"].model_copy(update={"path": str(folder)})
    assert local_row_count(pooled) == 4
    from evalkit.data.loading import iter_samples

    first = next(iter_samples(pooled))
    assert first.text == "h one" and first.meta["choices"] == ["good", "bad"]
    assert [image.path for image in first.images or []] == [str(folder / "Harmless" / n) for n in ("1.png", "2.png")]
    logprobs = {"good": -0.1, "bad": -2.0, "kind": -2.5, "cruel": -0.5, "risky": -3.0, "know.": -0.1}
    logprobs |= {"I": -0.1, "don't": -0.1, "safe": -0.2}
    server = make_server({"token_logprobs": logprobs})
    paths = {"ch3ef": str(folder), "ch3ef_harmless": str(folder)}
    outcome = run_private(
        tmp_path, server.base_url, [["Ch3Ef", "Ch3Ef_Metric"], ["ch3ef_harmless", "ch3ef_accuracy"]], paths
    )
    scores = {(row.dataset, row.metric): row.score for row in outcome.rows}
    assert scores == {("ch3ef", "ch3ef_accuracy"): pytest.approx(3 / 4), ("ch3ef_harmless", "ch3ef_accuracy"): 0.5}
    chosen = [r["details"]["chosen"] for r in _records(outcome, "ch3ef", "ch3ef_accuracy")]
    assert chosen == ["good", "cruel", "safe", "I don't know."]


def test_a_json_object_with_no_single_list_of_rows_is_refused_by_name(tmp_path: Path) -> None:
    from evalkit.data.loading import iter_samples

    folder = tmp_path / "Ch3Ef"
    (folder / "meta_file").mkdir(parents=True)
    bad = {"items": [{"query": "a"}], "more": [{"query": "b"}]}
    (folder / "meta_file" / "Harmless.json").write_text(json.dumps(bad, indent=2), encoding="utf-8")
    spec = load_catalog(cwd=REPO).datasets["ch3ef_harmless"].model_copy(update={"path": str(folder)})
    with pytest.raises(RunspecError, match=r"Harmless.json: a JSON object is read as rows when exactly one of its"):
        list(iter_samples(spec))


def test_json_lines_in_a_json_file_are_still_read_line_by_line(tmp_path: Path) -> None:
    """Only a JSON object spread over many lines is one document: one object per line stays JSON Lines."""
    from evalkit.catalog import DatasetSpec
    from evalkit.data.counts import local_row_count
    from evalkit.data.loading import iter_samples

    data = tmp_path / "rows.json"
    data.write_text('{"q": "one", "items": [{"x": 1}]}\n{"q": "two", "items": [{"x": 2}]}\n', encoding="utf-8")
    spec = DatasetSpec.model_validate(
        {"name": "rows", "path": str(data), "language": "en", "modality": "text", "textual_input_column": "q"}
    )
    assert [sample.text for sample in iter_samples(spec)] == ["one", "two"]
    assert local_row_count(spec) == 2


def test_a_private_entry_without_its_path_names_the_key(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["Flickr30k_LAMM", "cider"]],
            "models": [model_entry("m", "http://127.0.0.1:9/v1")],
            "output_dir": str(tmp_path / "runs"),
        },
    )
    with pytest.raises(ConfigError, match=r"dataset_paths: \{lamm_flickr30k: /path/to/its/data\}"):
        build_plan(load_config(config), source=str(config))


@pytest.mark.parametrize("name", ["ScanQA_LAMM", "scannet_lamm", "ScanRefer_LAMM", "OctaviusPCLDataset"])
def test_the_3d_sets_say_why_they_cannot_run(tmp_path: Path, name: str) -> None:
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [[name, "chef_vqa_accuracy"]],
            "models": [model_entry("m", "http://127.0.0.1:9/v1")],
            "output_dir": str(tmp_path / "runs"),
        },
    )
    with pytest.raises(ConfigError, match="cannot be evaluated: its point clouds come from ScanNet.*terms of use"):
        build_plan(load_config(config), source=str(config))


# ----------------------------------------------------------------- FG_Classification against ChEF's own output


def _tree(tmp_path: Path) -> str:
    path = tmp_path / "bamboo.json"
    path.write_text(json.dumps(FG_REFERENCE["bamboo_tree"]), encoding="utf-8")
    return str(path)


def test_fg_classification_equals_chefs_with_the_tree(tmp_path: Path) -> None:
    tree = BambooTree.read(_tree(tmp_path), "fg_classification_accuracy")
    values = [weighted_depth(case["chain"], case["answer"], tree) for case in FG_REFERENCE["cases"]]
    assert values == pytest.approx([case["expected"] for case in FG_REFERENCE["cases"]])
    assert 100 * sum(values) / len(values) == pytest.approx(FG_REFERENCE["corpus_x100"])


def test_fg_classification_without_the_tree_differs_only_where_an_answer_holds_a_bamboo_id() -> None:
    ids = set(FG_REFERENCE["bamboo_tree"]["id2name"])
    for case in FG_REFERENCE["cases"]:
        value = weighted_depth(case["chain"], case["answer"])
        if any(node in case["answer"] for node in ids):
            continue
        assert value == pytest.approx(case["expected"]), case["answer"]


def test_fg_classification_metric_scores_a_chain_and_refuses_a_bad_tree(tmp_path: Path) -> None:
    from evalkit.data.sample import Sample

    metric = FgClassificationAccuracy(None, bamboo_tree=_tree(tmp_path))
    sample = Sample(id="s", reference=["animal", "dog", "beagle"])
    assert metric.score("an animal, a dog", sample).score == pytest.approx(2 / 3)
    assert metric.score("anything", Sample(id="t", reference="dog")).failure is not None
    (tmp_path / "not_a_tree.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ConfigError, match="option 'bamboo_tree'.*not a readable Bamboo tree"):
        FgClassificationAccuracy(None, bamboo_tree=str(tmp_path / "not_a_tree.json"))

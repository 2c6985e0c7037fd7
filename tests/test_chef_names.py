"""ChEF's 33 scenario names resolve: to the catalogue entry reading the same benchmark, or to a message saying
what ChEF reads and that evalkit has no entry for it; names resolve whatever their case when no exact name exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.catalog import Catalog, DatasetSpec, load_catalog
from evalkit.errors import RunspecError

REPO = Path(__file__).resolve().parent.parent
TABLE = json.loads((REPO / "runspecs" / "_names" / "chef.json").read_text(encoding="utf-8"))
#: ChEF's dataset_dict keys (src/ChEF/scenario/__init__.py at commit ea57136)
CHEF_SCENARIOS = [
    "Flickr30k",
    "CIFAR10",
    "Omnibenchmark",
    "ScienceQA",
    "VOC2012",
    "FSC147",
    "CIFAR10_LAMM",
    "VOC2012_LAMM",
    "ScienceQA_LAMM",
    "Flickr30k_LAMM",
    "SVT",
    "FSC147_LAMM",
    "UCMerced",
    "CelebA(Hair)",
    "CelebA(Smile)",
    "AI2D",
    "ScanQA_LAMM",
    "ScanNet_LAMM",
    "ScanRefer_LAMM",
    "Locating_VOC2012",
    "Locating_LSP",
    "MMBench",
    "POPE_COCO_random",
    "POPE_COCO_popular",
    "POPE_COCO_adversarial",
    "SEEDBench",
    "SEEDBench2",
    "MME",
    "OctaviusPCLDataset",
    "Winoground",
    "Winoground_Cap",
    "Ch3Ef",
    "MMMU",
]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(cwd=REPO)


def test_the_table_lists_every_chef_scenario() -> None:
    assert len(CHEF_SCENARIOS) == 33
    assert sorted(TABLE["datasets"]) == sorted(CHEF_SCENARIOS)


@pytest.mark.parametrize("name", CHEF_SCENARIOS)
def test_every_scenario_name_resolves_or_says_why_not(catalog: Catalog, name: str) -> None:
    target = TABLE["datasets"][name]["evalkit"]
    if target is None:
        with pytest.raises(RunspecError, match="ChEF's dataset .* evalkit's catalogue has no entry"):
            catalog.resolve(name)
    else:
        # a bare name that is also an alias of evalkit's own entry (lmms-lab-encoder/ScienceQA's) keeps evalkit's entry
        bare = catalog.aliases.get(name, target)
        assert [s.name for s in catalog.resolve(name)] == [bare]
        assert [s.name for s in catalog.resolve(f"chef:{name}")] == [target]


@pytest.mark.parametrize(
    "typed,entry",
    [
        ("AI2D", "chef_ai2d"),
        ("MMBench", "chef_mmbench"),
        ("mmbench", "chef_mmbench"),
        ("MMMU", "chef_mmmu"),
        ("POPE_COCO_random", "pope_random"),
        ("pope_coco_adversarial", "pope_adversarial"),
        ("MME", "chef_mme"),
        ("mme", "mme"),
        ("CHEF:scienceqa", "chef_scienceqa"),
        ("ScienceQA", "scienceqa_img"),
    ],
)
def test_names_resolve_whatever_their_case(catalog: Catalog, typed: str, entry: str) -> None:
    assert [s.name for s in catalog.resolve(typed)] == [entry]
    assert catalog.entry_name(typed) == entry


def test_the_3d_scenarios_say_the_data_is_behind_a_licence(catalog: Catalog) -> None:
    (spec,) = catalog.resolve("ScanQA_LAMM")
    assert spec.name == "lamm_scanqa" and "terms of use" in str(spec.unavailable)


def test_an_exact_name_wins_and_a_shared_spelling_is_not_guessed() -> None:
    spec = {"language": "en", "modality": "text", "textual_input_column": "q", "instruction": "x", "path": "d.jsonl"}
    catalog = Catalog()
    for name in ("Shared", "SHARED", "only"):
        catalog.datasets[name] = DatasetSpec.model_validate({**spec, "name": name})
    assert [s.name for s in catalog.resolve("SHARED")] == ["SHARED"]
    assert [s.name for s in catalog.resolve("ONLY")] == ["only"]
    with pytest.raises(RunspecError, match="not a dataset"):
        catalog.resolve("shared")


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("Gone_Scenario", "'Gone_Scenario' is OtherTool's dataset (it reads someone/gone/test)"),
        ("mmsu", "'mmsu' is a group of 12 datasets (auharness:mmsu_biology, "),
    ],
)
def test_info_dataset_says_of_another_tools_name_what_run_says(name: str, said: str, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every name of the shipped tables has an entry now; a table with a name the catalogue lacks shows the path."""
    from evalkit.cli.main import main

    names = tmp_path / "_names"
    names.mkdir()
    table = {"tool": "OtherTool", "datasets": {"Gone_Scenario": {"hub": "someone/gone/test", "evalkit": None}}}
    (names / "othertool.json").write_text(json.dumps(table))
    assert main(["info", "dataset", name, "--runspecs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err


def test_chefs_mme_runs_acc_plus_over_each_image_by_its_question_id(catalog: Catalog) -> None:
    """lmms-lab-encoder/MME's question_id is the image's file, shared by its two questions (lmms-eval groups by it)."""
    from evalkit.data.sample import Sample
    from evalkit.metrics import METRICS

    (spec,) = catalog.resolve("MME")
    assert spec.name == "chef_mme" and spec.extra_columns["question_id"] == "question_id"
    assert {"mme_accuracy", "mme_accuracy_plus"} <= set(catalog.fitting_metrics(spec))
    metric = METRICS.get("mme_accuracy_plus")(language="en")
    sample = Sample(id="7", reference="Yes", meta={"question_id": "code_reasoning/0020.png"})
    assert metric.group_of(sample) == ("code_reasoning/0020.png", None)

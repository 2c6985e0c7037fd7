"""A LALMEval config works as written: its dataset names, its quoted pairs, its ${VAR}s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, write_config

from evalkit.catalog import load_catalog
from evalkit.config import parse_config
from evalkit.errors import ConfigError
from evalkit.plan import build_plan

MODEL = {"info": {"name": "m", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1", "model": "m"}}


@pytest.mark.parametrize(
    ("alias", "dataset"),
    [
        ("alpaca_audio_test", "alpaca_audio"),
        ("openhermes_instruction_test", "openhermes_audio"),
        ("AudioLLMs/openhermes_instruction_test", "openhermes_audio"),
        ("sd-qa_ind_s_audio", "voicebench_sd_qa_ind_s"),
        ("sd-qa_usa_text", "voicebench_sd_qa_usa_text"),
    ],
)
def test_lalmeval_dataset_names_are_aliases(alias: str, dataset: str) -> None:
    assert [spec.name for spec in load_catalog().resolve(alias)] == [dataset]


def test_the_readme_aggregate_and_pairs_plan_as_written() -> None:
    """LALMEval's README: aggregate over alpaca_audio_test + openhermes_instruction_test, pairs as quoted strings."""
    config = parse_config(
        {
            "dataset_metric": ["[alpaca_audio_test, llm_judge_detailed]", '["sd-qa_ind_s_audio", llm_judge_binary]'],
            "aggregate": [["llm_judge_detailed", ["alpaca_audio_test", "openhermes_instruction_test"]]],
            "judge_properties": {"judge_api_endpoint": "http://127.0.0.1:9/v1", "judge_model": "j"},
            "models": [MODEL],
        }
    )
    plan = build_plan(config)
    assert [(e.dataset.name, e.metric) for e in plan.engines] == [
        ("alpaca_audio", "llm_judge_detailed"),
        ("voicebench_sd_qa_ind_s", "llm_judge_binary"),
    ]


def test_an_alias_two_entries_would_share_is_not_made_and_never_shadows_a_name(tmp_path: Path) -> None:
    folder = tmp_path / "cat" / "qa"
    folder.mkdir(parents=True)
    entry = {"hf_repo": "org/shared_repo", "language": "en", "modality": "text", "split": "test"}
    (folder / "qa.json").write_text(
        json.dumps(
            {
                "_task": {"description": "t", "metrics": ["exact_match"]},
                "first": {**entry, "split": "a"},
                "second": {**entry, "split": "b"},
                "own_repo": {**entry, "hf_repo": "org/first"},  # its basename is a dataset name: no alias
            }
        )
    )
    catalog = load_catalog([tmp_path / "cat"])
    assert "shared_repo" not in catalog.aliases and "org/shared_repo" not in catalog.aliases
    assert [s.name for s in catalog.resolve("first")] == ["first"]
    assert catalog.aliases["org/first"] == "own_repo"


def test_quoted_pairs_and_mistakes_in_them() -> None:
    pairs = parse_config({"dataset_metric": ["[tiny_qa, exact_match]", " [ 'tiny_qa' , f1 ] "], "models": [MODEL]})
    assert pairs.dataset_metric == [("tiny_qa", "exact_match"), ("tiny_qa", "f1")]
    with pytest.raises(ConfigError, match=r"dataset_metric: \[1\] 'tiny_qa exact_match' is not a \[dataset, metric\]"):
        parse_config({"dataset_metric": [["a", "b"], "tiny_qa exact_match"], "models": [MODEL]})


def test_every_missing_variable_is_reported_at_once(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["tiny_qa", "exact_match"]],
            "models": [
                {"info": {"name": "a", "inference_type": "vllm", "url": "${EVALKIT_T_URL}", "model": "a"}},
                {"info": {**MODEL["info"], "name": "b", "auth_token": "${EVALKIT_T_KEY}"}},
            ],
            "runspecs_dir": str(FIXTURES / "runspecs"),
            "output_dir": "${EVALKIT_T_OUT}/runs",
        },
    )
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "validate", str(config)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    for where, name in [
        ("models[0].info.url", "EVALKIT_T_URL"),
        ("models[1].info.auth_token", "EVALKIT_T_KEY"),
        ("output_dir", "EVALKIT_T_OUT"),
    ]:
        assert f"{where}: environment variable ${{{name}}} is not set" in proc.stderr


def test_a_subset_name_two_entries_want_stays_with_the_repo_read_several_times(tmp_path: Path) -> None:
    """As `hi_test_audio` (LALMEval's name for Common Voice Hindi): a single-entry Hindi set, named by its repo id,
    must not take the subset name away from a repo read several times; an image entry gets no `_audio` name."""
    folder = tmp_path / "cat" / "alias_probe"
    folder.mkdir(parents=True)
    audio = {"language": "hi", "modality": "audio", "audio_column": "a", "split": "probe", "subset": "hi"}
    (folder / "alias_probe_asr.json").write_text(
        json.dumps(
            {
                "_task": {"description": "t", "metrics": ["wer"]},
                "cv_hi": {**audio, "hf_repo": "org/common_voice"},
                "cv_ta": {**audio, "hf_repo": "org/common_voice", "subset": "ta", "language": "ta"},
                "eka_hi": {**audio, "hf_repo": "org/eka_asr"},
                "docs": {**audio, "hf_repo": "org/docs", "modality": "image+text", "subset": "Doc", "language": "en"},
            }
        )
    )
    catalog = load_catalog([tmp_path / "cat"])
    assert catalog.aliases["hi_probe_audio"] == "cv_hi" and catalog.aliases["ta_probe_audio"] == "cv_ta"
    assert catalog.aliases["org/eka_asr"] == "eka_hi" and catalog.aliases["eka_asr"] == "eka_hi"
    assert catalog.aliases["org/docs"] == "docs" and "Doc_probe_audio" not in catalog.aliases


def test_every_alias_of_the_catalogue_before_the_medical_and_vision_sets_is_kept() -> None:
    """LALMEval names that existed before must still resolve to the same entries (a sample of them)."""
    catalog = load_catalog()
    for alias, dataset in {
        "hi_test_audio": "common_voice_17_hi",
        "sd-qa_ind_s_audio": "voicebench_sd_qa_ind_s",
    }.items():
        assert [s.name for s in catalog.resolve(alias)] == [dataset]

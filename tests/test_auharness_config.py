"""AU-Harness's run config, read as its users write it: every shape it ships, its names, its refusals, convert.

The configs here are written by evalkit's authors from AU-Harness's README and the
keys its shipped configs use (task_metric, filter, judge_settings, logging,
prompt_overrides, generation_params_override, flat model entries with delay,
retry_attempts, chunk_size, location/project_id, reasoning_effort); none is a
copied file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import FIXTURES

from evalkit.catalog import load_catalog
from evalkit.cli.info import dataset_info
from evalkit.cli.main import main
from evalkit.config import GEMINI_OPENAI_URL, load_config, parse_config
from evalkit.config.foreign.auharness_names import is_auharness
from evalkit.errors import ConfigError, RunspecError
from evalkit.metrics import METRICS
from evalkit.plan import build_plan
from evalkit.testing import start_test_server

ENDPOINT = "http://127.0.0.1:9/v1"
JUDGE = {
    "judge_concurrency": 8,
    "judge_model": "judge-model",
    "judge_type": "openai",
    "judge_api_endpoint": ENDPOINT,
    "judge_api_key": "judge-key",
    "judge_temperature": 0.1,
}


def flat_model(name: str, inference_type: str = "vllm", **extra: Any) -> dict[str, Any]:
    """A model entry as AU-Harness writes it: flat, with its delay/retry/chunk settings."""
    entry = {
        "name": name,
        "inference_type": inference_type,
        "url": ENDPOINT,
        "delay": 100,
        "retry_attempts": 8,
        "timeout": 30,
        "model": name,
        "auth_token": "token",
        "batch_size": 5,
        "chunk_size": 30,
    }
    entry.update(extra)
    return entry


# Each shape of config AU-Harness ships (its sample config and run_configs/), as pairs, with the extra sections
# that shape carries. The pairs name AU-Harness's own task, group and dataset names.
SHAPES: dict[str, dict[str, Any]] = {
    "sample": {
        "task_metric": [
            ["alpaca_audio_test", "llm_judge_detailed"],
            ["librispeech_test_clean", "word_error_rate"],
            ["emotion_recognition", "llm_judge_binary"],
            ["voxceleb_gender_test", "llm_judge_binary"],
            ["iemocap_gender_recognition", "llm_judge_binary"],
            ["big_bench_audio", "llm_judge_big_bench_audio"],
            ["music_understanding", "llm_judge_binary"],
        ],
        "aggregate": [
            ["llm_judge_binary", ["emotion_recognition"]],
            ["llm_judge_binary", ["voxceleb_gender_test", "iemocap_gender_recognition"]],
        ],
        "filter": {"num_samples": 100, "length_filter": [0.0, 30.0]},
        "judge_settings": {**JUDGE, "judge_api_version": "2024-10-21", "judge_prompt_model_override": "gpt-4o-mini"},
        "logging": {"log_file": "audiobench.log"},
        "models": [
            # two endpoints of one model (AU-Harness shards the data between them): replicas in evalkit
            flat_model("audio-chat-1", "openai", api_version="2024-10-21", model="gpt-4o-mini-audio-preview"),
            flat_model("audio-chat-2", "openai", api_version="2024-10-21", model="gpt-4o-mini-audio-preview"),
            {
                "name": "gemini-flash",
                "inference_type": "gemini",
                "auth_token": "gemini-key",
                "reasoning_effort": "medium",
                "delay": 100,
                "retry_attempts": 5,
                "timeout": 300,
                "model": "gemini-2.5-flash",
                "batch_size": 100,
                "chunk_size": 30240,
            },
            flat_model("omni", "vllm"),
            flat_model("whisper", "transcription"),
        ],
    },
    "covost2_group": {"task_metric": [["covost2", "bleu"]], "aggregate": [["bleu", ["covost2"]]]},
    "librispeech_group": {
        "task_metric": [["librispeech", "word_error_rate"]],
        "aggregate": [["word_error_rate", ["librispeech"]]],
        "filter": {"num_samples": 100},
        "models": [flat_model("asr", "transcription")],
    },
    "voxtral_transcription": {
        "task_metric": [["librispeech_test_clean", "word_error_rate"]],
        "models": [flat_model("voxtral", "transcription", retry_attempts=10, timeout=120)],
    },
    "leaderboard": {
        "task_metric": [
            ["librispeech_test_clean", "word_error_rate"],
            ["meld_emotion_test", "llm_judge_binary"],
            ["iemocap_gender_recognition", "llm_judge_binary"],
            ["voxceleb_accent_test", "llm_judge_binary"],
            ["mu_chomusic_test", "llm_judge_binary"],
            ["audiocaps_qa_test", "llm_judge_detailed"],
            ["public_sg_speech_qa_test", "llm_judge_detailed"],
            ["covost2_zh-CN_en", "bleu"],
            ["voicebench_ifeval_audio", "instruction_following"],
            ["mmau_mini", "llm_judge_binary"],
            ["big_bench_audio_audio_query", "llm_judge_big_bench_audio"],
            ["mnsc_sds_part3_test", "llm_judge_detailed"],
            ["SLURP-intent", "llm_judge_binary"],
            ["bfcl_audio", "bfcl_match_score"],
            ["spider_audio", "sql_score"],
            ["mtbench_audio", "mt_bench_llm_judge"],
            ["advbench", "llm_judge_redteaming"],
            ["asvspoof", "llm_judge_binary"],
        ],
        "aggregate": [["bfcl_match_score", ["bfcl_audio"]]],
        "judge_settings": JUDGE,
    },
    "mtbench": {
        "task_metric": [["mtbench_audio", "mt_bench_llm_judge"], ["mtbench_text", "mt_bench_llm_judge"]],
        "judge_settings": JUDGE,
    },
    "spokenwoz": {
        "task_metric": [
            ["spokenwoz_audio", "joint_goal_accuracy"],
            ["spokenwoz_audio", "slot_accuracy"],
            ["spokenwoz_audio", "slot_f1"],
            ["spokenwoz_audio", "bleu"],
        ],
        "aggregate": [[metric, ["spokenwoz_audio"]] for metric in ("joint_goal_accuracy", "slot_accuracy", "slot_f1")],
        "filter": {"num_samples": 2, "length_filter": [0.0, 30.0]},
        "logging": {"log_file": "spokenwoz_eval.log"},
        "models": [flat_model("gpt-4o-audio-preview", "openai", api_version="2024-10-21", timeout=60)],
    },
    "callhome_diarization": {
        "task_metric": [["speaker_diarization", "diarization_metrics"]],
        "aggregate": [["diarization_metrics", ["speaker_diarization"]]],
        "filter": {"num_samples": 100, "length_filter": [0.0, 30.0]},
    },
}
#: engines each shape plans (datasets in evalkit's names; the sample's gemini/whisper entries share them)
EXPECTED = {
    "sample": {
        ("alpaca_audio", "auharness:llm_judge_detailed"),
        ("librispeech_test_clean_audiollms", "auharness:word_error_rate"),
        ("iemocap_emotion", "auharness:llm_judge_binary"),
        ("meld_emotion", "auharness:llm_judge_binary"),
        ("meld_sentiment", "auharness:llm_judge_binary"),
        ("voxceleb_gender", "auharness:llm_judge_binary"),
        ("iemocap_gender", "auharness:llm_judge_binary"),
        ("muchomusic", "auharness:llm_judge_binary"),
        ("big_bench_audio_audio_query", "llm_judge_big_bench_audio"),
        ("big_bench_audio_text_query", "llm_judge_big_bench_audio"),
    },
    "mtbench": {("mtbench_audio", "mt_bench_llm_judge"), ("mtbench_text", "mt_bench_llm_judge")},
    "voxtral_transcription": {("librispeech_test_clean_audiollms", "auharness:word_error_rate")},
}


def _config(shape: str) -> dict[str, Any]:
    data = json.loads(json.dumps(SHAPES[shape]))
    data.setdefault("models", [flat_model("model-under-test")])
    return data


def _missing_metrics(data: dict[str, Any]) -> list[str]:
    return sorted({metric for _, metric in data["task_metric"] if metric != "all" and metric not in METRICS})


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_auharness_ships_validates_and_plans(shape: str, tmp_path: Path) -> None:
    data = _config(shape)
    assert not _missing_metrics(data), "every metric name AU-Harness's configs use is registered"
    assert is_auharness(data)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_config(path)
    if shape == "callhome_diarization":
        # CallHome is licensed: AU-Harness reads it from private_datasets/, evalkit from the path the user gives
        # CallHome is licensed: read where AU-Harness keeps it (private_datasets/ under the folder it runs in)
        missing = r"private dataset 'callhome_deu': \S+/private_datasets/CallHome_deu/hf_dataset does not exist"
        with pytest.raises(ConfigError, match=missing + r"; give the folder or file of your copy in `dataset_paths"):
            build_plan(config, source=str(path))
        return
    plan = build_plan(config, source=str(path))
    names = {m["name"] for m in data["models"]}
    if shape == "sample":
        names = names - {"audio-chat-1", "audio-chat-2"} | {"gpt-4o-mini-audio-preview"}
        assert len(plan.models["gpt-4o-mini-audio-preview"].replicas) == 2
    assert plan.engines and set(plan.models) == names
    if shape in EXPECTED:
        assert {(e.dataset.variant_of or e.dataset.name, e.metric) for e in plan.engines} == EXPECTED[shape]
    # every dataset of an AU-Harness config is AU-Harness's variant: its request is AU-Harness's
    assert all(e.dataset.name.startswith("auharness:") and e.dataset.variant_of for e in plan.engines)
    if shape == "covost2_group":
        assert len(plan.engines) == 36 and {e.dataset.task for e in plan.engines} == {"speech_translation"}
    if shape == "librispeech_group":
        # AU-Harness's librispeech group: its test-clean upload, and evalkit's test-other (another upload, warned)
        assert {e.dataset.variant_of for e in plan.engines} == {
            "librispeech_test_clean_audiollms",
            "librispeech_test_other",
        }
    if shape == "sample":
        assert config.log_file == str(tmp_path / "audiobench.log")
        assert config.judge_properties is not None and config.judge_properties.judge_concurrency == 8
        gemini = next(e.info for e in config.models if e.info.name == "gemini-flash")
        assert gemini.url == GEMINI_OPENAI_URL and gemini.inference_type == "vllm"
        assert gemini.extra_body == {"reasoning_effort": "medium"} and gemini.retry_attempts == 4
        # AU-Harness applies num_samples, not length_filter (its preprocessors read another key): nor does evalkit
        assert config.filters.num_samples == 100 and config.filters.length_filter is None


def test_every_auharness_dataset_name_has_a_catalogue_entry() -> None:
    table = load_catalog().foreign["auharness"]
    assert len(table.datasets) == 399
    assert [name for name, entry in table.datasets.items() if entry.evalkit is None] == []


def test_a_dataset_evalkit_lacks_is_refused_naming_the_users_pair_and_what_it_reads() -> None:
    """As in a catalogue without the entry (a checkout older than its table): named with the repo it reads."""
    catalog = load_catalog()
    table = catalog.foreign["auharness"]
    table.datasets["big_bench_audio_text_query"] = table.datasets["big_bench_audio_text_query"].model_copy(
        update={"evalkit": None}
    )
    data = _config("sample")
    data["task_metric"] = [["music_understanding", "llm_judge_binary"], ["big_bench_audio", "llm_judge_binary"]]
    with pytest.raises(RunspecError, match=r"task_metric\[1\] \(big_bench_audio, llm_judge_binary\)") as error:
        build_plan(parse_config(data, "sample.yaml"), catalog=catalog, source="sample.yaml")
    assert "AU-Harness's group 'big_bench_audio' has 2 datasets" in str(error.value)
    assert "no entry for 1 of them (big_bench_audio_text_query)" in str(error.value)
    table.datasets["asvspoof"] = table.datasets["asvspoof"].model_copy(update={"evalkit": None})
    data["task_metric"] = [["asvspoof", "llm_judge_binary"]]
    with pytest.raises(RunspecError, match=r"'asvspoof' is AU-Harness's dataset \(it reads DynamicSuperb/Spoof"):
        build_plan(parse_config(data, "spoof.yaml"), catalog=catalog, source="spoof.yaml")


# ---------------------------------------------------------------- keys evalkit cannot honour, and mistakes


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colours": "blue"}, r"x.yaml: colours: unknown key"),
        ({"logging": {"log_file": "a.log", "level": "debug"}}, r"logging.level: not a logging setting"),
        ({"filter": {"num_samples": 3, "max_len": 9}}, r"filter.max_len: not a filter of AU-Harness's format"),
        ({"dataset_metric": [["tiny_qa", "f1"]]}, r"dataset_metric: give `task_metric` or `dataset_metric`"),
        (
            {"prompt_overrides": {"user_prompt": [{"task": "librispeech_test_clean", "model": "m", "prompt": "T."}]}},
            r"prompt_overrides.user_prompt\[0\].model: evalkit cannot honour a user prompt for one model",
        ),
        (
            {"prompt_overrides": {"user_prompt": [{"prompt": "Transcribe."}]}},
            r"prompt_overrides.user_prompt\[0\]: expected \{task, prompt\}",
        ),
        (
            {"prompt_overrides": {"system_prompt": [{"model": "m", "task": "asr", "prompt": "Be brief."}]}},
            r"prompt_overrides.system_prompt\[0\].task: evalkit cannot honour a system prompt for one model on one",
        ),
        (
            {"generation_params_override": [{"task": "asr", "generation_params": {"frequency_penalty": 1}}]},
            r"generation_params_override\[0\].generation_params.frequency_penalty: evalkit sets",
        ),
        ({"task_metric": [["librispeech_test_clean"]]}, r"task_metric\[0\]: expected a \[task, metric\] pair"),
    ],
)
def test_keys_evalkit_cannot_honour_are_errors_naming_them(change: dict[str, Any], message: str) -> None:
    data = {"task_metric": [["librispeech_test_clean", "word_error_rate"]], "models": [flat_model("m")], **change}
    with pytest.raises(ConfigError, match=message):
        parse_config(data, "x.yaml")


def test_validation_errors_name_the_users_keys_not_the_translated_ones() -> None:
    data = _config("voxtral_transcription")
    data["models"][0].update(timeout=-3, colour="red")
    data["filter"] = {"num_samples": "many"}
    data["judge_settings"] = {"judge_api_endpoint": ENDPOINT, "judge_type": "azure"}
    with pytest.raises(ConfigError) as error:
        parse_config(data, "x.yaml")
    text = str(error.value)
    assert "x.yaml: models[0].timeout: Input should be greater than 0" in text
    assert "x.yaml: models[0].colour: unknown key" in text
    assert "x.yaml: filter.num_samples:" in text
    assert "x.yaml: judge_settings.judge_model: missing mandatory key" in text
    assert "x.yaml: judge_settings.judge_type: 'azure' is not one of" in text
    assert ".info." not in text and "filters" not in text and "judge_properties" not in text


def test_length_filter_is_left_unapplied_as_auharness_leaves_it(caplog) -> None:
    """AU-Harness's preprocessors read ``filter.length``, never the ``length_filter`` its configs write.

    The end-to-end comparison (test_auharness_parity.py) shows it: AU-Harness scores LibriSpeech's 36 s clip
    under ``length_filter: [0.0, 30.0]``, so evalkit must too for the same figure.
    """
    for key in ("filter", "filters"):
        data = {**_config("voxtral_transcription"), key: {"num_samples": 5, "length_filter": [0.0, 30.0]}}
        with caplog.at_level(logging.WARNING):
            config = parse_config(data, "x.yaml")
        assert config.filters.num_samples == 5 and config.filters.length_filter is None
        assert f"{key}.length_filter is not applied, as AU-Harness does not apply it" in caplog.text
        data[key] = {"length_filter": [30]}
        with pytest.raises(ConfigError, match=rf"x.yaml: {key}.length_filter: expected \[min_seconds, max_seconds\]"):
            parse_config(data, "x.yaml")


def test_a_judge_type_left_as_auharness_placeholder_is_read_as_the_openai_api(caplog) -> None:
    """AU-Harness ships `judge_type: <JUDGE_MODEL_TYPE>`; filling in the URL and key must be enough."""
    data = _config("voxtral_transcription")
    data["judge_settings"] = {
        **JUDGE,
        "judge_type": "<JUDGE_MODEL_TYPE>",
        "judge_api_version": "<JUDGE_MODEL_VERSION>",
    }
    with caplog.at_level(logging.WARNING):
        config = parse_config(data, "x.yaml")
    assert config.judge_properties is not None
    assert config.judge_properties.judge_type == "openai" and config.judge_properties.judge_api_version is None
    assert "judge_settings.judge_type is still AU-Harness's placeholder" in caplog.text
    data["judge_settings"] = {**JUDGE, "judge_type": "<JUDGE_MODEL_TYPE>", "judge_api_version": "2024-10-21"}
    assert parse_config(data, "x.yaml").judge_properties.judge_api_version == "2024-10-21"  # type: ignore[union-attr]


def test_gemini_is_served_through_googles_openai_endpoint_and_needs_its_key() -> None:
    entry = {"name": "g", "inference_type": "gemini", "model": "gemini-2.5-flash", "auth_token": "key"}
    config = parse_config({"task_metric": [["librispeech_test_clean", "word_error_rate"]], "models": [entry]})
    assert config.models[0].info.url == GEMINI_OPENAI_URL
    with pytest.raises(ConfigError, match=r"models\[0\]: inference_type gemini needs auth_token: a Gemini API key"):
        parse_config(
            {"task_metric": [["librispeech_test_clean", "word_error_rate"]], "models": [{**entry, "auth_token": None}]}
        )
    vertex = {**entry, "location": "us-central1", "project_id": "proj-123", "model": "google/gemini-2.5-flash"}
    config = parse_config({"task_metric": [["librispeech_test_clean", "word_error_rate"]], "models": [vertex]})
    assert config.models[0].info.url == (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/proj-123/locations/us-central1/endpoints/openapi"
    )
    # AU-Harness signs in with Google's application-default credentials: gcloud prints their token, renewed
    for given in ({"auth_token": ""}, {"auth_token": None}):
        config = parse_config(
            {"task_metric": [["librispeech_test_clean", "word_error_rate"]], "models": [{**vertex, **given}]}
        )
        info = config.models[0].info
        assert info.auth_token in (None, "") and info.auth_command == [
            "gcloud",
            "auth",
            "application-default",
            "print-access-token",
        ]
        assert info.auth_refresh_s == 2700.0


# ---------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "dataset"),
    [
        ("mmsu_law", "voicebench_mmsu_law"),
        ("advbench", "voicebench_advbench"),
        ("openbookqa", "voicebench_openbookqa"),
        ("earnings21", "earnings21_long_form_test"),
        ("covost2_en_sv-SE", "covost2_en_sv"),
        ("voicebench_ifeval_audio", "voicebench_ifeval"),
        ("callhome_diarization_eng", "callhome_eng"),
        ("auharness:librispeech_test_clean", "librispeech_test_clean_audiollms"),
        ("librispeech_test_clean", "librispeech_test_clean"),  # evalkit's own name keeps evalkit's data
    ],
)
def test_auharness_dataset_names_resolve_to_the_same_data(name: str, dataset: str) -> None:
    assert [spec.variant_of or spec.name for spec in load_catalog().resolve(name)] == [dataset]


def test_groups_tasks_and_categories_resolve_whole_or_say_what_is_missing() -> None:
    catalog = load_catalog()
    assert len(catalog.resolve("covost2")) == 36 == len(catalog.resolve("translation"))
    assert len(catalog.resolve("mmsu")) == 12
    assert {s.subset for s in catalog.resolve("voxpopuli")} == set(VOXPOPULI)
    assert len(catalog.resolve("fleurs")) == 102 == len({s.subset for s in catalog.resolve("fleurs")})
    assert len(catalog.resolve("common_voice_15")) == 100 and all(s.private for s in catalog.resolve("common_voice_15"))
    # a category evalkit also has keeps evalkit's meaning; the prefix gives AU-Harness's
    assert {s.category for s in catalog.resolve("paralinguistics")} == {"paralinguistics"}
    theirs = catalog.resolve("auharness:paralinguistics")
    assert len(theirs) == 16 and {s.category for s in theirs} != {"paralinguistics"}


def test_a_category_namesake_is_written_with_the_prefix_and_all_runs_auharness_metrics() -> None:
    config = parse_config(
        {
            "task_metric": [["covost2", "all"], ["emotion_recognition", "all"], ["speech_recognition", "all"]],
            "models": [flat_model("m")],
        }
    )
    assert ("covost2", "auharness:bleu") in config.dataset_metric and ("covost2", "comet") in config.dataset_metric
    # evalkit's emotion_recognition task holds other entries (and prompts): AU-Harness's folder gets the prefix;
    # AU-Harness's llm_judge_binary is written with the prefix in evalkit's format (its own keeps the plain name)
    assert ("auharness:emotion_recognition", "auharness:llm_judge_binary") in config.dataset_metric
    assert ("auharness:speech_recognition", "auharness:word_error_rate") in config.dataset_metric
    assert config.pair_labels is not None and config.pair_labels[0] == "config: task_metric[0] (covost2, all -> bleu)"


def test_the_name_table_points_only_at_catalogue_entries() -> None:
    catalog = load_catalog()
    table = catalog.foreign["auharness"]
    assert len(table.datasets) == 399
    for name, entry in table.datasets.items():
        assert entry.evalkit is None or entry.evalkit in catalog.datasets, name
        assert entry.metrics, name
    for group, members in table.groups.items():
        assert members and set(members) <= set(table.datasets), group
    assert len(table.groups["tasks"]) == 399


def test_info_says_where_evalkit_reads_another_upload_and_offers_auharness_source() -> None:
    catalog = load_catalog()
    notes = dataset_info("librispeech_test_clean", catalog)["other_tools"]
    assert len(notes) == 1 and "AudioLLMs/librispeech_test_clean" in notes[0]
    assert "'librispeech_test_clean_audiollms'" in notes[0] and "openslr/librispeech_asr" in notes[0]
    assert dataset_info("mmsu_law", catalog)["name"] == "voicebench_mmsu_law"
    assert "has no entry reading that upload" in dataset_info("spgispeech_test", catalog)["other_tools"][0]


# ---------------------------------------------------------------- convert


def test_convert_writes_a_config_that_validates_and_plans_the_same(tmp_path: Path, capsys) -> None:
    data = _config("sample")
    data["models"][0]["auth_token"] = "${AUH_TEST_TOKEN}"  # a variable stays a variable in the converted file
    source = tmp_path / "auh.yaml"
    source.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "evalkit.yaml"
    assert main(["convert", str(source), "--output", str(out)]) == 0
    text = out.read_text()
    assert "${AUH_TEST_TOKEN}" in text and "task_metric" not in text and "info:" in text
    assert "retry_attempts: 8 attempts in AU-Harness are 7 retries in evalkit" in text
    assert "metric 'word_error_rate' is AU-Harness's computation, 'auharness:word_error_rate'" in text
    converted = yaml.safe_load(text)
    assert ["auharness:librispeech_test_clean", "auharness:word_error_rate"] in converted["dataset_metric"]
    assert not is_auharness(converted)
    env = {"AUH_TEST_TOKEN": "t"}
    original = build_plan(load_config(source, env=env))
    again = build_plan(load_config(out, env=env))
    assert [(e.dataset.name, e.metric) for e in again.engines] == [(e.dataset.name, e.metric) for e in original.engines]
    assert {n: m.info.model_dump() for n, m in again.models.items()} == {
        n: m.info.model_dump() for n, m in original.models.items()
    }
    assert again.config.aggregate == original.config.aggregate and again.config.log_file == original.config.log_file
    capsys.readouterr()
    assert main(["convert", str(source), "--output", str(out)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert main(["convert", str(source), "--output", str(out), "--force"]) == 0
    assert main(["convert", str(out)]) == 2  # already evalkit's own format
    assert "not an AU-Harness config" in capsys.readouterr().err


# ---------------------------------------------------------------- metric names


def test_au_harness_metric_names_mean_au_harness_computation_and_evalkits_keep_theirs() -> None:
    """word_error_rate and bleu: AU-Harness's in its config or on its dataset names, evalkit's on evalkit's."""
    theirs = parse_config(
        {
            "task_metric": [["librispeech_test_clean", "word_error_rate"], ["covost2_en_de", "bleu"]],
            "aggregate": [["bleu", ["covost2_en_de"]]],
            "models": [flat_model("m")],
        }
    )
    assert [m for _, m in theirs.dataset_metric] == ["auharness:word_error_rate", "auharness:bleu"]
    assert [entry[0] for entry in theirs.aggregate] == ["auharness:bleu"]
    assert {e.metric for e in build_plan(theirs).engines} == {"auharness:word_error_rate", "auharness:bleu"}
    model = {"info": {"name": "m", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1", "model": "m"}}
    ours = parse_config(
        {
            "dataset_metric": [
                ["librispeech_test_clean", "word_error_rate"],  # evalkit's dataset name: evalkit's metric
                ["auharness:librispeech_test_clean", "word_error_rate"],  # AU-Harness's name: AU-Harness's metric
                ["librispeech_test_other", "auharness:word_error_rate"],  # asked for by name on evalkit's dataset
                ["librispeech_test_other", "wer"],
            ],
            "models": [model],
        }
    )
    planned = [(e.dataset.name, e.metric) for e in build_plan(ours).engines]
    assert planned == [
        ("librispeech_test_clean", "word_error_rate"),
        ("auharness:librispeech_test_clean", "auharness:word_error_rate"),
        ("librispeech_test_other", "auharness:word_error_rate"),
        ("librispeech_test_other", "word_error_rate"),
    ]


# ---------------------------------------------------------------- end to end against the test server


@pytest.fixture()
def server(speech_runspecs: dict[str, Any]) -> Iterator[Any]:
    fps = speech_runspecs["fingerprints"]
    truth = {"clip1": "hello world", "clip2": "the cat sat on the mat", "clip3": "good morning everyone"}
    rules = [{"audio_fingerprint": fps[c], "answer": text} for c, text in truth.items()]
    srv = start_test_server({"answers": rules, "require_auth": "sk-test"}, request_log=True)
    yield srv
    srv.stop()


def test_an_auharness_config_runs_end_to_end(tmp_path: Path, server: Any, speech_runspecs: dict[str, Any]) -> None:
    models = [
        {
            **flat_model("chat", "vllm"),
            "url": server.base_url,
            "auth_token": "sk-test",
            "delay": 0,
            "retry_attempts": 2,
        },
        {**flat_model("asr", "transcription"), "url": server.base_url, "auth_token": "sk-test", "delay": 0},
        {
            "name": "gemini",
            "inference_type": "gemini",
            "url": server.url + "/v1/",  # Google's base URL ends in a slash too
            "model": "gemini-2.5-flash",
            "auth_token": "sk-test",
            "reasoning_effort": "low",
            "retry_attempts": 1,
        },
    ]
    config = {
        "task_metric": [["tiny_asr", "all"]],
        "aggregate": [["word_error_rate", ["tiny_asr"]]],
        "filter": {"num_samples": 2},
        "logging": {"log_file": "auh.log"},
        "prompt_overrides": {
            "system_prompt": [{"model": "chat", "prompt": "You transcribe tersely."}],
            "user_prompt": [{"task": "tiny_asr", "prompt": "Write down the words you hear."}],
        },
        "generation_params_override": [
            {"task": "tiny_asr", "generation_params": {"temperature": 0.3, "max_completion_tokens": 64}}
        ],
        "models": models,
        "runspecs_dir": [str(speech_runspecs["dir"]), str(FIXTURES / "runspecs")],
        "output_dir": "runs",
    }
    path = tmp_path / "auh.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    assert main(["run", str(path), "--dry-run"]) == 0  # nothing generated: the endpoints are only listed
    assert not [e for e in server.log_events("completed") if e["path"] != "/v1/models"]
    assert main(["run", str(path), "--quiet"]) == 0
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    results = json.loads((run_dir / "results.json").read_text())
    rows = {(r["dataset"], r["metric"], r["model"]): r for r in results["results"]}
    for model in ("chat", "asr", "gemini"):  # AU-Harness's word_error_rate, as its config means it
        assert rows[("tiny_asr", "auharness:word_error_rate", model)]["score"] == 0.0
        assert rows[("tiny_asr", "auharness:word_error_rate", model)]["n"] == 2
        assert ("tiny_asr", "cer", model) in rows  # `all`: every metric the task lists
    assert (tmp_path / "auh.log").is_file()
    chats = [e for e in server.log_events("completed") if e["path"] == "/v1/chat/completions"]
    transcriptions = [e for e in server.log_events("completed") if e["path"] == "/v1/audio/transcriptions"]
    assert len(transcriptions) == 2 and all(e["status"] == 200 for e in chats + transcriptions)
    gemini = [e for e in chats if e["model"] == "gemini-2.5-flash"]
    assert len(gemini) == 2
    for event in gemini:
        assert event["params"]["reasoning_effort"] == "low"
        assert event["params"]["temperature"] == 0.3 and event["params"]["max_tokens"] == 64
        assert all(m["role"] != "system" for m in event["messages"])
    chat = [e for e in chats if e["model"] == "chat"]
    assert chat and all(
        e["messages"][0] == {**e["messages"][0], "role": "system", "text": "You transcribe tersely."} for e in chat
    )
    # user_prompt: the task's instruction replaced, for every chat model (a transcription request takes no text)
    assert all(
        any(m["role"] == "user" and "Write down the words you hear." in (m.get("text") or "") for m in e["messages"])
        for e in chats
    ), [e["messages"] for e in chats]


def test_override_rules_on_auharness_names_become_rules_on_evalkit_datasets() -> None:
    config = parse_config(
        {
            "task_metric": [["mmsu", "llm_judge_binary"], ["librispeech_test_clean", "word_error_rate"]],
            "generation_params_override": [
                {"task": "mmsu", "generation_params": {"max_gen_tokens": 32}},
                {"model": "m", "task": "librispeech_test_clean", "generation_params": {"temperature": 0.2}},
            ],
            "temperature_overrides": [{"task": "advbench", "temperature": 0.7}],
            "judge_settings": JUDGE,
            "models": [flat_model("m")],
        }
    )
    rules = [(r.model, r.task, r.max_tokens, r.temperature) for r in config.generation_overrides]
    # an AU-Harness override replaces the task's settings whole: what it leaves out is AU-Harness's default
    assert rules[:12] == [(None, f"auharness:mmsu_{s}", 32, 0.7) for s in sorted(MMSU)]
    assert rules[12:] == [("m", "auharness:librispeech_test_clean", 4096, 0.2)]
    assert [(r.task, r.temperature) for r in config.temperature_overrides] == [("auharness:advbench", 0.7)]
    build_plan(config)  # evalkit's rules name evalkit's datasets: the plan accepts them


MMSU = [
    "biology",
    "business",
    "chemistry",
    "economics",
    "engineering",
    "health",
    "history",
    "law",
    "other",
    "philosophy",
    "physics",
    "psychology",
]
#: VoxPopuli's configs AU-Harness evaluates (every hub subset but multilang)
VOXPOPULI = [
    "cs",
    "de",
    "en",
    "en_accented",
    "es",
    "et",
    "fi",
    "fr",
    "hr",
    "hu",
    "it",
    "lt",
    "nl",
    "pl",
    "ro",
    "sk",
    "sl",
]


def test_user_prompt_and_prompts_instructions_replace_a_datasets_instruction() -> None:
    """AU-Harness's prompt_overrides.user_prompt (its Phi-4 config) and evalkit's own prompts.instructions."""
    theirs = parse_config(
        {
            "task_metric": [["librispeech_test_clean", "word_error_rate"]],
            "prompt_overrides": {
                "user_prompt": [{"task": "librispeech_test_clean", "prompt": "Transcribe the audio clip into text."}]
            },
            "models": [flat_model("phi4")],
        }
    )
    (engine,) = build_plan(theirs).engines
    assert engine.dataset.name == "auharness:librispeech_test_clean"
    assert engine.dataset.instruction == "Transcribe the audio clip into text."
    ours = parse_config(
        {
            "dataset_metric": [["librispeech_test_clean", "word_error_rate"], ["librispeech_test_other", "wer"]],
            "models": [{"info": {"name": "m", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1", "model": "m"}}],
            "prompts": {"instructions": {"librispeech_test_clean": "Write down what is said."}},
        }
    )
    given = {e.dataset.name: e.dataset.instruction for e in build_plan(ours).engines}
    assert given["librispeech_test_clean"] == "Write down what is said."
    assert given["librispeech_test_other"] != "Write down what is said."  # only the dataset named


def test_metric_all_leaves_out_the_judge_prompt_name_auharness_lists_as_a_metric(caplog) -> None:
    """AU-Harness lists `detailed_judge_prompt` among ASVspoof's metrics; its own `all` cannot run it either."""
    data = _config("voxtral_transcription")
    data["task_metric"] = [["asvspoof", "all"]]
    data["judge_settings"] = JUDGE
    with caplog.at_level(logging.WARNING):
        plan = build_plan(parse_config(data, "x.yaml"), source="x.yaml")
    assert {(e.dataset.name, e.metric) for e in plan.engines} == {("auharness:asvspoof", "auharness:llm_judge_binary")}
    assert "metric `all` leaves out 'detailed_judge_prompt'" in caplog.text

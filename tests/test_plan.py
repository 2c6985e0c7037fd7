"""Planning: generation parameters by precedence, language selection, names checked before any request."""

from __future__ import annotations

import pytest
from helpers import FIXTURES

from evalkit.config import parse_config
from evalkit.errors import ConfigError
from evalkit.plan import build_plan


def _plan(**extra):  # type: ignore[no-untyped-def]
    data = {
        "dataset_metric": [["gen_qa", "exact_match"], ["tiny_qa", "exact_match"]],
        "models": [
            {"info": {"name": "a", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1", "model": "a-id"}},
            {
                "info": {
                    "name": "b",
                    "inference_type": "vllm",
                    "url": "http://127.0.0.1:9/v1",
                    "model": "b-id",
                    "temperature": 0.7,
                    "max_tokens": 64,
                }
            },
        ],
        "runspecs_dir": str(FIXTURES / "runspecs"),
        **extra,
    }
    return build_plan(parse_config(data, "test.yaml", {}))


def _params(plan, dataset: str, model: str) -> dict:  # type: ignore[no-untyped-def]
    return next(e for e in plan.engines if e.dataset.name == dataset).params[model]


def test_runspec_defaults_fill_what_model_and_overrides_leave_open() -> None:
    plan = _plan()
    assert _params(plan, "gen_qa", "a") == {"temperature": 0.3, "max_tokens": 16, "top_p": 0.9}
    # the model's own values beat the task's defaults
    assert _params(plan, "gen_qa", "b") == {"temperature": 0.7, "max_tokens": 64, "top_p": 0.9}
    # no runspec defaults: temperature 0, nothing else sent
    assert _params(plan, "tiny_qa", "a") == {"temperature": 0.0}


def test_most_specific_override_wins() -> None:
    plan = _plan(
        temperature_overrides=[
            {"task": "gen_qa", "temperature": 0.1},
            {"model": "b", "temperature": 0.2},
            {"model": "b", "task": "textgen", "temperature": 0.4},
        ],
        generation_overrides=[
            {"model": "a", "max_tokens": 5},
            {"model": "a", "task": "gen_qa", "max_tokens": 7, "seed": 3},
        ],
    )
    assert _params(plan, "gen_qa", "a") == {"temperature": 0.1, "max_tokens": 7, "top_p": 0.9, "seed": 3}
    assert _params(plan, "tiny_qa", "a") == {"temperature": 0.0, "max_tokens": 5}
    assert _params(plan, "gen_qa", "b")["temperature"] == 0.4  # model+task (category name) over model
    assert _params(plan, "tiny_qa", "b")["temperature"] == 0.2  # model over the model's own default


def test_unknown_override_targets_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"generation_overrides\[0\].task.*gen_qq.*did you mean"):
        _plan(generation_overrides=[{"task": "gen_qq", "max_tokens": 3}])
    with pytest.raises(ConfigError, match=r"temperature_overrides\[0\].model"):
        _plan(temperature_overrides=[{"model": "zzz", "temperature": 0.3}])


def test_language_filter_keeps_named_datasets_and_matches_names_and_codes() -> None:
    plan = _plan(filters={"language": "English"})
    assert {e.dataset.name for e in plan.engines} == {"gen_qa", "tiny_qa"}
    named = _plan(filters={"language": "fr"})
    assert {e.dataset.name for e in named.engines} == {"gen_qa", "tiny_qa"}  # named explicitly: kept, 0 samples
    by_task = build_plan(
        parse_config(
            {
                "dataset_metric": [["text", "exact_match"]],
                "models": [
                    {"info": {"name": "a", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1", "model": "a"}}
                ],
                "runspecs_dir": str(FIXTURES / "runspecs"),
                "filters": {"language": "fr"},
            },
            "t.yaml",
            {},
        )
    )
    assert by_task.engines == []  # selected by category: datasets in other languages are left out


def test_length_filter_must_be_ordered() -> None:
    with pytest.raises(ConfigError, match="length_filter"):
        _plan(filters={"length_filter": [30, 1]})

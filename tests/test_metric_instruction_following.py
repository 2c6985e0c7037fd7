"""instruction_following as a user meets it: where it reads a sample's instructions, what it says when it cannot
decide one, and a run against the test server whose results carry IFEval's four accuracies."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, run, write_config

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.structured import ifeval
from evalkit.testing import start_test_server


def _metric() -> Any:
    return METRICS.get("instruction_following")(language="en")


def test_ids_come_from_the_reference_or_meta_and_kwargs_may_be_json() -> None:
    metric = _metric()
    ids = ["punctuation:no_comma", "length_constraints:number_words"]
    kwargs = [{"num_words": None}, {"num_words": 3, "relation": "at least"}]
    as_reference = metric.score("one two three", Sample(id="a", reference=ids, meta={"kwargs": kwargs}))
    in_meta = metric.score(
        "one two three",
        Sample(id="b", reference="ignored", meta={"instruction_id_list": ids, "kwargs": json.dumps(kwargs)}),
    )
    assert as_reference.score == in_meta.score == 1.0 and as_reference.stats == in_meta.stats
    assert as_reference.details == {"instructions": ids, "strict": [True, True], "loose": [True, True]}
    # a comma breaks one of the two: the prompt fails, the instruction level keeps one of two
    broken = metric.score("one, two three", Sample(id="c", reference=ids, meta={"kwargs": kwargs}))
    assert broken.score == 0.0 and broken.stats == (0.0, 1.0, 0.0, 1.0, 2.0, 1.0)


@pytest.mark.parametrize(
    ("ids", "kwargs", "message"),
    [
        (["punctuation:no_kommas"], [{}], "unknown instruction id 'punctuation:no_kommas'"),
        (["length_constraints:number_words"], [{"relation": "at least"}], "argument 'num_words' is missing"),
        (["keywords:frequency"], [{"keyword": "x", "frequency": 2, "relation": "about"}], "must be one of"),
        (["punctuation:no_comma", "startend:quotation"], [{}], "one per instruction"),
        ([], None, "no instruction ids"),
        (["keywords:existence"], [{"keywords": ["(unclosed"]}], "not a valid regular expression"),
    ],
)
def test_an_instruction_it_cannot_decide_fails_the_sample_with_the_reason(
    ids: list[str], kwargs: Any, message: str
) -> None:
    scored = _metric().score("some answer", Sample(id="x", reference=ids, meta={"kwargs": kwargs}))
    assert scored.score is None and scored.failure == FailureReason.METRIC_ERROR
    assert message in scored.details["error"]


def test_a_missing_package_fails_only_the_rules_that_need_it_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langdetect", None)  # what an environment without the package imports
    ifeval._language_detector.cache_clear()
    try:
        metric = _metric()
        lang = metric.score(
            "Bonjour", Sample(id="l", reference=["language:response_language"], meta={"kwargs": [{"language": "fr"}]})
        )
        assert lang.failure == FailureReason.METRIC_ERROR
        assert "'langdetect'" in lang.details["error"] and "evalkit[ifeval]" in lang.details["error"]
        plain = metric.score("no commas", Sample(id="p", reference=["punctuation:no_comma"]))
        assert plain.score == 1.0
    finally:
        ifeval._language_detector.cache_clear()


def test_it_takes_no_options() -> None:
    with pytest.raises(ConfigError, match="unknown option 'strict'"):
        METRICS.get("instruction_following")(language="en", strict=True)


ROWS = [
    # (key, prompt, instruction ids, kwargs, the model's answer)
    ("1", "Describe rain without commas.", ["punctuation:no_comma"], [{}], "Rain falls from clouds."),
    (
        "2",
        "Answer in JSON and end with 'Done.'",
        ["detectable_format:json_format", "startend:end_checker"],
        [{}, {"end_phrase": "Done."}],
        '{"answer": "yes"} Done.',
    ),
    (
        "3",
        "Wrap the answer in quotes.",
        ["startend:quotation"],
        [{}],
        'Sure:\n"The quoted answer"\n',
    ),
]


def test_a_run_reports_ifevals_four_accuracies(tmp_path: Path) -> None:
    data = tmp_path / "ifeval.jsonl"
    data.write_text(
        "".join(
            json.dumps({"key": key, "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs}) + "\n"
            for key, prompt, ids, kwargs, _ in ROWS
        )
    )
    specs = tmp_path / "runspecs" / "reasoning"
    specs.mkdir(parents=True)
    spec = {
        "_task": {"description": "verifiable instructions", "metrics": ["instruction_following"]},
        "tiny_ifeval": {
            "path": str(data),
            "language": "en",
            "modality": "text",
            "id_column": "key",
            "textual_input_column": "prompt",
            "target_column": "instruction_id_list",
            "extra_columns": {"kwargs": "kwargs"},
        },
    }
    (specs / "tiny_ifeval.json").write_text(json.dumps(spec))
    server = start_test_server({"answers": [{"match": prompt, "answer": answer} for _, prompt, _, _, answer in ROWS]})
    try:
        config = write_config(
            tmp_path / "config.yaml",
            {
                "dataset_metric": [["tiny_ifeval", "instruction_following"]],
                "models": [model_entry("m", server.base_url)],
                "runspecs_dir": str(tmp_path / "runspecs"),
                "output_dir": str(tmp_path / "runs"),
            },
        )
        outcome = run(config)
    finally:
        server.stop()
    (row,) = outcome.rows
    assert row.error is None and row.n == 3 and row.n_failed == 0
    # strict: 1 followed; 2 is not JSON as a whole ("Done." follows it); 3 has a first line before the quotes.
    # loose: 3 follows without its first line; 2 still fails JSON -> prompts 1/3 vs 2/3, instructions 2/4 vs 3/4
    expected = {"strict_prompt": 1 / 3, "strict_instruction": 2 / 4, "loose_prompt": 2 / 3, "loose_instruction": 3 / 4}
    for name, value in expected.items():
        assert row.details[name] == pytest.approx(value), name
    assert row.score == pytest.approx(sum(expected.values()) / 4)

"""The examples in `evalkit run --help` and KARMA's documented option names work as written."""

from __future__ import annotations

import re

import pytest

from evalkit.catalog import load_catalog
from evalkit.cli.parser import build_parser
from evalkit.config.foreign.karma_args import parse_processor_args
from evalkit.errors import ConfigError
from evalkit.metrics import METRICS
from evalkit.processing.processors import build_processors


def _run_help(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "100000")  # argparse wraps inside words (IN22-/Conv) at the terminal's width
    parser = build_parser()
    (run,) = [a for a in parser._subparsers._group_actions if a.dest == "command"]
    return " ".join(run.choices["run"].format_help().split())


def test_the_processor_args_example_names_a_dataset_and_arguments_that_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    example = re.search(r"--processor-args SPEC text processors.*?e\.g\. (\S+?);", _run_help(monkeypatch))
    assert example, "run --help lost its --processor-args example"
    parsed = parse_processor_args([example.group(1)])
    ((dataset, processors),) = parsed.items()
    assert load_catalog().resolve(dataset), dataset  # the catalogue knows the name (KARMA's)
    for name, arguments in processors.items():
        chain = build_processors([{"name": name, **arguments}], "--processor-args")
        assert chain.processors[0].process("नमस्ते") == "नमस्ते"


def test_karma_judge_option_names_point_at_judge_properties() -> None:
    for metric in ("rubric_evaluation", "llm_judge_binary"):
        with pytest.raises(ConfigError, match="judge_properties.judge_model"):
            METRICS.get(metric)(provider_to_use="openai", model_id="gpt-4o-mini")

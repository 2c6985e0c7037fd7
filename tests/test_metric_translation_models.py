"""meteor, bertscore and comet: AU-Harness's normalisation, what reaches the packages that score, and the refusals
at config validation when a package, WordNet, a model or a checkpoint is missing (never a score from something
else). The models themselves are not run here: their weights are on no package registry."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, write_config

from evalkit.config import load_config
from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.auharness import text as auharness_text
from evalkit.metrics.auharness import translation_models
from evalkit.metrics.auharness.text import normalize_like_auharness
from evalkit.plan import build_plan

pytest.importorskip("num2words", reason="AU-Harness's normalisation needs num2words (the auharness extra)")

NORMALIZED = json.loads(
    (Path(__file__).parent / "fixtures" / "references" / "auharness_normalize.json").read_text("utf-8")
)


@pytest.mark.parametrize("case", NORMALIZED["cases"], ids=lambda c: repr(c["text"][:20]))
def test_the_normalisation_equals_au_harness_normalize_text(case: dict[str, str]) -> None:
    assert normalize_like_auharness(case["text"]) == case["normalized"]


def test_without_num2words_each_metric_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "num2words", None)
    auharness_text._spell.cache_clear()
    try:
        for name in ("meteor", "bertscore", "comet"):
            with pytest.raises(ConfigError, match=rf"metric '{name}': .*'num2words'.*evalkit\[auharness\]"):
                METRICS.get(name)(language="en")
    finally:
        auharness_text._spell.cache_clear()


def test_meteor_without_wordnet_is_refused_saying_how_to_bring_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    nltk_data = pytest.importorskip("nltk.data")
    monkeypatch.setattr(nltk_data, "path", [str(tmp_path)])
    with pytest.raises(ConfigError, match=r"NLTK's WordNet corpus, which no package registry ships.*NLTK_DATA=DIR"):
        METRICS.get("meteor")(language="en")
    monkeypatch.setitem(sys.modules, "nltk.translate.meteor_score", None)
    with pytest.raises(ConfigError, match=r"metric 'meteor' needs the Python package 'nltk'"):
        METRICS.get("meteor")(language="en")


def _fake_bert_score(calls: list[dict[str, Any]]) -> types.ModuleType:
    """bert_score's score(cands, refs, **options) -> (P, R, F1), recording what it is given."""
    module = types.ModuleType("bert_score")

    def score(cands: list[str], refs: list[str], **options: Any) -> tuple[list[float], list[float], list[float]]:
        calls.append({"cands": cands, "refs": refs, **options})
        shared = len(set(cands[0].split()) & set(refs[0].split()))
        return [0.0], [0.0], [shared / max(len(refs[0].split()), 1)]

    module.score = score  # type: ignore[attr-defined]
    return module


def test_bertscore_refusals_and_what_reaches_bert_score(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "bert_score", None)
    with pytest.raises(ConfigError, match=r"metric 'bertscore' needs the Python package 'bert-score'"):
        METRICS.get("bertscore")(language="en")
    calls: list[dict[str, Any]] = []
    monkeypatch.setitem(sys.modules, "bert_score", _fake_bert_score(calls))
    with pytest.raises(ConfigError, match=r"'bert-base-multilingual-cased' on this machine .* option 'model'"):
        METRICS.get("bertscore")(language="en", model="bert-base-multilingual-cased")
    model_dir = tmp_path / "mbert"
    model_dir.mkdir()
    metric = METRICS.get("bertscore")(language="en", model=str(model_dir), num_layers=9)
    acc = ScoreAccumulator(metric)
    acc.add(metric.score("I have 3 Apples!", Sample(id="a", reference="i have 3 apples")))
    acc.add(metric.score("Nothing alike.", Sample(id="b", reference="three green pears")))
    assert calls[0] == {
        "cands": ["i have 3 apples"],
        "refs": ["i have 3 apples"],
        "model_type": str(model_dir),
        "num_layers": 9,
    }
    assert acc.result().score == pytest.approx((1.0 + 0.0) / 2)


class _FakeComet:
    def __init__(self, seen: list[Any]) -> None:
        self.seen = seen

    def predict(self, segments: list[dict[str, str]], batch_size: int, gpus: int) -> Any:
        self.seen.append((segments, batch_size, gpus))
        return types.SimpleNamespace(scores=[0.5 if segments[0]["mt"] == segments[0]["ref"] else 0.25])


def test_comet_refusals_and_what_reaches_the_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "comet", None)
    with pytest.raises(ConfigError, match=r"metric 'comet' needs the Python package 'unbabel-comet'"):
        METRICS.get("comet")(language="de")
    seen: list[Any] = []
    fake = types.ModuleType("comet")
    fake.load_from_checkpoint = lambda path: _FakeComet(seen)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "comet", fake)
    translation_models._comet_model.cache_clear()
    with pytest.raises(
        ConfigError, match=r"Unbabel/wmt22-comet-da's checkpoint on this machine: .* option 'checkpoint'"
    ):
        METRICS.get("comet")(language="de")
    with pytest.raises(ConfigError, match=r"is not a file"):
        METRICS.get("comet")(language="de", checkpoint=str(tmp_path / "model.ckpt"))
    checkpoint = tmp_path / "model.ckpt"
    checkpoint.write_bytes(b"weights")
    metric = METRICS.get("comet")(language="de", checkpoint=str(checkpoint))
    same = metric.score(
        "Das Haus, 3 Zimmer.", Sample(id="a", reference="das haus 3 zimmer", meta={"source": "The house."})
    )
    assert same.score == 0.5
    assert seen[0] == ([{"src": "the house", "mt": "das haus 3 zimmer", "ref": "das haus 3 zimmer"}], 1, 0)
    no_source = metric.score("x", Sample(id="b", reference="y"))
    assert no_source.failure == FailureReason.UNRESOLVABLE_REFERENCE and "meta['source']" in no_source.details["error"]
    translation_models._comet_model.cache_clear()


def test_a_config_naming_comet_without_a_checkpoint_stops_at_validation(tmp_path: Path) -> None:
    data = tmp_path / "mt.jsonl"
    data.write_text(json.dumps({"id": "1", "text": "Hello", "target": "Hallo"}) + "\n")
    (tmp_path / "runspecs" / "translation").mkdir(parents=True)
    spec = {
        "_task": {"description": "translation", "metrics": ["bleu"]},
        "tiny_mt": {
            "path": str(data),
            "language": "en-de",
            "modality": "text",
            "textual_input_column": "text",
            "target_column": "target",
        },
    }
    (tmp_path / "runspecs" / "translation" / "tiny_mt.json").write_text(json.dumps(spec))
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["tiny_mt", "comet"]],
            "models": [model_entry("m", "http://127.0.0.1:9")],
            "runspecs_dir": str(tmp_path / "runspecs"),
        },
    )
    with pytest.raises(ConfigError, match=r"dataset_metric\[0\].*metric 'comet' needs"):
        build_plan(load_config(config), source=str(config))

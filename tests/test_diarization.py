"""Speaker-attributed transcripts: cpWER and WDER by hand, and a run on the shipped espeak-ng conversations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from helpers import ROOT, model_entry, run, write_config

from evalkit.config import load_config
from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.metrics import METRICS
from evalkit.metrics.speech.diarization import parse_turns
from evalkit.plan import build_plan
from evalkit.testing import audio_fingerprint

REFERENCE = [{"speaker": "A", "text": "hello there how are you"}, {"speaker": "B", "text": "fine thanks"}]
DIALOGUES = ROOT / "evalkit" / "assets" / "speech" / "espeak_dialogues" / "data.parquet"


@pytest.mark.parametrize(
    ("answer", "cpwer", "wder"),
    [
        # speaker names are only names: any labels, any order of assignment
        ("Speaker 1: hello there how are you\nSpeaker 2: fine thanks", (0, 7), (0, 7)),
        ("B: hello there how are you\nA: fine thanks", (0, 7), (0, 7)),
        # "are you" said by the wrong speaker: A misses 2 words, B gains 2; 2 words carry the wrong speaker
        ("A: hello there how\nB: are you fine thanks", (4, 7), (2, 7)),
        # no labels: one speaker, so B's two words are missing (cpWER) and carry the wrong speaker (WDER)
        ("hello there how are you fine thanks", (4, 7), (2, 7)),
        # a substitution and a deletion, every speaker right: WDER counts over the 6 aligned words
        ("A: hello where how are you\nB: fine", (2, 7), (0, 6)),
    ],
)
def test_hand_computed_cases(answer: str, cpwer: tuple[int, int], wder: tuple[int, int]) -> None:
    sample = Sample(id="s", reference=REFERENCE)
    assert METRICS.get("cpwer")(language="en").score(answer, sample).stats == tuple(map(float, cpwer))
    assert METRICS.get("speaker_diarization")(language="en").score(answer, sample).stats == tuple(map(float, wder))


def test_references_as_lines_and_answers_with_stray_lines() -> None:
    assert parse_turns("A: one two\nthree\n[SPEAKER_01]: four") == [("a", "one two three"), ("speaker_01", "four")]
    sample = Sample(id="s", reference="Speaker 1: red green blue\nSpeaker 2: yellow")
    assert METRICS.get("cpwer")(language="en").score("X: red green blue\nY: yellow", sample).stats == (0.0, 4.0)
    empty = METRICS.get("cpwer")(language="en").score("A: words", Sample(id="e", reference=[]))
    assert empty.score is None and empty.failure == "no reference"


def test_a_run_on_the_shipped_conversations(tmp_path: Path, make_server) -> None:
    """Answers by audio fingerprint for the first three conversations; values by hand.

    dialogue_00 (16 words) and dialogue_01 (18 words, labels swapped) answered exactly;
    dialogue_02 (15 words) moves "yes" from B to A: cpWER 2 errors (an insertion, a deletion), WDER 1 word.
    The references are written with capitals and punctuation, the answers without: cpWER (meeteval's,
    words as written by default) is given meeteval's ``lower,rm(.?!,)`` normaliser; WDER's default is
    DiarizationLM's own normalisation.
    """
    rows = pq.read_table(DIALOGUES).to_pylist()[:3]
    answers = [
        "Speaker 1: good morning did you sleep well\nSpeaker 2: not really the neighbours were loud\n"
        "Speaker 1: that is a shame",
        "A: where did you park the car\nB: near the station on the left\nA: thank you i will find it",
        "A: can you bring some bread home yes\nB: white or brown\nA: brown please and some milk",
    ]
    server = make_server(
        {"answers": [{"audio_fingerprint": audio_fingerprint(r["audio"]), "answer": a} for r, a in zip(rows, answers)]}
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [
                ["espeak_en_dialogues", "cpwer", {"normalizer": "lower,rm(.?!,)"}],
                ["espeak_en_dialogues", "wder"],
            ],
            "models": [model_entry("m", server.base_url)],
            "filters": {"num_samples": 3},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    outcome = run(config)
    scores = {row.metric: (row.score, row.n, row.n_failed) for row in outcome.rows}
    assert scores["cpwer"] == (pytest.approx(2 / 49), 3, 0)
    assert scores["wder"] == (pytest.approx(1 / 49), 3, 0)


def test_a_private_dataset_needs_its_path_from_the_config(tmp_path: Path) -> None:
    entry: dict[str, Any] = {"dataset_metric": [["callhome_eng", "cpwer"]]}
    entry["models"] = [model_entry("m", "http://127.0.0.1:9/v1")]
    config = write_config(tmp_path / "config.yaml", entry)
    with pytest.raises(ConfigError, match=r"'callhome_eng' is a private dataset .*dataset_paths: \{callhome_eng:"):
        build_plan(load_config(config), source=str(config))
    (tmp_path / "calls").mkdir()
    pq.write_table(pq.read_table(DIALOGUES).rename_columns(["id", "audio", "turns", "transcript", "duration"]),
                   tmp_path / "calls" / "eng.parquet")  # fmt: skip
    config.write_text(config.read_text() + "dataset_paths: {callhome_eng: calls/eng.parquet}\n")
    plan = build_plan(load_config(config), source=str(config))
    (engine,) = plan.engines
    assert engine.metric == "cpwer" and Path(engine.dataset.source) == (tmp_path / "calls" / "eng.parquet")
    assert json.loads(json.dumps(engine.dataset.model_dump(mode="json")))["private"] is True

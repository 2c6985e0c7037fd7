"""ChEF's calibration (``ece``): equal to ChEF's compute_ECE on a table, and end to end through logprobs.

The table (tests/fixtures/references/chef_calibration.json) comes from running ChEF's own
``compute_ECE`` with the PPL inferencer's ``prob`` (commit and command inside the file).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import FIXTURES, model_entry, run, write_config

from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.chef.calibration import equal_count_bins, expected_calibration_error

TABLE = json.loads((FIXTURES / "references" / "chef_calibration.json").read_text())


def _prediction(item: dict[str, Any]) -> str:
    chars = [1.0] * len(item["tokens"])
    return json.dumps({"logprobs": item["logprobs"], "tokens": item["tokens"], "chars": chars})


@pytest.mark.parametrize("case", TABLE["cases"], ids=lambda c: f"n{len(c['items'])}-bins{c['bins']}")
def test_ece_equals_chefs_compute_ece(case: dict[str, Any]) -> None:
    metric = METRICS.get("ece")(bins=case["bins"])
    acc = ScoreAccumulator(metric)
    for row, item in enumerate(case["items"]):
        choices = [f"option {i}" for i in range(len(item["tokens"]))]
        sample = Sample(id=str(row), reference=item["gt_choice"], meta={"choices": choices})
        scored = metric.score(_prediction(item), sample)
        assert scored.details["confidence"] == pytest.approx(item["prob"], abs=1e-6)
        assert scored.details["correct"] == bool(item["correct"])
        # rows arrive out of order (concurrent samples): the order column puts ties back in row order
        acc.add(scored, order=row)
    result = acc.result(seed=0, n_resamples=200)
    assert result.score == pytest.approx(case["ECE"], abs=1e-12)
    assert result.details["acc_bins"] == pytest.approx(case["Acc_bins"])
    assert result.details["prob_bins"] == pytest.approx(case["Prob_bins"])
    if len(case["items"]) >= 10:
        assert result.ci_low is not None and result.ci_low <= result.score <= result.ci_high
        assert result.ci_low < result.ci_high


def test_bins_are_chefs_sizes_and_ties_keep_row_order() -> None:
    assert equal_count_bins(23, 10) == [3, 3, 3, 2, 2, 2, 2, 2, 2, 2]
    assert equal_count_bins(3, 10) == [1, 1, 1]
    # two bins of one tie: the first row (wrong) must land in the first bin, as Python's stable sort puts it
    ece, accs, _ = expected_calibration_error(np.array([0.5, 0.5]), np.array([0.0, 1.0]), bins=2)
    assert accs == [0.0, 1.0] and ece == pytest.approx(0.5)
    assert math.isnan(expected_calibration_error(np.array([]), np.array([]))[0])


def test_bad_bins_option_is_refused() -> None:
    with pytest.raises(ValueError, match="'bins'"):
        METRICS.get("ece")(bins=0)


ROWS = [
    ("c1", "Capital of Italy?", ["Rome", "Paris"], 0),  # Rome -0.2 vs Paris -2.0: confident, right
    ("c2", "Capital of Spain?", ["Lisbon", "Madrid"], 1),  # Lisbon -0.3 vs Madrid -1.9: confident, wrong
    ("c3", "Largest ocean?", ["Pacific", "Indian"], 0),  # -0.9 vs -1.0: unsure, right
    ("c4", "Red planet?", ["Venus", "Mars"], 1),  # -1.1 vs -1.2: unsure, wrong
]
LOGPROBS = {"Rome": -0.2, "Paris": -2.0, "Lisbon": -0.3, "Madrid": -1.9, "Pacific": -0.9, "Indian": -1.0}
LOGPROBS |= {"Venus": -1.1, "Mars": -1.2}


def _specs(root: Path) -> Path:
    data = root / "cal.jsonl"
    data.write_text("".join(json.dumps({"id": i, "q": q, "choices": c, "answer": a}) + "\n" for i, q, c, a in ROWS))
    entry = {
        "path": str(data),
        "language": "en",
        "modality": "text",
        "id_column": "id",
        "textual_input_column": "q",
        "target_column": "answer",
        "choices_column": "choices",
    }
    folder = root / "specs" / "mc"
    folder.mkdir(parents=True)
    (folder / "mc.json").write_text(json.dumps({"_task": {"description": "mc", "metrics": ["ece"]}, "cal_mc": entry}))
    return root / "specs"


def test_ece_run_through_the_completions_endpoint(tmp_path: Path, make_server) -> None:
    server = make_server({"token_logprobs": LOGPROBS})
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["cal_mc", "ece", {"bins": 2}]],
            "models": [model_entry("m", server.base_url)],
            "runspecs_dir": str(_specs(tmp_path)),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    outcome = run(config)
    (row,) = outcome.rows
    assert row.n == 4 and row.n_failed == 0
    # by hand: each option is one token, so the ppl score is its logprob
    conf = [1 / (1 + math.exp(-1.8)), 1 / (1 + math.exp(-1.6)), 1 / (1 + math.exp(-0.1)), 1 / (1 + math.exp(-0.1))]
    # c1 and c3 right, c2 and c4 wrong; by confidence c3 and c4 (near equal) come first, then c2, c1:
    # bins {c3, c4} and {c2, c1}
    expected = (2 * abs((conf[2] + conf[3]) / 2 - 0.5) + 2 * abs((conf[1] + conf[0]) / 2 - 0.5)) / 4
    assert row.score == pytest.approx(expected)
    assert row.details["acc_bins"] == [0.5, 0.5] and row.details["bins"] == 2
    records = [
        json.loads(line) for line in (outcome.run_dir / "records" / "cal_mc__ece.jsonl").read_text().splitlines()
    ]
    by_id = {r["sample_id"]: r for r in records}
    assert by_id["c2"]["stats"] == [pytest.approx(conf[1]), 0.0]
    assert by_id["c1"]["details"]["chosen"] == "A" and by_id["c1"]["details"]["correct"] is True
    # recomputable from the records alone: rows in row order give the same ECE
    rows = np.array([r["stats"] for r in sorted(records, key=lambda r: r["row"])])
    assert METRICS.get("ece")(bins=2).corpus_rows(rows) == pytest.approx(row.score)

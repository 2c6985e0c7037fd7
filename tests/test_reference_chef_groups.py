"""MMBench's circular accuracy and MME's acc+ against ChEF's MMBenchVQA and MMEVQA run on the same answers
(tests/fixtures/references/chef_groups.json; its "reference" block names the command)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evalkit.metrics.chef.groups import CircularMember, MmeMember, group_figure, mmbench_circular, mme_accuracy_plus

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "chef_groups.json").read_text("utf-8"))


def _circular_members() -> list[CircularMember]:
    return [
        CircularMember(int(i["id"]), i["answer"], i["choices"], i["gt_choice"]) for i in FIXTURE["mmbench"]["items"]
    ]


def test_fixture_says_where_it_came_from() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "OpenGVLab/LAMM" and len(ref["commit"]) == 40 and ref["command"]


def test_vanilla_and_circular_accuracy_equal_chefs() -> None:
    vanilla, circular = mmbench_circular(_circular_members())
    expected = FIXTURE["mmbench"]["expected"]
    assert vanilla.score == pytest.approx(expected["vanilla_acc"] / 100)
    assert circular.score == pytest.approx(expected["circular_acc"] / 100)
    assert circular.n == vanilla.n == 5  # groups are questions, not rows


def test_the_order_members_arrive_in_does_not_matter() -> None:
    forward = mmbench_circular(_circular_members())[1]
    backward = mmbench_circular(list(reversed(_circular_members())))[1]
    assert forward.outcomes == backward.outcomes


def test_one_wrong_copy_makes_the_question_wrong() -> None:
    members = [CircularMember(3, "A", ["x", "y"], 0), CircularMember(1_000_003, "A", ["y", "x"], 1)]
    assert mmbench_circular(members)[1].score == 0.0
    members[1] = CircularMember(1_000_003, "B", ["y", "x"], 1)
    assert mmbench_circular(members)[1].score == 1.0


def test_mme_accuracy_plus_equals_chefs_overall_plus() -> None:
    items = FIXTURE["mme"]["items"]
    figure = mme_accuracy_plus(MmeMember(i["image_path"], i["answer"], i["gt_answers"]) for i in items)
    assert figure.score == pytest.approx(FIXTURE["mme"]["expected"]["overall_plus"] / 100)
    assert figure.n == len({i["image_path"] for i in items})


def test_the_interval_is_over_groups() -> None:
    """Ten groups of 0/1 outcomes: the normal interval of ten values, not of the rows behind them."""
    outcomes = {str(k): float(k % 2) for k in range(10)}
    figure = group_figure(outcomes)
    half = 1.959963984540054 * math.sqrt((sum((v - 0.5) ** 2 for v in outcomes.values()) / 9) / 10)
    assert (figure.score, figure.ci_low, figure.ci_high) == pytest.approx((0.5, 0.5 - half, 0.5 + half))
    assert math.isnan(group_figure({}).score) and math.isnan(group_figure({"a": 1.0}).ci_low)

"""The compact sample-id index the engines use to find repeated ids."""

from __future__ import annotations

import random

from evalkit.util.idindex import IdIndex


def test_first_row_is_kept_and_repeats_find_it_across_growth() -> None:
    index = IdIndex(capacity=4)
    ids = [f"sample-{i}" for i in range(5000)]
    for row, key in enumerate(ids):
        assert index.setdefault(key, row) == row
    assert len(index) == 5000
    rng = random.Random(0)
    for _ in range(2000):
        row = rng.randrange(5000)
        assert index.setdefault(ids[row], 99_999) == row  # a repeat: the first row, nothing stored
    assert len(index) == 5000
    assert index.setdefault("", 7) == 7 and index.setdefault("", 8) == 7  # an empty id is an id too
    assert index.setdefault("sample-é", 1) == 1

"""Rows that are bad because of the data, not the model: counted by kind while a pair runs, said once each at its end.

A duplicate id, a missing reference or a score that is not a number fails its row; an empty reference is
scored as is (a metric may define a score against "", as WER counts insertions). Either way a dataset with
thousands of such rows gets one warning per kind, naming the first, instead of thousands of lines.
"""

from __future__ import annotations

import logging
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.run.scoring import where

log = logging.getLogger("evalkit")

#: failures that come from the data, not the model: each kind gets one warning naming its first row
DATA_PROBLEMS = frozenset({FailureReason.DUPLICATE_ID, FailureReason.NO_REFERENCE, FailureReason.NO_SCORE})


class DataProblems:
    """Bad rows of one pair by kind: (count, the first one's message)."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, str]] = {}

    def note(self, record: dict[str, Any], sample: Sample) -> None:
        """Count a bad row by kind, keeping the first one's message for the warning at the end."""
        failure = record.get("failure")
        if failure in DATA_PROBLEMS:
            problem, message = str(failure), record.get("error") or ""
        elif failure is None and _blank(sample.reference):
            # a metric may define a score against "" (WER counts insertions): scored as is, but said once
            problem, message = "empty reference", f"{where(record, sample)}: the reference is empty; scored as is"
        else:
            return
        count, first = self.seen.get(problem, (0, message))
        self.seen[problem] = (count + 1, first)

    def warn(self, pair: str) -> None:
        """One warning per kind of bad row (duplicate id, empty reference, non-finite score), naming the first."""
        for reason, (count, first) in self.seen.items():
            rows = "1 row" if count == 1 else f"{count} rows"
            what = (
                "scored against an empty reference" if reason == "empty reference" else f"counted as failed ({reason})"
            )
            log.warning("%s: %s %s; the first: %s", pair, rows, what, first)


def _blank(reference: Any) -> bool:
    """A reference that is there but says nothing: "", blanks, or a list of only those."""
    if isinstance(reference, str):
        return not reference.strip()
    if isinstance(reference, (list, tuple)):
        return bool(reference) and all(isinstance(r, str) and not r.strip() for r in reference)
    return False

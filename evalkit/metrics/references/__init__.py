"""The reference implementation each built-in metric equals, and how that was checked.

A score is worth publishing only when it means what the field means by its
name, so every metric names the code whose value it reproduces: the project,
the file and function, the version or commit it was compared with, and every
difference known. ``evalkit info metric NAME`` prints the entry and
``evalkit list metrics`` shows the project in a column. The tests compare each
metric with its reference: by calling it where it is a package (jiwer,
sacrebleu, meeteval), or against a table of cases whose values were produced
by running the reference's own script (``tests/fixtures/references/``).

Kept apart from the metric modules so listing stays import-light: these files
import nothing but the standard library, and are read only when a reference is
asked for (a run never does). The entries are grouped as the metrics are:
evalkit's own definitions (standard.py), and each peer's computations in a file
named after the peer.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from evalkit.metrics.references.reference import Reference

__all__ = ["REFERENCES", "Reference", "reference_of"]


@cache
def _tables() -> tuple[tuple[dict[str, Reference], ...], dict[str, Reference]]:
    """The parts, and every entry by canonical name: read on first use, as a run's metrics never need them."""
    from evalkit.metrics.references.auharness import AUHARNESS_REFERENCES
    from evalkit.metrics.references.chef import CHEF_REFERENCES
    from evalkit.metrics.references.karma import KARMA_REFERENCES
    from evalkit.metrics.references.standard import STANDARD_REFERENCES

    parts = (STANDARD_REFERENCES, AUHARNESS_REFERENCES, KARMA_REFERENCES, CHEF_REFERENCES)
    return parts, {name: reference for part in parts for name, reference in part.items()}


def __getattr__(name: str) -> Any:
    """``PARTS`` (by whose definition a metric follows; a metric name is in exactly one, a test checks it) and
    ``REFERENCES`` (by canonical metric name; a test checks every built-in metric has an entry)."""
    if name in ("PARTS", "REFERENCES"):
        parts, references = _tables()
        return parts if name == "PARTS" else references
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def reference_of(name: str) -> Reference | None:
    """The reference of a built-in metric by canonical name, or None."""
    return _tables()[1].get(name)

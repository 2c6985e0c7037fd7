"""The record of where a metric's definition comes from, and its one cell in listings.

Imports nothing but the standard library, so listing metrics stays import-light.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    """Where a metric's definition comes from."""

    #: the project, as a user would find it ("jiwer", "RUCAIBox/POPE", "evalkit" for evalkit's own definition)
    project: str
    #: file and function (or the package's function) whose value the metric equals
    source: str
    #: the package version or the repository commit the metric was compared with
    version: str
    #: how the comparison is made in the tests ("calls jiwer", "table of cases from running evaluate.py")
    checked_by: str
    #: every known way evalkit's value can differ from the reference's (empty: none known)
    differences: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        """One cell for listings: the project and the first version named ("jiwer 4.0.0", "RUCAIBox/POPE 3df3ba1")."""
        if self.project == OWN:
            return "evalkit's own"
        first = self.version.split(";")[0].split(" (")[0].strip()
        words = first.split()
        if words and words[0].lower() in (self.project.lower(), self.project.split("/")[-1].lower()):
            words = words[1:]
        if words and words[0] == "commit":
            words = words[1:]
        return " ".join([self.project, *(_abbreviated(w) for w in words)])


#: the project of evalkit's own definitions
OWN = "evalkit"


def _abbreviated(word: str) -> str:
    """A full commit hash as its first 12 digits; any other word as it is."""
    is_hash = len(word) > 12 and all(c in "0123456789abcdef" for c in word)
    return word[:12] if is_hash else word

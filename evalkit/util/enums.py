"""A string enum that reads as its plain value everywhere a record goes (str(), f-strings, JSON, dict keys).

``enum.StrEnum`` would do, but it is new in Python 3.11 and evalkit supports 3.10.
"""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    """Members are their values: ``str(Kind.CHAT) == f"{Kind.CHAT}" == "chat"``."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

"""The one thing AU-Harness's Jinja rendering changes in a plain user text: its final newline.

AU-Harness renders every instruction as a Jinja template before sending it
(models/model.py, ``Template(instruction).render(message)``), and Jinja drops
one trailing newline by default (``keep_trailing_newline=False``). Its BFCL and
Spider texts end in one, so what the model receives lacks it; the
preprocessors that reproduce those texts drop it the same way.
"""

from __future__ import annotations


def without_final_newline(text: str) -> str:
    """``text`` with one trailing newline (``\\r\\n``, ``\\n`` or ``\\r``) dropped, as Jinja renders it."""
    for ending in ("\r\n", "\n", "\r"):
        if text.endswith(ending):
            return text[: -len(ending)]
    return text

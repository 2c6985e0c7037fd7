"""Failure reasons are one closed list, and the documentation lists every one of them."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from helpers import doc_section

from evalkit.failures import FailureReason, http_reason

ROOT = Path(__file__).resolve().parent.parent


def test_the_docs_list_every_failure_reason() -> None:
    section = doc_section("Failures, retries and resuming")
    documented = set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.M))
    missing = [reason.value for reason in FailureReason if reason.value not in documented]
    assert not missing, f"the table of failure reasons (docs/getting-started.md) lacks {missing}"
    assert "http_<status>" in documented


def test_reasons_read_as_plain_strings_everywhere_a_record_goes() -> None:
    assert str(FailureReason.TIMEOUT) == f"{FailureReason.TIMEOUT}" == "timeout"
    assert json.loads(json.dumps({"failure": FailureReason.NO_REFERENCE})) == {"failure": "no reference"}
    assert {"audio": 1}[FailureReason.AUDIO] == 1
    assert http_reason(404) == "http_404"


def test_no_failure_reason_is_a_free_string_in_the_package() -> None:
    """A reason written as a literal (failed("...") or failure="...") would bypass the list and the docs."""
    offenders = []
    for path in (ROOT / "evalkit").rglob("*.py"):
        if "testing" in path.parts or path.name == "dryrun.py":  # the dry run's markers never reach a record
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            literal_first = name in {"failed", "add_failure"} and node.args and isinstance(node.args[0], ast.Constant)
            literal_kw = any(
                k.arg == "failure" and isinstance(k.value, ast.Constant) and k.value.value is not None
                for k in node.keywords
            )
            if literal_first or literal_kw:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders

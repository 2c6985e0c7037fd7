"""The documentation's reference pages are generated from the code's own tables and must not go stale.

docs/catalogue.md (from the runspecs), docs/metrics.md (from the metric table and its references) and
docs/test-server.md (from the test server's script reader) are written whole by scripts/docs_pages.py;
adding, removing or re-checking a runspec entry, or changing a metric's reference, its known differences
or a script key, without rerunning it fails here, with the command to run.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from evalkit.metrics.table import BUILTIN_METRICS

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "docs_pages.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_pages", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["catalogue.md", "metrics.md", "test-server.md"])
def test_the_committed_page_is_the_scripts_output(page: str) -> None:
    script = _script()
    committed = (REPO / "docs" / page).read_text(encoding="utf-8")
    assert committed == script.PAGES[page](), f"docs/{page} is stale: run `{script.COMMAND}`"


def test_catalogue_counts_every_shipped_entry() -> None:
    page = _script().render_catalogue()
    files = sorted(p for p in (REPO / "runspecs").glob("*/*.json") if not p.parent.name.startswith(("_", ".")))
    entries = {path.stem: [k for k in json.loads(path.read_text(encoding="utf-8")) if k != "_task"] for path in files}
    assert f"evalkit ships {sum(map(len, entries.values()))} datasets in {len(entries)} tasks" in page
    summary = page[page.index("## By task") : page.index("\n## Category")]
    rows = [line for line in summary.splitlines() if line.startswith("| ") and not line.startswith("| Category")]
    counted = {re.sub(r"\[(.*?)\]\(.*?\)", r"\1", row.split(" | ")[1]): int(row.split(" | ")[2]) for row in rows}
    assert counted == {task: len(names) for task, names in entries.items()}
    for names in entries.values():  # and each entry has its row under its task
        for name in names:
            assert f"| `{name}` |" in page, name


def test_metrics_page_has_every_metric_with_its_reference_and_every_known_difference() -> None:
    page = _script().render_metrics()
    sections = re.split(r"^## ", page, flags=re.M)[1:]
    by_name = {section.splitlines()[0].split(" {#")[0]: section for section in sections}
    assert set(by_name) == {info.name for info in BUILTIN_METRICS}
    for info in BUILTIN_METRICS:
        section = " ".join(by_name[info.name].split())
        assert info.reference is not None, info.name
        assert " ".join(info.reference.source.split()) in section.replace("\\|", "|"), info.name
        for difference in info.reference.differences:
            assert " ".join(difference.split()) in section.replace("\\|", "|"), (info.name, difference)
        if not info.reference.differences:
            assert "Known differences: none." in section, info.name


def test_a_stale_page_is_detected_and_rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    script = _script()
    for page in script.PAGES:
        (tmp_path / page).write_text("# old\n", encoding="utf-8")
    monkeypatch.setattr(script, "DOCS", tmp_path)
    assert script.main(["--check"]) == 1
    assert script.COMMAND in capsys.readouterr().err
    assert (tmp_path / "catalogue.md").read_text(encoding="utf-8") == "# old\n", "--check wrote a page"
    assert script.main([]) == 0
    for page, render in script.PAGES.items():
        assert (tmp_path / page).read_text(encoding="utf-8") == render()
    assert script.main(["--check"]) == 0


def test_the_script_page_names_every_key_the_server_reads() -> None:
    from evalkit.testing.script import FAULT_KEYS, RULE_KEYS, SCRIPT_KEYS

    page = _script().render_test_server()
    for key in SCRIPT_KEYS:
        assert re.search(rf"^{key}:", page, re.M), key
    for key in (*RULE_KEYS, *FAULT_KEYS):
        assert f"{key}:" in page, key

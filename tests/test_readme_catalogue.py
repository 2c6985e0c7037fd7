"""README.md's catalogue table is generated from the runspecs and must not go stale.

The block between the catalogue markers is written by scripts/catalogue_table.py;
adding, removing or re-checking a runspec entry without rerunning it fails here,
with the command that regenerates the table.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "catalogue_table.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("catalogue_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_catalogue_table_is_up_to_date() -> None:
    script = _script()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme.count(script.START) == 1 and readme.count(script.END) == 1, "README.md lost its catalogue markers"
    block = readme[readme.index(script.START) : readme.index(script.END) + len(script.END)]
    assert block == script.render_block(), f"README.md's catalogue table is stale: run `{script.COMMAND}`"


def test_table_counts_every_shipped_entry() -> None:
    script = _script()
    block = script.render_block()
    files = sorted(p for p in (REPO / "runspecs").glob("*/*.json") if not p.parent.name.startswith(("_", ".")))
    entries = {
        path.stem: len([k for k in json.loads(path.read_text(encoding="utf-8")) if k != "_task"]) for path in files
    }
    assert f"evalkit ships {sum(entries.values())} datasets in {len(entries)} tasks" in block
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| Category")]
    assert {row.split(" | ")[1]: int(row.split(" | ")[2]) for row in rows} == entries


def test_stale_readme_is_detected_and_rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    script = _script()
    stale = tmp_path / "README.md"
    stale.write_text(f"# x\n\n{script.START}\nold table\n{script.END}\n\nafter\n", encoding="utf-8")
    monkeypatch.setattr(script, "README", stale)
    assert script.main(["--check"]) == 1
    assert script.COMMAND in capsys.readouterr().err
    assert script.main([]) == 0
    text = stale.read_text(encoding="utf-8")
    assert text.startswith("# x\n\n") and text.endswith("\n\nafter\n") and script.render_block() in text
    assert script.main(["--check"]) == 0

"""`evalkit run --output FILE`: the results written where KARMA users expect them, besides the run folder.

The format follows the extension: ``.json`` and ``.yaml``/``.yml`` hold what the
run folder's results.json holds (run metadata, ``results`` and ``aggregate``
rows), so ``evalkit report FILE.json`` and the Python API read either back;
``.csv`` is results.csv's table. The run folder stays the record (records,
report.html, resume); FILE is a copy of its results for scripts and spreadsheets.

The target is checked before the first request, so a wrong extension or a
missing folder does not cost a run. An existing file is replaced only when it
is itself an earlier evalkit results file (a re-run to the same name, as KARMA
users do), or with ``--force``: anything else there may be someone's data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalkit.errors import UserError

FORMATS = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".csv": "csv"}
#: the largest existing file read to tell whether it is an earlier evalkit output
_SNIFF_LIMIT = 64 * 2**20


def results_format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise UserError(f"--output {path}: expected a .json, .yaml, .yml or .csv file (the extension picks the format)")
    return fmt


def _csv_header() -> str:
    from evalkit.report.tables import results_csv

    return results_csv([]).splitlines()[0]


def is_evalkit_results(path: Path) -> bool:
    """Whether ``path`` holds results evalkit wrote: a results.json-shaped mapping, or results.csv's header."""
    try:
        if path.stat().st_size > _SNIFF_LIMIT:
            return False
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if results_format(path) == "csv":
        return text.splitlines()[:1] == [_csv_header()]
    try:
        if results_format(path) == "json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception:  # any parse error means: not ours
        return False
    return isinstance(data, dict) and isinstance(data.get("results"), list) and "run_id" in data


def check_target(output: str, force: bool) -> Path:
    """The --output path once it is known to be writable here without losing someone's file."""
    path = Path(output)
    results_format(path)
    if path.is_dir():
        raise UserError(f"--output {path}: is a folder; give a file name (the run folder is set by --output-dir)")
    if not path.parent.is_dir():
        raise UserError(f"--output {path}: folder {path.parent} does not exist")
    if path.exists() and not force and not is_evalkit_results(path):
        raise UserError(
            f"--output {path}: exists and is not an earlier evalkit results file; pass --force to replace it"
        )
    return path


def results_payload(rows: list[Any], meta: dict[str, Any]) -> dict[str, Any]:
    """What results.json holds: the run's metadata, then its dataset rows and its aggregate rows."""
    return {
        **meta,
        "results": [r.as_dict() for r in rows if r.kind == "dataset"],
        "aggregate": [r.as_dict() for r in rows if r.kind == "aggregate"],
    }


def write_results_file(path: Path, rows: list[Any], meta: dict[str, Any]) -> None:
    from evalkit.util.atomic import write_json_atomic, write_text_atomic

    fmt = results_format(path)
    if fmt == "csv":
        from evalkit.report.tables import results_csv

        write_text_atomic(path, results_csv(rows))
    elif fmt == "json":
        write_json_atomic(path, results_payload(rows, meta))
    else:
        import yaml

        # through JSON first: the same plain types (and str for the rest) as results.json holds
        plain = json.loads(json.dumps(results_payload(rows, meta), default=str))
        write_text_atomic(path, yaml.safe_dump(plain, sort_keys=False, allow_unicode=True))

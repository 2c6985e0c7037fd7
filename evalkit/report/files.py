"""The files a finished run leaves: results.json (the source of truth), then the CSV, Markdown and HTML views.

``load_results`` reads a run folder back, so ``evalkit report`` and the Python
API re-render without re-running.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from evalkit.errors import DiskFullError, UserError
from evalkit.report.results import ResultRow, row_from_dict
from evalkit.report.tables import results_csv, results_markdown
from evalkit.util.atomic import write_json_atomic, write_text_atomic
from evalkit.util.confine import MAX_JSON_BYTES, is_within, read_capped

log = logging.getLogger("evalkit")


def write_results(run_dir: Path, rows: list[ResultRow], meta: dict[str, Any]) -> None:
    """Everything a finished run leaves behind: results.json first (the source of truth), then the views."""
    run_dir = Path(run_dir)
    payload = {
        **meta,
        "results": [r.as_dict() for r in rows if r.kind == "dataset"],
        "aggregate": [r.as_dict() for r in rows if r.kind == "aggregate"],
    }
    write_json_atomic(run_dir / "results.json", payload)
    write_views(run_dir, rows, meta)


def write_views(run_dir: Path, rows: list[ResultRow], meta: dict[str, Any]) -> None:
    """results.csv, results.md and report.html, all derived from rows + meta (re-rendered by `evalkit report`)."""
    run_dir = Path(run_dir)
    write_text_atomic(run_dir / "results.csv", results_csv(rows))
    write_text_atomic(run_dir / "results.md", results_markdown(rows, meta))
    try:
        from evalkit.report.html import write_html

        write_html(run_dir, rows, meta)
    except DiskFullError:
        raise
    except Exception:
        log.exception("could not write %s", run_dir / "report.html")


def load_results(run_dir: str | Path) -> tuple[list[ResultRow], dict[str, Any]]:
    """Rows (dataset rows, then aggregates) and run metadata from ``run_dir/results.json``."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / "results.json"
    if not path.is_file():
        raise UserError(f"{path}: no results.json here (is {run_dir} a run directory that finished?)")
    if not is_within(path, path.parent):
        raise UserError(f"{path}: a link to a file outside the run folder; a run's own results.json is read only")
    try:
        payload = json.loads(read_capped(path, MAX_JSON_BYTES).decode("utf-8"))
    except json.JSONDecodeError as error:
        raise UserError(f"{path}: line {error.lineno}: not valid JSON: {error.msg}") from None
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: not UTF-8 text (byte {error.start})") from None
    except ValueError as error:  # larger than the limit
        raise UserError(f"{path}: {error}") from None
    except OSError as error:
        raise UserError(f"{path}: cannot read: {error.strerror or error}") from None
    if not isinstance(payload, dict) or "results" not in payload:
        raise UserError(f"{path}: not an evalkit results file (no `results` list)")
    rows = [row_from_dict({**r, "kind": "dataset"}) for r in payload.get("results") or []]
    rows += [row_from_dict({**r, "kind": "aggregate"}) for r in payload.get("aggregate") or []]
    meta = {k: v for k, v in payload.items() if k not in ("results", "aggregate")}
    return rows, meta

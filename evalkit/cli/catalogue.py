"""``evalkit catalogue check [NAMES...]``: the catalogue's hub entries against the hub as it is today.

Prints one row per entry (where the repo lives, gating, subset/split, the
mapped columns found, the row count, the state) and, under the table, what
changed or could not be checked. Exit 0 when every entry still matches, 1
when something changed (``--strict``: or could not be checked), 2 when the
hub cannot be reached or may not be asked (HF_HUB_OFFLINE).
"""

from __future__ import annotations

import argparse
import io
import json
import sys

from evalkit.catalog import DatasetSpec, load_catalog
from evalkit.data.hubcache import hub_offline
from evalkit.data.hubcheck import EntryCheck, HubChecker, Transport
from evalkit.errors import UserError

COLUMNS = ["dataset", "repo", "lives at", "gated", "subset/split", "columns", "rows", "state"]


def selected(names: list[str], runspecs_dirs: list[str]) -> list[DatasetSpec]:
    """The entries named (datasets, tasks, categories, another tool's names), or every hub entry of the catalogue."""
    catalog = load_catalog(runspecs_dirs)
    if not names:
        return [spec for spec in catalog.entries().values() if spec.hf_repo is not None]
    found = {spec.name: spec for name in names for spec in catalog.resolve(name, "catalogue check")}
    return list(found.values())


def _columns_cell(check: EntryCheck) -> str:
    if not check.columns:
        return "-"
    if check.missing:
        return f"missing {', '.join(check.missing)}"
    return f"{len(check.columns)} found" if check.columns_checked else f"{len(check.columns)} not checked"


def render_table(checks: list[EntryCheck], width: int | None = None) -> str:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{len(checks)} hub entries checked", title_justify="left")
    for column in COLUMNS:
        table.add_column(column, overflow="fold", no_wrap=column in ("state", "rows"))
    for check in checks:
        cells = [
            check.name,
            check.repo,
            check.lives_at or "same",
            check.gated,
            f"{check.subset or '(default)'}/{check.split}",
            _columns_cell(check),
            f"{check.rows:,}" if check.rows is not None else "?",
            check.state,
        ]
        table.add_row(*(Text(cell) for cell in cells))  # hub text is data, never markup
    console = Console(
        width=width, record=True, force_terminal=False, color_system=None, highlight=False, file=io.StringIO()
    )
    console.print(table)
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    for check in checks:
        lines += [f"{check.name}: {what}" for what in check.problems]
        lines += [f"{check.name}: not checked: {what}" for what in check.unchecked]
        lines += [f"{check.name}: note: {what}" for what in check.notes]
    counts = {state: sum(1 for c in checks if c.state == state) for state in ("ok", "changed", "unchecked")}
    lines.append(f"{counts['ok']} ok, {counts['changed']} changed, {counts['unchecked']} not checked")
    return "\n".join(lines) + "\n"


def exit_code(checks: list[EntryCheck], strict: bool) -> int:
    if any(check.state == "changed" for check in checks):
        return 1
    return 1 if strict and any(check.state == "unchecked" for check in checks) else 0


def run_check(args: argparse.Namespace, transport: Transport | None = None) -> int:
    """The command; ``transport`` replaces the hub library's session (tests replay recorded answers through it)."""
    if hub_offline():
        raise UserError("catalogue check: HF_HUB_OFFLINE is set; the check asks the hub (unset it, or run online)")
    specs = selected(args.names, args.runspecs_dir)
    skipped = [spec.name for spec in specs if spec.hf_repo is None]
    if skipped:
        print(f"catalogue check: not on the hub, skipped: {', '.join(skipped)}", file=sys.stderr)
    if len(skipped) == len(specs):
        raise UserError("catalogue check: none of the names given reads a hub dataset")
    checks = HubChecker(transport).check(specs)
    if args.format == "json":
        sys.stdout.write(json.dumps([check.as_dict() for check in checks], indent=2) + "\n")
    else:
        sys.stdout.write(render_table(checks))
    return exit_code(checks, args.strict)

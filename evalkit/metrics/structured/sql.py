"""Spider execution accuracy on SQLite (AU-Harness's ``sql_score``): do the answer's SQL and the gold SQL return
the same rows?

AU-Harness scores speech-to-SQL with the Spider test-suite evaluation
(taoyds/test-suite-sql-eval ``exec_eval.eval_exec_match``, which it vendors).
This module follows the same steps:

1. the SQL is read from the answer: the first fenced code block (```sql ...```
   or ```...```), else the whole answer, stripped; an empty answer becomes
   ``SELECT`` (AU-Harness's Spider postprocessor). Anything after a tab is cut
   and every ``value`` becomes ``1`` (Spider's placeholder for literal values,
   replaced even inside words, as the evaluation does);
2. ``> =``, ``< =``, ``! =`` are closed up, ``DISTINCT`` is removed from both
   queries (the test suite's default, ``keep_distinct=False``; option
   ``keep_distinct``), and ``YEAR(CURDATE())`` becomes 2020;
3. both queries run on every ``*.sqlite`` file in the database's folder
   (Spider's layout: ``<database_dir>/<db_id>/<db_id>.sqlite``; the test
   suite's extra databases sit beside it);
4. the results are equal when some order of the answer's columns makes them
   the same rows: in the same order when the gold query has ``ORDER BY``,
   otherwise as multisets. A query that fails scores 0; a gold query that
   fails makes the sample a failure (the reference raises).

Where the database is: ``meta["db_path"]`` (a ``.sqlite`` file), or the metric
option ``database_dir`` with the database id from ``meta["db_id"]`` or from the
reference written as AU-Harness writes it, ``"<gold SQL>\\t<db_id>"``. A
database that is not there fails the sample with its path.

Databases are opened read-only, so an answer that writes (``DELETE``,
``DROP``) fails instead of changing the data the next sample is scored on.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings

_FENCED = re.compile(r"```(?:sql)?([\s\S]*?)```")
_CURRENT_YEAR = re.compile(r"YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*", re.IGNORECASE)
_SPACED_OPERATORS = (("> =", ">="), ("< =", "<="), ("! =", "!="))

Rows = list[tuple[Any, ...]]


def sql_of_answer(answer: str) -> str:
    """The query in a model's answer (step 1 of the module docstring, before the placeholder rules)."""
    if not answer.strip():
        return "SELECT"
    blocks = _FENCED.findall(answer)
    return (blocks[0] if blocks else answer).strip()


def _without_distinct(query: str) -> str:
    """The query with each ``DISTINCT`` token dropped, tokens as sqlparse reads them (strings, quoted names kept)."""
    sqlparse = importlib.import_module("sqlparse")
    statements = sqlparse.parse(query)
    if not statements:
        return query
    return "".join(t.value for t in statements[0].flatten() if t.value.lower() != "distinct")


def prepared(query: str, *, keep_distinct: bool) -> str:
    for spaced, closed in _SPACED_OPERATORS:
        query = query.replace(spaced, closed)
    return query if keep_distinct else _without_distinct(query)


def _column_orders(gold: Rows, answer: Rows) -> Iterator[tuple[int, ...]]:
    """Orders of the answer's columns under which each column holds the gold column's values (as multisets)."""
    width = len(gold[0])
    gold_columns = [Counter(row[i] for row in gold) for i in range(width)]
    answer_columns = [Counter(row[j] for row in answer) for j in range(width)]
    fits = [[j for j in range(width) if answer_columns[j] == gold_columns[i]] for i in range(width)]

    def extend(prefix: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
        if len(prefix) == width:
            yield prefix
            return
        for j in fits[len(prefix)]:
            if j not in prefix:
                yield from extend((*prefix, j))

    return extend(())


def same_rows(gold: Rows, answer: Rows, *, ordered: bool) -> bool:
    """Whether some order of the answer's columns makes its rows the gold rows (in order when ``ordered``)."""
    if not gold and not answer:
        return True
    if len(gold) != len(answer) or len(gold[0]) != len(answer[0]):
        return False
    for order in _column_orders(gold, answer):
        moved = [tuple(row[j] for j in order) for row in answer]
        if moved == gold if ordered else Counter(moved) == Counter(gold):
            return True
    return False


class QueryFailed(Exception):
    """A query SQLite refused or stopped (the message says which)."""


def run_query(database: Path, query: str, timeout: float) -> Rows:
    """The rows ``query`` returns on a read-only connection; QueryFailed past ``timeout`` seconds or on an error."""
    connection = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
    connection.text_factory = lambda raw: raw.decode(errors="ignore")
    deadline = time.monotonic() + timeout
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        rows: Rows = connection.execute(_CURRENT_YEAR.sub("2020", query)).fetchall()
        return rows
    except (sqlite3.Error, sqlite3.Warning, ValueError) as error:
        stopped = time.monotonic() > deadline
        raise QueryFailed(f"timed out after {timeout:g} s" if stopped else f"{type(error).__name__}: {error}") from None
    finally:
        connection.close()


def suite_of(database: Path) -> list[Path]:
    """Every database the test suite runs on: the ``.sqlite`` files beside ``database``, in name order."""
    return sorted(p for p in database.parent.iterdir() if ".sqlite" in p.name and p.is_file())


class SqlExecutionAccuracy(Metric):
    """1 when the answer's SQL returns the gold query's rows on the sample's SQLite database (Spider test suite)."""

    name = "sql_score"
    bounds = (0.0, 1.0)
    tasks = ("speech_to_sql", "text_to_sql", "spider")

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("database_dir", "keep_distinct", "timeout"))
        super().__init__(language, **options)
        try:
            importlib.import_module("sqlparse")
        except ImportError:
            raise ConfigError(
                f"metric {self.name!r} needs the Python package 'sqlparse' (how Spider's evaluation reads DISTINCT): "
                "pip install 'evalkit[sql]'"
            ) from None
        directory = options.get("database_dir")
        self.database_dir = Path(str(directory)).expanduser() if directory is not None else None
        if self.database_dir is not None and not self.database_dir.is_dir():
            raise ConfigError(
                f"metric {self.name!r}: option 'database_dir': {str(self.database_dir)!r} is not a directory "
                "(expected Spider's database folder, holding <db_id>/<db_id>.sqlite)"
            )
        self.keep_distinct = bool(options.get("keep_distinct", False))
        self.timeout = float(options.get("timeout", 60.0))
        if self.timeout <= 0:
            raise ConfigError(f"metric {self.name!r}: option 'timeout' must be positive seconds, not {self.timeout}")

    def _gold_and_database(self, sample: Sample) -> tuple[str, Path]:
        references = reference_strings(sample.reference)
        if not references:
            raise LookupError("no gold query")
        gold, _, db_from_reference = references[0].partition("\t")
        db_path = sample.meta.get("db_path")
        if db_path:
            return gold, Path(str(db_path)).expanduser()
        db_id = sample.meta.get("db_id") or db_from_reference.strip()
        if not db_id:
            raise LookupError("no database: give meta['db_path'], or meta['db_id'] with the option database_dir")
        if self.database_dir is None:
            raise LookupError(
                f"database {db_id!r}: set the metric option database_dir to Spider's database folder "
                f"(holding {db_id}/{db_id}.sqlite)"
            )
        return gold, self.database_dir / str(db_id) / f"{db_id}.sqlite"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        try:
            gold, database = self._gold_and_database(sample)
        except LookupError as error:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE, details={"error": str(error)})
        if not database.is_file():
            return SampleScore(
                None,
                failure=FailureReason.UNRESOLVABLE_REFERENCE,
                details={"error": f"no SQLite database at {database}"},
            )
        query = sql_of_answer(prediction or "").split("\t")[0].replace("value", "1")
        answer_sql = prepared(query, keep_distinct=self.keep_distinct)
        gold_sql = prepared(gold, keep_distinct=self.keep_distinct)
        ordered = "order by" in gold_sql.lower()
        details: dict[str, Any] = {"sql": query, "database": database.name}
        for db in suite_of(database):
            try:
                gold_rows = run_query(db, gold_sql, self.timeout)
            except QueryFailed as error:
                details["error"] = f"the gold query fails on {db.name}: {error}"
                return SampleScore(None, failure=FailureReason.UNRESOLVABLE_REFERENCE, details=details)
            try:
                answer_rows = run_query(db, answer_sql, self.timeout)
            except QueryFailed as error:
                details["reason"] = f"the answer's query fails on {db.name}: {error}"
                return SampleScore(0.0, (0.0, 1.0), details=details)
            if not same_rows(gold_rows, answer_rows, ordered=ordered):
                details["reason"] = f"different rows on {db.name}"
                return SampleScore(0.0, (0.0, 1.0), details=details)
        return SampleScore(1.0, (1.0, 1.0), details=details)

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        """Queries run in a worker thread: a slow one must not hold the event loop."""
        return await asyncio.to_thread(self.score, prediction, sample)

    def describe(self) -> dict[str, Any]:
        return {"keep_distinct": self.keep_distinct, "timeout_s": self.timeout, "order_matters": "gold has ORDER BY"}

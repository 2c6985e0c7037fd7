"""Spider's speech-to-SQL questions asked as AU-Harness asks them, with the database's schema (``SpiderPreprocessor``).

ServiceNow-AI/spider_audio holds Spider's dev questions (``question``, the
gold ``query``, ``db_id``) and their recordings, but not the databases nor
their schemas: those come with Spider itself (https://yale-lily.github.io/spider,
``tables.json`` and ``database/<db_id>/<db_id>.sqlite``), which AU-Harness
downloads into ``data/spider``. evalkit reads that folder from the
environment variable ``SPIDER_DATA_DIR`` (the folder holding ``tables.json``,
or AU-Harness's ``tables.jsonl``, and ``database/``): the prompt needs the
schema before any metric option is read, and one variable serves both the
prompt and the scoring. :meth:`SpiderPreprocessor.expand` gives each sample
its database, ``meta["db_path"] = $SPIDER_DATA_DIR/database/<db_id>/<db_id>.sqlite``,
which ``sql_score`` runs the queries on (so its ``database_dir`` option is
not needed, and an AU-Harness config runs unchanged). Without the variable,
or with a folder that lacks the schema file or the sample's database, the
pair stops before its first request with a message saying what to set.

The user text is AU-Harness's (preprocessors/spider_preprocessor.py): the
runspec's instruction (its ``user_prompt``), then ``"### Sqlite SQL tables,
with their properties: \\n#\\n"``, the schema, ``"\\n#\\n### "``, and for a
text task (no audio) the question and a newline; one final newline is dropped,
as AU-Harness's Jinja rendering drops it. The schema of a database is one line
per table, ``# table (column type, ...)`` with Spider's original names and
types, then ``# Primary Key (table): column`` per primary key and
``# Foreign Key: table.column = table.column`` per foreign key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.prompts.auharness.jinja_newline import without_final_newline
from evalkit.prompts.preprocessors import PREPROCESSORS, Preprocessor, PromptContext
from evalkit.prompts.prompt import Prompt, PromptTurn

#: the environment variable naming the Spider folder (tables.json and database/)
SPIDER_DIR_VARIABLE = "SPIDER_DATA_DIR"
SCHEMA_FILES = ("tables.json", "tables.jsonl")
SCHEMA_LEAD = "### Sqlite SQL tables, with their properties: \n#\n"
SCHEMA_END = "\n#\n### "
HOW_TO = (
    f"download Spider (https://yale-lily.github.io/spider) and set the environment variable {SPIDER_DIR_VARIABLE} "
    "to its folder (the one holding tables.json and database/)"
)


def schema_text(database: dict[str, Any]) -> str:
    """One database of Spider's tables.json as the text AU-Harness puts in the prompt."""
    tables: list[str] = database["table_names_original"]
    columns: list[list[Any]] = database["column_names_original"]
    types: list[str] = database["column_types"]
    lines = []
    for index, table in enumerate(tables):
        # the type of a column's first listing, as AU-Harness looks it up (list.index)
        listed = ", ".join(f"{c[1]} {types[columns.index(c)]}" for c in columns if c[0] == index)
        lines.append(f"# {table} ({listed})")
    for key in database.get("primary_keys", []):
        # an int per key in Spider's dev tables; a composite key (a list, where a release has one) a line per column
        for column in key if isinstance(key, list) else [key]:
            owner, name = columns[column]
            lines.append(f"# Primary Key ({tables[owner]}): {name}")
    for child, parent in database.get("foreign_keys", []):
        lines.append(
            f"# Foreign Key: {tables[columns[child][0]]}.{columns[child][1]} = "
            f"{tables[columns[parent][0]]}.{columns[parent][1]}"
        )
    return "\n".join(lines)


@lru_cache(maxsize=4)
def schemas_in(folder: Path) -> dict[str, str]:
    """Every database's schema text in a Spider folder, by db_id (read once per folder)."""
    found = next((folder / name for name in SCHEMA_FILES if (folder / name).is_file()), None)
    if found is None:
        raise ConfigError(f"{SPIDER_DIR_VARIABLE}={folder}: no tables.json there; {HOW_TO}")
    text = found.read_text(encoding="utf-8")
    try:
        databases = (
            json.loads(text) if found.suffix == ".json" else [json.loads(line) for line in text.splitlines() if line]
        )
        return {str(db["db_id"]): schema_text(db) for db in databases}
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise ConfigError(f"{found}: not Spider's tables file ({type(error).__name__}: {error})") from None


def spider_folder() -> Path:
    given = os.environ.get(SPIDER_DIR_VARIABLE)
    if not given:
        raise ConfigError(f"Spider's table schemas are not in the hub dataset: {HOW_TO}")
    return Path(given).expanduser()


@PREPROCESSORS.register("SpiderPreprocessor", "spider")
class SpiderPreprocessor(Preprocessor):
    """The instruction, the database's schema, then (text tasks) the question, as AU-Harness writes them."""

    def expand(self, samples: Iterable[Sample]) -> Iterator[Sample]:
        given = os.environ.get(SPIDER_DIR_VARIABLE)
        databases = Path(given).expanduser() / "database" if given else None
        for sample in samples:
            db_id = sample.meta.get("db_id")
            if databases is None or not db_id or sample.meta.get("db_path"):
                yield sample
            else:
                yield replace(sample, meta={**sample.meta, "db_path": str(databases / str(db_id) / f"{db_id}.sqlite")})

    def build(self, sample: Sample, context: PromptContext) -> Prompt:
        folder = spider_folder()
        db_id = str(sample.meta.get("db_id", ""))
        schemas = schemas_in(folder.resolve())
        if db_id not in schemas:
            raise ConfigError(
                f"{SPIDER_DIR_VARIABLE}={folder}: tables file has no database {db_id!r} (sample {sample.id}); "
                "is it Spider's dev release?"
            )
        text = (sample.instruction or "") + SCHEMA_LEAD + schemas[db_id] + SCHEMA_END
        if sample.audio is None:
            text += f"{sample.text or ''}\n"
        sent = "\n\n".join(part for part in (without_final_newline(text), *context.add_ons) if part)
        return Prompt(turns=[PromptTurn(text=sent, audio=sample.audio)], system=context.system_prompt)

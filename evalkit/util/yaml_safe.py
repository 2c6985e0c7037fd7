"""The one YAML loader for files a user gives evalkit: PyYAML's SafeLoader with bounds.

``yaml.safe_load`` refuses Python objects but not documents that cannot be
meant: a 326-byte "billion laughs" file (anchors of anchors) composes into a
small graph of shared nodes that every later step (``${VAR}`` expansion,
pydantic, an error message quoting the value) walks as a tree of 10^9 nodes;
20,000 nested brackets overflow the composer's recursion; and a key written
twice silently keeps its last value (a run measured ``cer`` where the file
also said ``wer``). This loader refuses all three while composing, before
anything is built, each with one line naming the file, the line and what to
change:

- at most :data:`MAX_ALIAS_USES` aliases (``*name``) and at most
  :data:`MAX_EXPANDED_NODES` nodes once every alias is written out; an alias
  to the node it sits in (a recursive document) is refused too;
- at most :data:`MAX_DEPTH` levels of nested lists and mappings, checked
  before the composer recurses deeper;
- no mapping key twice (merge keys ``<<`` excepted: overriding a merged key
  is what they are for).

Everything else (syntax errors, a number too long for ``int``) also ends as
one short :class:`~evalkit.errors.ConfigError`; no message quotes more than
:data:`MAX_ECHO` characters of the document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.reader import ReaderError

from evalkit.errors import ConfigError, UserError
from evalkit.util.user_files import read_user_text

#: most aliases (``*name``) one document may use; configs use a handful (shared model settings)
MAX_ALIAS_USES = 100
#: most nodes a document may have with every alias written out (sample_config.yaml has about 150)
MAX_EXPANDED_NODES = 100_000
#: most levels of lists and mappings nested in one another (sample_config.yaml goes 5 deep)
MAX_DEPTH = 100
#: most characters of a value or a name from the document quoted in a message
MAX_ECHO = 200

_MERGE_TAG = "tag:yaml.org,2002:merge"


def shorten(text: str, limit: int = MAX_ECHO) -> str:
    """``text`` cut to ``limit`` characters with a note of how much was left out, so no message quotes a document."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


class YamlRefused(yaml.MarkedYAMLError):
    """A document this loader will not build: too many aliases, too deep, a key twice."""


class BoundedSafeLoader(yaml.SafeLoader):
    """SafeLoader that counts aliases, expanded nodes and depth, and refuses duplicate keys, while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._alias_uses = 0
        self._expanded = 0
        self._depth = 0
        #: anchor -> nodes it stands for once written out; absent while the anchored node is still being composed
        self._sizes: dict[str, int] = {}

    def _refuse(self, problem: str, mark: Any) -> YamlRefused:
        return YamlRefused(problem=problem, problem_mark=mark)

    def _count(self, nodes: int, mark: Any, alias: str | None) -> None:
        self._expanded += nodes
        if self._expanded > MAX_EXPANDED_NODES:
            what = f"alias *{shorten(alias, 40)}" if alias is not None else "the document"
            raise self._refuse(
                f"{what} makes the document more than {MAX_EXPANDED_NODES:,} values once aliases are written out "
                f"(an alias bomb?); write the values out or use fewer aliases",
                mark,
            )

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            anchor = event.anchor
            self._alias_uses += 1
            if self._alias_uses > MAX_ALIAS_USES:
                raise self._refuse(
                    f"more than {MAX_ALIAS_USES} aliases (*name) in one document; write the values out",
                    event.start_mark,
                )
            if anchor in self.anchors and anchor not in self._sizes:
                raise self._refuse(
                    f"alias *{shorten(anchor, 40)} refers to the value it is part of (a recursive document)",
                    event.start_mark,
                )
            self._count(self._sizes.get(anchor, 0), event.start_mark, anchor)
            return super().compose_node(parent, index)
        event = self.peek_event()
        nested = isinstance(event, (SequenceStartEvent, MappingStartEvent))
        if nested:
            if self._depth >= MAX_DEPTH:
                raise self._refuse(
                    f"lists and mappings nested more than {MAX_DEPTH} levels deep; no evalkit file needs that",
                    event.start_mark,
                )
            self._depth += 1
        anchor = event.anchor
        if anchor is not None:
            self._sizes.pop(anchor, None)
        before = self._expanded
        self._count(1, event.start_mark, None)
        try:
            node = super().compose_node(parent, index)
        finally:
            if nested:
                self._depth -= 1
        if anchor is not None:
            self._sizes[anchor] = self._expanded - before
        return node

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        node = super().compose_mapping_node(anchor)
        first: dict[tuple[str, str], Any] = {}
        for key, _value in node.value:
            if not isinstance(key, ScalarNode) or key.tag == _MERGE_TAG:
                continue
            seen = first.setdefault((key.tag, key.value), key.start_mark)
            if seen is not key.start_mark:
                raise self._refuse(
                    f"key {shorten(key.value, 80)!r} given twice in one mapping, first at {_at(seen)}, again at "
                    f"{_at(key.start_mark)}; keep one (YAML would silently use the last)",
                    key.start_mark,
                )
        return node

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except ValueError as error:  # e.g. an integer of more than 4,300 digits
            raise self._refuse(f"cannot read this value: {shorten(str(error))}", node.start_mark) from None


def _where(error: yaml.YAMLError, text: str) -> str:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if mark is not None:
        return f" {_at(mark)}:"
    if isinstance(error, ReaderError) and isinstance(error.position, int):  # a character, by offset
        line = text.count("\n", 0, error.position)
        column = error.position - (text.rfind("\n", 0, error.position) + 1)
        return f" line {line + 1}, column {column + 1}:"
    return ""


def load_yaml(text: str, source: str, error: type[UserError] = ConfigError) -> Any:
    """Parse one YAML document from ``text`` with the bounds above; any problem is one ``error`` naming ``source``.

    The message is ``<source>: line L, column C: <problem>``, never the
    document itself, so a hostile file cannot flood the terminal.
    """
    loader: BoundedSafeLoader | None = None
    try:
        # in the try: PyYAML's reader refuses a NUL or another control character while it is being built
        loader = BoundedSafeLoader(text)
        return loader.get_single_data()
    except yaml.YAMLError as problem:
        what = getattr(problem, "problem", None) or str(problem).splitlines()[0]
        prefix = "" if isinstance(problem, YamlRefused) else "not valid YAML: "
        raise error(f"{source}:{_where(problem, text)} {prefix}{shorten(str(what))}") from None
    except RecursionError:  # the depth bound comes first; this is the last line of defence
        raise error(f"{source}: nested too deeply to read (at most {MAX_DEPTH} levels)") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml_file(path: str | Path, error: type[UserError] = ConfigError) -> Any:
    """Read ``path`` as UTF-8 and parse it with :func:`load_yaml`; a missing, unreadable or binary file is ``error``."""
    return load_yaml(read_user_text(path, error), str(path), error)

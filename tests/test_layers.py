"""The package layout: each stage of a run has one folder, and imports only point to earlier stages.

Every import counts, including lazy ones inside functions and those under
``TYPE_CHECKING``: a lazy import is still a dependency a reader must follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "evalkit"

#: the layers, first to last; a unit may import its own layer's units and earlier layers' only
LAYERS: list[set[str]] = [
    {"errors", "failures", "util", "registry", "languages", "assets"},
    {"catalog"},
    {"config"},
    {"data"},
    {"prompts", "metrics", "processing"},
    {"plan"},
    {"clients"},
    {"report"},
    {"serve"},
    {"run"},
    {"view"},
    {"api", "cli", "plugin", "testing", "__main__", "__init__"},
]


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path) -> set[str]:
    """Every evalkit module named by an import statement anywhere in the file."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("evalkit.") and name != "evalkit.__version__"}


def _unit_edges() -> dict[tuple[str, str], set[str]]:
    edges: dict[tuple[str, str], set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _unit(_module_name(path)) if _module_name(path) != "evalkit" else "__init__"
        for target in _imported(path):
            unit = _unit(target)
            if unit != source and unit != "__init__":
                edges.setdefault((source, unit), set()).add(_module_name(path))
    return edges


def _layer(unit: str) -> int:
    for index, layer in enumerate(LAYERS):
        if unit in layer:
            return index
    raise AssertionError(f"evalkit.{unit} belongs to no layer; add it to LAYERS in {__file__}")


def test_every_top_level_unit_has_a_layer() -> None:
    units = {
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
    }
    for unit in units:
        _layer(unit)


def test_imports_point_to_earlier_layers_only() -> None:
    wrong = [
        f"evalkit.{a} (layer {_layer(a)}) imports evalkit.{b} (layer {_layer(b)}) in {', '.join(sorted(modules))}"
        for (a, b), modules in sorted(_unit_edges().items())
        if _layer(b) > _layer(a)
    ]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_between_top_level_units() -> None:
    graph: dict[str, set[str]] = {}
    for a, b in _unit_edges():
        graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                pytest.fail("import cycle: " + " -> ".join([*trail[trail.index(nxt) :], nxt]))
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_the_checker_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    """The scan would be worthless if imports inside functions or TYPE_CHECKING blocks slipped past it."""
    path = PACKAGE / "data" / "counts.py"
    names = _imported(path)
    assert "evalkit.catalog" in names  # under TYPE_CHECKING
    assert "evalkit.data.files" in names


def test_no_folder_holds_more_than_25_modules() -> None:
    """A newcomer finds a module by its folder's name, not by reading a long list of file names."""
    for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
        modules = sorted(p.name for p in folder.glob("*.py"))
        assert len(modules) <= 25, f"{folder.relative_to(PACKAGE.parent)} holds {len(modules)} modules: group them"

"""The package layout: each stage of a run has one folder, and imports only point to earlier stages.

Every import counts, including lazy ones inside functions and those under
``TYPE_CHECKING``: a lazy import is still a dependency a reader must follow.
Within a folder too, modules import one way (no circle), no module reaches
into another's private (``_``-prefixed) names, and none grows past
:data:`MAX_LINES` lines.
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


#: the longest a module may be; a longer one holds more than one job
MAX_LINES = 900

# The three allow-lists below are removed when the metrics/config reorganisation lands (evalkit/metrics/ and
# evalkit/prompts/ into subfolders, config.py + compat/ + envvars.py into a config/ package): they name exactly
# the cases left in the parts being moved in those branches, so that any new one fails here.

#: import circles left, each as the set of modules it joins
KNOWN_CYCLES: set[frozenset[str]] = set()
#: private names still imported across modules: "importer: module.name"
KNOWN_PRIVATE: set[str] = set()
#: modules over MAX_LINES being split in those branches, with their length today (they may only shrink)
KNOWN_LONG: dict[str, int] = {}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
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


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _base(path: Path, node: ast.ImportFrom, root: Path = PACKAGE) -> str:
    """The module an ``from X import ...`` statement names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _module_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The evalkit modules the file imports, lazy and TYPE_CHECKING ones too.

    ``from evalkit.a import b`` names the module ``evalkit.a.b`` when there is one, else ``evalkit.a`` (a name
    from the package's ``__init__``). A parent package that Python imports on the way is not counted: every
    module would then import ``evalkit/__init__.py``, and that imports the public API.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = _base(path, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    found.add(f"{base}.{alias.name}")
                elif base in modules:
                    found.add(base)
    found.discard(_module_name(path))
    return found


def _module_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _module_imports(path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The graph's strongly connected components of more than one module: each holds at least one circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the graph is a few hundred modules deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _circle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One circle through the component, as the path of imports that closes it."""
    start = min(component)
    trail = [start]
    seen = {start}
    while True:
        nxt = min(graph[trail[-1]] & component)  # every member of a component imports another member
        if nxt in seen:
            return [*trail[trail.index(nxt) :], nxt]
        trail.append(nxt)
        seen.add(nxt)


def test_no_import_cycle_between_modules() -> None:
    graph = _module_graph()
    new = [c for c in _cycles(graph) if frozenset(c) not in KNOWN_CYCLES]
    assert not new, "import cycles:\n" + "\n".join(" -> ".join(_circle(graph, c)) for c in new)


def test_known_cycles_are_still_there() -> None:
    """An allow-list entry that no longer matches is dead weight: remove it when its circle is gone."""
    cycles = {frozenset(c) for c in _cycles(_module_graph())}
    assert not KNOWN_CYCLES - cycles, f"gone from the code, remove from KNOWN_CYCLES: {KNOWN_CYCLES - cycles}"


def _private_uses(path: Path, modules: dict[str, Path], root: Path = PACKAGE) -> set[str]:
    """Private names of other evalkit modules the file uses: ``from evalkit.a import _x``, or ``a._x``
    where ``a`` names an evalkit module (``import evalkit.a as a``, ``from evalkit import a``)."""
    own = _module_name(path, root)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    bound: dict[str, str] = {}  # local name -> the evalkit module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    bound[alias.asname or alias.name.partition(".")[0]] = (
                        alias.name if alias.asname else alias.name.partition(".")[0]
                    )
        elif isinstance(node, ast.ImportFrom):
            base = _base(path, node, root)
            if not base.startswith("evalkit"):
                continue
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:  # a submodule (private ones are a package's own business)
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif alias.name.startswith("_") and not alias.name.startswith("__") and base != own:
                    found.add(f"{base}.{alias.name}")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
            continue
        chain: list[str] = []
        value: ast.expr = node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            owner = ".".join([bound[value.id], *reversed(chain)])
            if owner in modules and owner != own:  # an attribute of a class or object is not a module's name
                found.add(f"{owner}.{node.attr}")
    return found


def _private_imports() -> set[str]:
    modules = _modules()
    return {f"{name}: {used}" for name, path in modules.items() for used in _private_uses(path, modules)}


def test_no_module_uses_another_modules_private_names() -> None:
    """A name shared between modules is public where it is defined; a private one stays in its module."""
    new = sorted(_private_imports() - KNOWN_PRIVATE)
    assert not new, "private names used across modules (make them public, or move them where they are used):\n" + (
        "\n".join(new)
    )


def test_known_private_imports_are_still_there() -> None:
    gone = KNOWN_PRIVATE - _private_imports()
    assert not gone, f"gone from the code, remove from KNOWN_PRIVATE: {sorted(gone)}"


def test_the_private_name_check_sees_every_form(tmp_path: Path) -> None:
    """``from`` imports, relative ones, and attributes of an imported module are all seen; own names are not."""
    package = tmp_path / "evalkit"
    (package / "a").mkdir(parents=True)
    for name in ("__init__", "a/__init__", "a/b", "a/_impl"):
        (package / f"{name}.py").write_text("")
    (package / "a" / "c.py").write_text(
        "from evalkit.a.b import _x, y\n"
        "from .b import _z\n"
        "from . import _impl\n"  # a private module of its own package: allowed
        "import evalkit.a.b as m\n"
        "from evalkit.a import b\n"
        "import evalkit.a.b\n"
        "m._p; b._q; evalkit.a.b._r; b.Thing._s; _own\n"
    )
    modules = {
        "evalkit": package / "__init__.py",
        "evalkit.a": package / "a" / "__init__.py",
        "evalkit.a.b": package / "a" / "b.py",
        "evalkit.a._impl": package / "a" / "_impl.py",
        "evalkit.a.c": package / "a" / "c.py",
    }
    used = _private_uses(package / "a" / "c.py", modules, package)
    assert used == {f"evalkit.a.b.{name}" for name in ("_x", "_z", "_p", "_q", "_r")}


def test_the_cycle_check_reports_the_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"d"}}  # d and e lead into the circle only
    (component,) = _cycles(graph)
    assert component == {"a", "b", "c"}
    assert _circle(graph, component) == ["a", "b", "c", "a"]


def test_no_module_exceeds_the_line_limit() -> None:
    long = {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    wrong = [
        f"{name}: {lines} lines (at most {KNOWN_LONG.get(name, MAX_LINES)}); split it along its jobs"
        for name, lines in long.items()
        if lines > KNOWN_LONG.get(name, MAX_LINES)
    ]
    assert not wrong, "\n".join(wrong)

"""What each metric is, without importing it: name, aliases, direction, CI method, whether it needs a judge.

Listing and report rendering must stay fast, so they read this instead of
importing the metric modules (numpy, sacrebleu). Plugins' metrics can only be
known by importing, so the imported registry is used when plugins are installed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

_METRIC_DEFAULTS = {"higher_is_better": True, "ci_method": "normal", "needs_judge": False}


@dataclass(frozen=True)
class MetricInfo:
    name: str
    aliases: tuple[str, ...] = ()
    higher_is_better: bool = True
    ci_method: str = "normal"
    needs_judge: bool = False
    doc: str = ""
    module: str = ""

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""


@dataclass
class _ClassInfo:
    name: str
    module: str
    bases: list[str]
    attrs: dict[str, Any]
    doc: str
    registered: list[tuple[str, ...]] = field(default_factory=list)


def _register_names(decorator: ast.expr) -> tuple[str, ...] | None:
    """("name", "alias", ...) for ``@METRICS.register("name", "alias")``, else None."""
    if not isinstance(decorator, ast.Call):
        return None
    func = decorator.func
    if not (isinstance(func, ast.Attribute) and func.attr == "register" and isinstance(func.value, ast.Name) and func.value.id == "METRICS"):
        return None
    names = tuple(a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return names or None


def _scan_module(path: Path, module: str) -> tuple[dict[str, _ClassInfo], dict[str, tuple[str, str]]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    classes: dict[str, _ClassInfo] = {}
    imports: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.ClassDef):
            attrs: dict[str, Any] = {}
            for stmt in node.body:
                target, value = None, None
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    target, value = stmt.targets[0].id, stmt.value
                elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                    target, value = stmt.target.id, stmt.value
                if target in _METRIC_DEFAULTS and isinstance(value, ast.Constant):
                    attrs[target] = value.value
            bases = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases]
            info = _ClassInfo(node.name, module, bases, attrs, ast.get_docstring(node) or "")
            info.registered = [n for n in (_register_names(d) for d in node.decorator_list) if n]
            classes[node.name] = info
    return classes, imports


@lru_cache(maxsize=1)
def _static_metrics() -> dict[str, MetricInfo]:
    package = Path(__file__).resolve().parent
    modules: dict[str, tuple[dict[str, _ClassInfo], dict[str, tuple[str, str]]]] = {}
    for path in sorted(package.glob("*.py")):
        modules[f"evalkit.metrics.{path.stem}"] = _scan_module(path, f"evalkit.metrics.{path.stem}")

    def attribute(cls: _ClassInfo, key: str, depth: int = 0) -> Any:
        if key in cls.attrs:
            return cls.attrs[key]
        if depth > 20:
            return _METRIC_DEFAULTS[key]
        classes, imports = modules[cls.module]
        for base in cls.bases:
            parent = classes.get(base)
            if parent is None and base in imports:
                mod, name = imports[base]
                parent = modules.get(mod, ({}, {}))[0].get(name)
            if parent is not None:
                value = attribute(parent, key, depth + 1)
                if value is not _MISSING:
                    return value
        return _METRIC_DEFAULTS[key] if depth == 0 else _MISSING

    out: dict[str, MetricInfo] = {}
    for module, (classes, _) in modules.items():
        for cls in classes.values():
            for names in cls.registered:
                values = {key: attribute(cls, key) for key in _METRIC_DEFAULTS}
                out[names[0]] = MetricInfo(names[0], tuple(sorted(names[1:])), bool(values["higher_is_better"]), str(values["ci_method"]), bool(values["needs_judge"]), cls.doc, module)
    return out


_MISSING = object()


def _plugins_installed() -> bool:
    from importlib.metadata import entry_points

    return bool(list(entry_points(group="evalkit.plugins")))


def _imported_metrics() -> dict[str, MetricInfo]:
    import inspect

    from evalkit.metrics import METRICS

    aliases: dict[str, list[str]] = {}
    for name in METRICS.names(include_aliases=True):
        canonical = METRICS.canonical(name)
        if canonical != name:
            aliases.setdefault(canonical, []).append(name)
    out = {}
    for name, cls in METRICS.items():
        out[name] = MetricInfo(
            name, tuple(sorted(aliases.get(name, []))), bool(cls.higher_is_better), str(cls.ci_method), bool(cls.needs_judge), inspect.cleandoc(cls.__doc__ or ""), cls.__module__
        )
    return out


def metric_infos(*, imported: bool = False) -> dict[str, MetricInfo]:
    """Every registered metric by canonical name; static unless plugins (or ``imported``) need the registry."""
    if imported or _plugins_installed():
        return _imported_metrics()
    return dict(_static_metrics())


def canonical_metric(name: str, infos: dict[str, MetricInfo]) -> str:
    for info in infos.values():
        if name == info.name or name in info.aliases:
            return info.name
    return name

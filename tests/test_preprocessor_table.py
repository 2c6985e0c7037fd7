"""The built-in preprocessors' table says what their modules register, and a lookup imports one module."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

from evalkit.prompts.preprocessor_table import BUILTIN_PREPROCESSORS, PREPROCESSOR_MODULES
from evalkit.prompts.preprocessors import PREPROCESSORS

ROOT = Path(__file__).resolve().parent.parent


def test_every_registered_preprocessor_is_in_the_table_as_registered() -> None:
    for module in PREPROCESSOR_MODULES:
        importlib.import_module(module)
    # a decorator registering what the table lacks lands among the registered items (as a plugin's would)
    assert _own_names() == []
    for name, aliases, target in BUILTIN_PREPROCESSORS:
        cls = PREPROCESSORS.get(name)
        assert f"{cls.__module__}:{cls.__qualname__}" == target
        assert PREPROCESSORS.aliases(name) == tuple(sorted(aliases))


def _own_names() -> list[str]:
    """Classes defined in the built-in modules that a decorator registered outside the table."""
    names = []
    for name, cls in PREPROCESSORS.registered_items():
        if cls.__module__ in PREPROCESSOR_MODULES:
            names.append(name)
    return names


def test_the_table_names_every_decorated_class_of_its_modules() -> None:
    """Each ``@PREPROCESSORS.register`` in a built-in module names a table entry (found in the source)."""
    import ast

    registered = set()
    for module in PREPROCESSOR_MODULES:
        path = ROOT / (module.replace(".", "/") + ".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for decorator in node.decorator_list:
                    if (
                        isinstance(decorator, ast.Call)
                        and isinstance(decorator.func, ast.Attribute)
                        and decorator.func.attr == "register"
                        and isinstance(decorator.func.value, ast.Name)
                        and decorator.func.value.id == "PREPROCESSORS"
                    ):
                        args = [a.value for a in decorator.args if isinstance(a, ast.Constant)]
                        registered.add((args[0], tuple(args[1:]), f"{module}:{node.name}"))
    assert registered == set(BUILTIN_PREPROCESSORS)


def test_looking_up_one_preprocessor_imports_only_its_family() -> None:
    code = (
        "import json, sys\n"
        "from evalkit.prompts.preprocessors import PREPROCESSORS\n"
        "PREPROCESSORS.get('auharness')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('evalkit.prompts.'))))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    imported = set(json.loads(out))
    assert "evalkit.prompts.auharness.general" in imported
    assert not imported & {
        "evalkit.prompts.karma.sets",
        "evalkit.prompts.chef.questions",
        "evalkit.prompts.auharness.bfcl",
    }

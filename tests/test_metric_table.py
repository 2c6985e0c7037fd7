"""The static metric table is the truth about built-in metrics; classes, registry and listings agree with it."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
import types
from pathlib import Path

import pytest

from evalkit.errors import ConfigError
from evalkit.metrics import METRICS, Metric
from evalkit.metrics.table import BUILTIN_METRICS, MetricInfo, metric_infos
from evalkit.registry import Registry

METRICS_DIR = Path(__file__).resolve().parent.parent / "evalkit" / "metrics"
#: the peers whose exact computations have a folder of their own, by the project their references name
PEER_FOLDERS = {
    "ServiceNow/AU-Harness": "auharness",
    "eka-care/KARMA-OpenMedEvalKit": "karma",
    "OpenGVLab/LAMM": "chef",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(METRICS_DIR.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("info", BUILTIN_METRICS, ids=lambda i: i.name)
def test_each_row_matches_its_class(info) -> None:
    module, _, attribute = info.target.partition(":")
    cls = getattr(importlib.import_module(module), attribute)
    assert issubclass(cls, Metric) and not inspect.isabstract(cls)
    assert (cls.name, cls.higher_is_better, cls.ci_method, cls.needs_judge) == (
        info.name,
        info.higher_is_better,
        info.ci_method,
        info.needs_judge,
    )
    assert inspect.cleandoc(cls.__doc__ or "").splitlines()[0] == info.summary
    assert METRICS.get(info.name) is cls
    assert all(METRICS.get(alias) is cls and METRICS.canonical(alias) == info.name for alias in info.aliases)


def test_every_concrete_metric_class_has_a_row() -> None:
    """A class added to evalkit/metrics without a row would be unreachable by name."""
    in_table = {i.target for i in BUILTIN_METRICS}
    found = set()
    for path in sorted(METRICS_DIR.rglob("*.py")):
        module = importlib.import_module(_module_name(path))
        for name, obj in vars(module).items():
            # list[...] aliases count as classes for inspect on Python 3.10, and issubclass refuses them
            is_class = inspect.isclass(obj) and not isinstance(obj, types.GenericAlias)
            concrete = is_class and issubclass(obj, Metric) and not inspect.isabstract(obj)
            if concrete and obj.__module__ == module.__name__ and not name.startswith("_") and obj.name:
                found.add(f"{module.__name__}:{name}")
    assert found == in_table


def test_names_and_aliases_are_written_once() -> None:
    """No metric module registers itself any more: the table is the only place a built-in name appears."""
    for path in METRICS_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "register":
                pytest.fail(f"{path.name}:{node.lineno} registers a metric by decorator")
    names = [n for i in BUILTIN_METRICS for n in (i.name, *i.aliases)]
    assert len(names) == len(set(names))


def test_the_infos_are_the_table_plus_the_decorated_metrics_and_names_resolve_through_the_registry() -> None:
    infos = metric_infos()
    table = {info.name: info for info in BUILTIN_METRICS}
    decorated = {name for name, _ in METRICS.registered_items()}  # other test modules register some on import
    assert infos.keys() == table.keys() | decorated and all(infos[name] == info for name, info in table.items())
    assert METRICS.canonical("wer") == "word_error_rate" and METRICS.canonical("no_such_metric") == "no_such_metric"
    assert {n for i in BUILTIN_METRICS for n in (i.name, *i.aliases)} <= set(METRICS.names())


def test_resolving_names_and_listing_infos_import_no_metric_module() -> None:
    code = (
        "import sys\n"
        "from evalkit.metrics import METRICS\n"
        "from evalkit.metrics.table import metric_infos\n"
        "assert METRICS.canonical('em') == 'exact_match' and 'bleu' in metric_infos() and 'sacrebleu' in METRICS\n"
        "print(sorted(m for m in sys.modules if m.startswith('evalkit.metrics.') or m == 'numpy'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # the table and the metric interface: no metric module, no numpy, and no reference table until one is asked for
    assert eval(out) == [
        "evalkit.metrics.base",
        "evalkit.metrics.references",
        "evalkit.metrics.references.reference",
        "evalkit.metrics.table",
    ]


@pytest.fixture()
def restored_metrics(monkeypatch: pytest.MonkeyPatch) -> Registry[type[Metric]]:
    """The process-wide registry, with whatever a test registers forgotten afterwards."""
    monkeypatch.setattr(METRICS, "_items", dict(METRICS._items))
    monkeypatch.setattr(METRICS, "_aliases", dict(METRICS._aliases))
    return METRICS


def test_a_plugin_registered_with_the_decorator_is_in_the_registry_and_the_infos(
    restored_metrics: Registry[type[Metric]],
) -> None:
    from evalkit.plugin import METRICS as PLUGIN_METRICS
    from evalkit.plugin import Sample, SampleScore

    assert PLUGIN_METRICS is restored_metrics

    @PLUGIN_METRICS.register("answer_length", "length", "len")
    class AnswerLength(Metric):
        """Words in the answer; shorter is better.

        (A second paragraph the one-line summary leaves out.)
        """

        higher_is_better = False

        def score(self, prediction: str, sample: Sample) -> SampleScore:
            words = float(len(prediction.split()))
            return SampleScore(words, (words, 1.0))

    assert restored_metrics.get("length") is AnswerLength and restored_metrics.canonical("len") == "answer_length"
    assert "answer_length" in restored_metrics.names()
    assert restored_metrics.aliases("answer_length") == ("len", "length")
    infos = metric_infos()
    assert infos["answer_length"] == MetricInfo(
        "answer_length",
        f"{__name__}:{AnswerLength.__qualname__}",
        ("len", "length"),
        higher_is_better=False,
        ci_method="normal",
        needs_judge=False,
        summary="Words in the answer; shorter is better.",
    )
    assert all(infos[info.name] == info for info in BUILTIN_METRICS)
    with pytest.raises(ValueError, match="registered twice"):
        restored_metrics.register("bleu")(AnswerLength)
    with pytest.raises(ValueError, match="already taken"):
        restored_metrics.register("other_length", "wer")(AnswerLength)
    assert "other_length" not in restored_metrics  # a refused registration leaves nothing behind
    with pytest.raises(ValueError, match="already an alias of 'word_error_rate'"):
        restored_metrics.register("wer")(AnswerLength)
    assert restored_metrics.register("answer_length", "length")(AnswerLength) is AnswerLength  # a module imported twice


def test_looking_up_one_metric_imports_only_its_module() -> None:
    code = (
        "import sys\n"
        "from evalkit.metrics import METRICS\n"
        "METRICS.get('em')\n"
        "print(sorted(m for m in sys.modules if m.startswith('evalkit.metrics.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(eval(out))
    assert "evalkit.metrics.text.exact_match" in loaded
    others = {"evalkit.metrics.text.bleu", "evalkit.metrics.speech.wer", "evalkit.metrics.judges.judge"}
    assert not loaded & others


def test_a_plugin_registers_with_the_decorator_and_cannot_take_a_builtin_name() -> None:
    registry: Registry[type] = Registry(
        "metric", lazy=[("builtin", ("b",), "evalkit.metrics.text.exact_match:ExactMatch")]
    )

    @registry.register("mine", "my_alias")
    class Mine:
        pass

    assert registry.get("my_alias") is Mine and registry.names() == ["b", "builtin", "mine", "my_alias"]
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("builtin")(Mine)
    with pytest.raises(ValueError, match="already taken"):
        registry.register("other", "b")(Mine)
    with pytest.raises(ConfigError, match='did you mean "mine"'):
        registry.get("mien")


@pytest.mark.parametrize("info", BUILTIN_METRICS, ids=lambda i: i.name)
def test_each_builtin_names_the_reference_it_equals(info) -> None:
    """Issue 29: every metric says which implementation its value equals, where, at which version, how checked."""
    ref = info.reference
    assert ref is not None, f"{info.name} has no entry in evalkit/metrics/references/"
    assert ref.project and ref.source and ref.version and ref.checked_by
    assert all(isinstance(d, str) and d for d in ref.differences)
    # the class or its module says so too, so a reader of the code meets the same name
    module, _, attribute = info.target.partition(":")
    mod = importlib.import_module(module)
    text = (mod.__doc__ or "") + (getattr(mod, attribute).__doc__ or "")
    if ref.project != "evalkit":
        key = ref.project.split("/")[-1].lower()
        assert key in text.lower(), f"{info.name}: its docstrings do not name {ref.project}"


def test_listing_shows_each_metrics_reference() -> None:
    from evalkit.cli.listing import Filters, metric_rows

    rows = {row["name"]: row for row in metric_rows(Filters())}
    assert rows["bleu"]["reference"].startswith("sacrebleu ")
    assert all(row["reference"] for row in rows.values())


@pytest.mark.parametrize("info", BUILTIN_METRICS, ids=lambda i: i.name)
def test_a_peers_computation_lives_in_the_peers_folder_and_evalkits_own_in_a_folder_by_kind(info) -> None:
    """Whose definition a metric follows (its reference's project) says its folder: a newcomer finds it by folder."""
    folder = info.module.split(".")[2]
    assert info.reference is not None
    expected = PEER_FOLDERS.get(info.reference.project)
    if expected:
        assert folder == expected, f"{info.name} follows {info.reference.project}: belongs in metrics/{expected}/"
    else:
        assert folder not in PEER_FOLDERS.values(), f"{info.name} is evalkit's own: belongs in a folder by kind"


def test_each_metric_has_one_reference_in_the_part_of_whose_definition_it_follows() -> None:
    from evalkit.metrics.references import PARTS, REFERENCES
    from evalkit.metrics.references.auharness import AUHARNESS_REFERENCES
    from evalkit.metrics.references.chef import CHEF_REFERENCES
    from evalkit.metrics.references.karma import KARMA_REFERENCES

    assert sum(len(part) for part in PARTS) == len(REFERENCES)  # no name in two parts
    by_peer = {"auharness": AUHARNESS_REFERENCES, "karma": KARMA_REFERENCES, "chef": CHEF_REFERENCES}
    for project, folder in PEER_FOLDERS.items():
        assert {n for n, r in REFERENCES.items() if r.project == project} == set(by_peer[folder])

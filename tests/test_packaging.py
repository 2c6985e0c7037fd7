"""The package as a user installs it: the wheel carries the catalogue, its data and the prompts; the
dependencies are what the code imports; a definition read twice is not a conflict.

The wheel test builds the wheel with pip (the same setuptools build as ``python -m build``), installs it
into a fresh virtual environment and runs ``evalkit`` from an empty folder, as a new user would. The
venv sees the test environment's packages (a ``.pth`` file) so no dependency is downloaded here;
``.ci/run`` does the same with a venv of its own that installs every dependency.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, installed_wheel

from evalkit.catalog import load_catalog
from evalkit.errors import RunspecError

# -- the wheel ------------------------------------------------------------------------------------------


def _clean_env() -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH pointing into a checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the freshly built wheel installed; returns its bin folder."""
    if shutil.which("git") is None:  # pragma: no cover - every CI machine has git
        pytest.skip("needs git to copy the working tree")
    return installed_wheel(tmp_path_factory.mktemp("wheel"))


def _evalkit(bin_dir: Path, args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "evalkit"), *args], cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=timeout
    )


def test_the_wheel_carries_the_catalogue_its_data_and_the_prompts(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run(
        [
            str(installed / "python"),
            "-c",
            "import evalkit, evalkit.catalog as c; print(evalkit.__file__, c.SHIPPED_RUNSPECS)",
        ],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    package_file, shipped = where.stdout.split()
    package = Path(package_file).parent
    assert Path(shipped) == package / "runspecs", "the installed evalkit must read its own packaged catalogue"
    assert not str(package).startswith(str(ROOT)), "the test must run the installed wheel, not the checkout"
    for name in (
        "assets/speech/espeak_en/data.parquet",
        "prompts/add_ons.yaml",
        "prompts/pools.yaml",
        "prompts/system_prompts.yaml",
        "prompts/judges/llm_judge_binary.yaml",
        "runspecs/_data/basic_qa.jsonl",
    ):
        assert (package / name).is_file(), f"the wheel lacks evalkit/{name}"

    listed = _evalkit(installed, ["list", "datasets", "--format", "json"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = {row["name"] for row in json.loads(listed.stdout)}
    assert names == set(load_catalog(cwd=tmp_path).entries()), "the installed catalogue differs from the checkout's"
    assert {"espeak_en_asr", "basic_qa", "librispeech_test_clean"} <= names


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_the_installed_package_validates_and_runs_the_default_config(installed: Path, tmp_path: Path) -> None:
    pytest.importorskip("pocketsphinx")
    for name in ("sample_config.yaml", "config.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    validated = _evalkit(installed, ["validate", "sample_config.yaml"], tmp_path)
    assert validated.returncode == 0, validated.stderr
    ran = _evalkit(installed, ["run", "config.yaml", "--num-samples", "3", "--quiet"], tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (results,) = (tmp_path / "runs").glob("*/results.json")
    rows = json.loads(results.read_text())["results"]
    assert {(r["dataset"], r["n"], r["n_failed"]) for r in rows} == {("espeak_en_asr", 3, 0)}


#: run in the installed venv: which of evalkit's modules had to be compiled from source on import
_COMPILED_FROM_SOURCE = """
import importlib.machinery, json, pathlib, sys
compiled = []
original = importlib.machinery.SourceFileLoader.source_to_code
def record(self, data, path, *args, **kwargs):
    compiled.append(str(path))
    return original(self, data, path, *args, **kwargs)
importlib.machinery.SourceFileLoader.source_to_code = record
import evalkit
package = pathlib.Path(evalkit.__file__).parent
sys.argv = ["evalkit", "run", "--help"]  # the command line's parser
import evalkit.cli.main, evalkit.api, evalkit.plan, evalkit.run.runner, evalkit.cli.listing
imported = sorted(m for m in sys.modules if m.startswith("evalkit"))
sources = sorted(str(p) for p in package.rglob("*.py"))
print(json.dumps({"compiled": [p for p in compiled if p.startswith(str(package))], "imported": imported,
                  "sources": sources, "cached": [importlib.util.cache_from_source(p) for p in sources]}))
"""


def test_the_installed_wheel_starts_from_compiled_bytecode(installed: Path, tmp_path: Path) -> None:
    """pip compiles a wheel's modules as it installs them: evalkit then starts without compiling its own source.

    Checked by compiling nothing in the venv's Python (PYTHONDONTWRITEBYTECODE, as on machines that set it) and
    watching the import system: a module whose bytecode is missing or stale would be compiled from source here.
    """
    env = {**_clean_env(), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    done = subprocess.run(
        [str(installed / "python"), "-c", _COMPILED_FROM_SOURCE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert len(seen["imported"]) > 50, "the check must import the modules a run needs"
    assert seen["compiled"] == [], "evalkit modules compiled from source at start: their bytecode is missing or stale"
    missing = [s for s, c in zip(seen["sources"], seen["cached"]) if not Path(c).is_file()]
    assert missing == [], "modules the installed wheel has no bytecode for"


def test_a_checkout_beside_an_installed_evalkit_is_no_conflict(installed: Path, tmp_path: Path) -> None:
    """The packaged catalogue and a checkout's runspecs/ hold the same definitions: read once, no error."""
    shutil.copytree(ROOT / "runspecs", tmp_path / "runspecs")
    listed = _evalkit(installed, ["list", "datasets", "--format", "json"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "espeak_en_asr" in {row["name"] for row in json.loads(listed.stdout)}


# -- no false conflicts ---------------------------------------------------------------------------------


def _write_runspec(root: Path, entry: dict[str, object], name: str = "my_asr") -> Path:
    folder = root / "speech_recognition"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "asr.json").write_text(json.dumps({"_task": {"metrics": ["word_error_rate"]}, name: entry}))
    return root


def test_the_same_definition_found_twice_is_read_once(tmp_path: Path) -> None:
    shipped = json.loads((ROOT / "runspecs" / "speech_recognition" / "asr.json").read_text())
    copy = _write_runspec(tmp_path / "mine", shipped["espeak_en_asr"], "espeak_en_asr")
    catalog = load_catalog([copy], cwd=tmp_path)
    assert catalog.tasks["asr"].datasets.count("espeak_en_asr") == 1
    assert catalog.datasets["espeak_en_asr"].file.startswith(str(catalog.roots[0]))


def test_a_different_definition_under_the_same_name_is_still_a_conflict(tmp_path: Path) -> None:
    shipped = json.loads((ROOT / "runspecs" / "speech_recognition" / "asr.json").read_text())
    changed = {**shipped["espeak_en_asr"], "split": "validation"}
    mine = _write_runspec(tmp_path / "mine", changed, "espeak_en_asr")
    with pytest.raises(RunspecError, match=r"dataset 'espeak_en_asr' is already defined differently in .*asr\.json"):
        load_catalog([mine], cwd=tmp_path)


def test_a_package_path_names_data_inside_an_installed_package(tmp_path: Path) -> None:
    entry = {"path": "pkg://evalkit/assets/speech/espeak_en/data.parquet", "language": "en", "audio_column": "audio"}
    spec = load_catalog([_write_runspec(tmp_path / "mine", entry)], cwd=tmp_path).datasets["my_asr"]
    assert Path(spec.source) == ROOT / "evalkit" / "assets" / "speech" / "espeak_en" / "data.parquet"
    bad = {**entry, "path": "pkg://no_such_package_here/x.parquet"}
    spec = load_catalog([_write_runspec(tmp_path / "bad", bad)], cwd=tmp_path).datasets["my_asr"]
    with pytest.raises(RunspecError, match="'no_such_package_here' is not an installed Python package"):
        _ = spec.source


# -- dependencies are what the code imports -------------------------------------------------------------

#: distribution name -> the top-level module it provides, where they differ
_MODULE_OF = {
    "pyyaml": "yaml",
    "whisper-normalizer": "whisper_normalizer",
    "pocketsphinx": "pocketsphinx",
    "pillow": "PIL",
    "indic-nlp-library": "indicnlp",
    "scikit-learn": "sklearn",
}


def _top_level_imports(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def _modules(requirements: list[str]) -> set[str]:
    names = {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].strip().lower() for r in requirements}
    return {_MODULE_OF.get(n, n.replace("-", "_")) for n in names}


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_every_main_dependency_is_imported_by_the_package_and_test_only_ones_are_not() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    main = _modules(project["dependencies"])
    package_imports = _top_level_imports(ROOT / "evalkit")
    test_imports = _top_level_imports(ROOT / "tests")
    assert main <= package_imports, f"declared but never imported by evalkit: {sorted(main - package_imports)}"
    extras = project["optional-dependencies"]
    # a package extra the tests also need (e.g. indic) is imported by evalkit on use: not test-only
    package_extras = set().union(*(_modules(v) for k, v in extras.items() if k not in ("test", "lint")))
    test_only = _modules(extras["test"]) - main - package_extras
    for module in test_only - {"pytest", "pocketsphinx"}:
        assert module not in package_imports, f"{module} is a test dependency but evalkit imports it"
        assert module in test_imports, f"{module} is in the test extra but no test imports it"
    assert "sniffio" not in package_imports | main


def test_a_revision_pins_only_a_hub_dataset(tmp_path: Path) -> None:
    hub = {"hf_repo": "acme/tiny_asr", "revision": "v1.0", "language": "en", "audio_column": "audio"}
    assert load_catalog([_write_runspec(tmp_path / "hub", hub)], cwd=tmp_path).datasets["my_asr"].revision == "v1.0"
    local = {"path": "x.parquet", "revision": "v1.0", "language": "en"}
    with pytest.raises(RunspecError, match="my_asr: `revision` pins a hub dataset: it needs `hf_repo`"):
        load_catalog([_write_runspec(tmp_path / "local", local)], cwd=tmp_path)

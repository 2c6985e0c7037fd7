"""`evalkit init` driven in a real pseudo-terminal (pexpect), as a person would answer it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import yaml
from helpers import ROOT


def _spawn(cwd: Path) -> pexpect.spawn:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "dumb"}
    return pexpect.spawn(sys.executable, ["-m", "evalkit", "init"], cwd=str(cwd), env=env, encoding="utf-8", timeout=60)


def test_init_asks_checks_each_answer_and_writes_a_config_that_validates(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("# mine\n")
    child = _spawn(tmp_path)
    child.expect("Datasets, tasks or categories")
    child.sendline("librispeeh_test_clean, basic_qa")
    child.expect('did you mean "librispeech_test_clean"')  # a typo is caught at once, and asked again
    child.expect("Datasets, tasks or categories")
    child.sendline("librispeech_test_clean, basic_qa")
    child.expect(r"Metric for librispeech_test_clean \(fitting: .*word_error_rate.*\) \[word_error_rate\]")
    child.sendline("bleu")
    child.expect("does not fit librispeech_test_clean")
    child.expect("Metric for librispeech_test_clean")
    child.sendline("")  # the task's default
    child.expect(r"Metric for basic_qa .*\[exact_match\]")
    child.sendline("f1")
    child.expect(r"Model name .*\[my-model\]")
    child.sendline("qwen2-audio")
    child.expect(r"Inference type .*\[vllm\]")
    child.sendline("")
    child.expect(r"Endpoint base URL \[http://127.0.0.1:8000/v1\]")
    child.sendline("http://10.0.0.5:8000/v1")
    child.expect(r"Model id the endpoint serves \[qwen2-audio\]")
    child.sendline("Qwen/Qwen2-Audio-7B-Instruct")
    child.expect("Environment variable holding the API key")
    child.sendline("MY_KEY")
    child.expect("Samples per dataset")
    child.sendline("50")
    child.expect(r"config.yaml exists; overwrite it\? \(y/N\)")
    child.sendline("")  # no: the user's file is kept
    child.expect(r"Write the config to \[config.new.yaml\]")
    child.sendline("")
    child.expect("wrote config.new.yaml: 2 dataset-metric pairs x 1 model")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (tmp_path / "config.yaml").read_text() == "# mine\n"
    written = yaml.safe_load((tmp_path / "config.new.yaml").read_text())
    assert written["dataset_metric"] == [["librispeech_test_clean", "word_error_rate"], ["basic_qa", "f1"]]
    info = written["models"][0]["info"]
    assert info == {
        "name": "qwen2-audio",
        "inference_type": "vllm",
        "url": "http://10.0.0.5:8000/v1",
        "model": "Qwen/Qwen2-Audio-7B-Instruct",
        "auth_token": "${MY_KEY}",
    }
    assert written["filters"] == {"num_samples": 50}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MY_KEY": "k"}
    validated = subprocess.run(
        [sys.executable, "-m", "evalkit", "validate", "config.new.yaml"], cwd=tmp_path, env=env, capture_output=True
    )
    assert validated.returncode == 0, validated.stderr


def test_init_without_a_terminal_to_answer_is_a_clear_error(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "init"], cwd=tmp_path, env=env, input="", capture_output=True, text=True
    )
    assert proc.returncode == 2 and "run it in a terminal" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "config.yaml").exists()

"""evalkit serve's torch thread count: ``--threads auto`` measures one thread against torch's default."""

from __future__ import annotations

import importlib.util
import threading
import time
from typing import Any

import pytest

if any(importlib.util.find_spec(name) is None for name in ("torch", "transformers", "tokenizers")):
    pytest.skip("needs torch, transformers and tokenizers (bash .ci/install_vllm.sh)", allow_module_level=True)

import torch

from evalkit.serve.backends import transformers_backend
from evalkit.serve.backends.transformers_backend import TransformersBackend
from evalkit.serve.cli import main as serve_main


@pytest.fixture()
def backend(tiny_llama: Any) -> Any:
    made = TransformersBackend(tiny_llama)
    before = torch.get_num_threads()
    yield made
    made.close()
    torch.set_num_threads(before)


def _timed_by_threads(one: float, many: float, calls: list[int]) -> Any:
    """A sample batch that takes ``one`` s on one thread and ``many`` s on more (and notes each call's count)."""

    def run() -> None:
        calls.append(torch.get_num_threads())
        time.sleep(one if torch.get_num_threads() == 1 else many)

    return lambda: run


@pytest.mark.parametrize(
    ("one", "many", "expected"),
    [(0.002, 0.020, 1), (0.020, 0.002, "default"), (0.010, 0.010, 1), (0.012, 0.010, 1), (0.016, 0.010, "default")],
    ids=["one-thread-faster", "threads-pay", "tie-goes-to-one", "1.2x-is-not-enough", "1.6x-pays"],
)
def test_auto_keeps_many_threads_only_when_they_pay_for_their_cores(
    backend: Any, monkeypatch: pytest.MonkeyPatch, one: float, many: float, expected: Any
) -> None:
    monkeypatch.setattr(transformers_backend, "_DEFAULT_THREADS", 4)
    calls: list[int] = []
    monkeypatch.setattr(backend, "_sample_batch", _timed_by_threads(one, many, calls))
    chosen = backend.choose_threads()
    want = 4 if expected == "default" else 1
    assert chosen == want and torch.get_num_threads() == want
    assert sorted(set(calls)) == [1, 4] and len(calls) == 8  # a warm-up and three timed runs of each, alternating
    assert calls[:4] == [4, 1, 4, 1]
    note = backend.runtime()["threads"]
    assert note.startswith(f"{want} (auto: a batch of {backend.max_batch_size} took ") and "on 1 thread" in note


def test_auto_on_a_one_core_machine_measures_nothing(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transformers_backend, "_DEFAULT_THREADS", 1)
    monkeypatch.setattr(backend, "_sample_batch", lambda: pytest.fail("nothing to choose between"))
    assert backend.choose_threads() == 1


def test_the_real_sample_batch_answers_for_each_chat_kind(backend: Any) -> None:
    answers = backend._sample_batch()()
    assert len(answers) == backend.max_batch_size and all(isinstance(a, str) for a in answers)


def test_threads_auto_at_load_reports_its_choice(tiny_llama: Any) -> None:
    before = torch.get_num_threads()
    try:
        made = TransformersBackend(tiny_llama, threads="auto")
        note = made.runtime()["threads"]
        if transformers_backend._DEFAULT_THREADS > 1:
            assert "(auto: a batch of" in note and int(note.split()[0]) in (1, transformers_backend._DEFAULT_THREADS)
        made.close()
        made = TransformersBackend(tiny_llama, threads=1)
        assert made.runtime()["threads"] == "1" and torch.get_num_threads() == 1
        made.close()
    finally:
        torch.set_num_threads(before)


def test_generate_uses_the_chosen_count_on_a_thread_that_had_another(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenMP's thread count is per thread: a model thread that ran torch work before keeps its own count."""
    from evalkit.serve.backends.base import ChatInput, GenerationParams

    seen: list[int] = []
    generate = backend.model.generate

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(torch.get_num_threads())
        return generate(*args, **kwargs)

    monkeypatch.setattr(backend.model, "generate", spy)
    prepared = backend.prepare_chat([ChatInput([{"role": "user", "content": "hello"}], GenerationParams(max_tokens=2))])
    chunk = prepared.chunks[0]
    out: list[int] = []

    def model_thread() -> None:
        torch.set_num_threads(3)  # this thread's own count, as a thread that ran torch work keeps it
        backend.threads = 1
        backend.generate_chat_chunk(chunk.encoded, chunk.params, 2)
        out.append(torch.get_num_threads())

    worker = threading.Thread(target=model_thread)
    worker.start()
    worker.join()
    assert seen == [1] and out == [1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "transformers", "--threads", "many"], "got 'many'"),
        (["--backend", "transformers", "--threads", "-1"], "got '-1'"),
    ],
)
def test_thread_and_process_options_are_checked_before_loading(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tiny_llama: Any
) -> None:
    if args[1] == "transformers":
        args = [*args, "--model", str(tiny_llama)]
    assert serve_main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1

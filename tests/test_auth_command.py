"""Short-lived bearer tokens from a model's ``auth_command`` (Gemini on Vertex AI, Azure AD), against real servers.

The test server answers only the token it was started with (``require_auth``); the command is a small Python
program, standing in for ``gcloud auth application-default print-access-token``. The token must reach the
requests, never the run's files or log; a failing command stops the run naming the model and the command's
error (never what it printed); a renewed token reaches new requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, live_group_members, model_entry, run, text_set

from evalkit.clients import token_command
from evalkit.clients.endpoint import EndpointPool
from evalkit.clients.model_client import ModelClient, RetryPolicy
from evalkit.clients.protocol import EndpointProtocol
from evalkit.clients.request import ModelRequest
from evalkit.clients.token_command import command_token, keep_fresh
from evalkit.config import ModelInfo, RequestKind
from evalkit.config.models import RUNS_A_PROGRAM
from evalkit.errors import UserError

TOKEN = "ya29.short-lived-token-0123456789"


def _printing(text: str, status: int = 0, stderr: str = "") -> list[str]:
    code = f"import sys; print({text!r}); sys.stderr.write({stderr!r}); sys.exit({status})"
    return [sys.executable, "-c", code]


def test_the_commands_token_reaches_the_requests_and_no_file_of_the_run(tmp_path: Path, make_server: Any) -> None:
    server = make_server({"require_auth": TOKEN}, request_log=True)
    entry = model_entry("m", server.base_url, auth_command=_printing(TOKEN))
    config = config_for(tmp_path, text_set(tmp_path, 3), [entry])
    outcome = run(config)
    (row,) = outcome.rows
    assert row.error is None and row.n == 3 and row.n_failed == 0
    assert all(e.get("status", 200) == 200 for e in server.log_events("completed"))
    for path in outcome.run_dir.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), f"the token was written to {path}"


def test_a_failing_command_stops_the_run_naming_the_model_and_its_error_not_its_output(tmp_path: Path) -> None:
    # what it prints is made at run time, so only its output (never the command line) could carry it
    code = (
        "import sys; print('partial' + '-secret-output'); "
        "sys.stderr.write('ERROR: (gcloud.auth) not logged in'); sys.exit(1)"
    )
    command = [sys.executable, "-c", code]
    entry = model_entry("m", "http://127.0.0.1:9/v1", auth_command=command)
    config = config_for(tmp_path, text_set(tmp_path, 2), [entry])
    with pytest.raises(UserError, match=r"models: m: auth_command .* printed exit status 1 \(ERROR: \(gcloud.auth\) "
                       r"not logged in\)") as error:  # fmt: skip
        run(config)
    assert "partial-secret-output" not in str(error.value)
    with pytest.raises(UserError, match="'no-such-token-tool' is not installed or not on PATH"):
        command_token(["no-such-token-tool", "print-token"], "models: m")
    with pytest.raises(UserError, match="printed no token"):
        command_token(_printing(""), "models: m")


def test_a_fixed_key_and_a_command_are_not_both_given() -> None:
    base = {"name": "m", "model": "m", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1"}
    with pytest.raises(ValueError, match="give `auth_token` .* or `auth_command`"):
        ModelInfo.model_validate({**base, "auth_token": "k", "auth_command": ["gcloud"]})
    with pytest.raises(ValueError, match="non-empty list of words"):
        ModelInfo.model_validate({**base, "auth_command": []})
    assert ModelInfo.model_validate({**base, "auth_command": ["gcloud", "x"]}).auth_refresh_s == 2700.0


def _request(i: int) -> ModelRequest:
    return ModelRequest(kind=RequestKind.CHAT, model="m", messages=[{"role": "user", "content": f"question {i}"}])


def test_a_renewed_token_reaches_new_requests(make_server: Any) -> None:
    server = make_server({"require_auth": "token-2"})

    async def scenario() -> tuple[Any, Any]:
        protocol = EndpointProtocol(base_url=server.base_url, kind=RequestKind.CHAT, auth_token="token-1")
        client = ModelClient("m", [(EndpointPool(protocol, 2, timeout=5.0), 2)], RetryPolicy(retry_attempts=0))
        try:
            before = await client.submit(_request(0), use_store=False)
            client.use_token("token-2")
            after = await client.submit(_request(1), use_store=False)
            return before, after
        finally:
            await client.close()

    before, after = asyncio.run(scenario())
    assert not before.ok and before.status == 401 and "token-1" not in str(before.error)
    assert after.ok


def test_tokens_are_asked_for_again_and_a_failed_refresh_keeps_the_current_one(tmp_path: Path, caplog) -> None:
    counter = tmp_path / "count"
    counter.write_text("0")
    code = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); n = int(p.read_text()) + 1; p.write_text(str(n)); "
        "sys.exit(3) if n == 2 else print(f'token-{n}')"
    )
    command = [sys.executable, "-c", code, str(counter)]
    given: list[str] = []

    async def scenario() -> None:
        task = asyncio.create_task(keep_fresh(command, 0.05, "models: m", given.append, retry_after=0.05))
        for _ in range(200):
            await asyncio.sleep(0.05)
            if len(given) >= 2:
                break
        task.cancel()

    asyncio.run(scenario())
    assert given[:2] == ["token-1", "token-3"]  # the second run failed: logged, tried again, the next one taken
    assert "auth_command" in caplog.text and "the current token is kept" in caplog.text


def test_a_dry_run_neither_runs_the_command_nor_probes_without_its_token(tmp_path: Path) -> None:
    from helpers import evalkit_cli

    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x'); print('tok')"]
    entry = model_entry("m", "http://127.0.0.1:9/v1", auth_command=command)
    config = config_for(tmp_path, text_set(tmp_path, 2), [entry])
    done = evalkit_cli(["run", str(config), "--dry-run"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "token from auth_command: not asked for in a dry run" in done.stdout + done.stderr
    assert not marker.exists()


@pytest.mark.parametrize("key", sorted(RUNS_A_PROGRAM))
def test_a_flag_string_cannot_name_a_program_to_run(
    tmp_path: Path, make_server: Any, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    """``--model-args`` is text a user may paste from elsewhere: a key that runs a program is refused, unrun."""
    from evalkit.cli.main import main

    server = make_server()
    marker = tmp_path / "ran"
    program = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x'); print('tok-0123456789')"]
    value: Any = program if key == "auth_command" else {"backend": "pocketsphinx", "args": program}
    config = config_for(tmp_path, text_set(tmp_path, 2), [model_entry("m", server.base_url)])
    assert main(["run", str(config), "--model-args", json.dumps({key: value})]) == 2
    err = capsys.readouterr().err
    assert f"--model-args: {key!r} cannot be set here" in err and "Traceback" not in err
    assert not marker.exists() and server.stats()["requests"] == 0


# -- the command is someone else's program: bounded in size, shape and time, and ended with all its children ------


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("sys.stdout.write('A' * 100_000_000)", "printed more than 64 KiB; one token was expected"),
        ("sys.stdout.write('B' * 20_000)", "printed no token of a token's shape"),
        ("print('ya29.' + 'first-line'); print('second-line')", "printed no token of a token's shape"),
        ("print('tök€n-with-non-ascii')", "printed no token of a token's shape"),
        ("print('tok\\x1b[2Jen-0123')", "printed no token of a token's shape"),
        ("print('abc')", "printed no token of a token's shape"),
    ],
)
def test_output_that_is_no_token_is_refused_without_quoting_it(tmp_path: Path, code: str, message: str) -> None:
    """A 100 MB output was once taken as a token and compiled into every mask (3.65 GB after 2 minutes)."""
    command = [sys.executable, "-c", f"import sys; {code}"]
    with pytest.raises(UserError, match=re.escape(message)) as error:
        command_token(command, "models: m")
    assert len(str(error.value)) < 1000 and "ya29.first-line" not in str(error.value)
    # and a run stops there, before any request, exit 2 naming the model
    entry = model_entry("m", "http://127.0.0.1:9/v1", auth_command=command)
    config = config_for(tmp_path, text_set(tmp_path, 2), [entry])
    with pytest.raises(UserError, match=rf"models: m: auth_command .*{re.escape(message)}"):
        run(config)


def test_a_child_holding_the_output_open_neither_holds_up_the_run_nor_outlives_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command prints its token and exits, leaving a child that keeps standard output open: the token is
    taken at once (well within the timeout) and the child, in the command's process group, is ended."""
    monkeypatch.setattr(token_command, "COMMAND_TIMEOUT_S", 20.0)
    group_file = tmp_path / "group"
    code = (
        "import os, subprocess, sys; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
        f"open({str(group_file)!r}, 'w').write(str(os.getpgid(0))); print({TOKEN!r})"
    )
    assert command_token([sys.executable, "-c", code], "models: m") == TOKEN
    group = int(group_file.read_text())
    assert live_group_members(group) == []


def test_a_command_past_its_timeout_is_ended_with_its_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_command, "COMMAND_TIMEOUT_S", 1.0)
    group_file = tmp_path / "group"
    code = (
        "import os, subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
        f"open({str(group_file)!r}, 'w').write(str(os.getpgid(0))); sys.stdout.flush(); time.sleep(300)"
    )
    with pytest.raises(UserError, match="gave no token within 1 s"):
        command_token([sys.executable, "-c", code], "models: m")
    assert live_group_members(int(group_file.read_text())) == []


def test_a_failing_commands_error_is_quoted_masked_of_what_it_printed() -> None:
    # the token is made at run time: only the command's output (never its command line) could carry it
    code = (
        "import base64, sys; t = 'ya29.' + 'printed-then-refused-42'; print(t); "
        "sys.stderr.write(f'ERROR: token {t} (base64 {base64.b64encode(t.encode()).decode()}) refused\\n'); "
        "sys.exit(1)"
    )
    with pytest.raises(UserError, match=r"printed exit status 1 \(ERROR: token \*\*\* \(base64 \*\*\*=*\) refused\)"):
        command_token([sys.executable, "-c", code], "models: m")


def test_a_refresh_cancelled_while_the_command_runs_ends_the_command(tmp_path: Path) -> None:
    started = tmp_path / "group"
    code = f"import os, time; open({str(started)!r}, 'w').write(str(os.getpgid(0))); time.sleep(300)"

    async def scenario() -> None:
        task = asyncio.create_task(keep_fresh([sys.executable, "-c", code], 0.01, "models: m", print))
        for _ in range(600):
            await asyncio.sleep(0.05)
            if started.exists() and started.read_text():
                break
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(scenario())  # returns: the loop's worker thread was not left waiting on the command
    assert live_group_members(int(started.read_text())) == []


def test_an_interrupted_run_ends_the_token_command_it_waits_for(tmp_path: Path) -> None:
    """The command runs in its own process group, which a Ctrl-C at the terminal does not reach: evalkit ends it."""
    import os
    import signal
    import subprocess

    from helpers import ROOT

    group_file = tmp_path / "group"
    code = f"import os, time; open({str(group_file)!r}, 'w').write(str(os.getpgid(0))); time.sleep(300)"
    entry = model_entry("m", "http://127.0.0.1:9/v1", auth_command=[sys.executable, "-c", code])
    config = config_for(tmp_path, text_set(tmp_path, 2), [entry])
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with subprocess.Popen(
        [sys.executable, "-m", "evalkit", "run", str(config)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as evalkit:
        for _ in range(1200):
            if group_file.exists() and group_file.read_text():
                break
            if evalkit.poll() is not None:
                break
            time.sleep(0.05)
        group = int(group_file.read_text())
        evalkit.send_signal(signal.SIGINT)
        try:
            _, stderr = evalkit.communicate(timeout=40)  # the command's own timeout is 60 s: not waited out
        finally:
            evalkit.kill()
    assert evalkit.returncode != 0 and "Traceback" not in stderr, stderr
    assert live_group_members(group) == []

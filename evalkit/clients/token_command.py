"""Short-lived bearer tokens from a command (a model's ``auth_command``), fetched at the start and kept fresh.

Gemini on Vertex AI and Azure AD hand out access tokens that last about an hour, from their own command-line
tools, which already know the user's credentials (``gcloud auth application-default print-access-token``). A
run that outlives one token asks the command again every ``auth_refresh_s`` and gives the model's client the
new token; requests in flight finish with the old one. The command's output is the secret: it is never logged,
and an error quotes the command and the last line of its standard error (masked of what it printed), never its
standard output.

The command is someone else's program, so it is bounded like one: it runs in its own process group, which is
ended as soon as the command is done (a child it left behind holding the output open does not hold up the run);
its output is read up to :data:`MAX_OUTPUT_BYTES` within :data:`COMMAND_TIMEOUT_S`; and what it printed counts as
a token only in a token's shape (:data:`TOKEN_SHAPE`): anything else would be sent as a header and compiled into
the masks of every file the run writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from evalkit.errors import UserError
from evalkit.util.redact import scrub

log = logging.getLogger("evalkit")

#: seconds a token command may take (gcloud asks Google's token endpoint)
COMMAND_TIMEOUT_S = 60.0
#: after a failed refresh, seconds before the next try (the current token is kept meanwhile)
RETRY_AFTER_S = 60.0
#: the most standard output read from a token command (an Azure AD token with many claims is under 16 KiB)
MAX_OUTPUT_BYTES = 64 * 1024
#: the most standard error kept (its end: the last line is what is quoted)
MAX_STDERR_BYTES = 64 * 1024
#: the longest token taken
MAX_TOKEN_CHARS = 16 * 1024
#: a token: one word of visible ASCII (what an HTTP header carries as is), at least as long as a masked secret
TOKEN_SHAPE = re.compile(rf"[\x21-\x7e]{{4,{MAX_TOKEN_CHARS}}}")
#: seconds between two looks at the command while it runs (it is read as soon as it writes)
_TICK_S = 0.05
#: seconds the command's group has to end after SIGTERM before SIGKILL
_TERM_GRACE_S = 2.0
#: the longest words of a failing command's output masked in its quoted error in every form (others: as they are)
_MASKED_LONGEST = 8
#: the most characters of the command's standard error quoted in a message
_QUOTED_CHARS = 300


class _Output:
    """What a token command wrote: its standard output up to a cap, the end of its standard error."""

    def __init__(self) -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.too_large = False

    def take(self, stream: str, data: bytes) -> None:
        if stream == "stdout":
            self.stdout += data
            self.too_large = len(self.stdout) > MAX_OUTPUT_BYTES
            del self.stdout[MAX_OUTPUT_BYTES + 1 :]
        else:
            self.stderr += data
            del self.stderr[: max(0, len(self.stderr) - MAX_STDERR_BYTES)]


def command_token(command: list[str], where: str, stop: threading.Event | None = None) -> str:
    """The token ``command`` prints (its standard output, stripped); UserError naming ``where`` when it fails.

    ``stop`` set ends the command at once (the run is over); the UserError then says so.
    """
    shown = shlex.join(command)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own group, ended with all its children when the command is done
        )
    except FileNotFoundError:
        raise UserError(f"{where}: auth_command `{shown}`: {command[0]!r} is not installed or not on PATH") from None
    except OSError as error:
        raise UserError(f"{where}: auth_command `{shown}` could not start: {error.strerror or error}") from None
    try:
        output, finished = _read(process, stop)
    finally:
        _end_group(process)
    if stop is not None and stop.is_set() and not finished:
        raise UserError(f"{where}: auth_command `{shown}` was stopped: the run ended")
    if output.too_large:
        raise UserError(
            f"{where}: auth_command `{shown}` printed more than {MAX_OUTPUT_BYTES // 1024} KiB; one token was expected"
        )
    if not finished:
        raise UserError(f"{where}: auth_command `{shown}` gave no token within {COMMAND_TIMEOUT_S:.0f} s")
    text = output.stdout.decode("utf-8", "replace").strip()
    if process.returncode == 0 and TOKEN_SHAPE.fullmatch(text):
        return text
    why = _last_line(bytes(output.stderr), text)
    if process.returncode != 0:
        what = f"exit status {process.returncode}"
    elif not text:
        what = "no token"
    else:
        what = f"no token of a token's shape (one line of 4 to {MAX_TOKEN_CHARS} visible ASCII characters)"
    detail = f" ({why})" if why else ""
    raise UserError(f"{where}: auth_command `{shown}` printed {what}{detail}; one token was expected")


def _read(process: subprocess.Popen[bytes], stop: threading.Event | None) -> tuple[_Output, bool]:
    """The command's output, read until it exits (then what it left in its pipes), overflows, times out or is
    stopped; and whether it exited. Its exit is noticed without reaping it, so its pid, the group's id, stays
    its own until :func:`_end_group` has ended the group."""
    output = _Output()
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    streams = {"stdout": process.stdout, "stderr": process.stderr}
    with selectors.DefaultSelector() as selector:
        for name, stream in streams.items():
            assert stream is not None
            os.set_blocking(stream.fileno(), False)
            selector.register(stream.fileno(), selectors.EVENT_READ, name)
        while True:
            exited = _exited(process)
            # once the command has exited, what is already in its pipes is its output; a child holding them
            # open is not waited for
            wait = 0.0 if exited else min(_TICK_S, max(0.0, deadline - time.monotonic()))
            if selector.get_map():
                ready = selector.select(wait)
            else:  # both pipes closed, the command still running: look again shortly
                ready = []
                time.sleep(wait)
            for key, _ in ready:
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if data:
                    output.take(key.data, data)
                else:
                    selector.unregister(key.fd)
            if output.too_large:
                return output, False
            if exited and not ready:
                return output, True
            if (stop is not None and stop.is_set()) or time.monotonic() >= deadline:
                return output, False


def _exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether the command's leader has exited, leaving it unreaped where the system allows (``waitid``)."""
    if process.returncode is not None:
        return True
    if not hasattr(os, "waitid"):
        return process.poll() is not None
    try:
        found = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return process.poll() is not None
    return found is not None


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """End the command's whole process group (SIGTERM, then SIGKILL), reap its leader and close its pipes."""
    group = process.pid  # the leader is not yet reaped, so its id is still this group's
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)
        until = time.monotonic() + _TERM_GRACE_S
        while time.monotonic() < until and _group_alive(group, process):
            time.sleep(_TICK_S)
        os.killpg(group, signal.SIGKILL)
    process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def _group_alive(group: int, leader: subprocess.Popen[bytes]) -> bool:
    """Whether a process of ``group`` other than the exited leader may still run (killpg finds a zombie too)."""
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return not _exited(leader) or _other_members(group)


def _other_members(group: int) -> bool:
    """Whether ``group`` has a live member besides its (exited) leader: read from /proc where there is one."""
    proc = "/proc"
    if not os.path.isdir(proc):
        return True  # cannot tell: wait out the grace, then SIGKILL
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == group:
            continue
        try:
            with open(f"{proc}/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and fields[0] not in (b"Z", b"X") and int(fields[2]) == group:
            return True
    return False


def _last_line(stderr: bytes, printed: str) -> str:
    """The last line of the command's standard error, quotable: masked of what the command printed (a tool that
    fails after printing a token may repeat it there) and of anything that is not printable text."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    if not lines:
        return ""
    line = lines[-1]
    words = sorted({w for w in [printed, *printed.split()] if len(w) >= 4}, key=len, reverse=True)
    # the longest words (a token is one) in every form they travel in; any other word found in the line as is
    secrets = words[:_MASKED_LONGEST] + [w for w in words[_MASKED_LONGEST:] if w in line]
    line = scrub(line, secrets)
    line = "".join(c if c.isprintable() else "?" for c in line)
    return line[:_QUOTED_CHARS]


async def keep_fresh(
    command: list[str], every: float, where: str, use: Callable[[str], None], retry_after: float = RETRY_AFTER_S
) -> None:
    """Ask ``command`` for a token every ``every`` seconds and hand it to ``use``, until cancelled.

    A refresh that fails is logged (with the command's error) and tried again sooner; the client keeps the
    token it has, which may still be valid. Cancelled while the command runs, the command is ended.
    """
    wait = every
    while True:
        await asyncio.sleep(wait)
        stop = threading.Event()
        try:
            token = await asyncio.to_thread(command_token, command, where, stop)
        except asyncio.CancelledError:
            stop.set()  # the thread goes on until the command is ended: at once, now
            raise
        except UserError as error:
            log.warning("%s; the current token is kept, next try in %.0f s", error, min(every, retry_after))
            wait = min(every, retry_after)
            continue
        use(token)
        wait = every

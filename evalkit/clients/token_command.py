"""Short-lived bearer tokens from a command (a model's ``auth_command``), fetched at the start and kept fresh.

Gemini on Vertex AI and Azure AD hand out access tokens that last about an hour, from their own command-line
tools, which already know the user's credentials (``gcloud auth application-default print-access-token``). A
run that outlives one token asks the command again every ``auth_refresh_s`` and gives the model's client the
new token; requests in flight finish with the old one. The command's output is the secret: it is never logged,
and an error quotes the command and its standard error, never its standard output.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import subprocess
from collections.abc import Callable

from evalkit.errors import UserError

log = logging.getLogger("evalkit")

#: seconds a token command may take (gcloud asks Google's token endpoint)
COMMAND_TIMEOUT_S = 60.0
#: after a failed refresh, seconds before the next try (the current token is kept meanwhile)
RETRY_AFTER_S = 60.0


def command_token(command: list[str], where: str) -> str:
    """The token ``command`` prints (its standard output, stripped); UserError naming ``where`` when it fails."""
    shown = shlex.join(command)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise UserError(f"{where}: auth_command `{shown}`: {command[0]!r} is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"{where}: auth_command `{shown}` gave no token within {COMMAND_TIMEOUT_S:.0f} s") from None
    token = done.stdout.strip()
    if done.returncode != 0 or not token or any(c.isspace() for c in token):
        why = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        what = "no token" if done.returncode == 0 else f"exit status {done.returncode}"
        raise UserError(f"{where}: auth_command `{shown}` printed {what} ({why[0][:300]}); one token was expected")
    return token


async def keep_fresh(
    command: list[str], every: float, where: str, use: Callable[[str], None], retry_after: float = RETRY_AFTER_S
) -> None:
    """Ask ``command`` for a token every ``every`` seconds and hand it to ``use``, until cancelled.

    A refresh that fails is logged (with the command's error) and tried again sooner; the client keeps the
    token it has, which may still be valid.
    """
    wait = every
    while True:
        await asyncio.sleep(wait)
        try:
            token = await asyncio.to_thread(command_token, command, where)
        except UserError as error:
            log.warning("%s; the current token is kept, next try in %.0f s", error, min(every, retry_after))
            wait = min(every, retry_after)
            continue
        use(token)
        wait = every

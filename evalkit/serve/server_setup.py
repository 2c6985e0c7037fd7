"""How a launched model server is set up wherever it runs, on this machine or on a Ray node.

Both ways of launching (:mod:`evalkit.serve.launch` for loopback servers, :mod:`evalkit.serve.ray_launch`
for Ray replicas) start the same command line with the same environment changes, mask the same secrets in
what the server says, and accept a server only once it answers as the entry's own; those shared parts live
here, so each launcher imports them and neither imports the other's internals.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.config import ModelInfo
from evalkit.errors import UserError
from evalkit.util.redact import argv_secrets, is_secret_key, scrub

if TYPE_CHECKING:
    import aiohttp

#: seconds a stopped server gets to exit after SIGTERM before its group is SIGKILLed
STOP_GRACE = 10.0
#: how often a vLLM start is retried when another process took its port first
PORT_RETRIES = 3
#: what a server's output says when another process took its port first
ADDRESS_IN_USE = re.compile(r"address already in use|errno 98", re.IGNORECASE)


class LaunchError(UserError):
    """A server evalkit was asked to start did not come up."""


#: servers given a free port by evalkit; `evalkit serve` binds port 0 and reports its port in a file
PORT_CHOSEN_BY_EVALKIT = frozenset({"vllm", "transformers-serve"})


def server_command(
    info: ModelInfo,
    port: int | str | None,
    port_file: Path | str | None = None,
    host: str = "127.0.0.1",
    python: str = sys.executable,
) -> list[str]:
    """The server's command line: vLLM on ``port``, or ``evalkit serve`` writing its own port to ``port_file``.

    ``host``, ``port``, ``port_file`` and ``python`` may be placeholders a Ray replica fills in on its node.
    """
    launch = info.launch
    assert launch is not None
    if launch.backend == "vllm":
        assert port is not None
        return [
            python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(launch.model_path),
            "--served-model-name",
            info.model,
            "--host",
            host,
            "--port",
            str(port),
            *launch.args,
        ]
    if launch.backend == "transformers-serve":
        assert port is not None
        # transformers' CLI module, not the `transformers` script: the same interpreter as evalkit's
        return [
            python,
            "-m",
            "transformers.cli.transformers",
            "serve",
            str(launch.model_path),
            "--host",
            host,
            "--port",
            str(port),
            *launch.args,
        ]
    if launch.backend == "test-server":
        # evalkit's scriptable test server: it lists the entry's model id, so the readiness check holds for it too
        command = [python, "-m", "evalkit.testing.server", "--host", host, "--model", info.model]
        if port_file is not None:
            return [*command, "--port", "0", "--port-file", str(port_file), *launch.args]
        return [*command, "--port", str(port), *launch.args]
    # evalkit is the server's only client, and when it stops the server it wants no answer still being computed
    command = [
        python,
        "-m",
        "evalkit.serve",
        "--backend",
        str(launch.backend),
        "--model-id",
        info.model,
        "--host",
        host,
        "--shutdown-timeout",
        "0",
    ]
    if port_file is not None:
        command += ["--port", "0", "--port-file", str(port_file)]
    else:
        assert port is not None
        command += ["--port", str(port)]
    if launch.model_path:
        command += ["--model", launch.model_path]
    return command + list(launch.args)


def launch_secrets(info: ModelInfo) -> list[str]:
    """Values that must not show in logs or messages: the entry's token, secret env values, values of secret flags
    and ``KEY=VALUE`` arguments (``--api-key K``, ``--hf-token=K``, ``HF_TOKEN=K``)."""
    assert info.launch is not None
    found = {info.auth_token or ""}
    found |= {value for key, value in info.launch.env.items() if is_secret_key(key)}
    found |= set(argv_secrets(list(info.launch.args)))
    return sorted((s for s in found if len(s) >= 4), key=len, reverse=True)


def masked_command(command: list[str], secrets: list[str]) -> list[str]:
    return [scrub(part, secrets) for part in command]


def env_changes(info: ModelInfo) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """What a server's environment gets on top of the one it starts in: defaults the user's environment may
    override, values that win, and names removed. A Ray replica applies them to its node's environment."""
    assert info.launch is not None
    defaults: dict[str, str] = {}
    overrides: dict[str, str] = {}
    unset: list[str] = []
    if info.launch.backend == "vllm":
        # no usage reports from an evaluation box; the user's env may still turn them on
        defaults = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    elif info.launch.backend == "transformers-serve":
        # its CLI asks PyPI for a newer release at every start: not from an evaluation run
        defaults = {"HF_HUB_DISABLE_UPDATE_CHECK": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    else:
        # [serve safety] the entry's auth_token is the key the launched `evalkit serve` requires (the run's client
        # sends it); a key in evalkit's own environment is not this server's, and launch.env may still set one
        unset.append("EVALKIT_SERVE_API_KEY")
        if info.auth_token:
            overrides["EVALKIT_SERVE_API_KEY"] = info.auth_token
    overrides.update(info.launch.env)
    return defaults, overrides, unset


async def answers(
    session: aiohttp.ClientSession, url: str, backend: str, model_id: str, model: str, where: str
) -> bool:
    """Whether the server at ``url`` (``.../v1``) is up and is ours: /health 200, ``model_id`` in /v1/models.

    A LaunchError when it answers but is not ours (another model id, or it wants a key the entry does not send).
    """
    import aiohttp

    base = url.removesuffix("/v1")
    timeout = aiohttp.ClientTimeout(total=5)
    with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
        async with session.get(base + "/health", timeout=timeout) as response:
            if response.status != 200:
                return False
        if backend == "transformers-serve":
            # its /v1/models lists the hub cache, not the folder it was started with (500 with no cache)
            return True
        async with session.get(url + "/models", timeout=timeout) as response:
            if response.status == 401:  # [serve safety] a key in launch.args/env that the entry does not send
                raise LaunchError(
                    f"models: {model}: the server {where} wants an API key that this entry "
                    "does not send: set the entry's auth_token to it (evalkit passes auth_token to a launched "
                    "evalkit serve itself)"
                )
            body = await response.json(content_type=None)
        served = [m.get("id") for m in body.get("data", []) if isinstance(m, dict)]
        if model_id in served:
            return True
        raise LaunchError(
            f"models: {model}: the server {where} serves {served}, not {model_id!r}: "
            "another process took the port evalkit chose for it; run again"
        )
    return False

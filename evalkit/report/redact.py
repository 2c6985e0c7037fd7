"""Secrets never leave the process: config values that carry credentials are masked."""

from __future__ import annotations

from typing import Any

SECRET_KEYS = frozenset({"auth_token", "judge_api_key", "api_key", "authorization", "api-key", "token", "password"})
MASK = "***"


def redact(node: Any) -> Any:
    """A copy of a config tree with secret-bearing keys masked."""
    if isinstance(node, dict):
        return {k: (MASK if str(k).lower() in SECRET_KEYS and v else redact(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [redact(item) for item in node]
    return node


def scrub(text: str, secrets: list[str]) -> str:
    """Remove literal secret values from free text (error messages, logs)."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK)
    return text

"""Secrets never leave the process: credentials are masked in config dumps, URLs, free text and logs.

Two nets, because either alone has holes: keys known to carry secrets
(``auth_token``, ``judge_api_key``, ...) are masked wherever they appear in
a tree, and the literal secret values of the run are scrubbed from any text
(an error message, a log line, a URL a user pasted a key into).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_KEYS = frozenset(
    {"auth_token", "judge_api_key", "api_key", "authorization", "api-key", "token", "password", "secret"}
)
#: a key whose name has one of these words as a part (``hf_token``, ``OPENAI_API_KEY``, ``db-password``) holds a secret;
#: ``max_tokens`` or ``tokens_per_minute`` do not (``tokens`` is not ``token``)
SECRET_WORDS = frozenset(
    {"token", "secret", "password", "passwd", "key", "apikey", "authorization", "credential", "credentials"}
)
_WORD_SPLIT = re.compile(r"[_\-. ]+")
#: query parameters that carry credentials in URLs (Azure SAS ``sig``, Google ``key``, ...)
SECRET_QUERY = frozenset(
    {"key", "api_key", "api-key", "apikey", "token", "access_token", "sig", "signature", "password", "secret", "code"}
)
URL_KEYS = frozenset({"url", "judge_api_endpoint"})
MASK = "***"
_MIN_SECRET = 4


def is_secret_key(key: Any) -> bool:
    """Whether a config key names a credential."""
    name = str(key).lower()
    return name in SECRET_KEYS or any(word in SECRET_WORDS for word in _WORD_SPLIT.split(name))


def redact(node: Any) -> Any:
    """A copy of a config tree with secret-bearing keys masked and credentials in URLs removed."""
    if isinstance(node, dict):
        out: dict[Any, Any] = {}
        for key, value in node.items():
            name = str(key).lower()
            if is_secret_key(key) and value:
                out[key] = MASK
            elif name in URL_KEYS:
                out[key] = (
                    [redact_url(v) if isinstance(v, str) else v for v in value]
                    if isinstance(value, list)
                    else (redact_url(value) if isinstance(value, str) else redact(value))
                )
            else:
                out[key] = redact(value)
        return out
    if isinstance(node, list):
        return [redact(item) for item in node]
    return node


def redact_url(url: str) -> str:
    """``url`` without a password in its user info and without credential query parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{MASK}@{host}" if ":" in userinfo else f"{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in SECRET_QUERY for k, _ in pairs):
            query = urlencode([(k, MASK if k.lower() in SECRET_QUERY else v) for k, v in pairs], safe="*")
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Remove literal secret values from free text (error messages, logs)."""
    for secret in secrets:
        if secret and len(secret) >= _MIN_SECRET and secret in text:
            text = text.replace(secret, MASK)
    return text


def scrub_tree(node: Any, secrets: Iterable[str]) -> Any:
    """``scrub`` applied to every string of a JSON-like tree (keys included)."""
    secrets = [s for s in secrets if s and len(s) >= _MIN_SECRET]
    if not secrets:
        return node

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return scrub(value, secrets)
        if isinstance(value, dict):
            return {walk(k) if isinstance(k, str) else k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    return walk(node)


def secrets_of(config: Any) -> list[str]:
    """Every secret value in a config (tokens, keys, URL passwords), longest first so overlaps scrub whole."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                name = str(key).lower()
                if is_secret_key(key) and isinstance(value, str) and value:
                    found.add(value)
                elif name in URL_KEYS:
                    for url in value if isinstance(value, list) else [value]:
                        if isinstance(url, str):
                            found.update(url_secrets(url))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(config.model_dump(mode="json") if hasattr(config, "model_dump") else config)
    return sorted((s for s in found if len(s) >= _MIN_SECRET), key=len, reverse=True)


def url_secrets(url: str) -> list[str]:
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    out = []
    if parts.password:
        out.append(parts.password)
    out += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() in SECRET_QUERY and v]
    return out


class SecretFilter(logging.Filter):
    """Scrubs secret values from a log record's message and traceback before any handler formats it."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s and len(s) >= _MIN_SECRET]
        self._pattern = re.compile("|".join(re.escape(s) for s in self.secrets)) if self.secrets else None

    def filter(self, record: logging.LogRecord) -> bool:
        if self._pattern is None:
            return True
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        record.msg, record.args = self._pattern.sub(MASK, message), None
        if record.exc_info:
            text = record.exc_text or logging.Formatter().formatException(record.exc_info)
            record.exc_text = self._pattern.sub(MASK, text)
            record.exc_info = None
        if record.stack_info:
            record.stack_info = self._pattern.sub(MASK, record.stack_info)
        return True


@contextmanager
def secrets_filtered(secrets: Iterable[str]) -> Iterator[SecretFilter]:
    """Attach a :class:`SecretFilter` to every handler that can print a record (root's and the last resort)."""
    flt = SecretFilter(secrets)
    handlers = list(logging.getLogger().handlers)
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):
            handlers += [h for h in logger.handlers if h not in handlers]
    if logging.lastResort is not None:
        handlers.append(logging.lastResort)
    for handler in handlers:
        handler.addFilter(flt)
    try:
        yield flt
    finally:
        for handler in handlers:
            handler.removeFilter(flt)

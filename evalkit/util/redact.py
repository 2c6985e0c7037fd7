"""Secrets never leave the process: credentials are masked in config dumps, URLs, free text and logs.

Two nets, because either alone has holes: keys known to carry secrets
(``auth_token``, ``judge_api_key``, ...) are masked wherever they appear in
a tree, and the literal secret values of the run are scrubbed from any text
(an error message, a log line, a URL a user pasted a key into).

Where secrets come from: secret-named keys, a URL's user info and credential
query parameters (``?key=``, ``?sig=``, ...), and a server's command line
(``launch.args``: the value after ``--api-key``/``--hf-token``/..., or of a
``HF_TOKEN=...`` argument). What is masked is every form in which a secret
travels (:func:`secret_forms`): as given, percent-encoded or decoded, JSON-escaped,
and base64-encoded at any offset, because HTTP Basic auth sends
``base64(user:password)`` and a server that rejects it may echo the header
back. A server's own output is masked as it is written (:class:`StreamScrubber`).
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import re
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlencode, urlsplit, urlunsplit

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
#: keys whose value is a command line (``launch.args``): secrets inside are found by :func:`argv_secrets`
ARGV_KEYS = frozenset({"args"})
#: a command-line flag with one of these words as a part (``--basic-auth``) takes a secret, besides SECRET_WORDS
ARGV_SECRET_WORDS = SECRET_WORDS | {"auth"}
MASK = "***"
_MIN_SECRET = 4
#: the shortest base64 fragment masked on its own (shorter ones would mask innocent text)
_MIN_BASE64_CORE = 8
_HEADER_ARG = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*:\s*(\S.*)$")


def is_secret_key(key: Any) -> bool:
    """Whether a config key names a credential."""
    name = str(key).lower()
    return name in SECRET_KEYS or any(word in SECRET_WORDS for word in _WORD_SPLIT.split(name))


def redact(node: Any) -> Any:
    """A copy of a config tree with secret-bearing keys masked and credentials in URLs and command lines removed."""
    if isinstance(node, dict):
        out: dict[Any, Any] = {}
        for key, value in node.items():
            name = str(key).lower()
            if is_secret_key(key) and value:
                out[key] = MASK
            elif name in ARGV_KEYS and isinstance(value, list) and all(isinstance(v, str) for v in value):
                out[key] = redact_args(value)
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


def _base64_cores(data: bytes) -> set[str]:
    """The base64 text that ``data`` turns into wherever it sits in a longer encoded string (3 offsets, 2 alphabets).

    Only the characters that depend on ``data`` alone: ``Basic base64(user:KEY)``
    holds the core of ``KEY`` at offset ``len("user:") % 3``.
    """
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode("ascii")
        start = -(-offset * 8 // 6)  # the first character with no bit of the filler
        end = (offset + len(data)) * 8 // 6  # the last character with only bits of data
        core = encoded[start:end]
        if len(core) >= _MIN_BASE64_CORE:
            cores |= {core, core.replace("+", "-").replace("/", "_")}
    whole = base64.b64encode(data).decode("ascii").rstrip("=")
    if len(whole) >= _MIN_SECRET:
        cores |= {whole, whole.replace("+", "-").replace("/", "_")}
    return cores


#: what may stay as is in a URL path segment (RFC 3986 ``pchar``): a client quotes the rest, a server may echo it so
_PATH_SAFE = "!$&'()*+,;=:@~"


def _misread(text: str) -> set[str]:
    """``text`` as a server that read its bytes in another encoding echoes it (mojibake): UTF-8 read as Latin-1
    (HTTP/1.1's header encoding, what many servers decode with) or as Windows-1252, twice over (a proxy, then a
    server), and Latin-1 bytes read as UTF-8. Empty for ASCII, which every encoding reads alike."""
    if text.isascii():
        return set()
    found = set()
    for first in ("latin-1", "cp1252"):
        once = text.encode("utf-8", "surrogatepass").decode(first, "replace")
        found |= {once, once.encode("utf-8").decode(first, "replace")}
    with suppress(UnicodeEncodeError):
        found.add(text.encode("latin-1").decode("utf-8", "replace"))
    return found


def _escaped(text: str) -> set[str]:
    """``text`` percent-encoded as a query value, a form field or a path segment (upper- and lowercase hex), and
    JSON-escaped (ASCII-only, or only quotes and backslashes)."""
    found = {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    for encoded in (quote(text, safe=""), quote(text, safe=_PATH_SAFE), quote_plus(text)):
        found |= {encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)}
    return found


@functools.lru_cache(maxsize=1024)
def secret_forms(secret: str) -> tuple[str, ...]:
    """Every form in which ``secret`` may show in text: as given or percent-decoded; each of those as a server
    that misread its encoding echoes it (:func:`_misread`), Unicode-normalized, percent-encoded or JSON-escaped
    (:func:`_escaped`); and base64 of its UTF-8 or Latin-1 bytes at any offset (HTTP Basic auth).

    Longest first, so an alternation of them masks a whole form, not a part of it.
    """
    plain = {secret, unquote(secret)}
    for text in list(plain):
        plain |= _misread(text) | {unicodedata.normalize(form, text) for form in ("NFC", "NFD", "NFKC")}
    forms = set(plain)
    for text in plain:
        forms |= _escaped(text)
    for text in {secret, unquote(secret)}:
        forms |= _base64_cores(text.encode("utf-8", "surrogatepass"))
        with suppress(UnicodeEncodeError):
            forms |= _base64_cores(text.encode("latin-1"))
    return tuple(sorted((f for f in forms if len(f) >= _MIN_SECRET), key=len, reverse=True))


@functools.lru_cache(maxsize=64)
def _pattern(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    forms = {form for secret in secrets if secret and len(secret) >= _MIN_SECRET for form in secret_forms(secret)}
    if not forms:
        return None
    return re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """Remove secret values, in every form they travel in (:func:`secret_forms`), from free text (errors, logs)."""
    pattern = _pattern(tuple(secrets))
    return pattern.sub(MASK, text) if pattern is not None and text else text


def scrub_tree(node: Any, secrets: Iterable[str]) -> Any:
    """``scrub`` applied to every string of a JSON-like tree (keys included)."""
    secrets = [s for s in secrets if s and len(s) >= _MIN_SECRET]
    if not secrets:
        return node
    pattern = _pattern(tuple(secrets))

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(MASK, value) if pattern is not None else value
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
                elif name in ARGV_KEYS and isinstance(value, list):
                    found.update(argv_secrets([v for v in value if isinstance(v, str)]))
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
    """The credentials in a URL: the password (and ``user:password``, what Basic auth encodes), a user name given
    alone (a key passed as ``https://KEY@host``) and credential query parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    out = []
    if parts.password:
        out += [parts.password, f"{unquote(parts.username or '')}:{unquote(parts.password)}"]
    elif parts.username:
        out += [parts.username, f"{unquote(parts.username)}:"]
    out += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() in SECRET_QUERY and v]
    return out


def _is_secret_flag(name: str) -> bool:
    name = name.lstrip("-").lower()
    return is_secret_key(name) or any(word in ARGV_SECRET_WORDS for word in _WORD_SPLIT.split(name))


def _argv_values(args: list[str]) -> Iterator[tuple[int, str, str]]:
    """(index, prefix kept, secret value) for every secret in a command line."""
    for index, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if eq and _is_secret_flag(name) and (name.startswith("-") or " " not in name):
            yield index, name + eq, value  # --api-key=KEY, HF_TOKEN=KEY
        elif name.startswith("-") and not eq and _is_secret_flag(name) and index + 1 < len(args):
            yield index + 1, "", args[index + 1]  # --api-key KEY
        elif (header := _HEADER_ARG.match(arg)) is not None and _is_secret_flag(header.group(1)):
            yield index, arg[: header.start(2)], header.group(2)  # "Authorization: Bearer KEY"


def argv_secrets(args: list[str]) -> list[str]:
    """Secret values in a command line (``launch.args``); a value like ``Bearer KEY`` also gives ``KEY``."""
    found: set[str] = set()
    for _, _, value in _argv_values(args):
        found.add(value)
        last = value.split()[-1] if value.split() else ""
        if last != value:
            found.add(last)
    return sorted((s for s in found if len(s) >= _MIN_SECRET), key=len, reverse=True)


def redact_args(args: list[str]) -> list[str]:
    """A command line with the value of every secret flag or ``KEY=VALUE`` argument masked."""
    out = list(args)
    for index, prefix, value in _argv_values(args):
        if value:
            out[index] = prefix + MASK
    return out


class SecretFilter(logging.Filter):
    """Scrubs secret values from a log record's message and traceback before any handler formats it."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s and len(s) >= _MIN_SECRET]
        self._pattern = _pattern(tuple(self.secrets))

    def add(self, secret: str) -> None:
        """Scrub ``secret`` too from now on (a token renewed during the run)."""
        if secret and len(secret) >= _MIN_SECRET and secret not in self.secrets:
            self.secrets.append(secret)
            self._pattern = _pattern(tuple(self.secrets))

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


class StreamScrubber:
    """Masks secrets in output that arrives in pieces cut anywhere (a server's log): a secret split across two
    pieces is still masked, because the end of each piece that could begin one is held back until the next."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = {
            f.encode("utf-8", "surrogatepass") for s in secrets if s and len(s) >= _MIN_SECRET for f in secret_forms(s)
        }
        ordered = sorted(forms, key=len, reverse=True)
        self._pattern = re.compile(b"|".join(re.escape(f) for f in ordered)) if ordered else None
        self._hold = max((len(f) for f in ordered), default=1) - 1
        self._pending = b""

    def feed(self, data: bytes) -> bytes:
        """The masked bytes that can be written now."""
        if self._pattern is None:
            return data
        buffer = self._pattern.sub(MASK.encode(), self._pending + data)
        # a secret holds no line break, so a finished line can go; otherwise all but what could start a secret
        cut = max(buffer.rfind(b"\n") + 1, len(buffer) - self._hold)
        self._pending = buffer[cut:]
        return buffer[:cut]

    def close(self) -> bytes:
        """What is still held back, masked (the stream ended)."""
        rest, self._pending = self._pending, b""
        return self._pattern.sub(MASK.encode(), rest) if self._pattern is not None else rest

"""Does the Hugging Face hub answer? Asked once per process, known within seconds, before any engine starts.

Without this, a machine that cannot reach the hub learns it from
``datasets``: ``huggingface_hub`` retries each request five times with
backoff (about 25 s, ten warnings on the console) and the run then fails one
engine at a time with ``LocalEntryNotFoundError``. One ``HEAD`` to the hub
endpoint (``HF_ENDPOINT``, default https://huggingface.co), through the hub
library's own HTTP session (so its proxies and certificates apply), with a
short timeout and a hard deadline, says the same thing in at most
``DEADLINE`` seconds; the answer is kept for the rest of the process.

The hub "answers" when it returns any HTTP status below 500: a 401 or 404 is
the hub speaking (the load itself then says what is wrong), a 5xx or no
answer at all is a hub that cannot serve rows now.

The hub library's retry warnings are dropped (:func:`quiet_hub_retries`):
they repeat, every ~8 s, what the final error says once. Its other warnings
and every error still reach the console, and ``--verbose`` keeps all.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

#: seconds a connection (and then the answer) may take
TIMEOUT = 3.0
#: the probe gives up after this many seconds whatever the network does (a DNS lookup has no timeout of its own)
DEADLINE = 4.0
DEFAULT_ENDPOINT = "https://huggingface.co"

_answers: dict[str, HubAnswer] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class HubAnswer:
    """What one probe of the hub endpoint found."""

    endpoint: str
    reachable: bool
    #: why not, in words a user reads after "unreachable (...)": "connection refused", "answered HTTP 503"
    reason: str = ""


def hub_endpoint() -> str:
    """The hub the ``datasets`` loads go to: ``HF_ENDPOINT`` as ``huggingface_hub`` reads it, or the public hub."""
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or DEFAULT_ENDPOINT


def probe_hub(endpoint: str | None = None) -> HubAnswer:
    """Whether the hub answers, asked once per endpoint and process (later calls return the first answer)."""
    endpoint = endpoint or hub_endpoint()
    with _lock:
        known = _answers.get(endpoint)
        if known is not None:
            return known
        found: list[HubAnswer] = []
        # a daemon thread: a lookup that hangs past the deadline is left behind, never waited for
        worker = threading.Thread(target=lambda: found.append(_ask(endpoint)), name="evalkit-hub-probe", daemon=True)
        worker.start()
        worker.join(DEADLINE)
        answer = found[0] if found else HubAnswer(endpoint, False, f"no answer within {DEADLINE:g} s")
        _answers[endpoint] = answer
        return answer


def forget_probes() -> None:
    """Drop the kept answers (tests, and a long-lived process whose network changed)."""
    with _lock:
        _answers.clear()


def _ask(endpoint: str) -> HubAnswer:
    """One HEAD to the endpoint's root through the hub library's session (its proxies, certificates, user agent)."""
    from huggingface_hub import get_session

    quiet_hub_retries()
    try:
        response = get_session().head(endpoint + "/", timeout=TIMEOUT)
    except Exception as error:  # any failure to get an answer is "unreachable": the reason says which
        return HubAnswer(endpoint, False, failure_reason(error))
    if response.status_code >= 500:
        return HubAnswer(endpoint, False, f"answered HTTP {response.status_code}")
    return HubAnswer(endpoint, True)


def failure_reason(error: BaseException) -> str:
    """A failed request in a few words: the innermost OS error when there is one, else the error's name and text."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, TimeoutError) or "timeout" in type(seen).__name__.lower():
            return f"no answer within {TIMEOUT:g} s"
        seen = seen.__cause__ or seen.__context__
    text = str(error).strip()
    if "refused" in text.lower():
        return "connection refused"
    if "connect" in type(error).__name__.lower():
        return f"could not connect: {text}" if text else "could not connect"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


_RETRY_WORDS = ("thrown while requesting", "Retrying in ", "before retry [Retry ")


def _not_a_retry(record: logging.LogRecord) -> bool:
    """Keep a hub library record unless it is one of its retry notices (``--verbose`` keeps those too)."""
    if record.levelno > logging.WARNING or logging.getLogger("evalkit").isEnabledFor(logging.DEBUG):
        return True
    message = record.getMessage()
    return not any(words in message for words in _RETRY_WORDS)


def quiet_hub_retries() -> None:
    """Drop ``huggingface_hub``'s retry warnings from the console (idempotent); its other records pass."""
    # the logger's own filter list is the state (not a module flag): a test or a host application that resets the
    # logger's filters gets the filter added again on the next call
    logger = logging.getLogger("huggingface_hub.utils._http")
    if _not_a_retry not in logger.filters:
        logger.addFilter(_not_a_retry)

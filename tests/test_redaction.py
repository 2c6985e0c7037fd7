"""A run with a distinctive token leaves no copy of it under the output folder or on stdout/stderr.

The token travels the ways a secret does: from the environment into
``auth_token``, into a URL's user info, to a server that accepts it, to one that
rejects it (401) and to a port where nothing listens; the run logs at debug
level. Then every byte the run wrote is searched.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import aiohttp
from aiohttp.client_reqrep import RequestInfo
from helpers import ROOT, closed_port, config_for, model_entry, text_set
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from evalkit.util.redact import (
    MASK,
    SecretFilter,
    redact,
    redact_url,
    scrub_tree,
    secrets_filtered,
    secrets_of,
)

TOKEN = "evk-REDACT-9f3b7c1d2e5a"
N = 6


def test_a_run_leaves_no_copy_of_the_token_anywhere(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, N)
    accepting = make_server(require_auth=TOKEN, request_log=True)
    rejecting = make_server(require_auth="another-token-0000")
    port = accepting.port
    models = [
        model_entry("good", accepting.base_url, auth_token="${EVALKIT_REDACTION_TOKEN}"),
        model_entry("rejected", rejecting.base_url, auth_token="${EVALKIT_REDACTION_TOKEN}"),
        model_entry(
            "refused", f"http://127.0.0.1:{closed_port()}/v1", auth_token="${EVALKIT_REDACTION_TOKEN}", retry_attempts=0
        ),
        model_entry("in_url", f"http://evalkit:{TOKEN}@127.0.0.1:{port}/v1", retry_attempts=0),
    ]
    output = tmp_path / "out"
    config = config_for(tmp_path / "cfg", runspecs, models, output_dir=str(output))
    env = {
        **os.environ,
        "EVALKIT_REDACTION_TOKEN": TOKEN,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(config), "--verbose"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr  # three models fail every request (3: written, too many failures)

    # the token did its work: the accepting server answered the model that sent it
    run_dir = next(p for p in output.iterdir() if p.is_dir())
    rows = {r["model"]: r for r in json.loads((run_dir / "results.json").read_text())["results"]}
    assert rows["good"]["n"] == N and rows["good"]["n_failed"] == 0
    assert rows["rejected"]["failure_reasons"] == {"http_401": N}
    assert rows["refused"]["n_failed"] == N and rows["in_url"]["n_failed"] == N

    forms = [TOKEN, quote(TOKEN), TOKEN.lower(), TOKEN[4:]]
    for text, where in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
        assert not any(f in text for f in forms), where
    files = [p for p in output.rglob("*") if p.is_file()]
    assert (
        any(p.name == "run.json" for p in files)
        and any(p.suffix == ".jsonl" for p in files)
        and any(p.suffix == ".sqlite" for p in files)
    )
    for path in files:
        data = path.read_bytes()
        assert not any(f.encode() in data for f in forms), path
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["config"]["models"][0]["info"]["auth_token"] == MASK
    assert MASK in manifest["config"]["models"][3]["info"]["url"]
    errors = [
        json.loads(line).get("error")
        for line in (run_dir / "records" / "synth_qa__exact_match.jsonl").read_text().splitlines()
    ]
    assert any("HTTP 401" in e for e in errors if e) and any("cannot connect" in e for e in errors if e)


def test_redact_masks_secret_keys_and_url_credentials() -> None:
    tree = {
        "models": [
            {
                "info": {
                    "auth_token": TOKEN,
                    "url": [f"https://u:{TOKEN}@h/v1", f"https://h/v1?api-key={TOKEN}&x=1"],
                    "model": "m",
                }
            }
        ],
        "judge_properties": {"judge_api_key": TOKEN, "judge_api_endpoint": f"https://h/?sig={TOKEN}"},
    }
    text = json.dumps(redact(tree))
    assert TOKEN not in text and text.count(MASK) == 5
    assert redact_url("https://h/v1?x=1") == "https://h/v1?x=1"
    assert set(secrets_of(tree)) == {TOKEN, f"u:{TOKEN}"}  # user:password too: what HTTP Basic auth encodes
    assert TOKEN not in json.dumps(scrub_tree({"error": f"401 for Bearer {TOKEN}", TOKEN: [TOKEN]}, [TOKEN]))


def test_secret_filter_scrubs_messages_and_tracebacks() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("evalkit.test_redaction")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with secrets_filtered([TOKEN]):
            logger.warning("header was %s", f"Bearer {TOKEN}")
            try:
                raise RuntimeError(f"request with {TOKEN} failed")
            except RuntimeError:
                logger.exception("boom")
            # aiohttp's error repr carries the request headers (str does not): even that is masked
            headers = CIMultiDictProxy(CIMultiDict({"Authorization": f"Bearer {TOKEN}"}))
            info = RequestInfo(URL("http://127.0.0.1/v1"), "POST", headers, URL("http://127.0.0.1/v1"))
            error = aiohttp.ClientResponseError(info, (), status=500, message="x", headers=headers)
            assert TOKEN in repr(error) and TOKEN not in str(error)
            logger.error("failed: %r", error)
        logger.warning("after: %s", "plain")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    out = stream.getvalue()
    assert (
        TOKEN not in out
        and out.count(MASK) >= 4
        and "RuntimeError" in out
        and "ClientResponseError" in out
        and "after: plain" in out
    )
    assert not handler.filters  # removed when the run ends
    assert SecretFilter([]).filter(logging.makeLogRecord({"msg": "x"}))

"""A secret planted in every place a secret can be given leaves no copy in any file a run writes, nor on the console.

The places: ``auth_token`` as given, ``auth_token`` from an environment variable
(``${VAR}``), a URL's ``user:password`` (sent as HTTP Basic auth, so as
``base64(user:password)``), URL query tokens (``?api_key=``, ``?sig=``),
``launch.args`` (``--hf-token K``, ``--api-key=K``, ``HF_TOKEN=K``) and
``launch.env``. The test server is scripted to echo what it rejects: its 401
body repeats the Authorization header and the path with its query, as a
careless server does; the launched server echoes its arguments when it
refuses them. Then every byte under the output folder (records, results,
run.json, the SQLite store read as bytes, server logs, gzip'd files
decompressed) and both console streams are searched for each secret, in the
forms it travels in: as given, percent-encoded, and base64 at any offset.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from helpers import ROOT, config_for, model_entry, text_set

from evalkit.util.redact import MASK, StreamScrubber, argv_secrets, redact, redact_args, scrub, secrets_of, url_secrets

N = 3
BEARER = "evk-bearer-4Tq9Zp2LmX7c"
FROM_ENV = "evk-fromenv-8Hs3Kd0WnB1v"
URL_PASSWORD = "evk-urlpass-6Jf5Rt8YqE2g"
QUERY_KEY = "evk-querykey-3Nb7Vc1XzA9m"
QUERY_SIG = "evk-querysig-5Pw2Gh6TkL0r"
ARG_FLAG = "evk-argflag-7Ue4Mi9OsD3y"
ARG_EQUALS = "evk-argequals-2Wa8Qb5CnF6h"
ARG_ENV_LIKE = "evk-argenvlike-9Lk1Zj4XvR7t"
LAUNCH_ENV = "evk-launchenv-1Sd6Fg3HjK8p"
SECRETS = [BEARER, FROM_ENV, URL_PASSWORD, QUERY_KEY, QUERY_SIG, ARG_FLAG, ARG_EQUALS, ARG_ENV_LIKE, LAUNCH_ENV]
USER = "evalkit"


def _base64_cores(data: bytes) -> list[bytes]:
    """The base64 characters that depend on ``data`` alone, at each of the three offsets it can sit at."""
    out = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data)
        core = encoded[-(-offset * 8 // 6) : (offset + len(data)) * 8 // 6]
        out += [core, core.replace(b"+", b"-").replace(b"/", b"_")]
    return out


def _forms(secret: str) -> list[bytes]:
    forms = [secret.encode(), quote(secret, safe="").encode(), *_base64_cores(secret.encode())]
    basic = f"{USER}:{secret}".encode()
    return [*forms, base64.b64encode(basic), *_base64_cores(basic)]


def _leaks(data: bytes) -> list[str]:
    return [secret for secret in SECRETS if any(form in data for form in _forms(secret))]


def _every_file(folder: Path) -> dict[Path, bytes]:
    """Every file under ``folder`` as bytes (gzip'd ones decompressed too)."""
    files = {}
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if data[:2] == b"\x1f\x8b":
                data += gzip.decompress(data)
            files[path] = data
    return files


def _evalkit(config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "EVALKIT_PLANTED_SECRET": FROM_ENV,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    return subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(config), "--verbose"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the launched server's process group is read from /proc"
)
@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_no_planted_secret_reaches_a_file_or_the_console(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, N)
    server = make_server(require_auth="the-only-accepted-key-0000", echo_auth=True)
    base = server.base_url
    host = base.split("//", 1)[1]
    models = [
        model_entry("bearer", base, auth_token=BEARER, retry_attempts=0),
        model_entry("from_env", base, auth_token="${EVALKIT_PLANTED_SECRET}", retry_attempts=0),
        model_entry("in_url", f"http://{USER}:{URL_PASSWORD}@{host}", retry_attempts=0),
        model_entry("in_query", f"{base}?api_key={QUERY_KEY}&sig={QUERY_SIG}", retry_attempts=0),
    ]
    output = tmp_path / "out"
    config = config_for(tmp_path / "http", runspecs, models, output_dir=str(output))
    http_run = _evalkit(config, tmp_path)
    assert http_run.returncode == 3, http_run.stderr  # every request failed with a 401 (3: written, too many failures)

    # a launched server that refuses its arguments prints them back; evalkit shows its output and logs it
    launch = {
        "backend": "pocketsphinx",
        "args": ["--hf-token", ARG_FLAG, f"--api-key={ARG_EQUALS}", f"HF_TOKEN={ARG_ENV_LIKE}"],
        "env": {"HF_TOKEN": LAUNCH_ENV},
        "startup_timeout": 120,
    }
    launched = {
        # a hostile model name too: the server log is named after it, and must stay in server-logs/
        "info": {"name": "../../launched", "inference_type": "transcription", "model": "ps", "launch": launch},
    }
    config = config_for(
        tmp_path / "launch", runspecs, [launched], pairs=[["espeak_en_asr", "word_error_rate"]], output_dir=str(output)
    )
    launch_run = _evalkit(config, tmp_path)
    assert launch_run.returncode == 2, launch_run.stderr
    assert "unrecognized arguments: --hf-token ***" in launch_run.stderr

    # the secrets were there to leak: the server echoed each one back (masked on the way in)
    (run_dir,) = [p for p in output.iterdir() if (p / "results.json").is_file()]
    records = [json.loads(line) for p in (run_dir / "records").glob("*.jsonl") for line in p.read_text().splitlines()]
    errors = {r["model"]: r["error"] for r in records}
    assert errors.keys() == {"bearer", "from_env", "in_url", "in_query"}
    assert all("Incorrect API key provided: " in e for e in errors.values()), errors
    assert f"Basic {MASK}" in errors["in_url"] and f"Bearer {MASK}" in errors["bearer"]
    assert f"api_key={MASK}" in errors["in_query"] and f"sig={MASK}" in errors["in_query"]
    (log,) = (output / "server-logs").glob("server-*.log")
    assert log.name.startswith("server-.._.._launched-") and log.parent == output / "server-logs"
    assert "unrecognized arguments" in log.read_text()

    files = _every_file(output)
    kinds = {p.suffix for p in files}
    assert {".jsonl", ".json", ".csv", ".md", ".html", ".sqlite", ".log"} <= kinds, kinds
    leaked = {str(p.relative_to(output)): _leaks(data) for p, data in files.items() if _leaks(data)}
    assert leaked == {}
    for run in (http_run, launch_run):
        assert _leaks(run.stdout.encode()) == [] and _leaks(run.stderr.encode()) == []


def test_every_form_of_a_secret_is_masked() -> None:
    key = "evk-forms-0Qw9Er8Ty7Ui"
    basic = base64.b64encode(f"someone:{key}".encode()).decode()
    text = f"a {key} b {quote(key + '/+', safe='')} c Basic {basic} d {base64.b64encode(key.encode()).decode()}"
    masked = scrub(text, url_secrets(f"https://someone:{key}@h/v1"))
    assert _leaks_of(key, masked) == [] and masked.count(MASK) == 4
    # a key alone is still found inside a longer base64 text, at any offset
    for prefix in ("", "x", "xy", "user:"):
        encoded = base64.b64encode((prefix + key).encode()).decode()
        assert key not in scrub(encoded, [key]) and scrub(encoded, [key]) != encoded


def _leaks_of(secret: str, text: str) -> list[bytes]:
    return [f for f in [secret.encode(), *_base64_cores(secret.encode())] if f in text.encode()]


def test_url_credentials_in_every_shape() -> None:
    assert set(url_secrets("https://u:p%40ss-word@h/v1")) == {"p%40ss-word", "u:p@ss-word"}
    assert set(url_secrets("https://KEY-ONLY-123@h/v1")) == {"KEY-ONLY-123", "KEY-ONLY-123:"}
    assert set(url_secrets("https://h/v1?token=t0ken-1&access_token=t0ken-2&x=1")) == {"t0ken-1", "t0ken-2"}


def test_launch_args_are_masked_in_config_dumps_and_found_as_secrets() -> None:
    args = [
        "--hf-token",
        ARG_FLAG,
        f"--api-key={ARG_EQUALS}",
        f"HF_TOKEN={ARG_ENV_LIKE}",
        f"Authorization: Bearer {BEARER}",
        "--max-tokens",
        "512",
        "--dtype=bfloat16",
    ]
    assert redact_args(args) == [
        "--hf-token",
        MASK,
        f"--api-key={MASK}",
        f"HF_TOKEN={MASK}",
        f"Authorization: {MASK}",
        "--max-tokens",
        "512",
        "--dtype=bfloat16",
    ]
    assert {ARG_FLAG, ARG_EQUALS, ARG_ENV_LIKE, BEARER} <= set(argv_secrets(args))
    tree = {"models": [{"info": {"launch": {"args": args, "env": {"HF_TOKEN": LAUNCH_ENV, "CUDA": "0"}}}}]}
    dumped = json.dumps(redact(tree))
    assert not any(s in dumped for s in (ARG_FLAG, ARG_EQUALS, ARG_ENV_LIKE, BEARER, LAUNCH_ENV))
    assert "--max-tokens" in dumped and '"CUDA": "0"' in dumped
    assert {ARG_FLAG, ARG_EQUALS, ARG_ENV_LIKE, LAUNCH_ENV} <= set(secrets_of(tree))


def test_a_stream_cut_anywhere_is_masked() -> None:
    """A server's output reaches its log in pieces; a secret split across two of them is still masked."""
    line = f"starting with --api-key {ARG_FLAG} and Basic {base64.b64encode(f'u:{ARG_FLAG}'.encode()).decode()}\n"
    data = (line * 3 + "no newline at the end " + ARG_FLAG).encode()
    for size in (1, 2, 5, 7, 64, len(data)):
        scrubber = StreamScrubber([ARG_FLAG, f"u:{ARG_FLAG}"])
        out = b"".join(scrubber.feed(data[i : i + size]) for i in range(0, len(data), size)) + scrubber.close()
        assert _leaks_of(ARG_FLAG, out.decode()) == [] and out.count(MASK.encode()) == 7, size
        assert out.endswith(b"no newline at the end ***")
    assert StreamScrubber([]).feed(b"as is") == b"as is"


# -- every form a server can echo: non-ASCII secrets read in another encoding, secrets in a URL's path -----------

NON_ASCII_BEARER = "evk-bëarer-tök€n-5Rd8"
PATH_TOKEN = "evk-päth+tok~en€-3Km7"
LATIN1_PASSWORD = "evk-pässwörd-8Ty2Ux"
NON_ASCII_QUERY = "evk-quëry-kéy-6Ws1"
ECHOED = [NON_ASCII_BEARER, PATH_TOKEN, LATIN1_PASSWORD, NON_ASCII_QUERY]


def _echoed_forms(secret: str) -> list[bytes]:
    """Each form in which a server may echo ``secret``, as bytes of the UTF-8 files a run writes: as given,
    percent-encoded (as a query value or as a path segment), read as Latin-1 or Windows-1252 after travelling
    as UTF-8 (mojibake), JSON-escaped, and base64 (of UTF-8 or Latin-1 bytes, alone or as Basic auth)."""
    texts = {secret, quote(secret, safe=""), quote(secret, safe="!$&'()*+,;=:@~")}
    for codec in ("latin-1", "cp1252"):
        texts.add(secret.encode().decode(codec, "replace"))
    texts |= {json.dumps(t)[1:-1] for t in list(texts)}
    raw = [secret.encode(), f"{USER}:{secret}".encode()]
    with contextlib.suppress(UnicodeEncodeError):
        raw += [secret.encode("latin-1"), f"{USER}:{secret}".encode("latin-1")]
    cores = [core for data in raw for core in [base64.b64encode(data), *_base64_cores(data)]]
    return [t.encode() for t in texts] + cores


def _echoed_leaks(data: bytes) -> list[str]:
    return [secret for secret in ECHOED if any(form in data for form in _echoed_forms(secret))]


def test_secrets_a_server_echoes_in_another_form_are_masked_everywhere(tmp_path: Path, make_server) -> None:
    """The server reads its headers as Latin-1 (UTF-8 comes back as mojibake) and echoes paths as sent
    (percent-encoded); the secrets are non-ASCII, and one sits in a URL's path (the model's key, in its URL)."""
    server = make_server(require_auth="the-only-accepted-key-0000", echo_auth="raw")
    base = server.base_url
    root, host = base.rsplit("/v1", 1)[0], base.split("//", 1)[1]
    models = [
        model_entry("bearer", base, auth_token=NON_ASCII_BEARER, retry_attempts=0),
        model_entry("in_path", f"{root}/{PATH_TOKEN}/v1", auth_token=PATH_TOKEN, retry_attempts=0),
        model_entry("in_url", f"http://{USER}:{LATIN1_PASSWORD}@{host}", retry_attempts=0),
        model_entry("in_query", f"{base}?api_key={NON_ASCII_QUERY}", retry_attempts=0),
    ]
    output = tmp_path / "out"
    config = config_for(tmp_path / "http", text_set(tmp_path, N), models, output_dir=str(output))
    done = _evalkit(config, tmp_path)
    assert done.returncode == 3, done.stderr

    # the secrets were there to leak: the server echoed each one back, masked on the way in
    (run_dir,) = [p for p in output.iterdir() if (p / "results.json").is_file()]
    records = [json.loads(line) for p in (run_dir / "records").glob("*.jsonl") for line in p.read_text().splitlines()]
    errors = {r["model"]: r["error"] for r in records}
    assert f"Bearer {MASK} for" in errors["bearer"] and f"Basic {MASK} for" in errors["in_url"], errors
    assert f"/{MASK}/v1/chat/completions" in errors["in_path"] and f"api_key={MASK}" in errors["in_query"], errors
    # the replica a record names is its URL with the key in its path masked, as in run.json and results.json
    assert {r["replica"] for r in records if r["model"] == "in_path"} == {f"{root}/{MASK}/v1"}

    files = _every_file(output)
    leaked = {str(p.relative_to(output)): _echoed_leaks(data) for p, data in files.items() if _echoed_leaks(data)}
    assert leaked == {}
    assert _echoed_leaks(done.stdout.encode()) == [] and _echoed_leaks(done.stderr.encode()) == []


def test_the_forms_of_a_non_ascii_secret() -> None:
    for secret in ECHOED:
        for form in _echoed_forms(secret):
            text = f"before {form.decode()} after"
            assert not _echoed_leaks(scrub(text, [secret]).encode()), (secret, form)

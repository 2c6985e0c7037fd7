"""Hostile answers through both HTTP paths: each fails its own sample with its reason, and memory stays bounded.

The transports differ (plain http goes through the lean keep-alive client,
https through aiohttp), so every hostile answer of the catalogue
(evalkit/testing/hostile.py) is sent through each: a real ``python -m evalkit
run`` subprocess against the project's test server, over plain http and over
https with a self-signed certificate made here (trusted by the run through
``SSL_CERT_FILE``, the standard OpenSSL variable; nothing in evalkit turns
verification off). Each run's records are checked sample by sample, its peak
RSS (``wait4``) against a clean run of the same set: a 1000 MiB gzip bomb, read
whole, would add a gigabyte. A second loopback server is the "other origin"
a redirect points to; it must never receive a request.

Faster in-process checks ask one endpoint directly, through the lean client
and through aiohttp over plain http (``EVALKIT_LEAN_HTTP=0``), for what the
records cannot show: that following stops at the cap and at 5 hops.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import json
import os
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, model_entry, run_measured, text_set

from evalkit.clients.endpoint import Attempt, EndpointPool
from evalkit.clients.protocol import EndpointProtocol
from evalkit.clients.request import ModelRequest
from evalkit.config import RequestKind

MAX_BODY = 1024 * 1024
#: sample index -> (hostile kind, reason with follow_redirects off, words of its error)
HOSTILE = {
    1: ("empty_choices", "no_choices", "empty `choices`"),
    2: ("null_content", "null_content", "content is null"),
    3: ("wrong_content_type", "content_type", "Content-Type text/html"),
    4: ("huge", "too_large", f"over max_response_bytes ({MAX_BODY})"),
    5: ("trickle", "timeout", "trickling"),
    6: ("cut", "connection", "closed mid-body"),
    7: ("sse", "unexpected_stream", "event stream"),
    8: ("gzip_bomb", "too_large", "after decompression"),
    9: ("deflate_bomb", "too_large", "after decompression"),
    10: ("br_unasked", "parse", "Content-Encoding 'br' is not supported"),
    11: ("redirect_307", "redirect", "HTTP 307 redirect to"),
    12: ("redirect_307_empty", "redirect", "follow_redirects is off"),
    13: ("redirect_away", "redirect_cross_origin", "another origin"),
    14: ("switching_protocols", "switching_protocols", "101 Switching Protocols"),
}
#: what changes for the model with follow_redirects: true (None: answered, scored as on a clean server)
FOLLOWED: dict[int, tuple[str, str, str] | None] = {11: None, 12: None}
N = 17
#: the run's extra peak memory over a clean run's, at most (a bomb read whole would be 1000 MiB)
RSS_BOUND_KIB = 64 * 1024


# -- a certificate made for the test ----------------------------------------------------------


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, valid one day: (cert.pem, key.pem)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("neither the cryptography package nor openssl is here to make a certificate")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
            + ["-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=evalkit test"]
            + ["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
            check=True,
            capture_output=True,
        )
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "evalkit test")])
    now = dt.datetime.now(dt.timezone.utc)
    public = private.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert, key


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_certificate(tmp_path_factory.mktemp("tls"))


# -- real runs ------------------------------------------------------------------------------


def records(config: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(model, sample id) -> record."""
    run_dir = next(p for p in (config.parent / "runs").iterdir() if p.is_dir())
    lines = (run_dir / "records" / "synth_qa__exact_match.jsonl").read_text().splitlines()
    return {(record["model"], record["sample_id"]): record for record in map(json.loads, lines)}


def models(url: str) -> list[dict[str, Any]]:
    """The same server asked by two models: redirects refused (the default) and same-origin ones followed."""
    settings = {"batch_size": 4, "timeout": 2, "retry_attempts": 1, "max_response_bytes": MAX_BODY}
    return [
        model_entry("strict", url, **settings),
        model_entry("follow", url, follow_redirects=True, **settings),
    ]


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_each_hostile_answer_fails_its_sample_through_both_transports(
    scheme: str, tmp_path: Path, make_server: Any, tls: tuple[Path, Path]
) -> None:
    """http: the lean keep-alive client; https: aiohttp. Same reasons, same bound on memory."""
    env = {"EVALKIT_LEAN_HTTP": "1"}
    server_tls: dict[str, Any] = {}
    if scheme == "https":
        env["SSL_CERT_FILE"] = str(tls[0])
        server_tls["tls"] = tls
    runspecs = text_set(tmp_path, N)
    away = make_server()  # the other origin
    # each rule answers what the clean server's echo does, so an answer reached by a redirect scores the same
    rules = [
        {"match": f"question {i} w0", "answer": f"question {i} w0", "fault": kind}
        for i, (kind, _, _) in HOSTILE.items()
    ]
    server = make_server({"answers": rules, "redirect_to": away.base_url + "/chat/completions"}, **server_tls)
    clean_server = make_server(**server_tls)
    assert server.url.startswith(f"{scheme}://")
    clean = config_for(tmp_path / "clean", runspecs, models(clean_server.base_url))
    hostile = config_for(tmp_path / "hostile", runspecs, models(server.base_url))

    code, stderr, clean_rss = run_measured(clean, env)
    assert code == 0, stderr
    code, stderr, hostile_rss = run_measured(hostile, env)
    assert code == 0, stderr  # the run never crashes
    assert "Traceback" not in stderr and "Fatal error" not in stderr, stderr

    got, want = records(hostile), records(clean)
    assert all(r.get("failure") is None for r in want.values())
    for model in ("strict", "follow"):
        for i in range(N):
            sample_id = f"s{i:05d}"
            record = got[(model, sample_id)]
            expected = FOLLOWED.get(i, HOSTILE.get(i)) if model == "follow" else HOSTILE.get(i)
            if expected is None:
                assert record.get("failure") is None, (model, i, record)
                assert record["score"] == want[(model, sample_id)]["score"]
                continue
            kind, reason, words = expected
            assert record["failure"] == reason, (model, kind, record)
            assert words in record["error"], (model, kind, record["error"])
            assert record["score"] is None and record["prediction"] is None and record["response"] is None
            if reason in ("too_large", "redirect", "redirect_cross_origin", "switching_protocols", "parse"):
                assert record["attempts"] == (2 if reason == "parse" else 1), (kind, record)
    assert away.stats()["requests"] == 0  # the payload never went to the other origin
    print(f"{scheme}: peak RSS clean {clean_rss} KiB, hostile {hostile_rss} KiB")
    assert hostile_rss - clean_rss < RSS_BOUND_KIB


def test_https_verifies_the_certificate(tmp_path: Path, make_server: Any, tls: tuple[Path, Path]) -> None:
    """Without the test's certificate among the trusted ones, the https run fails each sample as `connection`."""
    runspecs = text_set(tmp_path, 2)
    server = make_server(tls=tls)
    config = config_for(tmp_path / "run", runspecs, [model_entry("m", server.base_url, retry_attempts=0)])
    env = {"SSL_CERT_FILE": os.devnull}  # trust nothing: the certificate is checked, not waved through
    code, stderr, _ = run_measured(config, env)
    assert code == 0, stderr
    for record in records(config).values():
        assert record["failure"] == "connection" and "certificate" in record["error"].lower(), record
    assert server.stats()["requests"] == 0


# -- one endpoint, in process ---------------------------------------------------------------


def ask(url: str, text: str, lean: bool, **extra: Any) -> Attempt:
    """One attempt at a chat request through the lean client or through aiohttp."""

    async def main() -> Attempt:
        pool = EndpointPool(EndpointProtocol(base_url=url, kind=RequestKind.CHAT), connections=2, timeout=5.0, **extra)
        try:
            return await pool.attempt(
                ModelRequest(kind=RequestKind.CHAT, model="m", messages=[{"role": "user", "content": text}], params={})
            )
        finally:
            await pool.close()

    with lean_switch(lean):
        return asyncio.run(main())


@contextlib.contextmanager
def lean_switch(lean: bool) -> Iterator[None]:
    """Requests through the lean client (plain http) or through aiohttp, whatever the suite's environment says."""
    before = os.environ.get("EVALKIT_LEAN_HTTP")
    os.environ["EVALKIT_LEAN_HTTP"] = "1" if lean else "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["EVALKIT_LEAN_HTTP"]
        else:
            os.environ["EVALKIT_LEAN_HTTP"] = before


@pytest.fixture(scope="module")
def hostile_server() -> Any:
    from evalkit.testing import start_test_server

    rules = [{"match": kind, "answer": "-", "fault": kind} for kind in ("gzip_bomb", "deflate_bomb")]
    rules += [{"match": kind, "answer": "-", "fault": kind} for kind in ("redirect_307", "switching_protocols")]
    rules += [{"match": "away", "answer": "-", "fault": "redirect_away"}]
    with start_test_server({"answers": rules, "redirect_to": "http://localhost:9/v1/chat/completions"}) as server:
        yield server


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "aiohttp"])
def test_a_bomb_stops_at_the_cap_on_both_transports(hostile_server: Any, lean: bool) -> None:
    for kind in ("gzip_bomb", "deflate_bomb"):
        attempt = ask(hostile_server.base_url, kind, lean, max_body=MAX_BODY)
        assert attempt.failure == "too_large" and not attempt.retryable, attempt
        assert "after decompression" in (attempt.error or "") and f"({MAX_BODY})" in (attempt.error or "")
    # a cap above the bomb's first megabytes still stops it long before its gigabyte
    attempt = ask(hostile_server.base_url, "gzip_bomb", lean, max_body=8 * MAX_BODY)
    assert attempt.failure == "too_large"


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "aiohttp"])
def test_redirects_and_protocol_switches_on_both_transports(
    hostile_server: Any, lean: bool, caplog: pytest.LogCaptureFixture
) -> None:
    url = hostile_server.base_url
    refused = ask(url, "redirect_307", lean)
    assert (refused.failure, refused.status, refused.retryable) == ("redirect", 307, False)
    assert "?redirected=1" in (refused.error or "")
    followed = ask(url, "redirect_307", lean, follow_redirects=True)
    assert followed.failure is None and followed.text == "-"
    away = ask(url, "away", lean, follow_redirects=True)
    assert (away.failure, away.retryable) == ("redirect_cross_origin", False)
    assert "http://localhost:9/v1/chat/completions" in (away.error or "")
    switched = ask(url, "switching_protocols", lean)
    assert (switched.failure, switched.status, switched.retryable) == ("switching_protocols", 101, False)
    assert not [r for r in caplog.records if r.name == "asyncio" or "Fatal error" in r.getMessage()]


def test_a_transcription_upload_follows_a_same_origin_307_with_its_whole_form(make_server: Any) -> None:
    """A multipart form can be sent once: the followed request gets a fresh one, the audio and fields intact."""
    from helpers import tone_wav

    from evalkit.data.audio.pcm import AudioPart

    server = make_server({"faults": {"rates": {"redirect_307": 1.0}}}, request_log=True)
    request = ModelRequest(
        kind=RequestKind.TRANSCRIPTION, model="m", audio=[AudioPart.from_wav(tone_wav(440.0, 0.5))], prompt="hello"
    )

    async def main(follow: bool) -> Attempt:
        pool = EndpointPool(
            EndpointProtocol(base_url=server.base_url, kind=RequestKind.TRANSCRIPTION),
            connections=1,
            timeout=5.0,
            follow_redirects=follow,
        )
        try:
            return await pool.attempt(request)
        finally:
            await pool.close()

    refused = asyncio.run(main(False))
    assert (refused.failure, refused.status) == ("redirect", 307)
    followed = asyncio.run(main(True))
    assert followed.failure is None and followed.text == "hello", followed
    received = server.log_events("received")
    bodies = {event["body_sha256"] for event in received}
    assert len(received) == 3 and len(bodies) == 1 and None not in bodies  # the same form, sent again whole


# -- the decoder both transports read bodies with -------------------------------------------


def _packed(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "wbits"), [("gzip", 31), ("x-gzip", 31), ("deflate", 15), ("deflate", -15), ("identity", 0)]
)
def test_a_body_fed_byte_by_byte_decodes_whole(encoding: str, wbits: int) -> None:
    from evalkit.clients.decoding import CappedBody

    data = b'{"choices": []}' * 100
    packed = data if wbits == 0 else _packed(data, wbits)
    body = CappedBody(encoding, 200, None, MAX_BODY)
    for index in range(len(packed)):
        body.feed(packed[index : index + 1])
    assert body.finish() == data


def test_the_decoder_stops_one_byte_past_the_cap_and_names_what_it_cannot_read() -> None:
    from evalkit.clients.decoding import CappedBody
    from evalkit.clients.transport import TransportFailure
    from evalkit.testing.hostile import bomb

    packed = bomb("gzip")
    body = CappedBody("gzip", 200, None, MAX_BODY)
    with pytest.raises(TransportFailure) as failure:
        for start in range(0, len(packed), 64 * 1024):
            body.feed(packed[start : start + 64 * 1024])
    assert failure.value.reason == "too_large" and body.size == MAX_BODY + 1
    assert f"over {MAX_BODY + 1} bytes after decompression so far" in str(failure.value)
    with pytest.raises(TransportFailure, match="'br' is not supported"):
        CappedBody("br", 200, None, MAX_BODY)
    truncated = CappedBody("gzip", 200, None, MAX_BODY)
    truncated.feed(_packed(b"hello" * 100, 31)[:-8])
    with pytest.raises(TransportFailure, match="gzip body is truncated"):
        truncated.finish()
    broken = CappedBody("deflate", 200, None, MAX_BODY)
    with pytest.raises(TransportFailure, match="cannot be decompressed"):
        broken.feed(b"\x78\x9c not deflate at all")


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "aiohttp"])
def test_following_stops_after_five_hops_and_never_turns_a_post_into_a_get(lean: bool) -> None:
    from aiohttp import web
    from helpers import serve_app

    hits: list[str] = []

    async def loop_forever(request: web.Request) -> web.Response:
        hits.append(request.method)
        status = 302 if request.match_info["tail"].startswith("found") else 308
        return web.Response(status=status, headers={"Location": f"/{request.match_info['tail']}x"})

    async def main() -> tuple[Attempt, Attempt]:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", loop_forever)
        runner, root = await serve_app(app)
        try:
            results = []
            for base in (f"{root}/v1", f"{root}/found"):
                pool = EndpointPool(
                    EndpointProtocol(base_url=base, kind=RequestKind.CHAT),
                    connections=1,
                    timeout=5.0,
                    follow_redirects=True,
                )
                try:
                    results.append(await pool.attempt(ModelRequest(kind=RequestKind.CHAT, model="m", messages=[])))
                finally:
                    await pool.close()
            return results[0], results[1]
        finally:
            await runner.cleanup()

    with lean_switch(lean):
        looping, found = asyncio.run(main())
    assert (looping.failure, looping.status) == ("redirect", 308)
    assert "more than 5 redirects" in (looping.error or "")
    assert (found.failure, found.status) == ("redirect", 302) and "turn the POST into a GET" in (found.error or "")
    assert hits == ["POST"] * 7  # six to the looping path (the first and five followed), one 302

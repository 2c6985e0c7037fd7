"""The lean keep-alive HTTP/1.1 client: what real servers on loopback send, and what the endpoint makes of it.

Three kinds of server: the project's scriptable test server (a subprocess),
its hostile answers (evalkit/testing/hostile.py), and small raw asyncio
servers in the test's own loop where a behaviour needs exact bytes (chunked,
``Connection: close``, a close mid-body, a server that closes idle keep-alive
connections, gzip, a 300 MB Content-Length, a trickle). Each hostile answer
is also asked through aiohttp, and both transports must fail it the same way.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import gzip
import json
import os
import re
import warnings
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import closed_port

from evalkit.clients.endpoint import Attempt, EndpointPool
from evalkit.clients.keepalive import KeepAlivePool, request_head
from evalkit.clients.protocol import ChatWire, EndpointProtocol
from evalkit.clients.request import ModelRequest
from evalkit.config import RequestKind
from evalkit.data.audio.pcm import AudioPart, wav_from_pcm16
from evalkit.testing.hostile import HOSTILE_KINDS

TOKEN = "sk-lean-secret-token-1234"
ANSWER = (
    b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": '
    b'{"role": "assistant", "content": "hello"}, "finish_reason": "stop"}], "usage": {"total_tokens": 3}}'
)


@pytest.fixture(autouse=True)
def lean_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the lean client, whatever the suite's environment says."""
    monkeypatch.delenv("EVALKIT_LEAN_HTTP", raising=False)


def chat(text: str = "hi") -> ModelRequest:
    return ModelRequest(kind=RequestKind.CHAT, model="m", messages=[{"role": "user", "content": text}], params={})


def endpoint(url: str, *, connections: int = 4, timeout: float = 5.0, **extra: Any) -> EndpointPool:
    return EndpointPool(
        EndpointProtocol(base_url=url, kind=RequestKind.CHAT, auth_token=extra.pop("auth_token", None)),
        connections=connections,
        timeout=timeout,
        **extra,
    )


def run(main: Callable[[], Awaitable[Any]], loop: str = "asyncio") -> Any:
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.run(main())
    return asyncio.run(main())


# -- raw servers with exact bytes ----------------------------------------------------------------------


class RawServer:
    """A loopback server whose ``answer(index, request, writer)`` writes the exact bytes of each answer.

    ``index`` counts requests over all connections; ``connections`` and
    ``requests`` record what arrived, ``closed`` how many connections ended.
    """

    def __init__(self, answer: Callable[[int, bytes, asyncio.StreamWriter], Awaitable[bool | None]]) -> None:
        self.answer = answer
        self.connections = 0
        self.closed = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                keep = await self.answer(len(self.requests) - 1, request, writer)
                await writer.drain()
                if keep is False:
                    return
        except ConnectionError:
            return
        finally:
            self.closed += 1
            writer.close()


def ok(body: bytes = ANSWER, *headers: str) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def always(data: bytes, keep: bool | None = None) -> Callable[[int, bytes, asyncio.StreamWriter], Awaitable[Any]]:
    async def answer(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool | None:
        writer.write(data)
        return keep

    return answer


async def ask(url: str, n: int = 1, **extra: Any) -> list[Attempt]:
    pool = endpoint(url, **extra)
    assert pool.lean
    try:
        return [await pool.attempt(chat(f"q{i}")) for i in range(n)]
    finally:
        await pool.close()


async def ask_once_and_hang_up(url: str, **extra: Any) -> Attempt:
    """One attempt that must leave no connection open (a failed one is closed, never kept for reuse)."""
    pool = endpoint(url, **extra)
    try:
        attempt = await pool.attempt(chat())
        assert pool._lean is not None and pool._lean.open_connections == 0
    finally:
        await pool.close()
    return attempt


async def until(condition: Callable[[], bool]) -> None:
    """Wait (at most 2 s) for something the other end of a socket does."""
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_content_length_answers_reuse_one_connection_and_send_prebuilt_bytes(loop: str) -> None:
    async def main() -> None:
        async with RawServer(always(ok())) as server:
            attempts = await ask(server.url, 5, auth_token=TOKEN)
            assert [a.text for a in attempts] == ["hello"] * 5 and attempts[0].usage == {"total_tokens": 3}
            assert server.connections == 1  # one keep-alive connection for all five
            head, _, body = server.requests[0].partition(b"\r\n\r\n")
            assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
            assert f"Authorization: Bearer {TOKEN}".encode() in head and b"Content-Type: application/json" in head
            assert b"\r\nHost: 127.0.0.1:" in head
            assert b'"content":"q0"' in body.replace(b" ", b"")

    run(main, loop)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_chat_body_with_audio_arrives_whole_though_written_in_pieces(loop: str) -> None:
    """The clip's base64 goes as its own buffer: the server reads one body, as long as Content-Length says."""
    wav = wav_from_pcm16(bytes(range(256)) * 2000)  # ~0.5 MB: more than one socket write
    clip = AudioPart.from_wav(wav)
    messages = [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"audio_index": 0}}]}]
    request = ModelRequest(kind=RequestKind.CHAT, model="m", messages=messages, audio=[clip], params={})
    assert len(ChatWire().json_pieces(request)) == 3

    async def main() -> None:
        async with RawServer(always(ok())) as server:
            pool = endpoint(server.url)
            try:
                attempts = [await pool.attempt(request) for _ in range(2)]
            finally:
                await pool.close()
            assert [a.text for a in attempts] == ["hello"] * 2 and server.connections == 1
            for sent in server.requests:
                head, _, body = sent.partition(b"\r\n\r\n")
                assert f"Content-Length: {len(body)}".encode() in head
                assert body == ChatWire().json_body(request)
                assert base64.b64decode(json.loads(body)["messages"][0]["content"][0]["input_audio"]["data"]) == wav

    run(main, loop)


def test_chunked_answer_is_joined() -> None:
    body = ANSWER
    pieces = [body[:10], body[10:50], body[50:]]
    chunked = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked

    async def main() -> None:
        async with RawServer(always(answer)) as server:
            attempts = await ask(server.url, 3)
            assert [a.text for a in attempts] == ["hello"] * 3 and server.connections == 1

    run(main)


@pytest.mark.parametrize(
    "answer",
    [
        ok(ANSWER, "Connection: close"),
        b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER),
        b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + ANSWER,  # the body runs to the close
    ],
    ids=["connection-close", "http-1.0", "http-1.0-until-close"],
)
def test_connection_close_and_http_1_0_answers_are_not_reused(answer: bytes) -> None:
    async def main() -> None:
        async with RawServer(always(answer, keep=False)) as server:
            attempts = await ask(server.url, 3)
            assert [a.text for a in attempts] == ["hello"] * 3
            assert server.connections == 3

    run(main)


@pytest.mark.parametrize(
    ("sent", "words"),
    [
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n" + ANSWER[:40],
            "40 bytes of 500",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n", "0 bytes of 500"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", "of a chunked body"),
    ],
    ids=["mid-body", "after-headers", "mid-chunked"],
)
def test_a_close_mid_body_fails_as_connection_and_is_never_retried(sent: bytes, words: str) -> None:
    async def main() -> None:
        async with RawServer(always(sent, keep=False)) as server:
            (attempt,) = await ask(server.url)
            assert attempt.failure == "connection" and "closed mid-body" in (attempt.error or "")
            assert words in (attempt.error or "")
            assert len(server.requests) == 1  # bytes of the answer came: the request is not sent again

    run(main)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_keep_alive_race_a_reused_connection_closed_unanswered_is_retried_once_on_a_fresh_one(loop: str) -> None:
    """The server answers the first request of each connection, then closes on the next without a byte."""
    # keyed by the writer itself, never id(writer): a closed connection's writer, once freed, may
    # leave its id to the next one, which then counts as reused and is closed on its first request
    per_connection: dict[asyncio.StreamWriter, int] = {}

    async def answer(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        per_connection[writer] = per_connection.get(writer, 0) + 1
        if per_connection[writer] > 1:
            return False  # closed as if by its idle timeout, just as the request came
        writer.write(ok())
        return True

    async def main() -> None:
        async with RawServer(answer) as server:
            attempts = await ask(server.url, 3, connections=1)
            assert [a.text for a in attempts] == ["hello"] * 3
            # q0 on connection 1; q1 on connection 1 (closed unanswered), again on 2; q2 likewise on 2 then 3
            assert server.connections == 3 and len(server.requests) == 5

    run(main, loop)


def test_a_fresh_connection_closed_unanswered_is_not_retried() -> None:
    async def answer(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        return False

    async def main() -> None:
        async with RawServer(answer) as server:
            (attempt,) = await ask(server.url)
            assert attempt.failure == "connection" and "without answering" in (attempt.error or "")
            assert len(server.requests) == 1

    run(main)


def test_a_connection_the_server_closed_while_idle_leaves_the_pool() -> None:
    async def answer(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(ok())
        return False  # answered keep-alive, then closed at once: an idle timeout of zero

    async def main() -> None:
        async with RawServer(answer) as server:
            pool = endpoint(server.url)
            try:
                first = await pool.attempt(chat())
                await until(lambda: pool._lean is not None and pool._lean.idle_connections == 0)  # the FIN came
                assert pool._lean is not None and pool._lean.idle_connections == 0
                second = await pool.attempt(chat())
            finally:
                await pool.close()
            assert first.text == second.text == "hello"
            assert server.connections == 2 and len(server.requests) == 2  # never written to a closed socket

    run(main)


def test_a_connection_idle_past_the_idle_timeout_is_closed_not_reused() -> None:
    async def main() -> None:
        async with RawServer(always(ok())) as server:
            pool = KeepAlivePool("127.0.0.1", int(server.url.split(":")[2].split("/")[0]), 4, 1 << 20, "n", 0.05)
            head = request_head("127.0.0.1", "/v1/chat/completions", {})
            try:
                first = await pool.post(head, b"{}", 5.0)
                second = await pool.post(head, b"{}", 5.0)  # at once: the same connection
                await asyncio.sleep(0.2)
                third = await pool.post(head, b"{}", 5.0)  # after the idle timeout: a new one
                await until(lambda: server.closed == 1)
            finally:
                await pool.close()
            assert first.body == second.body == third.body == ANSWER and first.content_type == "application/json"
            assert server.connections == 2 and server.closed >= 1 and pool.open_connections == 0

    run(main)


def test_content_length_over_the_cap_fails_too_large_unread() -> None:
    big = 300 * 1000 * 1000
    sent = 0

    async def answer(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        nonlocal sent
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {big}\r\n\r\n".encode())
        chunk = b"x" * (1024 * 1024)
        try:
            while sent < big:
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)
        except ConnectionError:
            pass
        return False

    async def main() -> None:
        async with RawServer(answer) as server:
            (attempt,) = await ask(server.url, max_body=1024 * 1024)
            assert attempt.failure == "too_large" and attempt.status == 200
            assert f"{big} bytes is over max_response_bytes (1048576)" in (attempt.error or "")
            await until(lambda: server.closed > 0)
            assert server.closed == 1 and sent < big  # the client hung up instead of reading 300 MB

    run(main)


def test_chunked_body_over_the_cap_is_cut_off_and_the_connection_closed() -> None:
    chunk = b"y" * 65536

    async def answer(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            for _ in range(64):
                writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        except ConnectionError:
            pass
        return True

    async def main() -> None:
        async with RawServer(answer) as server:
            attempt = await ask_once_and_hang_up(server.url, max_body=200_000)
            assert attempt.failure == "too_large" and "over max_response_bytes (200000)" in (attempt.error or "")
            assert "bytes so far" in (attempt.error or "")

    run(main)


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (None, "no answer within 0.3 s"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + b"x" * 7, "(7 bytes after the headers: a stalled"),
    ],
    ids=["no-answer", "trickle"],
)
def test_the_attempt_timeout_covers_the_answer_and_its_body(answer: bytes | None, words: str) -> None:
    async def respond(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        if answer is not None:
            writer.write(answer)
            await writer.drain()
        await asyncio.sleep(5)
        return False

    async def main() -> None:
        async with RawServer(respond) as server:
            attempt = await ask_once_and_hang_up(server.url, timeout=0.3)  # a timed-out socket is closed
            assert attempt.failure == "timeout" and words in (attempt.error or "")

    run(main)


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data)


def _zlib(data: bytes) -> bytes:
    return zlib.compress(data)


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(("encoding", "pack"), [("gzip", _gzip), ("deflate", _zlib), ("deflate", _raw_deflate)])
def test_compressed_answers_are_inflated(encoding: str, pack: Callable[[bytes], bytes]) -> None:
    async def main() -> None:
        async with RawServer(always(ok(pack(ANSWER), f"Content-Encoding: {encoding}"))) as server:
            attempts = await ask(server.url, 2)
            assert [a.text for a in attempts] == ["hello", "hello"]
            assert b"Accept-Encoding: gzip, deflate" in server.requests[0]

    run(main)


def test_a_gzip_bomb_stops_at_the_cap_and_a_broken_one_fails_to_parse() -> None:
    bomb = gzip.compress(b"{" + b" " * 50_000_000 + b"}")

    async def main() -> None:
        async with RawServer(always(ok(bomb, "Content-Encoding: gzip"))) as server:
            (attempt,) = await ask(server.url, max_body=1024 * 1024)
            assert len(bomb) < 1024 * 1024 and attempt.failure == "too_large"
        async with RawServer(always(ok(b"\x1f\x8bnot gzip at all", "Content-Encoding: gzip"))) as server:
            (attempt,) = await ask(server.url)
            assert attempt.failure == "parse" and "cannot be decompressed" in (attempt.error or "")

    run(main)


def test_interim_answer_retry_after_and_malformed_http() -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
    busy = (
        b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 7\r\nContent-Length: 35\r\n"
        b'\r\n{"error": {"message": "slow down"}}'
    )

    async def main() -> None:
        async with RawServer(always(early + ok())) as server:
            (attempt,) = await ask(server.url)
            assert attempt.text == "hello"
        async with RawServer(always(busy)) as server:
            (attempt,) = await ask(server.url)
            assert attempt.status == 429 and attempt.retry_after == 7.0 and "slow down" in (attempt.error or "")
            assert attempt.rate_limited
        async with RawServer(always(b"SMTP ready\r\n\r\n", keep=False)) as server:
            (attempt,) = await ask(server.url)
            assert attempt.failure == "connection" and "malformed HTTP answer" in (attempt.error or "")

    run(main)


def test_cannot_connect_names_the_endpoint_and_the_os_reason() -> None:
    async def main() -> None:
        (attempt,) = await ask(f"http://127.0.0.1:{closed_port()}/v1")
        assert attempt.failure == "connection"
        assert attempt.error is not None and attempt.error.startswith("cannot connect to http://127.0.0.1:")
        assert attempt.error.endswith(": Connection refused")
        assert attempt.endpoint_fault and attempt.retryable

    run(main)


def test_errors_are_scrubbed_of_the_token_sent_in_the_header_block() -> None:
    async def answer(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        echoed = request.split(b"Authorization: ", 1)[1].split(b"\r\n", 1)[0]
        body = b'{"error": {"message": "bad key: ' + echoed + b'"}}'
        writer.write(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        return True

    async def main() -> None:
        async with RawServer(answer) as server:
            (attempt,) = await ask(server.url, auth_token=TOKEN)
            assert attempt.failure == "http_401" and "bad key: Bearer ***" in (attempt.error or "")
            assert TOKEN not in (attempt.error or "")

    run(main)


def test_a_cancelled_attempt_closes_its_connection_and_the_pool_goes_on() -> None:
    async def main() -> None:
        gate = asyncio.Event()

        async def answer(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
            if index == 0:
                await gate.wait()
                return False
            writer.write(ok())
            return True

        async with RawServer(answer) as server:
            pool = endpoint(server.url, connections=1)
            try:
                task = asyncio.create_task(pool.attempt(chat()))
                while not server.requests:
                    await asyncio.sleep(0.01)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                lean = pool._lean
                assert lean is not None and lean.open_connections == 0 and lean.idle_connections == 0
                after = await pool.attempt(chat())  # the slot of the cancelled one is free again
                assert after.text == "hello"
            finally:
                gate.set()
                await pool.close()
            assert server.connections == 2

    run(main)


def test_a_cancellation_that_comes_as_the_connection_opens_is_never_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled in the very step its connection completes, an attempt still ends cancelled (a run stops on Ctrl-C)."""
    from evalkit.clients import keepalive

    made = keepalive._Connection.connection_made
    victims: list[asyncio.Task[Any]] = []

    def connection_made(self: Any, transport: asyncio.BaseTransport) -> None:
        made(self, transport)
        if victims:
            victims.pop().cancel()

    monkeypatch.setattr(keepalive._Connection, "connection_made", connection_made)

    async def main() -> None:
        async with RawServer(always(ok())) as server:
            pool = endpoint(server.url, connections=1)
            try:
                task = asyncio.create_task(pool.attempt(chat()))
                victims.append(task)
                with pytest.raises(asyncio.CancelledError):
                    await task
                lean = pool._lean
                assert lean is not None
                await until(lambda: lean.open_connections == 0)
                assert lean.open_connections == 0 and not server.requests  # closed, never written to
                assert (await pool.attempt(chat())).text == "hello"
            finally:
                await pool.close()

    run(main)


def test_more_requests_than_connections_wait_for_a_free_one() -> None:
    async def answer(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.01)
        writer.write(ok())
        return True

    async def main() -> None:
        async with RawServer(answer) as server:
            pool = endpoint(server.url, connections=2)
            try:
                attempts = await asyncio.gather(*(pool.attempt(chat(f"q{i}")) for i in range(12)))
            finally:
                await pool.close()
            assert [a.text for a in attempts] == ["hello"] * 12
            assert server.connections == 2

    run(main)


def test_waiting_for_a_connection_counts_against_the_attempt_timeout() -> None:
    async def answer(index: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.5 if index == 0 else 0)
        writer.write(ok())
        return True

    async def main() -> None:
        async with RawServer(answer) as server:
            pool = endpoint(server.url, connections=1, timeout=2.0)
            try:
                slow = asyncio.create_task(pool.attempt(chat("slow")))
                await until(lambda: len(server.requests) == 1)
                waited = await pool.attempt(chat("waits"), timeout=0.1)  # the one connection stays busy
                assert waited.failure == "timeout" and "no answer within 0.1 s" in (waited.error or "")
                assert (await slow).text == "hello"
                assert (await pool.attempt(chat("after"))).text == "hello"
            finally:
                await pool.close()
            assert server.connections == 1 and len(server.requests) == 2

    run(main)


def test_closing_the_pool_closes_every_socket_without_resource_warnings() -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def main() -> tuple[int, int, int]:
        async with RawServer(always(ok())) as server:
            before = open_fds()
            pool = endpoint(server.url, connections=8)
            await asyncio.gather(*(pool.attempt(chat(f"q{i}")) for i in range(8)))
            during = open_fds()
            await pool.close()
            await until(lambda: server.closed == server.connections)  # the server's ends close at the client's FIN
            after = open_fds()
            return before, during, after

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before, during, after = run(main)
        gc.collect()
    assert during > before and after == before
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], [str(w.message) for w in caught]


# -- which requests take the lean path --------------------------------------------------------------


def test_the_lean_path_carries_plain_http_json_only_and_the_switch_turns_it_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert endpoint("http://127.0.0.1:9/v1").lean
    assert not endpoint("https://api.example.com/v1").lean
    assert not endpoint("http://user:secret@127.0.0.1:9/v1").lean  # aiohttp turns these into basic auth
    transcription = EndpointPool(
        EndpointProtocol(base_url="http://127.0.0.1:9/v1", kind=RequestKind.TRANSCRIPTION), connections=1, timeout=1
    )
    assert not transcription.lean  # multipart stays with aiohttp
    assert not endpoint("http://127.0.0.1:9/v1", auth_token="bad\r\nX-Injected: 1").lean
    monkeypatch.setenv("EVALKIT_LEAN_HTTP", "0")
    assert not endpoint("http://127.0.0.1:9/v1").lean


def test_request_head_refuses_header_injection_and_keeps_the_query() -> None:
    head = request_head("h:1", "/v1/chat/completions?api-version=2024", {"api-key": "k"})
    assert head.startswith(b"POST /v1/chat/completions?api-version=2024 HTTP/1.1\r\nHost: h:1\r\n")
    assert head.endswith(b"api-key: k\r\nContent-Length: ")
    with pytest.raises(ValueError):
        request_head("h", "/", {"X": "a\nb"})
    assert KeepAlivePool("h", 1, 0, 10, "n").limit == 1


# -- the test server and its hostile answers, both transports ----------------------------------------


def _hostile_attempts(url: str, lean: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Attempt]:
    monkeypatch.setenv("EVALKIT_LEAN_HTTP", "1" if lean else "0")
    pool = EndpointPool(
        EndpointProtocol(base_url=url, kind=RequestKind.CHAT), connections=4, timeout=1.5, max_body=1024 * 1024
    )
    assert pool.lean is lean

    async def main() -> dict[str, Attempt]:
        try:
            kinds = [*HOSTILE_KINDS, "fine"]
            got = await asyncio.gather(*(pool.attempt(chat(f"ask {kind}")) for kind in kinds))
            return dict(zip(kinds, got))
        finally:
            await pool.close()

    return run(main)


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_hostile_answers_fail_the_same_way_through_both_transports(
    make_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = [{"match": f"ask {kind}", "answer": "-", "fault": kind} for kind in HOSTILE_KINDS]
    server = make_server({"answers": rules})
    lean = _hostile_attempts(server.base_url, True, monkeypatch)
    plain = _hostile_attempts(server.base_url, False, monkeypatch)
    expected = {
        "empty_choices": "no_choices",
        "null_content": "null_content",
        "wrong_content_type": "content_type",
        "huge": "too_large",
        "trickle": "timeout",
        "cut": "connection",
        "sse": "unexpected_stream",
        "gzip_bomb": "too_large",
        "deflate_bomb": "too_large",
        "br_unasked": "parse",
        "redirect_307": "redirect",
        "redirect_307_empty": "redirect",
        "redirect_away": "redirect_cross_origin",
        "switching_protocols": "switching_protocols",
        "fine": None,
    }
    assert {k: a.failure for k, a in lean.items()} == expected
    assert {k: a.failure for k, a in plain.items()} == expected
    assert lean["fine"].text == plain["fine"].text == "ask fine" and lean["fine"].raw is not None
    assert lean["fine"].usage == plain["fine"].usage
    for kind in ("empty_choices", "null_content", "wrong_content_type", "sse", *HOSTILE_KINDS[7:]):
        same = [re.sub(r"chatcmpl-\w+", "ID", a[kind].error or "") for a in (lean, plain)]
        assert same[0] == same[1], kind  # one classification: the same text (but the answer's id)
    assert "closed mid-body" in (lean["cut"].error or "") and "trickling" in (lean["trickle"].error or "")
    assert "over max_response_bytes (1048576)" in (lean["huge"].error or "")


@pytest.mark.parametrize(("switch", "aiohttp_imported"), [("1", False), ("0", True)])
def test_a_run_on_the_lean_client_never_imports_aiohttp(tmp_path: Path, switch: str, aiohttp_imported: bool) -> None:
    """aiohttp is ~90 ms of start-up; a plain-HTTP chat run has no use for it (python -X importtime)."""
    from helpers import config_for, evalkit_cli, model_entry, text_set

    from evalkit.testing import start_test_server

    with start_test_server() as server:
        config = config_for(tmp_path, text_set(tmp_path, 6), [model_entry("echo", server.base_url)])
        env = {**os.environ, "EVALKIT_LEAN_HTTP": switch}
        proc = evalkit_cli(
            ["run", str(config), "--no-cache", "--quiet"], tmp_path, env=env, python_flags=["-X", "importtime"]
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "evalkit.clients.keepalive" in imported
    assert ("aiohttp" in imported) is aiohttp_imported

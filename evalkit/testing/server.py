"""A scriptable OpenAI-compatible server for dry runs, tests and benchmarks.

It answers chat completions and transcriptions from a script (see
:mod:`evalkit.testing.script`), injects reproducible faults, limits its own
concurrency like a real replica would, and can log what it received. The
request path is kept lean (benchmarks drive it at thousands of requests per
second): no per-request logging unless a request log is asked for, bodies are
hashed and audio decoded only when a rule, a fault table or the log needs it.

Run it as a process::

    python -m evalkit.testing.server --script script.yaml --host 127.0.0.1 --port 0

It prints one line ``LISTENING http://127.0.0.1:<port>`` once it accepts
connections and stops cleanly on SIGTERM/SIGINT. With ``--tls-cert`` and
``--tls-key`` it speaks https (``LISTENING https://...``), so a client's TLS
path can be tested against a certificate made for the test.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import ssl
import sys
from pathlib import Path

from aiohttp import web

from evalkit.errors import ConfigError
from evalkit.testing.app import TEST_SERVER_KEY, TestServerApp, build_app
from evalkit.testing.script import Script, load_script
from evalkit.util.atomic import write_text_atomic

__all__ = ["TEST_SERVER_KEY", "TestServerApp", "build_app", "main", "serve"]


# -- process entry point -------------------------------------------------------------------


def _url(host: str, port: int, scheme: str = "http") -> str:
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def _write_port_file(path: Path, port: int) -> None:
    """Write atomically so a reader polling the file never sees it empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, f"{port}\n")


async def serve(
    script: Script,
    host: str = "127.0.0.1",
    port: int = 0,
    port_file: Path | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT, announcing the bound port on stdout (https with a ``tls`` context)."""
    app = build_app(script)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=2048, reuse_address=True, ssl_context=tls)
    await site.start()
    bound = runner.addresses[0][1]
    if port_file is not None:
        _write_port_file(port_file, bound)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sys.stdout.write(f"LISTENING {_url(host, bound, 'https' if tls is not None else 'http')}\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evalkit.testing.server", description=__doc__.split("\n\n")[0])
    p.add_argument("--script", type=Path, default=None, help="YAML or JSON script (defaults apply without one)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--port-file", type=Path, default=None, help="write the bound port here once listening")
    p.add_argument("--latency-ms", default=None, help='a number, or "min,max" for a seeded uniform draw')
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--default-answer", default=None)
    p.add_argument("--request-log", type=Path, default=None)
    p.add_argument("--tls-cert", type=Path, default=None, help="PEM certificate (chain): serve https")
    p.add_argument("--tls-key", type=Path, default=None, help="PEM private key of --tls-cert")
    p.add_argument("--model", default=None)
    p.add_argument(
        "--image-answer", default=None, help="colour | size | format: answer image requests from their pixels"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    overrides = {
        "latency_ms": args.latency_ms,
        "max_concurrency": args.max_concurrency,
        "default_answer": args.default_answer,
        "request_log": args.request_log,
        "model": args.model,
        "image_answer": args.image_answer,
    }
    try:
        script = load_script(args.script, overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tls: ssl.SSLContext | None = None
    if args.tls_cert is not None or args.tls_key is not None:
        if args.tls_cert is None or args.tls_key is None:
            print("error: --tls-cert and --tls-key go together", file=sys.stderr)
            return 2
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            tls.load_cert_chain(args.tls_cert, args.tls_key)
        except (OSError, ssl.SSLError) as exc:
            print(f"error: cannot load --tls-cert {args.tls_cert} / --tls-key {args.tls_key}: {exc}", file=sys.stderr)
            return 2
    try:
        import uvloop
    except ImportError:
        uvloop = None
    try:
        if uvloop is not None:
            uvloop.run(serve(script, args.host, args.port, args.port_file, tls))
        else:
            asyncio.run(serve(script, args.host, args.port, args.port_file, tls))
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

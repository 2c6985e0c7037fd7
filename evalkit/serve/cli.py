"""``evalkit serve``: run a local model behind an OpenAI-compatible HTTP API.

The process binds first, loads the model while /health says "loading", and
then prints one line, ``LISTENING http://HOST:PORT``, so scripts and tests
can start it with ``--port 0`` and read the port from stdout (or
``--port-file``). SIGTERM and SIGINT stop it: no new connections, in-flight
requests get up to ``--shutdown-timeout`` seconds, then the model is released.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal
import socket
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, NoReturn

from aiohttp import web

from evalkit.config import SERVE_DEFAULT_MAX_BATCH, SERVE_DEFAULT_MAX_BATCH_CUDA, serve_default_max_batch
from evalkit.errors import UserError
from evalkit.serve.backends.registry import (
    BACKENDS,
    backend_names,
    backend_spec,
    create_backend,
    load_backend_class,
)
from evalkit.serve.by_name import looks_like_hub_id
from evalkit.serve.guard import API_KEY_ENV, DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BODY_BYTES, default_body_budget
from evalkit.util.atomic import write_text_atomic
from evalkit.util.listening import reach_beyond_loopback

PROG = "evalkit serve"


class _Parser(argparse.ArgumentParser):
    """argparse that reports one line through UserError instead of usage + exit."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{message} (see `{PROG} --help`)")


def build_parser() -> argparse.ArgumentParser:
    backends = "\n".join(f"  {name:<13} {spec.summary}" for name, spec in sorted(BACKENDS.items()))
    parser = _Parser(
        prog=PROG,
        description="Serve a local model over an OpenAI-compatible API with dynamic batching. Requests must name "
        "the served model id (see --model-id): pocketsphinx serves 'pocketsphinx-en-us', transformers its --model "
        "path, unless --model-id sets another.",
        epilog=f"backends:\n{backends}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--backend", required=True, help=f"one of: {', '.join(backend_names())}")
    parser.add_argument("--model", metavar="PATH", help="model directory (required by the transformers backend)")
    parser.add_argument(
        "--model-id",
        metavar="NAME",
        help="the served model id: reported by GET /v1/models and expected as the requests' `model` (a config's "
        "models[].info.model). Default: 'pocketsphinx-en-us' for pocketsphinx, the --model path for transformers",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one (default: %(default)s)")
    parser.add_argument("--port-file", metavar="PATH", help="write the chosen port here once the model is loaded")
    parser.add_argument(
        "--max-batch-size",
        type=int,
        metavar="N",
        help=f"largest batch (default: {SERVE_DEFAULT_MAX_BATCH} on the CPU, {SERVE_DEFAULT_MAX_BATCH_CUDA} on a CUDA "
        "device; a batch that runs out of accelerator memory is run in halves and later ones made smaller)",
    )
    parser.add_argument(
        "--batch-wait-ms",
        type=float,
        default=5.0,
        metavar="MS",
        help="how long to gather a batch before running it (default: %(default)s)",
    )
    parser.add_argument(
        "--max-queue",
        type=int,
        default=256,
        metavar="N",
        help="requests waiting beyond this are refused with 503 + Retry-After (default: %(default)s)",
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default: %(default)s)")
    parser.add_argument(
        "--dtype",
        metavar="TYPE",
        help="transformers: weight and compute dtype: auto (bfloat16 on a CUDA device that supports it, "
        "float16 on one that does not, float32 on the CPU), float32, bfloat16, float16 (default: auto)",
    )
    parser.add_argument(
        "--threads",
        default="auto",
        metavar="N",
        help="transformers: torch's CPU threads for the model, N or auto (default auto: on the CPU, one thread "
        "unless torch's own thread count makes a batch 1.5x as fast, measured at start-up: a small model's generate "
        "is mostly Python, and extra threads spin on the cores the HTTP side needs; on CUDA, torch's own count)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="transformers: run the model in the server's own process (default: a process of its own, so the "
        "HTTP side, templating and decoding never take the model's interpreter lock)",
    )
    parser.add_argument(
        "--grammar", metavar="FILE", help="pocketsphinx: only recognise the sentences in FILE (one per line)"
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds in-flight requests get to finish on SIGTERM (default: %(default)s)",
    )
    safety = parser.add_argument_group(
        "safety (for a server left running or reachable from other machines)",
        "Refusals are OpenAI-style JSON errors. GET /health answers without the key (it tells only\n"
        "ok, loading or failed), so supervisors and evalkit's launcher can poll it.",
    )
    safety.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"require 'Authorization: Bearer KEY' on every request but GET /health (401 otherwise). Prefer the "
        f"environment variable {API_KEY_ENV}: a command line shows in `ps`. Never logged. Default: "
        f"${API_KEY_ENV}, else none (a warning when --host is not a loopback address)",
    )
    safety.add_argument(
        "--max-body-mb",
        type=float,
        default=DEFAULT_MAX_BODY_BYTES / 2**20,
        metavar="MB",
        help="largest request body; a larger Content-Length is refused with 413 before the body is read "
        "(default: %(default)g)",
    )
    safety.add_argument(
        "--body-budget-mb",
        type=float,
        metavar="MB",
        help="request bodies held in memory at once, all requests together (each holds its size until "
        "answered); beyond it a request gets 503 with Retry-After, its body unread (default: an eighth of the "
        "machine's memory, at least --max-body-mb)",
    )
    safety.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT_S,
        metavar="S",
        help="seconds a whole request body may take to arrive; a slower sender gets 408 and its connection "
        "is closed (default: %(default)g)",
    )
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return parser


def _check(args: argparse.Namespace) -> None:
    """Every argument mistake is found here, before a socket is bound or a model loaded."""
    spec = backend_spec(args.backend)
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be between 0 and 65535, got {args.port}")
    if args.max_batch_size is None:
        args.max_batch_size = serve_default_max_batch(args.device)
    if args.max_batch_size < 1:
        raise UserError(f"--max-batch-size must be at least 1, got {args.max_batch_size}")
    if args.max_queue < 1:
        raise UserError(f"--max-queue must be at least 1, got {args.max_queue}")
    if not 0 <= args.batch_wait_ms <= 60_000:
        raise UserError(f"--batch-wait-ms must be between 0 and 60000, got {args.batch_wait_ms}")
    if args.shutdown_timeout < 0:
        raise UserError(f"--shutdown-timeout must be >= 0, got {args.shutdown_timeout}")
    if spec.needs_model and not args.model:
        raise UserError(f"--backend {args.backend} needs --model PATH")
    if args.grammar is not None:
        if args.backend != "pocketsphinx":
            raise UserError("--grammar only applies to --backend pocketsphinx")
        if not Path(args.grammar).is_file():
            raise UserError(f"--grammar {args.grammar}: no such file")
    if args.dtype is not None and args.backend != "transformers":
        raise UserError("--dtype only applies to --backend transformers")
    if args.threads != "auto":
        if args.backend != "transformers":
            raise UserError("--threads only applies to --backend transformers")
        if not args.threads.isdigit() or int(args.threads) < 1:
            raise UserError(f"--threads must be auto or a whole number of at least 1, got {args.threads!r}")
        args.threads = int(args.threads)
    if args.in_process and spec.separate_target is None:
        raise UserError(
            f"--in-process only applies to backends whose model can run apart (--backend {args.backend} "
            "always runs in the server's process)"
        )
    # the flags are checked above; then a missing dependency, which is what to fix before any model path matters
    load_backend_class(args.backend, separate_process=not args.in_process)
    if (
        args.model
        and not Path(args.model).exists()
        and not (args.backend == "transformers" and looks_like_hub_id(args.model))
    ):
        raise UserError(f"--model {args.model}: no such file or directory")
    _check_safety(args)
    if args.port_file and not Path(args.port_file).resolve().parent.is_dir():
        raise UserError(f"--port-file {args.port_file}: its folder does not exist")


def _check_safety(args: argparse.Namespace) -> None:
    """The API key (flag, else environment) and the body limits; an error never shows the key itself."""
    where = "--api-key"
    if args.api_key is None:
        args.api_key = os.environ.get(API_KEY_ENV) or None  # an empty variable is no key
        where = API_KEY_ENV
    if args.api_key is not None and not _HEADER_TOKEN.fullmatch(args.api_key):
        raise UserError(
            f"{where}: the API key must be printable ASCII without spaces (it travels in an HTTP header), "
            f"and not empty; got one of {len(args.api_key)} characters"
        )
    if not 0 < args.max_body_mb <= 64 * 1024:
        raise UserError(f"--max-body-mb must be more than 0 and at most 65536, got {args.max_body_mb:g}")
    args.max_body_bytes = int(args.max_body_mb * 2**20)
    if args.body_budget_mb is None:
        args.body_budget_bytes = default_body_budget(args.max_body_bytes)
    elif args.body_budget_mb < args.max_body_mb:
        raise UserError(
            f"--body-budget-mb must be at least --max-body-mb ({args.max_body_mb:g}), got {args.body_budget_mb:g}: "
            "a request of the largest size would never fit"
        )
    else:
        args.body_budget_bytes = int(args.body_budget_mb * 2**20)
    if not 0 < args.body_timeout <= 86_400:
        raise UserError(f"--body-timeout must be more than 0 and at most 86400 seconds, got {args.body_timeout:g}")


#: what an HTTP header token may hold: visible ASCII, no spaces
_HEADER_TOKEN = re.compile(r"[\x21-\x7e]+")


def _warn_if_open(sock: socket.socket, api_key: str | None) -> None:
    """Listening beyond loopback without a key lets anyone who reaches the port use the model: say so once."""
    reach = None if api_key else reach_beyond_loopback(sock)
    if reach is None:
        return
    print(
        f"{PROG}: warning: listening on {reach} ({_url(sock)}) without an API key: anyone who can reach this "
        f"port can use the model. Set {API_KEY_ENV} (or --api-key), or listen on --host 127.0.0.1",
        file=sys.stderr,
        flush=True,
    )


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UserError(f"--host {host}: cannot resolve it ({exc.strerror})") from None
    family = infos[0][0]
    try:
        return socket.create_server((host, port), family=family, backlog=1024)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _in_daemon_thread(fn: Any, /, *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
    """Run ``fn`` in a daemon thread: a SIGTERM during a long model load must not wait for it."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any = None, error: BaseException | None = None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the loop, which decides
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result)

    threading.Thread(target=target, name="evalkit-load", daemon=True).start()
    return future


def _install_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    count = 0

    def on_signal() -> None:
        nonlocal count
        count += 1
        if count > 1:  # a second Ctrl-C: the user does not want to wait
            os._exit(130)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, on_signal)
        except (NotImplementedError, RuntimeError):  # Windows: plain handlers
            signal.signal(sig, lambda *_: loop.call_soon_threadsafe(on_signal))


def _write_port_file(path: str, port: int) -> None:
    write_text_atomic(path, f"{port}\n")  # a reader polling the file never sees it empty


async def _serve(args: argparse.Namespace) -> int:
    from evalkit.serve.app import attach_backend, create_app

    stop = asyncio.Event()
    _install_signals(stop)
    sock = _bind(args.host, args.port)
    _warn_if_open(sock, args.api_key)
    app = create_app(
        None,
        max_batch_size=args.max_batch_size,
        batch_wait_ms=args.batch_wait_ms,
        max_queue=args.max_queue,
        max_body_bytes=args.max_body_bytes,
        body_budget_bytes=args.body_budget_bytes,
        body_timeout_s=args.body_timeout,
        api_key=args.api_key,
    )
    # lingering_time=0: a request answered before its body ended (401, 413, 503, 408) has its connection
    # closed, where aiohttp would otherwise go on reading and discarding the body for up to 10 s
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=args.shutdown_timeout, lingering_time=0)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        options: dict[str, Any] = {"grammar": args.grammar} if args.grammar else {}
        if args.dtype is not None:
            options["dtype"] = args.dtype
        if args.backend == "transformers":
            options["threads"] = args.threads
        loading = _in_daemon_thread(
            create_backend,
            args.backend,
            model_path=args.model,
            device=args.device,
            max_batch_size=args.max_batch_size,
            model_id=args.model_id,
            separate_process=not args.in_process,
            **options,
        )
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({loading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not loading.done():
            loading.cancel()
            return 0
        stopping.cancel()
        backend = loading.result()
        failed: list[str] = []
        watch = getattr(backend, "watch", None)
        if watch is not None:  # a model process that dies ends the server, so a supervisor can restart it

            def model_ended(reason: str) -> None:
                failed.append(reason)
                loop.call_soon_threadsafe(stop.set)

            loop = asyncio.get_running_loop()
            watch(model_ended)
        attach_backend(app, backend)
        port = sock.getsockname()[1]
        if args.port_file:
            _write_port_file(args.port_file, port)
        print(f"LISTENING {_url(sock)}", flush=True)
        await stop.wait()
        if failed:
            print(f"{PROG}: error: {failed[0]}", file=sys.stderr, flush=True)
            return 1
        return 0
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``evalkit serve``; returns the exit code (2 for a usage mistake)."""
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        _check(args)
        logging.basicConfig(
            level=args.log_level.upper(), stream=sys.stderr, format="evalkit serve: %(levelname)s %(name)s: %(message)s"
        )
        return asyncio.run(_serve(args))
    except UserError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a model that fails to load: say so, keep the traceback for a bug report
        traceback.print_exc(file=sys.stderr)
        print(f"{PROG}: error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1

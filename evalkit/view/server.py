"""The viewer's HTTP server (aiohttp): the pages, their JSON twins under /api/, the media, the style sheet.

Every answer is built in a worker thread (an index may be built or read on
first), so one slow pair never stalls the others. Whatever goes wrong with a
run's files becomes a page that says so (404 for a name that is not there,
400 for a query value that cannot be used, 500 with the message for anything
else) and the server keeps serving. Pages carry a Content-Security-Policy
that allows no script at all and media from this server only. Before any of
that, :mod:`evalkit.view.access` checks the Host, the Origin and the key.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from evalkit.util import jsonutil
from evalkit.view import pages
from evalkit.view.access import Access, warn_if_open
from evalkit.view.index import remove_stale, stop_builds
from evalkit.view.links import Links
from evalkit.view.media import MediaMissing
from evalkit.view.ranges import MediaCache, byte_range
from evalkit.view.static import CSS
from evalkit.view.viewer import BadQuery, NotFound, Viewer
from evalkit.view.warm import Warmer

log = logging.getLogger("evalkit.view")

DEFAULT_PORT = 8765
#: ports tried after a taken one before giving up
_PORT_TRIES = 20
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; media-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
_VIEWER = web.AppKey("viewer", Viewer)
_WARM = web.AppKey("warm", Warmer)
_MEDIA = web.AppKey("media", MediaCache)
LINKS = Links()

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(body=jsonutil.dumps_bytes(value), status=status, content_type="application/json")


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Security headers on every answer; a failure becomes a page (or JSON) naming it, never a dead server."""
    api = request.path.startswith("/api/")
    try:
        response = await handler(request)
    except web.HTTPException as error:
        if error.status >= 400 and not api:
            response = _html(pages.error_page(error.status, error.reason or "", LINKS), error.status)
        else:
            raise
    except NotFound as error:
        response = _json({"error": str(error)}, 404) if api else _html(pages.error_page(404, str(error), LINKS), 404)
    except (BadQuery, MediaMissing) as error:
        status = 400 if isinstance(error, BadQuery) else 404
        response = (
            _json({"error": str(error)}, status) if api else _html(pages.error_page(status, str(error), LINKS), status)
        )
    except Exception as error:  # one bad file must not stop the viewer; the page names what failed
        log.exception("evalkit view: %s failed", request.path)
        message = f"{type(error).__name__}: {error}"
        response = _json({"error": message}, 500) if api else _html(pages.error_page(500, message, LINKS), 500)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _viewer(request: web.Request) -> Viewer:
    return request.app[_VIEWER]


async def _call(function: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(function, *args)


def _warm(request: web.Request, run_id: str) -> None:
    """Index a run's pairs first once its page is open, so a click on a cell finds them ready."""
    request.app[_WARM].prefer(run_id)


# -- pages -----------------------------------------------------------------------------------------------------


async def runs_page(request: web.Request) -> web.Response:
    return _html(pages.runs_page(await _call(_viewer(request).runs), LINKS))


async def run_page(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    data = await _call(_viewer(request).run, run_id)
    _warm(request, run_id)
    return _html(pages.run_page(data, LINKS))


async def pair_page(request: web.Request) -> web.Response:
    m = request.match_info
    data = await _call(_viewer(request).pair, m["run_id"], m["dataset"], m["metric"], dict(request.query))
    return _html(pages.pair_page(data, LINKS))


def _sample_id(request: web.Request) -> str:
    """The id from the path, or from ``?id=`` (how ``.`` and ``..`` travel, see links.py)."""
    found = request.match_info.get("sample_id")
    if found is None:
        found = request.query.get("id")
        if found is None:
            raise BadQuery("name the sample: .../sample/<dataset>/<metric>/<sample id> or ?id=<sample id>")
    return found


async def sample_page(request: web.Request) -> web.Response:
    m = request.match_info
    data = await _call(_viewer(request).sample, m["run_id"], m["dataset"], m["metric"], _sample_id(request))
    return _html(pages.sample_page(data, LINKS))


#: changed samples a comparison page lists, and the furthest its page may start
CHANGES_PAGE = 200
MAX_OFFSET = 10**9


def _offset(request: web.Request) -> int:
    """Where the page of changed samples starts (``?offset=``, 0 when absent)."""
    value = request.query.get("offset", "0")
    if not value.isascii() or not value.isdigit() or int(value) > MAX_OFFSET:
        raise BadQuery(f"offset={value[:40]!r}: expected a whole number from 0 to {MAX_OFFSET:,}")
    return int(value)


async def compare_page(request: web.Request) -> web.Response:
    params = {k: request.query.get(k, "") for k in ("a", "b", "pair")}
    runs = await _call(_viewer(request).compare_choices)
    if not all(params.values()):
        return _html(pages.compare_page(None, params, LINKS, runs=runs))
    try:
        offset = _offset(request)
        data = await _call(_viewer(request).compare, params["a"], params["b"], params["pair"], CHANGES_PAGE, offset)
    except (NotFound, BadQuery) as error:
        status = 404 if isinstance(error, NotFound) else 400
        return _html(pages.compare_page(None, params, LINKS, str(error), runs), status)
    return _html(pages.compare_page(data, params, LINKS, runs=runs))


async def media(request: web.Request) -> web.Response:
    m = request.match_info
    name = (m["run_id"], m["dataset"], m["key"], m["part"])
    found = request.app[_MEDIA].get(name)
    if found is None:
        found = await _call(_viewer(request).media_part, *name)
        request.app[_MEDIA].put(name, found)
    body, mime = found
    headers = {"Cache-Control": "private, max-age=300", "Accept-Ranges": "bytes"}
    wanted = byte_range(request.headers.get("Range", ""), len(body))
    if wanted is None:
        return web.Response(body=body, content_type=mime, headers=headers)
    if not wanted:
        headers["Content-Range"] = f"bytes */{len(body)}"
        return web.Response(status=416, headers=headers)
    headers["Content-Range"] = f"bytes {wanted.start}-{wanted.stop - 1}/{len(body)}"
    return web.Response(status=206, body=body[wanted.start : wanted.stop], content_type=mime, headers=headers)


async def static(request: web.Request) -> web.Response:
    if request.match_info["name"] != "view.css":
        raise web.HTTPNotFound(reason="no such file")
    return web.Response(text=CSS, content_type="text/css", headers={"Cache-Control": "max-age=300"})


# -- the JSON API ----------------------------------------------------------------------------------------------


async def api_runs(request: web.Request) -> web.Response:
    return _json({"runs": await _call(_viewer(request).runs)})


async def api_run(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    data = await _call(_viewer(request).run, run_id)
    _warm(request, run_id)
    return _json(data)


async def api_pair(request: web.Request) -> web.Response:
    m = request.match_info
    return _json(await _call(_viewer(request).pair, m["run_id"], m["dataset"], m["metric"], dict(request.query)))


async def api_sample(request: web.Request) -> web.Response:
    m = request.match_info
    return _json(await _call(_viewer(request).sample, m["run_id"], m["dataset"], m["metric"], _sample_id(request)))


async def api_compare(request: web.Request) -> web.Response:
    q = request.query
    missing = [k for k in ("a", "b", "pair") if not q.get(k)]
    if missing:
        raise BadQuery(
            f"compare needs {', '.join(missing)} (a=<run>[:<model>]&b=<run>[:<model>]&pair=<dataset>/<metric>)"
        )
    return _json(await _call(_viewer(request).compare, q["a"], q["b"], q["pair"], CHANGES_PAGE, _offset(request)))


def make_app(viewer: Viewer, key: str | None = None) -> web.Application:
    app = web.Application(middlewares=[Access(key).middleware(), _guard])
    app[_VIEWER] = viewer
    app[_WARM] = Warmer(viewer.catalog)
    app[_MEDIA] = MediaCache()

    async def _start_warming(app: web.Application) -> None:
        await asyncio.to_thread(remove_stale)  # what builds killed before left in the cache
        app[_WARM].start()

    async def _stop_warming(app: web.Application) -> None:
        await asyncio.to_thread(app[_WARM].stop)
        await asyncio.to_thread(stop_builds)

    app.on_startup.append(_start_warming)
    app.on_cleanup.append(_stop_warming)
    r = app.router
    # each name is one segment of any characters but "/": aiohttp's default ([^{}/]+) would leave a run, dataset
    # or sample whose name holds "{" or "}" unreachable through its own links
    r.add_get("/", runs_page)
    r.add_get("/static/{name:[^/]+}", static)
    r.add_get("/run/{run_id:[^/]+}/", run_page)
    r.add_get("/run/{run_id:[^/]+}/pair/{dataset:[^/]+}/{metric:[^/]+}/", pair_page)
    r.add_get("/run/{run_id:[^/]+}/sample/{dataset:[^/]+}/{metric:[^/]+}/{sample_id:[^/]+}", sample_page)
    r.add_get("/run/{run_id:[^/]+}/sample/{dataset:[^/]+}/{metric:[^/]+}/", sample_page)
    r.add_get("/run/{run_id:[^/]+}/media/{dataset:[^/]+}/{key:[^/]+}/{part:[^/]+}", media)
    r.add_get("/compare/", compare_page)
    r.add_get("/api/runs", api_runs)
    r.add_get("/api/run/{run_id:[^/]+}/", api_run)
    r.add_get("/api/run/{run_id:[^/]+}/pair/{dataset:[^/]+}/{metric:[^/]+}/", api_pair)
    r.add_get("/api/run/{run_id:[^/]+}/sample/{dataset:[^/]+}/{metric:[^/]+}/{sample_id:[^/]+}", api_sample)
    r.add_get("/api/run/{run_id:[^/]+}/sample/{dataset:[^/]+}/{metric:[^/]+}/", api_sample)
    r.add_get("/api/compare/", api_compare)
    return app


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``: ``port``, else the next free one of the following few (0: any)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    last: OSError | None = None
    for candidate in [port] if port == 0 else range(port, port + _PORT_TRIES):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind((host, candidate))
        except OSError as error:
            sock.close()
            if error.errno != errno.EADDRINUSE:
                raise
            last = error
            continue
        sock.listen(128)
        sock.setblocking(False)
        return sock
    raise OSError(errno.EADDRINUSE, f"ports {port} to {port + _PORT_TRIES - 1} are all taken ({last})")


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


async def serve(
    viewer: Viewer, sock: socket.socket, ready: Callable[[str], None] | None = None, key: str | None = None
) -> None:
    """Serve until cancelled (Ctrl-C); with ``key``, every request must carry it."""
    runner = web.AppRunner(make_app(viewer, key), access_log=None)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not in the main thread: no signals
        loop.add_signal_handler(signal.SIGTERM, stop.set)  # a kill ends it as Ctrl-C does: index builds stopped
    try:
        await web.SockSite(runner, sock).start()
        if ready is not None:
            ready(url_of(sock))
        await stop.wait()
    finally:
        await runner.cleanup()


def run_viewer(
    roots: list[Path],
    host: str,
    port: int,
    open_browser: bool,
    *,
    media_roots: list[Path] | None = None,
    key: str | None = None,
    show_paths: bool = False,
) -> int:
    """`evalkit view`: bind, print the URL, open it in the browser, serve until Ctrl-C."""
    sock = bind(host, port)
    viewer = Viewer(roots, media_roots, show_paths)

    def ready(url: str) -> None:
        print(f"evalkit view: {url}", flush=True)
        warn_if_open(sock, url, key)
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    try:
        asyncio.run(serve(viewer, sock, ready, key))
    except KeyboardInterrupt:
        print("evalkit view: stopped", file=sys.stderr)
    return 0

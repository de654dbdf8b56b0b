"""Pages of pictures served on loopback, each under a per-session token.

Why: Model Explorer's front end loads ES modules and resolves everything against
``<base href>``, so it needs http (a page opened from disk draws nothing). The CLI's
``graph --open`` and the language server's graph page serve it from here: a thread
running a small HTTP server bound to 127.0.0.1 (never another address), answering
only paths under ``/<token>/`` -- the token is random per server, so another local
user or a web page cannot read the graphs or make the editor jump -- with one folder
per page (``/<token>/<n>/``). A node selected in a page comes back as
``POST /<token>/<n>/exportlens/open?model=M&node=ID``, handed to ``on_open``.

What the editor wants the page to do goes the other way by long polling:
``GET /<token>/<n>/exportlens/events?after=K`` answers at once when the page's event
count is past ``K`` (``K`` -1: the page's first question), else when it passes or after
``WAIT_S``, with ``{"seq", "select", "version"}``: ``select`` the nodes to select
(:meth:`PageServer.select`, the editor's cursor), ``version`` how many times the page
was replaced by a newer result (:meth:`PageServer.replace`): the page reloads when it
grows, keeping Model Explorer's UI state, which its address carries.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Callable, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from exportlens.core.picture.page import Page

__all__ = ["WAIT_S", "PageServer"]

WAIT_S = 20.0  # a long poll's longest wait: well under any proxy's idle timeout

log = logging.getLogger(__name__)

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".woff2": "font/woff2",
}

# A selected node: (page number, model index in the page, node id) -> whether it leads somewhere.
OnOpen = Callable[[int, int, str], bool]


class PageServer:
    """Serves pages on ``127.0.0.1`` at a free port; :meth:`add` gives a page its address."""

    def __init__(self, on_open: OnOpen | None = None, *, keep: int = 16) -> None:
        self.token = secrets.token_urlsafe(18)
        self._pages: dict[int, Page] = {}
        # per page: [event count, what to select (None: nothing yet), times replaced]
        self._events: dict[int, list[Any]] = {}
        self._next = 0
        self._keep = keep  # pages kept: an editor asks for a new one at each request
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._closed = False
        self._on_open = on_open
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
                log.debug("graph page: " + format, *args)

            def do_GET(self) -> None:
                server._get(self)

            def do_POST(self) -> None:
                server._post(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> PageServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, name="exportlens-graph-pages", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread = None
        self._httpd.server_close()

    def add(self, page: Page) -> str:
        """Serve ``page``; its address."""
        with self._lock:
            number = self._next
            self._next += 1
            self._pages[number] = page
            self._events[number] = [0, None, 0]
            for old in [n for n in self._pages if n <= number - self._keep]:
                del self._pages[old]
                del self._events[old]
            self._changed.notify_all()
        return f"http://127.0.0.1:{self.port}/{self.token}/{number}/"

    def page(self, number: int) -> Page | None:
        """The page served as ``number``, while it is kept."""
        with self._lock:
            return self._pages.get(number)

    def numbers(self) -> list[int]:
        """The pages served now."""
        with self._lock:
            return sorted(self._pages)

    def replace(self, number: int, page: Page) -> bool:
        """Serve ``page`` at ``number``'s address instead (a newer result): an open page
        reloads. False when ``number`` is no longer served."""
        with self._changed:
            events = self._events.get(number)
            if events is None:
                return False
            self._pages[number] = page
            events[0] += 1
            events[2] += 1
            self._changed.notify_all()
            return True

    def select(self, number: int, model: int, nodes: Sequence[str]) -> bool:
        """Ask page ``number`` to select ``nodes`` (ids) of its ``model``: it selects
        the first the graph it shows holds. False when ``number`` is not served."""
        with self._changed:
            events = self._events.get(number)
            if events is None:
                return False
            events[0] += 1
            events[1] = {"model": model, "nodes": list(nodes)}
            self._changed.notify_all()
            return True

    def _wait_events(self, number: int, after: int) -> dict[str, Any] | None:
        """On a handler's thread: the page's events once past ``after`` (or ``WAIT_S``)."""
        with self._changed:
            self._changed.wait_for(lambda: self._closed or number not in self._events or self._events[number][0] > after, WAIT_S)
            events = self._events.get(number)
            if events is None:
                return None
            return {"seq": events[0], "select": events[1], "version": events[2]}

    def _page(self, handler: BaseHTTPRequestHandler) -> tuple[int, Page, str | None] | None:
        """The page a path names and the rest of the path (None: the folder without its
        slash), or None for a path with no page or the wrong token."""
        parts = urlsplit(handler.path).path.split("/", 3)
        # ["", token, number, rest]
        if len(parts) < 3 or not secrets.compare_digest(parts[1], self.token) or not parts[2].isdigit():
            return None
        with self._lock:
            page = self._pages.get(int(parts[2]))
        if page is None:
            return None
        return int(parts[2]), page, parts[3] if len(parts) > 3 else None

    def _get(self, handler: BaseHTTPRequestHandler) -> None:
        found = self._page(handler)
        if found is None:
            self._status(handler, HTTPStatus.NOT_FOUND)
            return
        number, page, rest = found
        if rest == "exportlens/events":
            after = (parse_qs(urlsplit(handler.path).query).get("after") or ["-1"])[0]
            events = self._wait_events(number, int(after)) if after.lstrip("-").isdigit() else None
            if events is None:
                self._status(handler, HTTPStatus.NOT_FOUND)
                return
            self._send(handler, json.dumps(events).encode(), "application/json")
            return
        if rest is None:  # the page's folder is what its base needs: with its slash
            handler.send_response(HTTPStatus.MOVED_PERMANENTLY)
            handler.send_header("Location", f"/{self.token}/{number}/")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        try:
            data = page.file(rest)
        except Exception:  # a page that cannot be made must not take the server down
            log.exception("graph page: %s", rest)
            self._status(handler, HTTPStatus.INTERNAL_SERVER_ERROR)
            return
        if data is None:
            self._status(handler, HTTPStatus.NOT_FOUND)
            return
        name = rest.rsplit("/", 1)[-1] or "index.html"
        kind = _TYPES.get("." + name.rsplit(".", 1)[-1] if "." in name else "", "application/octet-stream")
        self._send(handler, data, kind)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, data: bytes, kind: str) -> None:
        handler.send_response(HTTPStatus.OK)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Cache-Control", "no-store")
        handler.end_headers()
        handler.wfile.write(data)

    def _post(self, handler: BaseHTTPRequestHandler) -> None:
        found = self._page(handler)
        if found is None:
            self._status(handler, HTTPStatus.NOT_FOUND)
            return
        number, _page, rest = found
        query = parse_qs(urlsplit(handler.path).query)
        model, node = (query.get("model") or ["0"])[0], (query.get("node") or [""])[0]
        if rest != "exportlens/open" or not model.isdigit() or not node or self._on_open is None:
            self._status(handler, HTTPStatus.NOT_FOUND)
            return
        try:
            led = self._on_open(number, int(model), node)
        except Exception:
            log.exception("graph page: opening %s", node)
            led = False
        self._status(handler, HTTPStatus.NO_CONTENT if led else HTTPStatus.NOT_FOUND)

    @staticmethod
    def _status(handler: BaseHTTPRequestHandler, status: HTTPStatus) -> None:
        handler.send_response(status)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

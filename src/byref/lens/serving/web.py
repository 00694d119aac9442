"""The lens's HTTP face: routes to pages, served by the standard library or mounted as ASGI.

Routes: `/` the run, `/artifact/<ref>` an artifact (`?path=` a JSON Pointer, `?page=`),
`/artifact/<ref>/raw` an image's bytes, `/artifact/<ref>/page/<n>.png` a PDF page, and
`/result/<seq>/<part>` a recorded result's value. Only GET and HEAD are answered; anything else
is 405. The law: the server is a reader, and answers only requests for the names it was started
for (`byref.lens.serving.hosts`: any other `Host` is 421, so a rebinding page reads nothing).
`byref lens` runs it on the standard library's threading HTTP server (a local, single-user page
needs no framework, and a core install has no other); the gateway mounts
`byref.lens.serving.gateway.lens_app` behind its own bearer-token check.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from byref.lens.pages.artifacts import INLINE_IMAGES, artifact_page, pdf_png
from byref.lens.pages.markup import CSP, gap, page
from byref.lens.pages.overview import overview
from byref.lens.pages.results import result_page
from byref.lens.reading.costs import Costs
from byref.lens.reading.run import Run
from byref.lens.serving.hosts import allowed_hosts, misdirected
from byref.media import base

_ARTIFACT = re.compile(r"^/artifact/([^/]+)(/raw|/page/(\d{1,6})\.png)?$")
_RESULT = re.compile(r"^/result/(\d{1,20})/(\d{1,6})$")


@dataclass(frozen=True, slots=True)
class Response:
    """One HTTP response of the lens: status, content type, body and headers."""
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


class Pages(Protocol):
    """What a lens server serves: responses to GET and HEAD, under `base`."""

    base: str

    def respond(self, method: str, target: str) -> Response:
        """The response to `method` of `target`."""
        ...


class Lens:
    """The pages of one run. Turn costs are computed once (they stream stored data)."""

    def __init__(self, run: Run, *, base: str = "") -> None:
        self.run = run
        self.base = base.rstrip("/")
        self._costs = Costs(run)
        self._lock = threading.Lock()

    def respond(self, method: str, target: str) -> Response:
        """The response to a GET or HEAD of `target` (405 for any other method)."""
        if method not in ("GET", "HEAD"):
            return html_response(405, "Read-only", gap("The lens only reads: GET and HEAD."),
                                 self.base, {"Allow": "GET, HEAD"})
        url = urlsplit(target)
        path = url.path[len(self.base):] if self.base and url.path.startswith(self.base) \
            else url.path
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        page_no = _int(query.get("page"), 1)
        if path in ("", "/"):
            with self._lock:  # one computation of the costs, however many tabs load at once
                body = overview(self.run, self._costs, base=self.base)
            return html_response(200, f"run {self.run.source}", body, self.base)
        if match := _ARTIFACT.match(path):
            ref = unquote(match.group(1))
            if match.group(2) == "/raw":
                return self._raw(ref)
            if match.group(3):
                return self._pdf_page(ref, int(match.group(3)))
            body = artifact_page(self.run, ref, page=page_no, path=query.get("path", ""),
                                 base=self.base)
            status = 200 if self.run.head(ref) is not None else 404
            return html_response(status, f"artifact {ref}", body, self.base)
        if match := _RESULT.match(path):
            seq, part = int(match.group(1)), int(match.group(2))
            body = result_page(self.run, seq, part, query.get("field"), page=page_no,
                               base=self.base, path=query.get("path", ""))
            return html_response(200, f"result at seq {seq} part {part}", body, self.base)
        return html_response(404, "Not found", gap(f"No lens page at {path!r}."), self.base)

    def _raw(self, ref: str) -> Response:
        found = self.run.head(ref)
        media = base(found[1].media_type) if found else ""
        if found is None or media not in INLINE_IMAGES:
            # Only raster images are served raw: anything else could be a page of its own.
            return html_response(404, "Not found", gap(f"No image {ref!r} in this run."), self.base)
        got = self.run.get(ref)
        if got is None:
            return html_response(404, "Not found", gap(f"Artifact {ref!r} is absent."), self.base)
        return Response(200, media, got[1], _SAFE)

    def _pdf_page(self, ref: str, number: int) -> Response:
        found = self.run.head(ref)
        if found is None or found[1].media_type != "application/pdf":
            return html_response(404, "Not found", gap(f"No PDF {ref!r} in this run."), self.base)
        try:
            png = pdf_png(self.run, ref, number)
        except ImportError:
            png = None
        if png is None:
            return html_response(404, "Not found", gap(f"PDF {ref!r} has no page {number}."),
                                 self.base)
        return Response(200, "image/png", png, _SAFE)


_SAFE = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": CSP,
         "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def html_response(status: int, title: str, body: str, base: str,
                  extra: dict[str, str] | None = None) -> Response:
    """An HTML response with the lens's safety headers."""
    return Response(status, "text/html; charset=utf-8",
                    page(title, body, base=base).encode(), {**_SAFE, **(extra or {})})


def _int(text: str | None, default: int) -> int:
    return int(text) if text is not None and text.isascii() and text.isdigit() and \
        len(text) < 10 else default


# -- the standard library's server -------------------------------------------------------------
def make_server(lens: Pages, host: str = "127.0.0.1", port: int = 0, *,
                allow_hosts: Iterable[str] = ()) -> ThreadingHTTPServer:
    """A threading HTTP server answering `lens`'s pages; port 0 picks a free one. Only requests
    for the names it was started for are answered (`byref.lens.serving.hosts`; `allow_hosts` adds
    names, e.g. the one a proxy forwards)."""
    allowed: frozenset[str] = frozenset()

    class Handler(BaseHTTPRequestHandler):
        server_version = "byref-lens"

        def _misdirected(self, head_only: bool) -> bool:
            why = misdirected(self.path, self.headers.get("Host"), allowed)
            if why is None:
                return False
            self._send(Response(421, "text/plain; charset=utf-8", why.encode(), _SAFE),
                           head_only)
            return True

        def _send(self, response: Response, head_only: bool) -> None:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if not head_only:
                self.wfile.write(response.body)

        def _answer(self, head_only: bool) -> None:
            if self._misdirected(head_only):
                return
            try:
                response = lens.respond("GET", self.path)
            except Exception as exc:  # a damaged record: say so on the page, keep serving
                response = html_response(500, "Error", gap(
                    f"The lens could not draw this page: {type(exc).__name__}: {exc}"),
                    lens.base)
            self._send(response, head_only)

        def do_GET(self) -> None:
            self._answer(False)

        def do_HEAD(self) -> None:
            self._answer(True)

        def _refuse(self) -> None:
            if not self._misdirected(False):
                self._send(lens.respond(self.command, self.path), False)

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

        def log_message(self, format: str, *args: Any) -> None:
            return None  # the terminal shows the URL, not a line per request

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    bound = server.server_address
    allowed = allowed_hosts(host, int(bound[1]), allow_hosts)
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    """The http:// URL a running server listens on."""
    host, port = server.server_address[:2]
    host = host.decode() if isinstance(host, bytes) else str(host)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


__all__ = ["Lens", "Response", "html_response", "make_server", "url_of"]

"""ASGI guards in front of the endpoints: who may call (Host, Origin, the API key) and how big a body may be.

Each answers with an error object before the request reaches FastAPI, so a refused request costs neither the
body's memory nor a parse: Anthropic's shape on its Messages API's paths, OpenAI's elsewhere.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from urllib.parse import urlsplit

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .anthropic import MESSAGES_PATHS, error_response
from .errors import APIError

DRAIN_LIMIT = 64 << 20  # bytes of a refused body read and dropped, so the client gets the 413 and not a reset
LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def refusal(scope: Scope, err: APIError) -> Response:
    """``err`` in the shape the client of the path reads (an SDK raises its typed error from it)."""
    return error_response(err) if scope["path"] in MESSAGES_PATHS else err.response()


def _hostname(netloc: str) -> str:
    """``"[::1]:8080"`` -> ``"::1"``, ``"Example.com:80"`` -> ``"example.com"``."""
    return (urlsplit(f"//{netloc}").hostname or "").lower()


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def is_local_name(name: str) -> bool:
    """A name only this machine answers to: ``localhost`` (and ``*.localhost``) or a loopback address."""
    ip = _ip(name)
    return ip.is_loopback if ip is not None else (name in LOCAL_NAMES or name.endswith(".localhost"))


class HostGuard:
    """Refuses (403) a ``Host`` that names another site, and a browser ``Origin`` from another site.

    A web page can make a browser send requests here; under DNS rebinding its own domain resolves to
    this machine, so the ``Host`` header still carries that domain name. Allowed hosts: an IP address
    (a client that typed the address, not a name), localhost names, this machine's name, the bound
    host, and ``extra`` names. Allowed origins: pages on a loopback name or address (any port), the
    server's own origin, and the CORS origins. Clients outside browsers send no Origin.
    """

    def __init__(self, app: ASGIApp, bound: str, extra: tuple[str, ...], origins: tuple[str, ...]) -> None:
        self.app = app
        machine = socket.gethostname().lower()
        self.hosts = frozenset({bound.lower(), machine, f"{machine}.local", *(h.lower() for h in extra)})
        self.origins = frozenset(o.rstrip("/").lower() for o in origins)

    def host_allowed(self, name: str) -> bool:
        return not name or _ip(name) is not None or is_local_name(name) or name in self.hosts

    def origin_allowed(self, origin: str, host: str | None) -> bool:
        origin = origin.rstrip("/").lower()
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False  # "null" (a sandboxed frame, a file), or a browser extension's scheme
        return is_local_name(parts.hostname) or (host is not None and parts.netloc == host.lower())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = _header(scope, b"host")
            origin = _header(scope, b"origin")
            if host is not None and not self.host_allowed(_hostname(host)):
                err = APIError(403, f"the Host {host!r} is not this server's: requests must name it by address, "
                               "as localhost, or by a name given with --allow-host", code="forbidden_host")
                await refusal(scope, err)(scope, receive, send)
                return
            if origin is not None and not self.origin_allowed(origin, host):
                err = APIError(403, f"requests from the web page {origin!r} are refused: only pages on this "
                               "machine, or origins given with --cors-origin, may call this server",
                               code="forbidden_origin")
                await refusal(scope, err)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BearerAuth:
    """Rejects /v1/* requests without ``Authorization: Bearer <key>`` (401, before the body is read)."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self._expected = f"Bearer {key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and str(scope["path"]).startswith("/v1"):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                msg = "a valid API key is required: send 'Authorization: Bearer <key>' (or 'x-api-key: <key>')" \
                    if not given else "the API key is not valid"
                err = APIError(401, msg, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
                await refusal(scope, err)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BodyLimit:
    """Reads the whole body before the app runs, counting bytes as they arrive; past ``limit`` it is a 413.

    A declared ``Content-Length`` over the limit is refused before any byte is read; a chunked body
    is refused at the chunk that crosses the limit. The app then reads the body from memory.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _too_large(self, size: str) -> APIError:
        return APIError(413, f"the request body is {size}, over this server's limit of {self.limit:,} bytes "
                        "(serve --max-body-mb)", code="request_too_large")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _drain(receive, 0)
            await refusal(scope, self._too_large(f"{int(declared):,} bytes"))(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left before its body arrived
                return
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > self.limit:
                more = bool(message.get("more_body"))
                if more:
                    await _drain(receive, size)
                await refusal(scope, self._too_large("larger than that"))(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        first: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal first
            if first is not None:
                message, first = first, None
                return message
            return await receive()  # then only a disconnect can come

        await self.app(scope, replay, send)


async def _drain(receive: Receive, read: int) -> None:
    """Read and drop the rest of a refused body, up to :data:`DRAIN_LIMIT` bytes in all."""
    while read < DRAIN_LIMIT:
        message = await receive()
        if message["type"] != "http.request":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body"):
            return

"""The Hub's HTTP side: endpoint and headers read at call time, download errors, progress reports.

huggingface_hub reads ``HF_ENDPOINT`` once, at import; these helpers read it (and ``HF_TOKEN``)
again on every call so tests and users can point the app at another Hub.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import constants
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils._headers import build_hf_headers  # mypy: not re-exported by .utils

from engine.errors import EngineError

SHA256 = re.compile(r"^[0-9a-f]{64}$")
OFFLINE = "offline: the Hugging Face Hub cannot be reached"
RESOLVE_WAIT_S = 1.5  # the Hub's name looked up before a call: a lookup still going after this lets the call try

log = logging.getLogger(__name__)
Resolve = Callable[[str, int], object]


class DownloadError(EngineError):
    """A download failed (network, server); the partial file is kept for a resume."""


class OfflineError(DownloadError):
    """The Hub's host name does not resolve (no network, no name server): said at once, without retries."""


class NotFoundError(DownloadError):
    """The repository or file does not exist on the Hub (HTTP 404)."""


class AuthError(DownloadError):
    """The Hub refused access (HTTP 401/403): private or gated repository, missing or wrong HF_TOKEN."""


class ChecksumError(DownloadError):
    """The downloaded bytes do not have the expected SHA-256; the file was discarded."""


class SizeMismatchError(DownloadError):
    """The server sent more or fewer bytes than the size it declared; the partial file was removed."""


class NotEnoughSpaceError(DownloadError):
    """The destination disk cannot hold the files; nothing was downloaded."""


class DownloadCancelled(DownloadError):
    """The download was cancelled; the partial file is kept for a resume."""


@dataclass(frozen=True)
class DownloadProgress:
    """A progress report.

    For :func:`download_pair`, ``done`` and ``total`` count both files together (the pair is one unit)
    and ``filename`` is the file being transferred.

    Attributes:
        filename: The file being downloaded.
        done: Bytes present so far (including bytes resumed from a partial file or already downloaded).
        total: Bytes expected in all (0 when the server does not say).
        rate_bps: Transfer rate over the last few seconds, bytes per second.
        eta_s: Seconds left at that rate, or None when unknown.
    """

    filename: str
    done: int
    total: int
    rate_bps: float
    eta_s: float | None


ProgressCallback = Callable[[DownloadProgress], None]
FreeBytes = Callable[[Path], int]


@dataclass(frozen=True)
class RemoteFile:
    """A file on the Hub, as its metadata (HEAD) describes it."""

    repo: str
    filename: str
    url: str  # pinned to the commit the HEAD reported, so a resume continues the same bytes
    size: int | None
    sha256: str | None
    commit: str | None


def endpoint() -> str:
    # huggingface_hub reads HF_ENDPOINT once, at import; read it again at call time.
    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def headers() -> dict[str, str]:
    # token=None lets huggingface_hub read HF_TOKEN (at call time) or the token saved by `hf auth login`.
    headers = build_hf_headers(token=os.environ.get("HF_TOKEN") or None)
    headers["Accept-Encoding"] = "identity"
    return headers


def http_error(exc: HfHubHTTPError, repo: str, filename: str) -> DownloadError:
    status = exc.response.status_code if exc.response is not None else None
    if status == 404:
        return NotFoundError(f"{filename} was not found in {repo} on {endpoint()} (HTTP 404)")
    if status == 401:
        return AuthError(
            f"access to {repo} was refused (HTTP 401): the repository is private, gated or does not exist; "
            "set HF_TOKEN to a token that can read it"
        )
    if status == 403:
        return AuthError(
            f"access to {repo} is forbidden (HTTP 403): accept the model's licence on its Hub page and "
            "set HF_TOKEN to a token of that account"
        )
    return DownloadError(f"the Hub answered HTTP {status} for {repo}/{filename}")


def transport_error(exc: httpx2.HTTPError) -> DownloadError:
    if _name_error(exc) is not None:  # the name stopped resolving during the call
        return OfflineError(offline_text(_host()))
    return DownloadError(f"cannot reach {endpoint()}: {exc or type(exc).__name__}")


def offline_text(host: str) -> str:
    """What an :class:`OfflineError` says: :data:`OFFLINE`, the name that did not resolve and what to check."""
    return f"{OFFLINE} ({host} does not resolve; check the network connection)"


def _name_error(exc: BaseException | None) -> socket.gaierror | None:
    """The failed name lookup behind ``exc``, if one is in its chain of causes."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, socket.gaierror):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _host() -> str:
    return urlsplit(endpoint()).hostname or endpoint()


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def check_online(wait_s: float = RESOLVE_WAIT_S, resolve: Resolve | None = None) -> None:
    """Look the Hub's host name up before a call: a name that does not resolve is :class:`OfflineError` at once.

    huggingface_hub retries a failed connection five times with back-off (about 23 s) before it gives up, and
    then says only "[Errno -2] Name or service not known". A lookup that has not answered within ``wait_s``
    (a slow name server) lets the call go on and try for itself; an IP address is never looked up.

    Raises:
        OfflineError: The name does not resolve.
    """
    parts = urlsplit(endpoint())
    host = parts.hostname
    if not host or _is_address(host):
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return  # a malformed port: the call says what is wrong with the endpoint
    lookup: Resolve = resolve or (lambda h, p: socket.getaddrinfo(h, p, type=socket.SOCK_STREAM))
    failed: list[socket.gaierror] = []

    def run() -> None:
        try:
            lookup(host, port)
        except socket.gaierror as exc:
            failed.append(exc)
        except OSError as exc:  # anything else is the call's to report
            log.info("looking up %s: %s", host, exc)

    worker = threading.Thread(target=run, name="hub-lookup", daemon=True)  # a hung name server: never waited out
    worker.start()
    worker.join(wait_s)
    if failed:
        log.info("looking up %s: %s", host, failed[0])
        raise OfflineError(offline_text(host))
    if worker.is_alive():
        log.info("the lookup of %s took over %.1f s; the call goes on", host, wait_s)

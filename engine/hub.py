"""Downloads from the Hugging Face Hub: resumable, verified, cancellable, a pair as one unit.

Metadata (size, SHA-256 from ``X-Linked-Etag``, commit) comes from huggingface_hub's
``get_hf_file_metadata``; the transfer is a GET through huggingface_hub's own HTTP session and
headers (``HF_ENDPOINT``, ``HF_TOKEN``, user agent), read at call time. ``hf_hub_download`` itself
is not used: the installed version (2.x) downloads into a process-unique ``.incomplete`` file that it
deletes on any failure (huggingface_hub PR #4228), so it cannot resume after an interruption or a
cancel, and it reads 10 MiB chunks, too coarse to cancel promptly. Here the partial file is
``<name>.<sha256[:16]>.incomplete`` beside the destination, kept on failure and on cancel, and
continued with a ``Range`` request; it is hashed, then moved into place with ``os.replace``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import httpx2
from huggingface_hub import constants, get_hf_file_metadata, get_session, hf_hub_url, hf_raise_for_status
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
from huggingface_hub.utils._headers import build_hf_headers  # mypy: not re-exported by .utils

from . import gguf_remote
from .catalog import FileSpec, PairSpec
from .errors import EngineError, VocabMismatchError
from .store import InstalledPair, ModelStore, check_pair_files
from .vocab import VocabInfo, check_vocab_rule

log = logging.getLogger(__name__)

RETRIES = 3  # resumes within one call after a dropped connection
RETRY_WAIT_S = 0.5
DISK_RESERVE = 64 << 20  # keep this much free beyond the files themselves
PROGRESS_INTERVAL_S = 0.1
RATE_WINDOW_S = 5.0
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class DownloadError(EngineError):
    """A download failed (network, server); the partial file is kept for a resume."""


class NotFoundError(DownloadError):
    """The repository or file does not exist on the Hub (HTTP 404)."""


class AuthError(DownloadError):
    """The Hub refused access (HTTP 401/403): private or gated repository, missing or wrong HF_TOKEN."""


class ChecksumError(DownloadError):
    """The downloaded bytes do not have the expected SHA-256; the file was discarded."""


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


def _endpoint() -> str:
    # huggingface_hub reads HF_ENDPOINT once, at import; read it again at call time.
    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _headers() -> dict[str, str]:
    # token=None lets huggingface_hub read HF_TOKEN (at call time) or the token saved by `hf auth login`.
    headers = build_hf_headers(token=os.environ.get("HF_TOKEN") or None)
    headers["Accept-Encoding"] = "identity"
    return headers


def _http_error(exc: HfHubHTTPError, repo: str, filename: str) -> DownloadError:
    status = exc.response.status_code if exc.response is not None else None
    if status == 404:
        return NotFoundError(f"{filename} was not found in {repo} on {_endpoint()} (HTTP 404)")
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


def _transport_error(exc: httpx2.HTTPError) -> DownloadError:
    return DownloadError(f"cannot reach {_endpoint()}: {exc or type(exc).__name__}")


def remote_file(repo: str, filename: str, revision: str = "main") -> RemoteFile:
    """Ask the Hub for a file's size, SHA-256 and commit (one HEAD request, no body).

    Raises:
        NotFoundError: HTTP 404.
        AuthError: HTTP 401 or 403.
        DownloadError: Any other failure to reach the Hub.
    """
    endpoint = _endpoint()
    url = hf_hub_url(repo, filename, revision=revision, endpoint=endpoint)
    try:
        meta = get_hf_file_metadata(url, token=os.environ.get("HF_TOKEN") or None, endpoint=endpoint)
    except HfHubHTTPError as exc:
        raise _http_error(exc, repo, filename) from exc
    except httpx2.HTTPError as exc:
        raise _transport_error(exc) from exc
    except OfflineModeIsEnabled as exc:
        raise DownloadError("downloads are disabled: HF_HUB_OFFLINE is set") from exc
    etag = (meta.etag or "").lower()
    commit = meta.commit_hash
    pinned = hf_hub_url(repo, filename, revision=commit, endpoint=endpoint) if commit else url
    return RemoteFile(repo, filename, pinned, meta.size, etag if _SHA256.match(etag) else None, commit)


# -- progress --------------------------------------------------------------------------------
class _Progress:
    """Turns byte counts into throttled :class:`DownloadProgress` reports."""

    def __init__(self, callback: ProgressCallback | None, total: int) -> None:
        self.callback = callback
        self.total = total
        self.done = 0
        self.filename = ""
        self._samples: deque[tuple[float, int]] = deque()
        self._transferred = 0
        self._last = 0.0

    def add(self, n: int, *, transferred: bool) -> None:
        self.done += n
        if transferred:
            self._transferred += n
        now = time.monotonic()
        if now - self._last >= PROGRESS_INTERVAL_S:
            self.emit(now)

    def emit(self, now: float | None = None) -> None:
        if self.callback is None:
            return
        now = time.monotonic() if now is None else now
        self._last = now
        self._samples.append((now, self._transferred))
        while len(self._samples) > 2 and now - self._samples[0][0] > RATE_WINDOW_S:
            self._samples.popleft()
        t0, b0 = self._samples[0]
        rate = (self._transferred - b0) / (now - t0) if now > t0 else 0.0
        left = max(self.total - self.done, 0)
        eta = left / rate if rate > 0 else (0.0 if self.total and not left else None)
        self.callback(DownloadProgress(self.filename, self.done, self.total, rate, eta))


# -- disk space ------------------------------------------------------------------------------
def free_bytes(path: Path) -> int:
    """Free bytes on the disk holding ``path`` (or its nearest existing parent)."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


def _check_space(dest: Path, need: int, free: FreeBytes) -> None:
    have = free(dest)
    if need + DISK_RESERVE > have:
        raise NotEnoughSpaceError(
            f"not enough disk space in {dest}: the download needs {need / 1e9:.2f} GB (plus "
            f"{DISK_RESERVE >> 20} MiB to spare), only {have / 1e9:.2f} GB is free"
        )


# -- one file --------------------------------------------------------------------------------
def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _write_stamp(path: Path, sha256: str) -> None:
    st = path.stat()
    _stamp(path).write_text(f"{sha256} {st.st_size} {st.st_mtime_ns}\n")


def stamped_sha256(path: Path) -> str | None:
    """The SHA-256 recorded when ``path`` was verified, if the file is unchanged since."""
    try:
        sha, size, mtime = _stamp(path).read_text().split()
        st = path.stat()
    except (OSError, ValueError):
        return None
    return sha if (int(size), int(mtime)) == (st.st_size, st.st_mtime_ns) else None


def _partial(final: Path, sha256: str | None) -> Path:
    return final.with_name(f"{final.name}.{(sha256 or 'unknown')[:16]}.incomplete")


def _remaining(remote: RemoteFile, final: Path, sha256: str | None) -> int:
    if remote.size is None or (sha256 is not None and stamped_sha256(final) == sha256):
        return 0
    partial = _partial(final, sha256)
    have = partial.stat().st_size if partial.is_file() else 0
    return max(remote.size - have, 0)


class _Sink:
    """The partial file being written and the running SHA-256 of everything in it."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.f.write(data)
        self.digest.update(data)
        self.size += len(data)

    def restart(self) -> None:
        self.f.seek(0)
        self.f.truncate()
        self.digest = hashlib.sha256()
        self.size = 0


def _stream(url: str, sink: _Sink, progress: _Progress, cancel: threading.Event) -> None:
    headers = _headers()
    offset = sink.size
    if offset:
        headers["Range"] = f"bytes={offset}-"
    with get_session().stream(
        "GET", url, headers=headers, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT, follow_redirects=True
    ) as response:
        hf_raise_for_status(response)
        if offset and response.status_code != 206:  # the server ignored Range: start over
            log.info("server ignored the Range request; restarting %s", url)
            sink.restart()
            progress.add(-offset, transferred=False)
        for chunk in response.iter_bytes():
            if cancel.is_set():
                raise DownloadCancelled("download cancelled; run it again to resume where it stopped")
            sink.write(chunk)
            progress.add(len(chunk), transferred=True)


def _fetch(
    remote: RemoteFile, dest_dir: Path, sha256: str | None, progress: _Progress, cancel: threading.Event
) -> tuple[Path, str]:
    """Download (or resume, or find) one file; returns its path and SHA-256."""
    final = dest_dir / Path(remote.filename).name
    progress.filename = final.name
    if sha256 is not None and stamped_sha256(final) == sha256:
        progress.add(final.stat().st_size, transferred=False)
        return final, sha256
    dest_dir.mkdir(parents=True, exist_ok=True)
    partial = _partial(final, sha256)
    for stale in dest_dir.glob(f"{final.name}.*.incomplete"):
        if stale != partial:
            stale.unlink(missing_ok=True)
    with partial.open("a+b") as f:
        sink = _Sink(f)
        if remote.size is not None and f.tell() > remote.size:
            sink.restart()
        f.seek(0)
        while block := f.read(8 << 20):
            sink.digest.update(block)
            sink.size += len(block)
        if sink.size:
            log.info("resuming %s at %d bytes", final.name, sink.size)
            progress.add(sink.size, transferred=False)
        for attempt in range(RETRIES + 1):
            if cancel.is_set():
                raise DownloadCancelled("download cancelled; run it again to resume where it stopped")
            if remote.size is not None and sink.size >= remote.size:
                break
            try:
                _stream(remote.url, sink, progress, cancel)
                break
            except HfHubHTTPError as exc:
                raise _http_error(exc, remote.repo, remote.filename) from exc
            except httpx2.TransportError as exc:
                f.flush()
                if attempt == RETRIES:
                    raise DownloadError(
                        f"download of {final.name} kept failing ({exc or type(exc).__name__}); "
                        "run it again to resume"
                    ) from exc
                log.warning("%s interrupted at %d bytes (%s); resuming", final.name, sink.size, exc)
                cancel.wait(RETRY_WAIT_S * (attempt + 1))
        f.flush()
        os.fsync(f.fileno())
        size = sink.size
    progress.emit()
    if remote.size is not None and size != remote.size:
        raise DownloadError(
            f"{final.name} is {size:,} bytes, expected {remote.size:,}; run it again to resume"
        )
    got = sink.digest.hexdigest()
    if sha256 is not None and got != sha256:
        partial.unlink(missing_ok=True)
        raise ChecksumError(
            f"checksum mismatch for {final.name}: expected SHA-256 {sha256}, got {got}; "
            "the file was discarded"
        )
    if sha256 is None:
        log.warning("no SHA-256 known for %s/%s; recorded %s unverified", remote.repo, final.name, got)
    os.replace(partial, final)
    _write_stamp(final, got)
    return final, got


def _expected_sha(given: str | None, remote: RemoteFile) -> str | None:
    if given is not None:
        given = given.lower()
        if not _SHA256.match(given):
            raise EngineError(f"not a SHA-256 (64 hex digits): {given!r}")
    return given or remote.sha256


def download_file(
    repo: str,
    filename: str,
    *,
    dest_dir: Path,
    sha256: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    free: FreeBytes = free_bytes,
) -> Path:
    """Download one file into ``dest_dir``, resuming a partial download, verifying its SHA-256.

    Args:
        repo: Hub repository id.
        filename: File inside the repository.
        dest_dir: Destination folder (created if needed).
        sha256: Expected SHA-256; default: the Hub's ``X-Linked-Etag`` (LFS files).
        progress: Called with :class:`DownloadProgress` about ten times a second and at the end.
        cancel: Set it to stop; the partial file is kept and the next call resumes it.
        free: Free-space probe (injectable for tests).

    Returns:
        The verified file's path.

    Raises:
        NotFoundError, AuthError, ChecksumError, NotEnoughSpaceError, DownloadCancelled, DownloadError.
    """
    remote = remote_file(repo, filename)
    expected = _expected_sha(sha256, remote)
    final = dest_dir / Path(filename).name
    _check_space(dest_dir, _remaining(remote, final, expected), free)
    tracker = _Progress(progress, remote.size or 0)
    path, _ = _fetch(remote, dest_dir, expected, tracker, cancel or threading.Event())
    return path


# -- compatibility before download -----------------------------------------------------------
def _range_fetch(remote: RemoteFile) -> gguf_remote.Fetch:
    def fetch(start: int, length: int) -> bytes:
        headers = _headers()
        headers["Range"] = f"bytes={start}-{start + length - 1}"
        try:
            with get_session().stream(
                "GET", remote.url, headers=headers, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT,
                follow_redirects=True,
            ) as response:
                if response.status_code == 416:  # past the end of a short file
                    return b""
                hf_raise_for_status(response)
                if response.status_code != 206:
                    raise gguf_remote.HeaderUnavailable("the server does not answer range requests")
                return response.read()
        except HfHubHTTPError as exc:
            raise _http_error(exc, remote.repo, remote.filename) from exc
        except httpx2.HTTPError as exc:
            raise gguf_remote.HeaderUnavailable(f"range request failed: {exc}") from exc

    return fetch


def remote_vocab(remote: RemoteFile) -> VocabInfo | None:
    """The vocabulary of a GGUF on the Hub, read from its header by range requests; None if not possible."""
    try:
        return gguf_remote.vocab_from_metadata(gguf_remote.read_metadata(_range_fetch(remote)))
    except gguf_remote.HeaderUnavailable as exc:
        log.info("cannot check %s/%s before download: %s", remote.repo, remote.filename, exc)
        return None


def _check_remote(target: RemoteFile, draft: RemoteFile) -> None:
    t = remote_vocab(target)
    d = remote_vocab(draft) if t is not None else None
    if t is None or d is None:
        return
    try:
        check_vocab_rule(t, d)
    except VocabMismatchError as exc:
        raise VocabMismatchError(
            f"{draft.filename} cannot be the draft for {target.filename}: {exc}. Speculative decoding needs "
            "both models to share one tokenizer; pick a draft from the target's model family"
        ) from exc


def check_remote_pair(spec: PairSpec) -> None:
    """Apply llama.cpp's pairing rule to the GGUF headers on the Hub, before downloading.

    Skips silently when the server does not answer range requests or the header cannot be read.

    Raises:
        VocabMismatchError: The draft cannot draft for the target (the reason says why).
        NotFoundError, AuthError, DownloadError: The Hub refused the metadata requests.
    """
    _check_remote(_remote_for(spec.target), _remote_for(spec.draft))


def _remote_for(f: FileSpec) -> RemoteFile:
    return remote_file(f.repo, f.filename)


# -- a pair ----------------------------------------------------------------------------------
def download_pair(
    spec: PairSpec,
    store: ModelStore,
    *,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    free: FreeBytes = free_bytes,
) -> InstalledPair:
    """Download a catalog pair as one unit and register it in the store.

    Order: metadata of both files (404/401 fail here), disk space for both, the pairing rule on the
    GGUF headers (range requests), the target, the draft, the pairing rule on the downloaded files,
    then registration. A pair is registered only when both files are verified; an interrupted or
    cancelled pull resumes on the next call.

    Args:
        spec: The catalog pair.
        store: Where to put it.
        progress: Called with :class:`DownloadProgress` (both files counted together).
        cancel: Set it to stop; partial files are kept for a resume.
        free: Free-space probe (injectable for tests).

    Returns:
        The installed pair.

    Raises:
        NotFoundError, AuthError, ChecksumError, NotEnoughSpaceError, DownloadCancelled, DownloadError,
        VocabMismatchError, ModelLoadError.
    """
    cancel = cancel or threading.Event()
    files = [(f, _remote_for(f), store.hub_dir(f.repo)) for f in (spec.target, spec.draft)]
    plan = [(remote, dest, _expected_sha(f.sha256, remote)) for f, remote, dest in files]
    need = sum(_remaining(r, dest / Path(r.filename).name, sha) for r, dest, sha in plan)
    _check_space(store.root, need, free)
    _check_remote(plan[0][0], plan[1][0])
    tracker = _Progress(progress, sum(r.size or f.size for f, r, _ in files))
    (t_path, t_sha), (d_path, d_sha) = (_fetch(r, dest, sha, tracker, cancel) for r, dest, sha in plan)
    try:
        check_pair_files(t_path, d_path)
    except EngineError:
        store.discard_files([t_path, d_path])
        raise
    return store.register(spec.id, spec.name, t_path, d_path, "hub", target_sha256=t_sha, draft_sha256=d_sha)

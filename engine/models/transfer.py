"""One file's bytes: a resumable, cancellable, hashed transfer into a partial file, then into place.

The partial file is ``<name>.<sha256[:16]>.incomplete`` beside the destination, kept on failure
and on cancel, and continued with a ``Range`` request; it is hashed, then moved into place with
``os.replace``; a stamp (``<name>.verified``, a name kept for existing stores) records its SHA-256,
size and mtime.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections import deque
from pathlib import Path
from typing import BinaryIO

import httpx2
from huggingface_hub import constants, get_session, hf_raise_for_status
from huggingface_hub.errors import HfHubHTTPError

from engine.core.diskio import atomic_write_text, write_error
from engine.errors import DiskFullError

from .hub_http import (
    ChecksumError,
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    FreeBytes,
    NotEnoughSpaceError,
    ProgressCallback,
    RemoteFile,
    SizeMismatchError,
    headers,
    http_error,
)
from .pace import RATE_FLOOR, RateFloor, RateWatch

log = logging.getLogger(__name__)

RETRIES = 3  # resumes within one call after a dropped connection
RETRY_WAIT_S = 0.5
DISK_RESERVE = 64 << 20  # keep this much free beyond the files themselves
PROGRESS_INTERVAL_S = 0.1
RATE_WINDOW_S = 5.0


# -- progress --------------------------------------------------------------------------------
class Progress:
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
def check_space(dest: Path, need: int, free: FreeBytes) -> None:
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
    atomic_write_text(_stamp(path), f"{sha256} {st.st_size} {st.st_mtime_ns}\n", "a checksum stamp")


def stamped_sha256(path: Path) -> str | None:
    """The SHA-256 recorded when ``path`` was checked, if the file is unchanged since."""
    try:
        sha, size, mtime = _stamp(path).read_text().split()
        st = path.stat()
    except (OSError, ValueError):
        return None
    return sha if (int(size), int(mtime)) == (st.st_size, st.st_mtime_ns) else None


def _partial(final: Path, sha256: str | None) -> Path:
    return final.with_name(f"{final.name}.{(sha256 or 'unknown')[:16]}.incomplete")


def remaining(remote: RemoteFile, final: Path, sha256: str | None) -> int:
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


_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")
_REMOVED = "; the part downloaded was removed"


def _body_end(response: httpx2.Response, offset: int, declared: int | None, name: str) -> int:
    """Where in the file this response's body must end: the declared size (a 206: the end of its range, which
    must be the rest of the declared file). A server that says otherwise has the size wrong."""
    length = response.headers.get("Content-Length", "")
    if response.status_code == 206:
        crange = response.headers.get("Content-Range", "")
        m = _CONTENT_RANGE.match(crange)
        total = int(m[3]) if m else -1
        if m is None or int(m[1]) != offset or int(m[2]) + 1 != total or total != (declared or total):
            raise SizeMismatchError(
                f"the server answered the resume of {name} at byte {offset:,} with the range {crange!r}, not the "
                f"rest of its {declared or 0:,} bytes: the server's size for it is wrong{_REMOVED}"
            )
        end = total
    elif declared is not None:
        end = declared
    elif length.isdigit():
        end = int(length)
    else:
        raise DownloadError(f"the server did not say how large {name} is; a download without an end is refused")
    if length.isdigit() and int(length) != end - offset:
        raise SizeMismatchError(
            f"the server declared {name} as {end:,} bytes, then sent {int(length):,} bytes from byte {offset:,} on: "
            f"the server's size for it is wrong{_REMOVED}"
        )
    return end


def _stream(url: str, sink: _Sink, progress: Progress, cancel: threading.Event, declared: int | None,
            floor: RateFloor) -> None:
    """One GET of the rest of the file into ``sink``: never a byte past the declared size, never slower than
    ``floor``; a body that ends cleanly before that size means the size is wrong (a dropped one is resumed)."""
    hdrs = headers()
    offset = sink.size
    name = url.rsplit("/", 1)[-1]
    if offset:
        hdrs["Range"] = f"bytes={offset}-"
    with get_session().stream(
        "GET", url, headers=hdrs, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT, follow_redirects=True
    ) as response:
        hf_raise_for_status(response)
        if offset and response.status_code != 206:  # the server ignored Range: start over
            log.info("server ignored the Range request; restarting %s", url)
            sink.restart()
            progress.add(-offset, transferred=False)
            offset = 0
        end = _body_end(response, offset, declared, name)
        watch = RateWatch(floor, name)
        for chunk in response.iter_bytes():
            if cancel.is_set():
                raise DownloadCancelled("download cancelled; run it again to resume where it stopped")
            if len(chunk) > end - sink.size:  # the first byte past the declared size ends it
                raise SizeMismatchError(
                    f"the server sent more of {name} than the {end:,} bytes it declared: the server's size for "
                    f"it is wrong{_REMOVED}"
                )
            sink.write(chunk)
            progress.add(len(chunk), transferred=True)
            watch.add(len(chunk))
        if sink.size != end:
            raise SizeMismatchError(
                f"the server ended {name} after {sink.size:,} of the {end:,} bytes it declared: the server's "
                f"size for it is wrong{_REMOVED}"
            )


def fetch(
    remote: RemoteFile, dest_dir: Path, sha256: str | None, progress: Progress, cancel: threading.Event,
    floor: RateFloor = RATE_FLOOR,
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
    try:
        _, got = _fill(remote, partial, final, progress, cancel, floor)
    except SizeMismatchError:
        partial.unlink(missing_ok=True)  # resuming would ask the same wrong server for the same wrong size
        raise
    except OSError as exc:
        err = write_error(exc, partial, final.name)
        if isinstance(err, DiskFullError):
            err = DiskFullError(f"{err}; the part downloaded so far is kept, so running it again resumes")
        raise err from exc
    progress.emit()
    if sha256 is not None and got != sha256:
        partial.unlink(missing_ok=True)
        raise ChecksumError(
            f"checksum mismatch for {final.name}: expected SHA-256 {sha256}, got {got}; "
            "the file was discarded"
        )
    if sha256 is None:
        log.warning("no SHA-256 known for %s/%s; recorded %s unchecked", remote.repo, final.name, got)
    os.replace(partial, final)
    _write_stamp(final, got)
    return final, got


def _fill(
    remote: RemoteFile, partial: Path, final: Path, progress: Progress, cancel: threading.Event, floor: RateFloor
) -> tuple[int, str]:
    """Append the rest of the file to ``partial`` (resuming what is there); its size and SHA-256."""
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
                _stream(remote.url, sink, progress, cancel, remote.size, floor)
                break
            except HfHubHTTPError as exc:
                raise http_error(exc, remote.repo, remote.filename) from exc
            except httpx2.TooManyRedirects as exc:
                raise DownloadError(
                    f"the server kept redirecting the download of {final.name} ({exc}): a redirect loop on its "
                    "side; try again later"
                ) from exc
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
        return sink.size, sink.digest.hexdigest()

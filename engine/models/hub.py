"""Downloads from the Hugging Face Hub: resumable, checksummed, cancellable, a pair as one unit.

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

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import httpx2
from huggingface_hub import constants, get_hf_file_metadata, get_session, hf_hub_url, hf_raise_for_status
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from engine.core.diskio import free_bytes
from engine.core.vocab import VocabInfo, check_vocab_rule
from engine.errors import EngineError, ModelLoadError, VocabMismatchError

from . import gguf_remote
from .catalog import FileSpec, PairSpec
from .hub_http import (
    SHA256,
    AuthError,
    ChecksumError,
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    FreeBytes,
    NotEnoughSpaceError,
    NotFoundError,
    OfflineError,
    ProgressCallback,
    RemoteFile,
    SizeMismatchError,
    check_online,
    endpoint,
    headers,
    http_error,
    transport_error,
)
from .hubnames import file_name, repo_id
from .installed import InstalledPair
from .pace import RATE_FLOOR, RateFloor, RateWatch, TooSlowError
from .pairfiles import check_pair_files
from .store import ModelStore
from .transfer import DISK_RESERVE, Progress, check_space, fetch, remaining, stamped_sha256

__all__ = [
    "DISK_RESERVE",
    "AuthError",
    "ChecksumError",
    "DownloadCancelled",
    "DownloadError",
    "DownloadProgress",
    "NotEnoughSpaceError",
    "NotFoundError",
    "OfflineError",
    "RemoteFile",
    "SizeMismatchError",
    "TooSlowError",
    "check_remote_pair",
    "download_file",
    "download_pair",
    "free_bytes",
    "range_fetch",
    "remote_file",
    "remote_vocab",
    "stamped_sha256",
]

log = logging.getLogger(__name__)


def remote_file(repo: str, filename: str, revision: str = "main") -> RemoteFile:
    """Ask the Hub for a file's size, SHA-256 and commit (one HEAD request, no body).

    Raises:
        NotFoundError: HTTP 404.
        AuthError: HTTP 401 or 403.
        OfflineError: The Hub's name does not resolve (:func:`check_online`).
        DownloadError: Any other failure to reach the Hub.
    """
    repo, filename = repo_id(repo), file_name(filename)
    check_online()
    base = endpoint()
    url = hf_hub_url(repo, filename, revision=revision, endpoint=base)
    try:
        meta = get_hf_file_metadata(url, token=os.environ.get("HF_TOKEN") or None, endpoint=base)
    except HfHubHTTPError as exc:
        raise http_error(exc, repo, filename) from exc
    except httpx2.HTTPError as exc:
        raise transport_error(exc) from exc
    except OfflineModeIsEnabled as exc:
        raise DownloadError("downloads are disabled: HF_HUB_OFFLINE is set") from exc
    etag = (meta.etag or "").lower()
    commit = meta.commit_hash
    pinned = hf_hub_url(repo, filename, revision=commit, endpoint=base) if commit else url
    return RemoteFile(repo, filename, pinned, meta.size, etag if SHA256.match(etag) else None, commit)


def _expected_sha(given: str | None, remote: RemoteFile) -> str | None:
    if given is not None:
        given = given.lower()
        if not SHA256.match(given):
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
    free: FreeBytes | None = None,
    floor: RateFloor = RATE_FLOOR,
) -> Path:
    """Download one file into ``dest_dir``, resuming a partial download, checking its SHA-256.

    Args:
        repo: Hub repository id.
        filename: File inside the repository.
        dest_dir: Destination folder (created if needed).
        sha256: Expected SHA-256; default: the Hub's ``X-Linked-Etag`` (LFS files).
        progress: Called with :class:`DownloadProgress` about ten times a second and at the end.
        cancel: Set it to stop; the partial file is kept and the next call resumes it.
        free: Free-space probe (default: the disk's; injectable for tests).
        floor: The slowest transfer accepted (:mod:`engine.models.pace`); slower fails, keeping the partial file.

    Returns:
        The checked file's path.

    Raises:
        NotFoundError, AuthError, ChecksumError, NotEnoughSpaceError, DownloadCancelled, DownloadError.
    """
    remote = remote_file(repo, filename)
    expected = _expected_sha(sha256, remote)
    final = dest_dir / Path(filename).name
    check_space(dest_dir, remaining(remote, final, expected), free or free_bytes)
    tracker = Progress(progress, remote.size or 0)
    path, _ = fetch(remote, dest_dir, expected, tracker, cancel or threading.Event(), floor)
    return path


# -- compatibility before download -----------------------------------------------------------
def range_fetch(remote: RemoteFile) -> gguf_remote.Fetch:
    """A :data:`gguf_remote.Fetch` of ``remote`` by HTTP range requests, for reading its header."""

    def fetch(start: int, length: int) -> bytes:
        hdrs = headers()
        hdrs["Range"] = f"bytes={start}-{start + length - 1}"
        try:
            with get_session().stream(
                "GET", remote.url, headers=hdrs, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT,
                follow_redirects=True,
            ) as response:
                if response.status_code == 416:  # past the end of a short file
                    return b""
                hf_raise_for_status(response)
                if response.status_code != 206:
                    raise gguf_remote.HeaderUnavailable("the server does not answer range requests")
                out = bytearray()
                watch = RateWatch(RATE_FLOOR, remote.filename)
                for chunk in response.iter_bytes():
                    out += chunk[: length - len(out)]
                    if len(out) == length:  # never more than was asked for, whatever the server sends
                        break
                    watch.add(len(chunk))
                return bytes(out)
        except HfHubHTTPError as exc:
            raise http_error(exc, remote.repo, remote.filename) from exc
        except (httpx2.HTTPError, TooSlowError) as exc:
            raise gguf_remote.HeaderUnavailable(f"range request failed: {exc}") from exc

    return fetch


def remote_vocab(remote: RemoteFile) -> VocabInfo | None:
    """The vocabulary of a GGUF on the Hub, read from its header by range requests; None if not possible.

    Raises:
        ModelLoadError: The header is damaged in a way llama.cpp would refuse (:class:`gguf_remote.HeaderDamaged`).
    """
    try:
        return gguf_remote.vocab_from_metadata(gguf_remote.read_metadata(range_fetch(remote)))
    except gguf_remote.HeaderDamaged as exc:
        raise ModelLoadError(
            f"{remote.filename} in {remote.repo} is not a model llama.cpp can load: {exc}; nothing was downloaded"
        ) from exc
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
    free: FreeBytes | None = None,
    floor: RateFloor = RATE_FLOOR,
) -> InstalledPair:
    """Download a catalog pair as one unit and register it in the store.

    Order: metadata of both files (404/401 fail here), disk space for both, the pairing rule on the
    GGUF headers (range requests), the target, the draft, the pairing rule on the downloaded files,
    then registration. A pair is registered only when both checksums match; an interrupted or
    cancelled pull resumes on the next call.

    Args:
        spec: The catalog pair.
        store: Where to put it.
        progress: Called with :class:`DownloadProgress` (both files counted together).
        cancel: Set it to stop; partial files are kept for a resume.
        free: Free-space probe (default: the disk's; injectable for tests).
        floor: The slowest transfer accepted (:mod:`engine.models.pace`).

    Returns:
        The installed pair.

    Raises:
        NotFoundError, AuthError, ChecksumError, NotEnoughSpaceError, DownloadCancelled, DownloadError,
        VocabMismatchError, ModelLoadError.
    """
    files = [(f, _remote_for(f), store.hub_dir(f.repo)) for f in (spec.target, spec.draft)]
    plan = [(remote, dest, _expected_sha(f.sha256, remote)) for f, remote, dest in files]
    return pull_pair(plan, 1, store, spec.id, spec.name, check_headers=lambda: _check_remote(plan[0][0], plan[1][0]),
                     total=sum(r.size or f.size for f, r, _ in files), progress=progress, cancel=cancel, free=free,
                     floor=floor)


Planned = tuple[RemoteFile, Path, str | None]  # a file to fetch, the folder it goes to, its expected sha256


def pull_pair(plan: list[Planned], draft_at: int, store: ModelStore, pair_id: str, name: str, *,
              check_headers: Callable[[], None], total: int, progress: ProgressCallback | None = None,
              cancel: threading.Event | None = None, free: FreeBytes | None = None,
              floor: RateFloor = RATE_FLOOR) -> InstalledPair:
    """Fetch a pair's files (``plan``; the target's first file first, the draft's first at ``draft_at``) as one unit:
    disk space for what is left of all of them, ``check_headers`` before any byte, then every file, the pairing rule
    on the downloaded models (their files discarded if it fails), and registration. ``total``: bytes for progress."""
    cancel = cancel or threading.Event()
    need = sum(remaining(r, dest / Path(r.filename).name, sha) for r, dest, sha in plan)
    check_space(store.root, need, free or free_bytes)
    check_headers()
    tracker = Progress(progress, total)
    got = [fetch(r, dest, sha, tracker, cancel, floor) for r, dest, sha in plan]
    (t_path, t_sha), (d_path, d_sha) = got[0], got[draft_at]
    try:
        check_pair_files(t_path, d_path)
    except EngineError:
        store.discard_files([p for p, _ in got])
        raise
    return store.register(pair_id, name, t_path, d_path, "hub", target_sha256=t_sha, draft_sha256=d_sha)

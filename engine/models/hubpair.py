"""Download any Hub target with a draft as one unit, as ``pull PAIR_ID`` does for the catalog's pairs; or a Hub
draft for a GGUF file of the user's own.

Order: metadata of every file (404/401 fail here), disk space for all of them, the pairing rule on the GGUF
headers (range requests), the files (resumable), the pairing rule on the files, then registration. A split
model's shards all land in one folder, where llama.cpp finds them from the first.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path

from engine.core.vocab import check_vocab_rule
from engine.errors import VocabMismatchError

from .headers import HeaderReader, NotGgufError
from .hub import Planned, download_file, pull_pair, remote_file
from .hub_http import FreeBytes, ProgressCallback
from .installed import InstalledPair
from .pairfiles import explain_mismatch
from .search import GgufModel
from .store import ModelStore


@dataclass(frozen=True)
class HubPair:
    """A target on the Hub and its draft on the Hub."""

    target: GgufModel
    draft: GgufModel

    @property
    def id(self) -> str:
        return f"hub-{_slug(self.target.name)}+{_slug(self.draft.name)}"

    @property
    def name(self) -> str:
        return f"{_stem(self.target.name)} + {_stem(self.draft.name)}"


def _stem(name: str) -> str:
    return Path(name).name.removesuffix(".gguf")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", _stem(text).lower()).strip("-") or "model"


def _header_check(pair: HubPair) -> None:
    try:
        t = HeaderReader.hub_file(pair.target.repo, pair.target.first).vocab()
        d = HeaderReader.hub_file(pair.draft.repo, pair.draft.first).vocab()
    except NotGgufError:
        return  # a header this reader cannot parse: llama.cpp checks the files after the download
    try:
        check_vocab_rule(t, d)
    except VocabMismatchError as exc:
        raise explain_mismatch(Path(pair.target.first), Path(pair.draft.first), exc) from exc


def download_hub_pair(pair: HubPair, store: ModelStore, *, progress: ProgressCallback | None = None,
                      cancel: threading.Event | None = None, free: FreeBytes | None = None) -> InstalledPair:
    """Download ``pair`` (resuming partial files), check it, and register it in ``store``.

    Raises:
        NotFoundError, AuthError, ChecksumError, NotEnoughSpaceError, DownloadCancelled, DownloadError,
        VocabMismatchError, ModelLoadError, EngineError.
    """
    plan: list[Planned] = []
    for m in (pair.target, pair.draft):
        for f in m.files:
            remote = remote_file(m.repo, f)
            plan.append((remote, store.hub_dir(m.repo), remote.sha256))
    return pull_pair(plan, len(pair.target.files), store, pair.id, pair.name, check_headers=lambda: _header_check(pair),
                     total=sum(r.size or 0 for r, _, _ in plan), progress=progress, cancel=cancel, free=free)


@dataclass(frozen=True)
class DraftFor:
    """A GGUF file of the user's own and a draft for it on the Hub."""

    target: Path
    draft: GgufModel

    @property
    def id(self) -> str:
        return f"local-{_slug(self.target.name)}+{_slug(self.draft.name)}"

    @property
    def name(self) -> str:
        return f"{_stem(self.target.name)} + {_stem(self.draft.name)}"


def download_draft_for(pair: DraftFor, store: ModelStore, *, progress: ProgressCallback | None = None,
                       cancel: threading.Event | None = None) -> InstalledPair:
    """Download a Hub draft for a GGUF file of the user's own and register the two as an imported pair.

    The vocabulary rule is held to the target's header and the draft's (range requests) before a byte of
    weights comes, and to both files after (:meth:`ModelStore.import_pair`).

    Raises:
        VocabMismatchError: The draft cannot draft for the target.
        NotFoundError, AuthError, ChecksumError, NotEnoughSpaceError, DownloadCancelled, DownloadError,
        ModelLoadError, EngineError.
    """
    target, draft = pair.target, pair.draft
    try:
        vocabs = HeaderReader.local(target).vocab(), HeaderReader.hub_file(draft.repo, draft.first).vocab()
    except NotGgufError:
        vocabs = None  # a header this reader cannot parse: import_pair checks the files with llama.cpp
    try:
        if vocabs is not None:
            check_vocab_rule(*vocabs)
    except VocabMismatchError as exc:
        raise explain_mismatch(target, Path(draft.first), exc) from exc
    paths = [download_file(draft.repo, f, dest_dir=store.hub_dir(draft.repo), progress=progress, cancel=cancel)
             for f in draft.files]
    return store.import_pair(target, paths[0])

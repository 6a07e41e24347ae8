"""The Hub search's worker: searches, repository listings and draft searches off the UI thread.

Every request carries a number; the pane shows only answers to its latest request of each kind, so a slow
answer to an earlier search never overwrites a newer one.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from PySide6.QtCore import QObject, Signal, Slot

from app.worker.boundary import WorkerBoundary
from engine import ModelStore, hub_drafts, hub_search


class HubBoundary(WorkerBoundary):
    """:class:`WorkerBoundary` that says "offline: …" alone: no "Search failed: " before it."""

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if isinstance(exc, hub_search.OfflineError):
            self.failed = True
            self.fail(str(exc))
            return True
        return super().__exit__(exc_type, exc, tb)


class HubSearchWorker(QObject):
    """Runs the Hub's requests one at a time on its own thread.

    Signals:
        searched(int, SearchPage): a page of repositories.
        listed(int, RepoModels): a repository's GGUF models with fit.
        candidate(int, Candidate): one draft candidate, as soon as it is decided.
        drafts_found(int, DraftSearch): every candidate, ranked.
        failed(int, str): a request failed (the message is one line).
    """

    searched = Signal(int, object)
    listed = Signal(int, object)
    candidate = Signal(int, object)
    drafts_found = Signal(int, object)
    failed = Signal(int, str)

    def __init__(self, store: ModelStore, memory: tuple[int, int | None]) -> None:
        super().__init__()
        self._store = store
        self._memory = memory

    @Slot(int, str, int)
    def search(self, request: int, query: str, page: int) -> None:
        """One page of GGUF repositories matching ``query``."""
        with HubBoundary("Search failed", lambda m: self.failed.emit(request, m)):
            self.searched.emit(request, hub_search.search(query, page=page))

    @Slot(int, str)
    def list_repo(self, request: int, repo: str) -> None:
        """A repository's models with their fit on this machine."""
        with HubBoundary(f"Cannot list {repo}", lambda m: self.failed.emit(request, m)):
            self.listed.emit(request, hub_search.repo_models(repo, self._memory))

    @Slot(int, str, str)
    def drafts(self, request: int, repo: str, filename: str) -> None:
        """Draft candidates for ``repo/filename``, each reported as it is decided, then ranked."""
        with HubBoundary("Finding a draft failed", lambda m: self.failed.emit(request, m)):
            found = hub_drafts.find_drafts(repo, filename, store=self._store,
                                on_candidate=lambda c: self.candidate.emit(request, c))
            self.drafts_found.emit(request, found)

    @Slot(int, str)
    def drafts_for_file(self, request: int, path: str) -> None:
        """Draft candidates for a GGUF file on disk (the store's files and the Hub's), as :meth:`drafts` does."""
        with HubBoundary("Finding a draft failed", lambda m: self.failed.emit(request, m)):
            found = hub_drafts.find_drafts_for_file(Path(path), store=self._store,
                                                    on_candidate=lambda c: self.candidate.emit(request, c))
            self.drafts_found.emit(request, found)

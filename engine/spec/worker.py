"""The draft thread of SSD: serves drafts and builds the speculation tree while the target verifies."""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass

from .drafter import Draft, Drafter, TreeStats, fanout_fn

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Request:
    """What the target knows after a verify: the committed tokens and how many drafts it accepted."""

    committed: tuple[int, ...]
    accepted: int  # -1: no previous speculative round (forces a miss)
    k: int
    budget: int  # branches in the tree to build after serving; 0 = synchronous SD round
    geometric: bool
    acceptance: float
    backup: str
    early_stop: bool = True  # cut the tree short when the next request arrives
    draft_threads: int = 0  # set the draft context's threads before serving (0: leave)


@dataclass(slots=True)
class Reply:
    """A served draft and the speculation trees the thread finished since its previous reply."""

    draft: Draft | None
    error: BaseException | None = None
    trees: tuple[TreeStats, ...] = ()


class DraftWorker:
    """Owns the draft thread. Only this thread touches the drafter while it runs."""

    def __init__(self, drafter: Drafter) -> None:
        self.drafter = drafter
        self._requests: queue.SimpleQueue[Request | None] = queue.SimpleQueue()
        self._replies: queue.SimpleQueue[Reply] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="ssd-draft", daemon=True)
        self._trees: list[TreeStats] = []  # owned by the draft thread; handed over with the next reply
        self._thread.start()

    def request(self, req: Request) -> None:
        self._requests.put(req)

    def reply(self) -> tuple[Draft, tuple[TreeStats, ...]]:
        """The requested draft, and the trees built since the previous reply."""
        rep = self._replies.get()
        if rep.error is not None:
            raise rep.error
        assert rep.draft is not None
        return rep.draft, rep.trees

    def close(self, timeout: float = 30.0) -> None:
        """Ask the thread to exit (it checks between tree levels) and join it."""
        if self._thread.is_alive():
            self._requests.put(None)
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.error("draft thread did not stop within %.0f s", timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        req = self._requests.get()
        while req is not None:
            try:
                if req.draft_threads:
                    self.drafter.set_threads(req.draft_threads)
                draft = self.drafter.serve(req.committed, req.accepted, req.k, req.backup)
            except BaseException as exc:  # crossing threads: the target side re-raises it
                self._replies.put(Reply(None, exc))
                req = self._requests.get()
                continue
            self._replies.put(Reply(draft, trees=tuple(self._trees)))
            self._trees.clear()
            if req.budget > 0 and draft.tokens:
                try:
                    stats = self.drafter.build_tree(
                        req.committed,
                        draft,
                        depth=req.k,
                        budget=req.budget,
                        fanout=fanout_fn(req.geometric, req.acceptance),
                        interrupt=(lambda: not self._requests.empty()) if req.early_stop else (lambda: False),
                    )
                    self._trees.append(stats)
                except BaseException:
                    log.exception("speculation tree failed; the next round will miss")
                    self.drafter.reset()
            req = self._requests.get()

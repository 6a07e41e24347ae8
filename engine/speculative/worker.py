"""Where drafts are made: on the draft thread (ssd), inline on the caller's thread (sd), or each request where
it runs best (auto).

All are :class:`~engine.speculative.types.DraftSource`\\ s, so one sd step serves either way. The draft
thread also builds the speculation tree after serving, while the target verifies.

Why auto's sequential rounds stay on the caller's thread: llama.cpp's CPU backend (OpenMP builds) keeps one
OpenMP thread pool per calling thread, and once the pools of the target's and the draft's threads hold more
threads than there are cores, libgomp stops spinning at its barriers and sleeps instead: every later target
decode of the process runs about 1.5x slower (measured: 23 -> 36 ms per token on the 2-core host, for the
rest of the reply). A draft thread that only ever decodes with the concurrent split's one thread keeps no
pool; one that drafted with all cores does.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .fanout import fanout_fn
from .types import Draft, DraftMaker, DraftRequest, TreeStats

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DraftReply:
    """A served draft (or the error serving it raised) and the trees finished since the previous reply."""

    draft: Draft | None
    error: BaseException | None = None
    trees: tuple[TreeStats, ...] = ()


class InlineDrafts:
    """Serves each request on the caller's thread when it asks for the reply; builds no tree."""

    def __init__(self, drafter: DraftMaker) -> None:
        self.drafter = drafter
        self._pending: DraftRequest | None = None

    def request(self, req: DraftRequest) -> None:
        if req.budget:
            raise ValueError("inline drafting builds no speculation tree (budget must be 0)")
        self._pending = req

    def reply(self) -> tuple[Draft, tuple[TreeStats, ...]]:
        req, self._pending = self._pending, None
        assert req is not None, "reply() without a request"
        if req.draft_threads:
            self.drafter.set_threads(req.draft_threads)
        return self.drafter.serve(req.committed, req.accepted, req.k, req.backup), ()

    def close(self) -> None:
        self._pending = None

    def set_threads(self, n: int) -> None:
        self.drafter.set_threads(n)


_PAUSE = "pause"  # a request: stop building, reply with the trees so far, touch nothing until the next request


class DraftWorker:
    """Owns the draft thread. Only this thread touches the drafter while it runs (except after :meth:`pause`)."""

    def __init__(self, drafter: DraftMaker) -> None:
        self.drafter = drafter
        self._requests: queue.SimpleQueue[DraftRequest | str | None] = queue.SimpleQueue()
        self._replies: queue.SimpleQueue[DraftReply] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="ssd-draft", daemon=True)
        self._trees: list[TreeStats] = []  # owned by the draft thread; handed over with the next reply
        self._pausing = threading.Event()  # a pause is asked: a tree stops at its next level, early stop or not
        self._thread.start()

    def request(self, req: DraftRequest) -> None:
        self._requests.put(req)

    def reply(self) -> tuple[Draft, tuple[TreeStats, ...]]:
        """The requested draft, and the trees built since the previous reply."""
        rep = self._replies.get()
        if rep.error is not None:
            raise rep.error
        assert rep.draft is not None
        return rep.draft, rep.trees

    def pause(self) -> tuple[TreeStats, ...]:
        """Wait until the draft thread is idle (a tree it builds is cut short); the trees finished since the
        previous reply. Until the next :meth:`request` the caller's thread may use the drafter."""
        if not self._thread.is_alive():
            return ()
        self._pausing.set()
        self._requests.put(_PAUSE)
        return self._replies.get().trees

    def close(self, timeout: float = 30.0) -> None:
        """Ask the thread to exit (it checks between tree levels) and join it."""
        if self._thread.is_alive():
            self._requests.put(None)
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.error("draft thread did not stop within %.0f s", timeout)

    def set_threads(self, n: int) -> None:
        if self._thread.is_alive():
            raise RuntimeError("the draft thread still runs; close it first")
        self.drafter.set_threads(n)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _interrupt(self, early_stop: bool) -> Callable[[], bool]:
        """When a tree stops growing: at a pause; with early stop also as soon as the next request waits."""
        if early_stop:
            return lambda: self._pausing.is_set() or not self._requests.empty()
        return self._pausing.is_set

    def _run(self) -> None:
        req = self._requests.get()
        while req is not None:
            if isinstance(req, str):  # _PAUSE: the caller's thread takes the drafter until the next request
                self._pausing.clear()
                self._replies.put(DraftReply(None, trees=tuple(self._trees)))
                self._trees.clear()
                req = self._requests.get()
                continue
            try:
                if req.draft_threads:
                    self.drafter.set_threads(req.draft_threads)
                draft = self.drafter.serve(req.committed, req.accepted, req.k, req.backup)
            except BaseException as exc:  # crossing threads: the target side re-raises it
                self._replies.put(DraftReply(None, exc))
                req = self._requests.get()
                continue
            self._replies.put(DraftReply(draft, trees=tuple(self._trees)))
            self._trees.clear()
            if req.budget > 0 and draft.tokens:
                try:
                    stats = self.drafter.build_tree(
                        req.committed,
                        draft,
                        depth=req.k,
                        budget=req.budget,
                        fanout=fanout_fn(req.geometric, req.acceptance),
                        interrupt=self._interrupt(req.early_stop),
                    )
                    self._trees.append(stats)
                except BaseException:
                    log.exception("speculation tree failed; the next round will miss")
                    self.drafter.reset()
            req = self._requests.get()


class SplitDrafts:
    """auto's draft source: rounds that build a tree on the draft thread (they overlap the target's verify), the
    others — sequential sd rounds, drafted with every core — on the caller's thread, like plain sd."""

    def __init__(self, drafter: DraftMaker, ready: Callable[[], None] | None = None) -> None:
        self.worker = DraftWorker(drafter)
        self.inline = InlineDrafts(drafter)
        self._via: DraftWorker | InlineDrafts = self.worker
        self._trees: tuple[TreeStats, ...] = ()
        self._ready = ready  # waits until the drafter is free (its prompt read done), before its first use

    def _await_drafter(self) -> None:
        ready, self._ready = self._ready, None
        if ready is not None:
            ready()

    def request(self, req: DraftRequest) -> None:
        self._await_drafter()
        if req.budget:
            self._via = self.worker
        else:
            self.idle()
            self._via = self.inline
        self._via.request(req)

    def reply(self) -> tuple[Draft, tuple[TreeStats, ...]]:
        draft, trees = self._via.reply()
        trees, self._trees = self._trees + trees, ()
        return draft, trees

    def idle(self) -> None:
        """Before a round that drafts no tree (ar, lookup, or sd on this thread): cut short a tree still being
        built, which that round will not use and whose decodes would slow it (measured: an ar verify 23 -> 106 ms
        on 2 cores); its trees so far come with the next reply."""
        self._trees += self.worker.pause()

    def close(self) -> None:
        self.worker.close()
        self.inline.close()

    def set_threads(self, n: int) -> None:
        self._await_drafter()
        self.worker.set_threads(n)

"""auto's draft source: tree rounds on the draft thread, sequential rounds on the caller's thread (see
engine.spec.worker: a draft thread that decodes with every core slows every later target decode)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from engine.spec.types import Draft, DraftRequest, TreeStats
from engine.spec.worker import SplitDrafts


class ThreadRecorder:
    """A draft maker that records which thread serves and builds; a tree grows until it is interrupted."""

    max_branches = 4

    def __init__(self) -> None:
        self.served: list[str] = []
        self.built: list[str] = []
        self.threads: list[tuple[str, int]] = []

    def serve(self, committed: Sequence[int], accepted: int, k: int, backup: str) -> Draft:
        self.served.append(threading.current_thread().name)
        return Draft([7] * k, None)

    def build_tree(self, committed: Sequence[int], draft: Draft, depth: int, budget: int,
                   fanout: Callable[[int, int], list[int]], interrupt: Callable[[], bool]) -> TreeStats:
        self.built.append(threading.current_thread().name)
        stop = threading.Event()
        while not interrupt():
            stop.wait(0.001)
        return TreeStats(levels=1, branches=budget, seconds=0.01)

    def set_threads(self, n: int) -> None:
        self.threads.append((threading.current_thread().name, n))

    def reset(self) -> None:
        pass


def request(budget: int, draft_threads: int) -> DraftRequest:
    return DraftRequest((1, 2, 3), -1, 4, budget, early_stop=True, draft_threads=draft_threads)


def test_tree_rounds_run_on_the_draft_thread_and_sequential_rounds_on_the_callers() -> None:
    maker = ThreadRecorder()
    drafts = SplitDrafts(maker)
    me = threading.current_thread().name
    try:
        drafts.request(request(budget=2, draft_threads=1))  # an ssd round: the split's one draft thread
        draft, trees = drafts.reply()
        assert draft.tokens == [7] * 4 and trees == ()
        drafts.request(request(budget=0, draft_threads=2))  # an sd round with every core: cuts the tree short
        draft, trees = drafts.reply()
        assert draft.tokens == [7] * 4 and [t.branches for t in trees] == [2]  # the cut tree is still reported
        drafts.request(request(budget=3, draft_threads=1))
        _, trees = drafts.reply()
        assert trees == ()
    finally:
        drafts.close()
    assert maker.served == ["ssd-draft", me, "ssd-draft"]
    assert maker.built == ["ssd-draft", "ssd-draft"]
    assert (me, 2) in maker.threads and ("ssd-draft", 2) not in maker.threads  # all cores only on the caller's

"""auto's draft source: tree rounds on the draft thread, sequential rounds on the caller's thread (see
engine.speculative.worker: a draft thread that decodes with every core slows every later target decode)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from engine.speculative.auto import AutoMode
from engine.speculative.costmodel import CostModel
from engine.speculative.lookup import Lookup, NgramPool
from engine.speculative.plan import Plan
from engine.speculative.planner import AutoPlanner
from engine.speculative.ssd import SSDOptions
from engine.speculative.steps import Steps
from engine.speculative.types import Draft, DraftRequest, TreeStats, Verdict
from engine.speculative.worker import SplitDrafts
from tests.spec_fakes import TRUTH, FakeTarget


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


def test_the_drafter_is_awaited_before_its_first_use_and_only_then() -> None:
    # auto may start while the draft still reads the prompt on a thread of its own: the first request (and the
    # thread count set at the end) waits for that read; a pause of an idle draft thread does not.
    maker = ThreadRecorder()
    waits: list[int] = []
    drafts = SplitDrafts(maker, ready=lambda: waits.append(len(maker.served)))
    try:
        drafts.idle()  # an ar round after the reply's start
        assert waits == []
        drafts.request(request(budget=0, draft_threads=1))
        drafts.reply()
        drafts.request(request(budget=2, draft_threads=1))
        drafts.reply()
        assert waits == [0]  # once, before the first draft was served
    finally:
        drafts.close()
    quiet = SplitDrafts(ThreadRecorder(), ready=lambda: waits.append(-1))
    quiet.close()
    quiet.set_threads(1)  # the end of a reply that never drafted: the read is waited for before the drafter is touched
    assert waits == [0, -1]


class TreeWatch(ThreadRecorder):
    """A ThreadRecorder that says whether a tree is being built right now."""

    def __init__(self) -> None:
        super().__init__()
        self.building = threading.Event()

    def build_tree(self, committed: Sequence[int], draft: Draft, depth: int, budget: int,
                   fanout: Callable[[int, int], list[int]], interrupt: Callable[[], bool]) -> TreeStats:
        self.building.set()
        try:
            return super().build_tree(committed, draft, depth, budget, fanout, interrupt)
        finally:
            self.building.clear()


class WatchingTarget(FakeTarget):
    """Records, at every verify, whether the draft thread was building a tree meanwhile."""

    def __init__(self, maker: TreeWatch) -> None:
        super().__init__()
        self.maker = maker
        self.tree_during: list[bool] = []

    def verify(self, draft: Draft) -> Verdict:
        self.tree_during.append(self.maker.building.wait(0.2))  # a tree the draft thread starts meanwhile counts
        return super().verify(draft)


def test_an_ar_or_lookup_round_after_an_ssd_round_stops_the_tree_first() -> None:
    maker = TreeWatch()
    target = WatchingTarget(maker)
    planner = AutoPlanner(CostModel(), k=4)
    plans = iter([Plan("ssd", 4, 2), Plan("ar"), Plan("ssd", 4, 2), Plan("ar")])
    planner.next_plan = lambda: next(plans)  # type: ignore[method-assign]
    mode = AutoMode(Steps(target, SplitDrafts(maker)), planner, SSDOptions(k=4))
    try:
        rounds = [mode.step() for _ in range(4)]
    finally:
        mode.close()
    assert [r.mode for r in rounds] == ["ssd", "ar", "ssd", "ar"]
    assert target.tree_during == [True, False, True, False]  # the ssd rounds' verify overlaps the tree, ar's not
    assert [t.branches for t in rounds[2].trees] == [2]  # the cut tree is still reported, with the next draft


def test_a_pause_cuts_the_tree_short_even_without_early_stop() -> None:
    maker = ThreadRecorder()  # its trees grow until interrupted
    drafts = SplitDrafts(maker)
    try:
        drafts.request(DraftRequest((1, 2, 3), -1, 4, budget=2, early_stop=False, draft_threads=1))
        drafts.reply()
        done = threading.Thread(target=drafts.idle, daemon=True)
        done.start()
        done.join(5.0)
        assert not done.is_alive()  # the ar round after it does not wait for a tree it will not use
        drafts.request(request(budget=0, draft_threads=2))
        assert [t.branches for t in drafts.reply()[1]] == [2]
    finally:
        drafts.close()


def test_a_pool_round_after_an_ssd_round_stops_the_tree_first() -> None:
    maker = TreeWatch()
    target = WatchingTarget(maker)
    model = CostModel()
    planner = AutoPlanner(model, k=4)
    plans = iter([Plan("ssd", 4, 2), Plan("ar")])
    planner.next_plan = lambda: next(plans)  # type: ignore[method-assign]
    lookup = Lookup(model, NgramPool(orders=(2,)))
    mode = AutoMode(Steps(target, SplitDrafts(maker)), planner, SSDOptions(k=4), lookup)
    try:
        first = mode.step()  # the pool knows nothing yet: an ssd round, its tree built meanwhile
        lookup.pool.feed(TRUTH[:3000])  # now the reply copies the context: the pool's draft beats the ar plan
        second = mode.step()
    finally:
        mode.close()
    assert (first.mode, second.mode) == ("ssd", "lookup")
    assert target.tree_during == [True, False]

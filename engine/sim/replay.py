"""auto's decisions on recorded rounds: record auto replies on real models, replay them without.

:func:`recording` logs, for every auto reply, the planner's settings, each plan it chose and every round it learnt
from (the pool's rounds too) as JSON-ready events. :func:`replay` feeds the same rounds to a fresh
:class:`~engine.speculative.planner.AutoPlanner` and returns the plans it chooses, so a change of auto's
behaviour on a real machine shows up as a diff (``tests/test_replay.py``).
``python -m engine.sim.replay OUT --scenario S``: record auto on the bench prompts with the offline pair, set up as
the bench's scenario S.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from engine.core.mode import Mode
from engine.speculative.costmodel import CostModel
from engine.speculative.lookup import Lookup
from engine.speculative.plan import Plan
from engine.speculative.planner import AutoPlanner
from engine.speculative.types import Draft, RoundResult, TreeStats

Event = dict[str, Any]
SETTINGS = ("k", "adaptive", "k_max", "max_branches", "draft", "early_stop", "draft_lag", "remaining", "prompt_read")
DRAFT_FIELDS = ("tokens", "source", "serve_s", "catchup_s", "catchup_tokens", "orders", "expected")


def round_event(rr: RoundResult) -> dict[str, Any]:
    """What the cost model learns from in a round (not the draft's distributions)."""
    d = rr.draft
    return {"tokens": list(rr.tokens), "mode": rr.mode, "speculator": rr.speculator, "drafted": rr.drafted,
            "accepted": rr.accepted, "hit": rr.hit, "verify_s": rr.verify_s, "wait_s": rr.wait_s,
            "new_shape": rr.new_shape,
            "trees": [[t.levels, t.branches, t.seconds, t.glue_s, t.level_s] for t in rr.trees],
            "draft": None if d is None else {**{f: getattr(d, f) for f in DRAFT_FIELDS},
                                             "top": [[int(i) for i in row] for row in d.top]}}


def round_from(e: dict[str, Any]) -> RoundResult:
    d = e["draft"]
    draft = None
    if d is not None:
        draft = Draft(d["tokens"], None, d["source"], top=[np.array(r, dtype=np.int64) for r in d["top"]],
                      serve_s=d["serve_s"], catchup_s=d["catchup_s"], catchup_tokens=d["catchup_tokens"],
                      orders=d["orders"], expected=d["expected"])
    return RoundResult(e["tokens"], e["mode"], e["speculator"], e["drafted"], e["accepted"], e["hit"],
                       verify_s=e["verify_s"], wait_s=e["wait_s"], trees=tuple(TreeStats(*t) for t in e["trees"]),
                       draft=draft, new_shape=e.get("new_shape", False))


@contextlib.contextmanager
def recording(events: list[Event]) -> Iterator[list[Event]]:
    """Log every auto reply's planner settings, plans and rounds into ``events`` while the block runs."""
    planner_init, lookup_learn = AutoPlanner.__init__, Lookup.learn
    originals = {name: getattr(AutoPlanner, name) for name in ("next_plan", "learn", "note", "defer_probe")}
    pending: weakref.WeakKeyDictionary[AutoPlanner, Event] = weakref.WeakKeyDictionary()  # settings not logged yet

    def init(self: AutoPlanner, model: CostModel, k: int, **kw: Any) -> None:
        busy: Callable[[], bool] | None = kw.get("draft_busy")
        if busy is not None:  # each answer is a decision's input
            kw["draft_busy"] = lambda: _logged(events, busy())
        planner_init(self, model, k, **kw)
        pending[self] = {"e": "start", "split": model.split, **{s: getattr(self, s) for s in SETTINGS}}

    def next_plan(self: AutoPlanner) -> Plan:
        start = pending.pop(self, None)
        if start is not None:  # the reply's first round: a planner that plans (not a rate readout)
            events.append(start)
        plan: Plan = originals["next_plan"](self)
        events.append({"e": "plan", "plan": list(plan)})
        return plan

    def learn(self: AutoPlanner, plan: Plan, rr: RoundResult, gap_tokens: int | None = None) -> None:
        events.append({"e": "learn", "plan": list(plan), "round": round_event(rr), "gap": gap_tokens})
        originals["learn"](self, plan, rr, gap_tokens)

    def note(self: AutoPlanner, rr: RoundResult, gap_tokens: int | None = None) -> None:
        events.append({"e": "note", "round": round_event(rr), "gap": gap_tokens})
        originals["note"](self, rr, gap_tokens)

    def defer_probe(self: AutoPlanner) -> None:
        events.append({"e": "defer"})
        originals["defer_probe"](self)

    def learn_lookup(self: Lookup, rr: RoundResult, *, timed: bool = True) -> None:
        events.append({"e": "lookup", "timed": timed, "round": round_event(rr)})
        lookup_learn(self, rr, timed=timed)

    patched = {"__init__": init, "next_plan": next_plan, "learn": learn, "note": note, "defer_probe": defer_probe}
    try:
        for name, f in patched.items():
            setattr(AutoPlanner, name, f)
        Lookup.learn = learn_lookup  # type: ignore[method-assign]
        yield events
    finally:
        AutoPlanner.__init__ = planner_init  # type: ignore[method-assign]
        for name, f in originals.items():
            setattr(AutoPlanner, name, f)
        Lookup.learn = lookup_learn  # type: ignore[method-assign]


def _logged(events: list[Event], busy: bool) -> bool:
    events.append({"e": "busy", "busy": busy})
    return busy


def recorded_plans(events: list[Event]) -> list[str]:
    return [str(Plan(*e["plan"])) for e in events if e["e"] == "plan"]


def replay(events: list[Event]) -> list[str]:
    """The plans a fresh planner chooses on the recorded rounds (one cost model over all the replies); it stops
    at the first plan that differs from the recording, whose rounds are then not the ones that plan would have had."""
    model: CostModel | None = None
    lookup: Lookup | None = None
    planner: AutoPlanner | None = None
    busy: list[bool] = []
    chosen: list[str] = []
    for e in events:
        kind = e["e"]
        if kind == "start":
            model = model or CostModel(split=e["split"])
            lookup = lookup or Lookup(model)
            settings = {s: e[s] for s in SETTINGS}
            if settings["draft"]:
                model.acceptance.new_text()  # as the engine starts an auto reply with a draft model
            planner = AutoPlanner(model, **settings, draft_busy=lambda: busy.pop(0) if busy else False)
        elif kind == "busy":
            busy.append(e["busy"])
        elif kind == "plan":
            assert planner is not None, "a plan before the reply's start"
            chosen.append(str(planner.next_plan()))
            if chosen[-1] != str(Plan(*e["plan"])):
                return chosen
        elif kind == "learn":
            assert planner is not None
            planner.learn(Plan(*e["plan"]), round_from(e["round"]), e.get("gap"))
        elif kind == "note":
            assert planner is not None
            planner.note(round_from(e["round"]), e.get("gap"))
        elif kind == "defer":
            assert planner is not None
            planner.defer_probe()
        elif kind == "lookup":
            assert lookup is not None
            lookup.learn(round_from(e["round"]), timed=e["timed"])
    return chosen


def main(argv: list[str] | None = None) -> int:
    from engine.bench.common import load_prompts, scenarios
    from engine.config import EngineConfig, GenerationParams
    from engine.core.options import cpu_cores
    from engine.engine import Engine
    from engine.models import offline
    from engine.models.convert import ensure_f16

    p = argparse.ArgumentParser(prog="python -m engine.sim.replay", description=__doc__)
    p.add_argument("out", type=Path, help="JSON file to write the events to")
    p.add_argument("--scenario", choices=("A", "B", "C"), default="A", help="the bench's hardware scenario "
                   "(B: its F16 row)")
    p.add_argument("--prompts", type=int, default=2, help="bench prompts to reply to, one auto reply each")
    p.add_argument("--max-tokens", type=int, default=128)
    args = p.parse_args(argv)
    pair = offline.ensure_pair()
    f16 = ensure_f16(pair.target) if args.scenario != "A" else None
    sc = scenarios([args.scenario], pair.target, cpu_cores(), f16)[0]
    cfg = EngineConfig(str(sc.target), str(pair.draft), threads=sc.threads, draft_threads=sc.draft_threads)
    events: list[Event] = []
    with Engine(cfg) as eng, recording(events):
        for pr in load_prompts(args.prompts):
            params = GenerationParams(mode=Mode.AUTO, max_tokens=args.max_tokens)
            eng.generate(eng.chat_tokens(pr["prompt"]), params).run()
    args.out.write_text(json.dumps(events) + "\n", encoding="utf-8")
    print(f"wrote {len(events)} events, {sum(e['e'] == 'plan' for e in events)} plans, to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

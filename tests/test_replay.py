"""auto's decisions on rounds recorded with the real pair (engine/sim/replay.py): a change of the planner's
behaviour on a real machine shows up here as a diff, to be explained in its commit and the files re-recorded with
``python -m engine.sim.replay tests/data/auto_replay_S.json --scenario S`` (S: A, the pair as shipped on both
cores, where auto runs ar; B, the F16 target on one core and the draft on the other, where it runs ssd)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.config import EngineConfig, GenerationParams
from engine.engine import Engine
from engine.sim import replay
from engine.speculative.plan import Plan
from engine.tiny.models import TinyPair

DATA = Path(__file__).parent / "data"


def recorded(scenario: str) -> list[replay.Event]:
    events: list[replay.Event] = json.loads((DATA / f"auto_replay_{scenario}.json").read_text(encoding="utf-8"))
    return events


@pytest.mark.parametrize("scenario", ["A", "B"])
def test_autos_decisions_on_rounds_recorded_with_the_real_pair_are_pinned(scenario: str) -> None:
    events = recorded(scenario)
    want = replay.recorded_plans(events)
    assert len(want) > 40 and sum(e["e"] == "start" for e in events) == 2  # two replies, one model between them
    assert replay.replay(events) == want


def test_a_recorded_session_replays_to_the_same_plans(tiny: TinyPair) -> None:
    events: list[replay.Event] = []
    cfg = EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=512)
    with Engine(cfg) as eng, replay.recording(events):
        for start in (20, 60):  # two replies: the second starts from what the first measured
            prompt = [eng.target_model.bos, *range(start, start + 24)]
            eng.generate(prompt, GenerationParams(mode="auto", max_tokens=40)).run()
    kinds = {e["e"] for e in events}
    assert {"start", "plan", "learn", "note"} <= kinds
    assert replay.replay(json.loads(json.dumps(events))) == replay.recorded_plans(events)  # through JSON


def test_a_planner_that_decides_otherwise_stops_the_replay_at_that_round() -> None:
    events = recorded("B")
    plans = [i for i, e in enumerate(events) if e["e"] == "plan"]
    at = plans[len(plans) // 2]
    kept = events[at]["plan"]
    events[at] = {**events[at], "plan": ["ssd", 7, 3] if kept != ["ssd", 7, 3] else ["ar", 0, 0]}
    chosen = replay.replay(events)  # the planner still chooses what was recorded, not the plan put there
    assert len(chosen) == len(plans) // 2 + 1 and chosen[-1] == str(Plan(*kept))

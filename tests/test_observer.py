"""Rounds of the fixed modes teach auto: after an ssd reply, auto starts from what that reply measured."""

from __future__ import annotations

from engine import Engine, EngineConfig, GenerationParams
from engine.speculative.knobs import ACCEPT_SEED_TRIALS
from engine.speculative.observer import fitted_budget, tree_budget
from engine.speculative.plan import Plan
from engine.speculative.planner import AutoPlanner
from engine.speculative.ssd import SSDMode
from tests.tiny_models import TinyPair


def test_fixed_mode_replies_feed_autos_picture_of_the_machine(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024)) as eng:
        model = eng._cost_model
        assert AutoPlanner(model, 4)._first_probes() == [Plan("ar"), Plan("sd", 4), Plan("sd", 4)]
        prompt = [eng.target_model.bos, *range(20, 40)]
        list(eng.generate(prompt, GenerationParams(mode="ar", max_tokens=12)))
        list(eng.generate(prompt, GenerationParams(mode="sd", k=4, max_tokens=32)))
        assert 1 in model.verify and 5 in model.verify  # ar's width and sd's K + 1
        assert model.draft_token.value is not None and model.acceptance.value is not None
        assert {"ar", "sd"} <= set(eng.measured_rates())
        assert model.last_run["sd"] == model.rounds > model.last_run["ar"] > 0  # probes are spaced from these
        assert Plan("ar") not in AutoPlanner(model, 4)._first_probes()  # nothing left to measure but the tree
        list(eng.generate(prompt, GenerationParams(mode="ssd", k=4, max_tokens=48)))
        assert model.hit.value is not None  # the cache's hits (the tree's levels too, unless every tree was cut short)
        planner = AutoPlanner(model, 4)
        assert all(p.mode == "ssd" for p in planner._first_probes())  # at most the tree is left to measure


def test_lookup_and_auto_replies_are_not_counted_twice(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), None, n_ctx=1024)) as eng:
        prompt = [eng.target_model.bos, *range(20, 40)] * 2
        list(eng.generate(prompt, GenerationParams(mode="lookup", max_tokens=24)))
        tallies = {str(p): t.n for p, t in eng._cost_model.tallies.items()}
        assert sum(tallies.values()) <= 24, tallies  # one observation per round at most


def test_the_draft_reports_its_catch_up_apart_from_its_round(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024)) as eng:
        drafter = eng.drafter
        assert drafter is not None
        prompt = [eng.target_model.bos, *range(20, 60)]
        first = drafter.draft_sequential(prompt, 4)  # the draft has seen nothing yet: it prefills the prompt
        assert 0 < first.catchup_s < first.serve_s and len(first.tokens) == 4
        after = [*prompt, *first.tokens[:2], 7]  # two drafts accepted, then the target's own token
        steady = drafter.draft_sequential(after, 4)
        assert steady.catchup_s == 0.0 and drafter.kv.synced == 1
        behind = drafter.draft_sequential([*after, *steady.tokens[:1], *range(100, 120)], 4)  # ar ran meanwhile
        assert behind.catchup_s > 0 and drafter.kv.synced == 20


def test_fixed_ssd_sizes_its_tree_from_what_earlier_replies_measured(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024)) as eng:
        asked, default = GenerationParams(mode="ssd", k=4, budget=3), GenerationParams(mode="ssd", k=4)
        assert tree_budget(eng._cost_model, asked) == 3
        assert tree_budget(eng._cost_model, default) == default.fanout * 5  # nothing measured: fan-out x (K + 1)
        model = eng._cost_model  # as a CPU draft measures: every branch of a tree level costs a token's time
        for _ in range(3):
            model.add_verify(1, 0.1)
            model.add_verify(5, 0.2)
            model.draft_token.add(0.025)
            for width in (1, 5, 10):
                model.add_level(width, 0.025 * width)
        fitted = fitted_budget(model, 4, default.fanout * 5, early_stop=default.early_stop)
        assert fitted < default.fanout * 5
        assert tree_budget(eng._cost_model, default) == fitted and tree_budget(eng._cost_model, asked) == 3
        mode = eng._make_mode(eng.target, default, tree_budget(eng._cost_model, default))  # as a reply makes it
        try:
            assert isinstance(mode, SSDMode) and mode.opts.tree_budget == fitted  # the tree its rounds build
        finally:
            mode.close()


def test_a_real_tree_times_its_glue_decode_apart_from_its_levels(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024)) as eng:
        drafter = eng.drafter
        assert drafter is not None
        prompt = [eng.target_model.bos, *range(20, 60)]
        draft = drafter.draft_sequential(prompt, 2)
        stats = drafter.build_tree(prompt, draft, depth=3, budget=4, fanout=lambda n, b: [2, 1, 1][: n + 1],
                                   interrupt=lambda: False)
        assert stats.levels == 3 and stats.branches == 4
        assert 0 < stats.glue_s and 0 < stats.level_s and stats.glue_s + stats.level_s <= stats.seconds


def test_an_auto_reply_counts_what_earlier_replies_taught_its_acceptance_as_a_restart_would(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024)) as eng:
        prompt = [eng.target_model.bos, *range(20, 40)]
        list(eng.generate(prompt, GenerationParams(mode="sd", k=4, max_tokens=24)))
        acceptance = eng._cost_model.acceptance
        acceptance.hits, acceptance.trials = 990.0, 1000.0  # a long session of earlier replies
        list(eng.generate(prompt, GenerationParams(mode="auto", k=4, max_tokens=24)))
        # at most ACCEPT_SEED_TRIALS from before, and this reply's few trials (a memory of 1000 would fade to 600)
        assert acceptance.trials < ACCEPT_SEED_TRIALS + 4 * 24

"""The server beside other replies: requests past one reply run at once (not closing or waiting for the reply in
progress), /health lists each place, the app's own reply takes a place of its own, and past every place and the
waiting line comes the 429; through the engine's own process too."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from engine import Engine, EngineConfig, EngineProcess, GenerationParams
from engine.server import LocalServer
from tests.server_helpers import chat_body, client, error_of, serve
from tests.tiny_models import TinyPair

CTX = 512
HELD = GenerationParams(mode="ar", max_tokens=200)


@pytest.fixture(scope="module")
def engine(tiny: TinyPair) -> Iterator[Engine]:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=CTX, threads=1, draft_threads=1,
                             parallel=2)) as eng:
        yield eng


def _reply(srv: LocalServer, content: str) -> str:
    out = client(srv).chat.completions.create(model=srv.model_id, messages=[{"role": "user", "content": content}],
                                              max_tokens=24, temperature=0)
    return out.choices[0].message.content or ""


def test_a_request_runs_beside_a_reply_in_progress(engine: Engine) -> None:
    with serve(engine) as srv:
        alone = _reply(srv, "What is two and two?")
        held = engine.generate(engine.tokenize("a reply of the app's"), HELD)
        tokens = iter(held)
        next(tokens)  # suspended mid-reply, holding one of the two sequences
        assert [busy for _, busy, _ in engine.slots()].count(True) == 1
        assert _reply(srv, "What is two and two?") == alone  # served beside it, the reply it gets alone
        assert held.stats.finish_reason == ""  # the reply in progress was neither closed nor stopped
        assert len(list(tokens)) > 0
        assert held.stats.finish_reason in ("length", "stop")


def test_health_lists_each_place(engine: Engine) -> None:
    with serve(engine) as srv:
        health = httpx.get(srv.url.removesuffix("/v1") + "/health", timeout=30).json()
        assert [s["slot"] for s in health["slots"]] == [0, 1]
        assert not any(s["busy"] for s in health["slots"]) and health["busy"] is False


def test_past_every_place_and_the_line_comes_a_429(engine: Engine) -> None:
    with serve(engine, max_queue=0) as srv:
        holders = [srv.exclusive(10) for _ in range(2)]  # the app's own replies, one place each
        for h in holders:
            h.__enter__()
        try:
            r = httpx.post(srv.url + "/chat/completions", json=chat_body(srv.model_id, max_tokens=3), timeout=30)
            err = error_of(r, 429)
            assert err["code"] == "queue_full" and "2 generations are running" in err["message"]
        finally:
            for h in holders:
                h.__exit__(None, None, None)
        r = httpx.post(srv.url + "/chat/completions", json=chat_body(srv.model_id, max_tokens=3), timeout=30)
        assert r.status_code == 200  # served once a place is free


def test_the_engine_process_runs_replies_side_by_side(tiny: TinyPair) -> None:
    config = EngineConfig(str(tiny.target), n_ctx=CTX, threads=1, parallel=2)
    prompts = [[1, 7, 8, 9], [1, 20, 21]]
    with Engine(config) as local:
        alone = [list(local.generate(p, GenerationParams(mode="ar", max_tokens=60)).run().tokens) for p in prompts]
    with EngineProcess(config) as eng:
        assert eng.replies_at_once == 2
        first = eng.generate(prompts[0], GenerationParams(mode="ar", max_tokens=60))
        it = iter(first)
        got0 = [next(it).token]
        done = threading.Event()
        second: list[int] = []

        def run_second() -> None:
            second.extend(ev.token for ev in eng.generate(prompts[1], GenerationParams(mode="ar", max_tokens=60)))
            done.set()

        threading.Thread(target=run_second, daemon=True).start()
        assert done.wait(60)  # the second reply ended while the first was still being read
        got0 += [ev.token for ev in it]
        assert [got0, second] == alone

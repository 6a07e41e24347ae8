"""logprobs of replies running at once on one target context: each reply's figures are read from its own
target's rows (its row observer), equal to the figures it gets alone, on the engine and through the server."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from engine import Engine, GenerationParams
from engine.server import LocalServer
from engine.speculative.logprobs import Figures, TappedGeneration
from tests.server_helpers import at_once, client, module_server, one_thread
from tests.tiny_models import TinyPair

pytestmark = pytest.mark.timeout(240)

REPLIES = 2
TOP = 3
N_TOKENS = 40  # long enough that the two replies overlap for many shared rounds
# a batch of rows and a one-row decode round the tiny model's logits differently (seen: up to 1.2e-3); another
# reply's rows give figures of another distribution altogether
CLOSE = 5e-3
ASKS = ("Hello there", "Count to ten slowly")


@pytest.fixture(scope="module")
def engine(tiny: TinyPair) -> Iterator[Engine]:
    with Engine(one_thread(tiny.target, tiny.draft_related, n_ctx=512, parallel=REPLIES)) as eng:
        yield eng


server = module_server()


def _same(got: list[tuple[Any, float, list[tuple[Any, float]]]],
          want: list[tuple[Any, float, list[tuple[Any, float]]]]) -> None:
    assert [t for t, _, _ in got] == [t for t, _, _ in want]
    assert [[t for t, _ in top] for _, _, top in got] == [[t for t, _ in top] for _, _, top in want]
    assert [v for _, v, _ in got] == pytest.approx([v for _, v, _ in want], abs=CLOSE)
    assert [v for _, _, top in got for _, v in top] == pytest.approx([v for _, _, top in want for _, v in top],
                                                                     abs=CLOSE)


def _engine_figures(eng: Engine, prompt: list[int], mode: str) -> list[Figures]:
    sink: list[Figures | None] = []
    gen = TappedGeneration(eng, prompt, GenerationParams(mode=mode, max_tokens=N_TOKENS, k=3), None, TOP, sink)
    tokens = [ev.token for ev in gen]
    assert len(sink) == len(tokens) and all(f is not None for f in sink)
    figures = [f for f in sink if f is not None]
    assert [f[0] for f in figures] == tokens  # every token's figures are its own
    return figures


def _listed(figures: list[Figures]) -> list[tuple[Any, float, list[tuple[Any, float]]]]:
    return [(t, lp, list(top)) for t, lp, top in figures]


@pytest.mark.parametrize("modes", [("ar", "ar"), ("sd", "lookup")])
def test_each_reply_at_once_gets_its_figures_alone(engine: Engine, modes: tuple[str, str]) -> None:
    prompts = [engine.chat_tokens(a) for a in ASKS]
    alone = [_engine_figures(engine, p, m) for p, m in zip(prompts, modes, strict=True)]
    before = engine._rounds.decodes
    together = at_once([partial(_engine_figures, engine, p, m) for p, m in zip(prompts, modes, strict=True)])
    assert engine._rounds.decodes > before  # the two replies shared decodes
    for got, want in zip(together, alone, strict=True):
        _same(_listed(got), _listed(want))


def _served_figures(srv: LocalServer, content: str) -> list[tuple[Any, float, list[tuple[Any, float]]]]:
    api = client(srv)
    try:
        reply = api.chat.completions.create(model=srv.model_id, messages=[{"role": "user", "content": content}],
                                            max_tokens=N_TOKENS, temperature=0, logprobs=True, top_logprobs=TOP,
                                            extra_body={"mode": "sd"})
    finally:
        api.close()
    lp = reply.choices[0].logprobs
    assert lp is not None and lp.content
    assert "".join(e.token for e in lp.content) == reply.choices[0].message.content
    return [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs]) for e in lp.content]


def test_two_requests_at_once_through_the_server(engine: Engine, server: LocalServer) -> None:
    alone = [_served_figures(server, a) for a in ASKS]
    assert alone[0] != alone[1]
    before = engine._rounds.decodes
    together = at_once([partial(_served_figures, server, a) for a in ASKS])
    assert engine._rounds.decodes > before
    for got, want in zip(together, alone, strict=True):
        _same(got, want)

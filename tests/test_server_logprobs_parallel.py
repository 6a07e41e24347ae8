"""logprobs of replies running at once on one target context: each reply's figures are read from its own
target's rows (its row observer), equal to the figures it gets alone, on the engine and through the server."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from engine import Engine, EngineConfig, GenerationParams
from engine.server import LocalServer
from engine.speculative.logprobs import Figures, TappedGeneration
from tests.server_helpers import client, serve
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
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=512, threads=1, draft_threads=1,
                             parallel=REPLIES)) as eng:
        yield eng


def _at_once(fns: list[Callable[[], Any]]) -> list[Any]:
    """Each ``fn`` on its own thread, started together; their results in order."""
    out: list[Any] = [None] * len(fns)
    errors: list[BaseException] = []
    start = threading.Barrier(len(fns))

    def one(i: int) -> None:
        try:
            start.wait()
            out[i] = fns[i]()
        except BaseException as exc:  # reported below, with the reply it belongs to
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return out


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
    together = _at_once([lambda p=p, m=m: _engine_figures(engine, p, m) for p, m in zip(prompts, modes,
                                                                                         strict=True)])
    assert engine._rounds.decodes > before  # the two replies shared decodes
    for got, want in zip(together, alone, strict=True):
        _same(_listed(got), _listed(want))


@pytest.fixture(scope="module")
def server(engine: Engine) -> Iterator[LocalServer]:
    with serve(engine) as srv:
        yield srv


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
    together = _at_once([lambda a=a: _served_figures(server, a) for a in ASKS])
    assert engine._rounds.decodes > before
    for got, want in zip(together, alone, strict=True):
        _same(got, want)

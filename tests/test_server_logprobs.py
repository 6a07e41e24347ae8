"""logprobs, n choices and embeddings through the real server with the official ``openai`` client: the figures
are the target's own log-softmax (checked against a row read by hand), the same in every mode and with the engine
in its own process; a streamed reply's figures joined are the whole reply's; choice i is the n=1 reply for seed + i;
the embeddings are unit vectors, equal for equal inputs, and bad input is a 400 naming it."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from engine import Engine
from engine.server import LocalServer
from tests.server_helpers import chat_body, client, error_of, module_client, module_server, one_thread, serve
from tests.tiny_models import TinyPair

pytestmark = pytest.mark.timeout(240)

ASK: Any = [{"role": "user", "content": "Hello there"}]
MODES = ("ar", "sd", "ssd", "lookup", "auto")
CLOSE = 1e-3  # a batch of K+1 rows and a one-row decode round differently in the last float digits


@pytest.fixture(scope="module")
def engine(tiny: TinyPair) -> Iterator[Engine]:
    with Engine(one_thread(tiny.target, tiny.draft_related)) as eng:
        yield eng


server = module_server()
oai = module_client()


def _figures(reply: Any) -> list[tuple[str, float, list[tuple[str, float]]]]:
    return [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs])
            for e in reply.choices[0].logprobs.content]


def _ask(oai: openai.OpenAI, server: LocalServer, mode: str, **kw: Any) -> Any:
    return oai.chat.completions.create(model=server.model_id, messages=ASK, max_tokens=10, temperature=0,
                                       logprobs=True, top_logprobs=3, extra_body={"mode": mode}, **kw)


def test_chat_logprobs_are_the_targets_log_softmax(engine: Engine, server: LocalServer, oai: openai.OpenAI) -> None:
    reply = _ask(oai, server, "ar")
    got = _figures(reply)
    assert len(got) == reply.usage.completion_tokens
    assert "".join(t for t, _, _ in got) == reply.choices[0].message.content
    for token, lp, top in got:
        assert lp <= 0 and top[0] == (token, lp)  # greedy: the chosen token is the likeliest
        assert [v for _, v in top] == sorted((v for _, v in top), reverse=True)
    with server.exclusive():  # the first position's row, read by hand from the target after the prompt
        prompt = engine.messages_tokens(ASK)
        row = np.asarray(engine.target.kv.sync(list(prompt)), dtype=np.float64)
    want = row - (row.max() + math.log(np.exp(row - row.max()).sum()))
    first = int(np.argmax(want))
    assert got[0][1] == pytest.approx(float(want[first]), abs=CLOSE)
    second = int(np.argsort(-want)[1])
    assert got[0][2][1][1] == pytest.approx(float(want[second]), abs=CLOSE)


@pytest.mark.parametrize("mode", MODES[1:])
def test_the_same_figures_in_every_mode(server: LocalServer, oai: openai.OpenAI, mode: str) -> None:
    ar, other = _figures(_ask(oai, server, "ar")), _figures(_ask(oai, server, mode))
    assert [t for t, _, _ in other] == [t for t, _, _ in ar]
    for (_, a, atop), (_, b, btop) in zip(ar, other, strict=True):
        assert b == pytest.approx(a, abs=CLOSE)
        assert [v for _, v in btop] == pytest.approx([v for _, v in atop], abs=CLOSE)


def test_streamed_figures_join_into_the_whole_replys(server: LocalServer, oai: openai.OpenAI) -> None:
    whole = _figures(_ask(oai, server, "ssd"))
    streamed: list[Any] = []
    for chunk in _ask(oai, server, "ssd", stream=True):
        if chunk.choices and chunk.choices[0].logprobs is not None:
            streamed += chunk.choices[0].logprobs.content or []
    got = [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs]) for e in streamed]
    assert got == whole


def test_completions_logprobs_in_the_legacy_shape(server: LocalServer, oai: openai.OpenAI) -> None:
    done = oai.completions.create(model=server.model_id, prompt="Once upon", max_tokens=6, temperature=0,
                                  logprobs=2, extra_body={"mode": "sd"})
    lp = done.choices[0].logprobs
    assert lp is not None and lp.tokens and lp.token_logprobs and lp.top_logprobs and lp.text_offset is not None
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == done.usage.completion_tokens
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    assert all(len(top) <= 2 and max(top.values()) == v for top, v in zip(lp.top_logprobs, lp.token_logprobs,
                                                                          strict=True))


def test_the_engine_in_its_own_process_gives_the_same_figures_and_vectors(engine: Engine, server: LocalServer,
                                                              oai: openai.OpenAI) -> None:
    from engine.process import EngineProcess

    want = _figures(_ask(oai, server, "sd"))
    cfg = one_thread(engine.config.target_path, engine.config.draft_path)
    with EngineProcess(cfg) as proc, serve(proc) as srv:
        got = _figures(_ask(client(srv), srv, "sd"))
        streamed = [e for c in _ask(client(srv), srv, "ar", stream=True)
                    if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content or []]
        there = client(srv).embeddings.create(model=srv.model_id, input="a cat sat").data[0].embedding
    here = oai.embeddings.create(model=server.model_id, input="a cat sat").data[0].embedding
    assert there == pytest.approx(here, abs=1e-6)
    assert [t for t, _, _ in got] == [t for t, _, _ in want]
    assert [v for _, v, _ in got] == pytest.approx([v for _, v, _ in want], abs=CLOSE)
    assert [e.token for e in streamed] == [t for t, _, _ in want]


def test_choice_i_is_the_reply_for_seed_plus_i(server: LocalServer, oai: openai.OpenAI) -> None:
    kw: Any = {"model": server.model_id, "messages": ASK, "max_tokens": 8, "temperature": 1.0}
    many = oai.chat.completions.create(n=3, seed=41, **kw)
    assert [c.index for c in many.choices] == [0, 1, 2]
    ones = [oai.chat.completions.create(seed=41 + i, **kw) for i in range(3)]
    assert [c.message.content for c in many.choices] == [o.choices[0].message.content for o in ones]
    assert many.usage.completion_tokens == sum(o.usage.completion_tokens for o in ones)
    assert len({c.message.content for c in many.choices}) > 1  # three seeds, three samples
    assert server.status().running is None and not server.status().busy


def test_streamed_choices_come_one_after_another(server: LocalServer, oai: openai.OpenAI) -> None:
    kw: Any = {"model": server.model_id, "messages": ASK, "max_tokens": 8, "temperature": 1.0, "seed": 7}
    whole = oai.chat.completions.create(n=2, **kw)
    texts: dict[int, str] = {}
    order: list[int] = []
    finishes = 0
    for chunk in oai.chat.completions.create(n=2, stream=True, stream_options={"include_usage": True}, **kw):
        if not chunk.choices:
            assert chunk.usage is not None and chunk.usage.completion_tokens == whole.usage.completion_tokens
            continue
        c = chunk.choices[0]
        order.append(c.index)
        texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
        finishes += c.finish_reason is not None
    assert order == sorted(order) and set(order) == {0, 1} and finishes == 2
    assert [texts[0], texts[1]] == [c.message.content for c in whole.choices]


def test_embeddings_from_the_target(server: LocalServer, oai: openai.OpenAI) -> None:
    done = oai.embeddings.create(model=server.model_id, input=["a cat sat", "a cat sat", "numbers 1 2 3 4"])
    vecs = [np.asarray(d.embedding) for d in done.data]  # the client asked for base64 and decoded it
    assert [d.index for d in done.data] == [0, 1, 2] and len({len(v) for v in vecs}) == 1
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-5 for v in vecs)
    assert float(vecs[0] @ vecs[1]) == pytest.approx(1.0, abs=1e-5) and float(vecs[0] @ vecs[2]) < 0.99
    assert done.usage.prompt_tokens > 0 and done.usage.total_tokens == done.usage.prompt_tokens
    floats = httpx.post(f"{server.url}/embeddings", json={"model": server.model_id, "input": "a cat sat",
                                                          "encoding_format": "float"}, timeout=60).json()
    assert np.asarray(floats["data"][0]["embedding"]) == pytest.approx(vecs[0], abs=1e-6)


@pytest.mark.parametrize(("body", "param", "words"), [
    ({"input": ""}, "input", "empty string"),
    ({"input": []}, "input", "empty list"),
    ({"input": ["ok", ""]}, "input[1]", "empty string"),
    ({"input": [[1, 2], [10_000_000]]}, "input[1]", "not in the model's vocabulary"),
    ({"input": "word " * 600}, "input", "at most 512"),
    ({"input": 5}, "input", "input must be a string"),
    ({"input": ["a", [1]]}, "input", "input must be a string"),
    ({"input": "x", "dimensions": 3}, "dimensions", "dimensions"),
])
def test_bad_embeddings_input_is_a_400(server: LocalServer, body: dict[str, Any], param: str, words: str) -> None:
    err = error_of(httpx.post(f"{server.url}/embeddings", json={"model": server.model_id, **body}, timeout=60), 400)
    assert err["param"] == param and words in err["message"], err


def test_logprob_and_n_requests_are_checked(server: LocalServer) -> None:
    url = f"{server.url}/chat/completions"
    err = error_of(httpx.post(url, json=chat_body(server.model_id, top_logprobs=2), timeout=60), 400)
    assert err["param"] == "top_logprobs"
    err = error_of(httpx.post(url, json=chat_body(server.model_id, n=17), timeout=60), 400)
    assert err["param"] == "n"
    err = error_of(httpx.post(f"{server.url}/completions", json={"model": server.model_id, "prompt": "a",
                                                                 "logprobs": 6}, timeout=60), 400)
    assert err["param"] == "logprobs"


def test_logprobs_on_an_engine_that_samples_inside_llama_cpp(engine: Engine, server: LocalServer,
                                                             oai: openai.OpenAI) -> None:
    """A backend sampler chain returns no rows: while tapped, the target reads them on the host, and the reply is
    the one the chain gives."""
    want = _figures(_ask(oai, server, "ar"))
    cfg = one_thread(engine.config.target_path, engine.config.draft_path, sampling_path="backend")
    with Engine(cfg) as chained, serve(chained) as srv:
        api = client(srv)
        plain = api.chat.completions.create(model=srv.model_id, messages=ASK, max_tokens=10, temperature=0,
                                            extra_body={"mode": "sd"})
        got = _figures(_ask(api, srv, "sd"))
        assert plain.model_extra is not None and plain.model_extra["speculation"]["mode"] == "sd"
    assert "".join(t for t, _, _ in got) == plain.choices[0].message.content
    assert [v for _, v, _ in got] == pytest.approx([v for _, v, _ in want], abs=CLOSE)


LOGPROBS_ASKED: Any = ["message.output_text.logprobs"]


def _output_figures(response: Any) -> list[tuple[str, float, list[tuple[str, float]]]]:
    parts = [p for item in response.output if item.type == "message" for p in item.content]
    assert len(parts) == 1 and parts[0].type == "output_text"
    return [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs]) for e in parts[0].logprobs or []]


def test_responses_output_text_carries_chats_logprobs(server: LocalServer, oai: openai.OpenAI) -> None:
    chat = _figures(_ask(oai, server, "sd"))
    kw: Any = {"model": server.model_id, "input": "Hello there", "max_output_tokens": 10, "temperature": 0,
               "extra_body": {"mode": "sd"}}
    asked = oai.responses.create(include=LOGPROBS_ASKED, top_logprobs=3, **kw)
    assert asked.top_logprobs == 3
    assert _output_figures(asked) == chat
    assert "".join(t for t, _, _ in chat) == asked.output_text
    bare = _output_figures(oai.responses.create(include=LOGPROBS_ASKED, **kw))  # no alternatives asked
    assert [(t, v) for t, v, _ in bare] == [(t, v) for t, v, _ in chat] and all(top == [] for _, _, top in bare)
    assert _output_figures(oai.responses.create(top_logprobs=3, **kw)) == chat  # alternatives come with figures
    assert _output_figures(oai.responses.create(**kw)) == []  # not asked
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        oai.responses.create(include=LOGPROBS_ASKED, top_logprobs=21, **kw)


def test_streamed_responses_logprobs_join_into_the_whole_replys(server: LocalServer, oai: openai.OpenAI) -> None:
    kw: Any = {"model": server.model_id, "input": "Hello there", "max_output_tokens": 10, "temperature": 0,
               "include": LOGPROBS_ASKED, "top_logprobs": 2, "extra_body": {"mode": "ssd"}}
    whole = _output_figures(oai.responses.create(**kw))
    events = list(oai.responses.create(stream=True, **kw))
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    joined = [(lp.token, lp.logprob, [(t.token, t.logprob) for t in lp.top_logprobs or []])
              for e in deltas for lp in e.logprobs]
    (done,) = [e for e in events if e.type == "response.output_text.done"]
    assert [(lp.token, lp.logprob) for lp in done.logprobs] == [(t, v) for t, v, _ in whole]
    assert joined == whole[: len(joined)] and len(joined) >= len(deltas)  # each delta carries its tokens' figures
    assert _output_figures(events[-1].response) == whole
    with oai.responses.stream(**kw) as helper:  # the client's strict helper parses every event
        last = list(helper)[-1]
    assert last.type == "response.incomplete" and _output_figures(last.response) == whole  # cut at 10 tokens

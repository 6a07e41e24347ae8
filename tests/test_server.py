"""The local OpenAI-compatible server: a real uvicorn server on a free loopback port over the tiny models,
driven by the official ``openai`` client (and httpx where a client would refuse to send the bad input)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from engine import Engine, EngineConfig, GenerationParams
from engine.server import LocalServer, ServerError
from engine.server.job import StopMatcher
from tests.server_helpers import (
    chat_body,
    cli_text,
    client,
    error_of,
    hang_up_later,
    serve,
    sse_events,
    start_serve,
    stop,
    wait_until,
)
from tests.tiny_models import TinyPair

pytestmark = pytest.mark.timeout(180)

CTX = 2048
PROMPT = "Hello there"


@pytest.fixture(scope="module")
def engine(tiny: TinyPair) -> Iterator[Engine]:
    # one thread each: the 2-core test machines are shared, and spinning thread pools oversubscribe them
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=CTX, threads=1, draft_threads=1)) as eng:
        yield eng


@pytest.fixture(scope="module")
def server(engine: Engine) -> Iterator[LocalServer]:
    with serve(engine, max_queue=4) as srv:
        yield srv


@pytest.fixture(scope="module")
def oai(server: LocalServer) -> openai.OpenAI:
    return client(server)


def chat(oai: openai.OpenAI, server: LocalServer, content: str = PROMPT, **kw: Any) -> Any:
    kw.setdefault("temperature", 0)
    return oai.chat.completions.create(model=server.model_id, messages=[{"role": "user", "content": content}], **kw)


# -- happy paths ----------------------------------------------------------------------------------
def test_models_and_health(server: LocalServer, oai: openai.OpenAI, tiny: TinyPair) -> None:
    models = oai.models.list().data
    assert [m.id for m in models] == ["target"] == [server.model_id]
    assert (models[0].model_extra or {})["draft"] == "draft_related"
    assert oai.models.retrieve("target").id == "target"
    health = httpx.get(server.url.removesuffix("/v1") + "/health").json()
    assert health["status"] == "ok" and health["model"] == "target"
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1")


@pytest.mark.parametrize("mode", ["ar", "auto", "ssd"])
def test_greedy_chat_equals_cli(server: LocalServer, oai: openai.OpenAI, tiny: TinyPair, mode: str) -> None:
    expected = cli_text(tiny.target, PROMPT, 12, chat=True, system="Be brief.")
    messages: Any = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}]
    reply = oai.chat.completions.create(model=server.model_id, messages=messages, max_tokens=12, temperature=0,
                                        extra_body={"mode": mode})
    assert reply.choices[0].message.content == expected
    assert reply.choices[0].message.role == "assistant"
    stream = oai.chat.completions.create(model=server.model_id, messages=messages, max_tokens=12, temperature=0,
                                         stream=True, extra_body={"mode": mode})
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == expected


def test_usage_and_speculation_stats(server: LocalServer, oai: openai.OpenAI, engine: Engine) -> None:
    reply = chat(oai, server, max_tokens=10, extra_body={"mode": "ssd"})
    n_prompt = len(engine.messages_tokens([{"role": "user", "content": PROMPT}]))
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == \
        (n_prompt, 10, n_prompt + 10)
    assert reply.choices[0].finish_reason == "length"
    spec = (reply.model_extra or {})["speculation"]
    assert spec["mode"] == "ssd" and spec["tokens_per_second"] > 0
    assert 0.0 <= spec["acceptance_rate"] <= 1.0 and 0.0 <= spec["hit_rate"] <= 1.0
    assert spec["drafted"] >= spec["accepted"] >= 0


def test_stream_chunks_usage_and_stats(server: LocalServer, oai: openai.OpenAI) -> None:
    whole = chat(oai, server, max_tokens=10).choices[0].message.content
    chunks = list(chat(oai, server, max_tokens=10, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole
    closing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(closing) == 1 and closing[0].choices[0].finish_reason == "length"
    assert (closing[0].model_extra or {})["speculation"]["mode"] == "auto"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 10


def test_completions_equal_cli(server: LocalServer, oai: openai.OpenAI, tiny: TinyPair) -> None:
    expected = cli_text(tiny.target, PROMPT, 12, chat=False)
    reply = oai.completions.create(model=server.model_id, prompt=PROMPT, max_tokens=12, temperature=0)
    assert reply.choices[0].text == expected and reply.object == "text_completion"
    assert reply.usage is not None and reply.usage.completion_tokens == 12
    assert "speculation" in (reply.model_extra or {})
    stream = oai.completions.create(model=server.model_id, prompt=PROMPT, max_tokens=12, temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in stream) == expected


@pytest.mark.parametrize("mode", ["ar", "sd"])
def test_sampling_is_seeded(server: LocalServer, oai: openai.OpenAI, mode: str) -> None:
    kw: Any = {"max_tokens": 8, "temperature": 0.9, "top_p": 0.95, "extra_body": {"mode": mode, "top_k": 50,
                                                                                    "min_p": 0.01}}
    first = chat(oai, server, seed=3, **kw).choices[0].message.content
    assert chat(oai, server, seed=3, **kw).choices[0].message.content == first
    assert chat(oai, server, seed=4, **kw).choices[0].message.content != first


@pytest.mark.parametrize("stream", [False, True])
def test_stop_strings_cut_the_reply(server: LocalServer, oai: openai.OpenAI, stream: bool) -> None:
    full = chat(oai, server, max_tokens=24).choices[0].message.content
    assert full is not None and len(full) > 12
    stop = full[8:11]
    if stream:
        chunks = list(chat(oai, server, max_tokens=24, stop=[stop, "never-there"], stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    else:
        reply = chat(oai, server, max_tokens=24, stop=stop)
        text, finish = reply.choices[0].message.content or "", [reply.choices[0].finish_reason]
    assert text == full[: full.find(stop)]
    assert finish == ["stop"]


def test_stop_matcher_holds_back_a_partial_stop() -> None:
    m = StopMatcher(["END", "xy"])
    assert m.feed("abcE") == "abc"  # "E" may start "END"
    assert m.feed("N") == ""
    assert m.feed("Dzz") == "" and m.hit
    m = StopMatcher(["END"])
    assert m.feed("aEN") == "a"
    assert m.feed("o") == "ENo" and not m.hit
    assert m.feed("E") == "" and m.flush() == "E"
    assert StopMatcher([]).feed("anything") == "anything"


# -- errors ---------------------------------------------------------------------------------------
EXTENSIONS = ("top_k", "min_p", "mode")
BAD_CHAT = [
    ({"messages": []}, "messages", "must not be empty"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role", "wizard"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content", "text"),
    ({"max_tokens": 0}, "max_tokens", "greater than 0"),
    ({"max_tokens": -5}, "max_tokens", "greater than 0"),
    ({"max_completion_tokens": 0}, "max_completion_tokens", "greater than 0"),
    ({"temperature": 2.5}, "temperature", "less than or equal to 2"),
    ({"temperature": -0.1}, "temperature", "greater than or equal to 0"),
    ({"top_p": 1.5}, "top_p", "less than or equal to 1"),
    ({"top_p": 0}, "top_p", "greater than 0"),
    ({"top_k": -1}, "top_k", "greater than or equal to 0"),
    ({"min_p": 1.0}, "min_p", "less than 1"),
    ({"seed": -1}, "seed", "greater than or equal to 0"),
    ({"n": 17}, "n", "less than or equal to 16"),
    ({"n": 0}, "n", "greater than or equal to 1"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
    ({"mode": "turbo"}, "mode", "turbo"),
    ({"top_logprobs": 2}, "top_logprobs", "needs logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs", "less than or equal to 20"),
    ({"messages": [{"role": "user", "content": "word " * (CTX + 100)}]}, "messages", "context holds only"),
]


@pytest.mark.parametrize(("change", "param", "words"), BAD_CHAT, ids=[f"{p}:{w}" for _, p, w in BAD_CHAT])
def test_bad_chat_request_is_a_400_naming_the_field(
    server: LocalServer, oai: openai.OpenAI, change: dict[str, Any], param: str, words: str
) -> None:
    body = chat_body(server.model_id, max_tokens=4) | change
    extra = {k: body.pop(k) for k in EXTENSIONS if k in body}  # fields the client has no argument for
    with pytest.raises(openai.BadRequestError) as info:
        oai.chat.completions.create(**body, extra_body=extra)
    err = info.value
    assert err.status_code == 400 and err.param == param, err.body
    assert isinstance(err.body, dict) and set(err.body) == {"message", "type", "param", "code"}
    assert words in err.body["message"] and err.body["type"] == "invalid_request_error"
    assert server.status().running is None  # nothing was started


def test_bad_completion_requests(server: LocalServer, oai: openai.OpenAI) -> None:
    for prompt, param in (("word " * (CTX + 100), "prompt"), (123, "prompt")):
        with pytest.raises(openai.BadRequestError) as info:
            oai.completions.create(model=server.model_id, prompt=prompt, max_tokens=4)  # type: ignore[arg-type]
        assert info.value.param == param
    with pytest.raises(openai.BadRequestError) as info:
        oai.completions.create(model=server.model_id, prompt="hi", max_tokens=4, echo=True)
    assert info.value.param == "echo"


def test_unknown_model_is_a_404(server: LocalServer, oai: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    assert info.value.param == "model" and info.value.code == "model_not_found"
    assert "gpt-4o" in str(info.value.body)
    with pytest.raises(openai.NotFoundError):
        oai.models.retrieve("gpt-4o")


@pytest.mark.parametrize(("payload", "code"), [
    (b'{"model": "target", "messages": [', "invalid_json"),
    (b"", "invalid_json"),
    (b"\xff\xfe", "invalid_json"),
    (b'[{"role": "user"}]', "invalid_body"),
])
def test_malformed_body(server: LocalServer, payload: bytes, code: str) -> None:
    for path in ("/chat/completions", "/completions"):
        r = httpx.post(server.url + path, content=payload, headers={"Content-Type": "application/json"})
        err = error_of(r, 400)
        assert err["code"] == code and err["param"] is None


def test_missing_fields_and_unknown_paths(server: LocalServer) -> None:
    err = error_of(httpx.post(server.url + "/chat/completions", json={"messages": [{"role": "user"}]}), 400)
    assert err["param"] == "model" and "required" in err["message"]
    err = error_of(httpx.post(server.url + "/chat/completions", json={"model": "target"}), 400)
    assert err["param"] == "messages"
    assert error_of(httpx.get(server.url + "/engines"), 404)["code"] == "not_found"
    assert error_of(httpx.get(server.url + "/chat/completions"), 405)["type"] == "invalid_request_error"


# -- one generation at a time ---------------------------------------------------------------------
def test_disconnect_mid_stream_frees_the_engine(engine: Engine) -> None:
    with serve(engine) as srv:
        oai = client(srv)
        stream = chat(oai, srv, stream=True)  # no max_tokens: the rest of the context (~2000 tokens)
        pieces = iter(stream)
        next(pieces), next(pieces), next(pieces)
        running = srv.status().running
        assert running is not None and running.endpoint == "chat.completions" and running.stream
        stream.close()  # the client goes away mid-reply
        reply = chat(oai, srv, "Hi", max_tokens=4)  # queued behind it at most one round
        assert reply.choices[0].finish_reason == "length"
        left, second = srv.status().recent
        assert left.id == running.id and left.finish_reason == "cancelled"
        assert left.completion_tokens < CTX - running.prompt_tokens  # stopped before its limit
        assert second.finish_reason == "length" and second.completion_tokens == 4
        assert srv.status().running is None and not srv.status().busy


def test_client_leaving_a_non_streamed_reply_stops_it(engine: Engine) -> None:
    with serve(engine) as srv:
        with hang_up_later(srv, chat_body(srv.model_id, temperature=0)):  # no max_tokens: ~2000 tokens
            wait_until(lambda: srv.status().running is not None, "the generation runs")
        wait_until(lambda: srv.status().served == 1, "the abandoned generation ended")
        (left,) = srv.status().recent
        assert left.finish_reason == "cancelled" and left.completion_tokens < CTX - left.prompt_tokens
        assert chat(client(srv), srv, max_tokens=3).choices[0].finish_reason == "length"


def test_full_queue_answers_429_while_a_request_runs(engine: Engine) -> None:
    with serve(engine, max_queue=0, retry_after_s=3) as srv:
        oai = client(srv)
        stream = chat(oai, srv, stream=True)
        next(iter(stream))
        assert srv.status().running is not None
        for streamed in (False, True):
            with pytest.raises(openai.RateLimitError) as info:
                chat(oai, srv, max_tokens=2, stream=streamed)
            assert info.value.status_code == 429 and info.value.code == "queue_full"
            assert info.value.response.headers["Retry-After"] == "3"
        stream.close()
        wait_until(lambda: not srv.status().busy, "the engine is free (queue size 0: nobody may wait for it)")
        assert srv.status().rejected == 2
        assert chat(oai, srv, max_tokens=2).choices[0].finish_reason == "length"


def test_waiting_line_is_bounded_and_served_in_order(engine: Engine) -> None:
    with serve(engine, max_queue=1) as srv, ThreadPoolExecutor(2) as pool:
        oai = client(srv)
        with srv.exclusive():  # the app holds the engine (its own chat reply)
            assert srv.status().busy
            waiting = pool.submit(chat, oai, srv, max_tokens=3)
            wait_until(lambda: srv.status().queued == 1, "the first request waits")
            with pytest.raises(openai.RateLimitError):
                chat(oai, srv, max_tokens=3)
            assert not waiting.done()
        assert waiting.result(timeout=60).choices[0].finish_reason == "length"
        status = srv.status()
        assert (status.served, status.rejected, status.queued, status.busy) == (1, 1, 0, False)


def test_client_leaving_the_line_never_runs(engine: Engine) -> None:
    with serve(engine, max_queue=2) as srv:
        with srv.exclusive():
            with hang_up_later(srv, chat_body(srv.model_id, max_tokens=3)):
                wait_until(lambda: srv.status().queued == 1, "the request waits")
            wait_until(lambda: srv.status().queued == 0, "the server noticed the client left the line")
        assert chat(client(srv), srv, max_tokens=3).choices[0].finish_reason == "length"
        assert srv.status().served == 1


def test_a_generation_left_open_does_not_block_the_server(engine: Engine) -> None:
    """Someone started a generation on the engine behind the server's back and left it open: the
    server's request closes it (within one round) instead of waiting, and is served."""
    with serve(engine) as srv:
        held = engine.generate(engine.tokenize("hi"), GenerationParams(mode="ar", max_tokens=50))
        tokens = iter(held)
        next(tokens)  # suspended mid-reply, holding the engine
        body = chat_body(srv.model_id, max_tokens=3, stream=True)
        with httpx.stream("POST", srv.url + "/chat/completions", json=body, timeout=60) as r:
            assert r.status_code == 200
            events = list(sse_events(r.iter_lines()))
        assert not [e for e in events if isinstance(e, dict) and "error" in e]
        assert events[-1] == "[DONE]"
        assert held.stats.finish_reason == "stopped" and list(tokens) == []
        assert [r.finish_reason for r in srv.status().recent] == ["length"]


def test_engine_refusing_is_an_error_event_not_a_traceback(engine: Engine) -> None:
    """The engine stays busy (its reply sequence held, as by a long top-2 margin check): after the engine's 5 s
    wait the stream carries an OpenAI-style error event, and the server goes on serving."""
    with serve(engine) as srv:
        held = engine._slots.take([1], 1.0)  # the engine's one reply sequence, as a margin check holds it
        try:
            body = chat_body(srv.model_id, max_tokens=3, stream=True)
            with httpx.stream("POST", srv.url + "/chat/completions", json=body, timeout=60) as r:
                assert r.status_code == 200
                events = list(sse_events(r.iter_lines()))
        finally:
            assert held is not None
            engine._slots.give(held)
        error = next(e for e in events if isinstance(e, dict) and "error" in e)["error"]
        assert error["code"] == "engine_unavailable" and "another generation" in error["message"]
        assert events[-1] == "[DONE]"
        assert [r.finish_reason for r in srv.status().recent] == ["error"]
        assert chat(client(srv), srv, max_tokens=3).choices[0].finish_reason == "length"


# -- access ---------------------------------------------------------------------------------------
def test_bearer_key(engine: Engine) -> None:
    with serve(engine, api_key="sekret") as srv:
        with pytest.raises(openai.AuthenticationError) as info:
            client(srv, key="wrong").models.list()
        assert info.value.status_code == 401 and info.value.code == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            chat(client(srv, key="wrong"), srv, max_tokens=2)
        err = error_of(httpx.post(srv.url + "/chat/completions", content=b"{not json"), 401)
        assert "Bearer" in err["message"]
        assert httpx.get(srv.url + "/models").headers["WWW-Authenticate"] == "Bearer"
        assert httpx.get(srv.url.removesuffix("/v1") + "/health").status_code == 200
        assert chat(client(srv, key="sekret"), srv, max_tokens=2).choices[0].finish_reason == "length"


def test_cors_is_off_unless_origins_are_given(engine: Engine) -> None:
    preflight = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}
    with serve(engine) as srv:
        r = httpx.options(srv.url + "/chat/completions", headers=preflight)
        assert "access-control-allow-origin" not in r.headers
        r = httpx.get(srv.url + "/models", headers={"Origin": "http://localhost:3000"})
        assert "access-control-allow-origin" not in r.headers
    with serve(engine, cors_origins=("http://localhost:3000",), api_key="k") as srv:
        r = httpx.options(srv.url + "/chat/completions", headers=preflight)
        assert r.headers["access-control-allow-origin"] == "http://localhost:3000"


# -- in-process API and command line --------------------------------------------------------------
def test_start_stop_restart_keeps_counters_and_frees_the_port(engine: Engine) -> None:
    srv = LocalServer(engine)
    assert srv.url == "" and not srv.status().listening
    with serve(engine) as first:
        port = first.port
        with pytest.raises(ServerError, match="cannot listen"):
            LocalServer(engine, first.config.__class__(port=port)).start()
        chat(client(first), first, max_tokens=2)
        first.stop()
        assert first.url == "" and first.status().served == 1
        with socket.create_server(("127.0.0.1", port)):  # the port is free again
            pass
        first.start()
        assert first.url.startswith("http://127.0.0.1:")
        chat(client(first), first, max_tokens=2)
        assert first.status().served == 2
    # the engine is the caller's: still usable after the server stopped
    assert engine.generate(engine.tokenize("hi"), GenerationParams(mode="ar", max_tokens=2)).run().stats.new_tokens == 2


def test_stop_ends_a_running_stream_and_frees_the_engine(engine: Engine) -> None:
    with serve(engine) as srv:
        stream = chat(client(srv), srv, stream=True)  # ~2000 tokens
        pieces = iter(stream)
        next(pieces)
        srv.stop()  # the app switches the server off mid-reply
        assert not srv.running and srv.url == ""
        with pytest.raises(openai.APIError, match="stopped before the reply was finished"):
            list(pieces)  # the reply ends at once with an error event: a cut reply never looks finished
        assert [r.finish_reason for r in srv.status().recent] == ["cancelled"]
    assert engine.generate(engine.tokenize("hi"), GenerationParams(mode="ar", max_tokens=2)).run().stats.new_tokens == 2


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine", "serve", *argv], capture_output=True, text=True,
                          timeout=120, check=False)


def test_cli_serve_answers_then_stops_on_ctrl_c(tiny: TinyPair) -> None:
    proc, line, rest = start_serve(tiny, "--ctx", "512")
    try:
        url = line.split()[1]
        assert url.startswith("http://127.0.0.1:") and "mode ar" in line
        with openai.OpenAI(base_url=url, api_key="x", max_retries=0) as oai:
            reply = oai.chat.completions.create(model="target", messages=[{"role": "user", "content": "Hi"}],
                                                max_tokens=3, temperature=0)
        assert reply.choices[0].finish_reason == "length"
    finally:
        code = stop(proc)  # Ctrl+C, then 60 s for the orderly stop (past them it is killed: not 0)
    assert code == 0, "".join(rest)[-2000:]


def test_cli_serve_errors_are_one_line(tiny: TinyPair, tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        cases = [
            (["--target", str(tmp_path / "nope.gguf")], "nope.gguf"),
            (["--target", str(tiny.target), "--mode", "ssd"], "needs --draft"),
            (["--target", str(tiny.target), "--port", port, "--ctx", "512"], "; serve on another port with --port N"),
            (["--target", str(tiny.target), "--port", "70000"], "port"),
            (["--target", str(tiny.target), "--queue", "-1"], "queue"),
        ]
        for args, words in cases:
            r = run_cli(*args)
            lines = r.stderr.strip().splitlines()
            assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
            assert lines[-1].startswith("error: ") and words in lines[-1], r.stderr

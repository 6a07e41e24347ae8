"""The local server against hostile and careless requests: big bodies, foreign web pages, deep JSON, a server
left open to the network, and Ctrl+C mid-reply. A real server on 127.0.0.1 over the tiny models, driven by the
official ``openai`` client, or httpx where the client cannot send the request."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from engine import Engine, EngineConfig
from engine.server import LocalServer
from tests.server_helpers import chat_body, client, error_of, serve, start_serve, stop
from tests.tiny_models import TinyPair

pytestmark = pytest.mark.timeout(180)

CTX = 2048
LIMIT = 64 << 10  # a small body limit, so a body over it stays small too


@pytest.fixture(scope="module")
def engine(tiny: TinyPair) -> Iterator[Engine]:
    with Engine(EngineConfig(str(tiny.target), None, n_ctx=CTX, threads=1)) as eng:
        yield eng


@pytest.fixture(scope="module")
def server(engine: Engine) -> Iterator[LocalServer]:
    with serve(engine, max_body_bytes=LIMIT, allowed_hosts=("chat.lan",),
               cors_origins=("https://tools.example",)) as srv:
        yield srv


def still_serves(server: LocalServer) -> None:
    reply = client(server).chat.completions.create(model=server.model_id, max_tokens=2,
                                                   messages=[{"role": "user", "content": "Hi"}])
    assert reply.choices[0].finish_reason == "length"


# -- row 1: the body's size -----------------------------------------------------------------------
def test_a_body_over_the_limit_is_413_with_an_error_object(server: LocalServer) -> None:
    served = server.status().served
    with pytest.raises(openai.APIStatusError) as info:
        client(server).completions.create(model=server.model_id, prompt="x" * (2 * LIMIT), max_tokens=2)
    assert info.value.status_code == 413 and info.value.code == "request_too_large"
    assert f"{LIMIT:,} bytes" in info.value.message
    # chunked: no Content-Length, so the limit is counted while the chunks arrive
    chunks = (b"x" * 4096 for _ in range(3 * LIMIT // 4096))
    r = httpx.post(server.url + "/chat/completions", content=chunks, headers={"Content-Type": "application/json"})
    assert r.request.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.request.headers
    assert error_of(r, 413)["code"] == "request_too_large"
    assert server.status().served == served  # nothing was generated
    still_serves(server)


def test_a_body_over_the_limit_on_the_messages_api_is_anthropics_413(server: LocalServer) -> None:
    with anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0,
                             timeout=60.0) as claude:
        with pytest.raises(anthropic.APIStatusError) as info:
            claude.messages.create(model=server.model_id, max_tokens=2,
                                   messages=[{"role": "user", "content": "x" * (2 * LIMIT)}])
    body: Any = info.value.body
    assert info.value.status_code == 413 and body["type"] == "error" and set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == "request_too_large" and f"{LIMIT:,} bytes" in body["error"]["message"]


def test_a_prompt_longer_than_the_context_is_refused_before_tokenizing(engine: Engine) -> None:
    with serve(engine) as srv:  # the default limit (4 MB): a 1 MB prompt gets through to the size check
        oai = client(srv)
        for chat in (False, True):
            with pytest.raises(openai.BadRequestError) as info:
                if chat:
                    oai.chat.completions.create(model=srv.model_id, max_tokens=2,
                                                messages=[{"role": "user", "content": "word " * 200_000}])
                else:
                    oai.completions.create(model=srv.model_id, prompt="word " * 200_000, max_tokens=2)
            assert info.value.code == "context_length_exceeded"
            assert "at least" in info.value.message and f"only {engine.n_ctx}" in info.value.message
        still_serves(srv)


# -- row 2: Host and Origin -----------------------------------------------------------------------
def test_a_foreign_host_or_web_page_is_refused_with_403(server: LocalServer) -> None:
    served = server.status().served
    url = server.url + "/chat/completions"
    body = httpx.Request("POST", url, json=chat_body(server.model_id, max_tokens=2)).content
    # what a web page's form or fetch() sends without a preflight, after DNS rebinding
    page = {"Content-Type": "text/plain", "Origin": "http://evil.example", "Host": f"evil.example:{server.port}"}
    assert error_of(httpx.post(url, content=body, headers=page), 403)["code"] == "forbidden_host"
    page["Host"] = f"127.0.0.1:{server.port}"
    err = error_of(httpx.post(url, content=body, headers=page), 403)
    assert err["code"] == "forbidden_origin" and "evil.example" in err["message"]
    for origin in ("null", "chrome-extension://abc"):
        assert error_of(httpx.get(server.url + "/models", headers={"Origin": origin}), 403)
    assert server.status().served == served
    still_serves(server)


@pytest.mark.parametrize("headers", [
    {"Host": "localhost:{port}"},
    {"Host": "[::1]:{port}"},
    {"Host": "chat.lan:{port}"},  # given with --allow-host
    {"Origin": "http://localhost:5173"},  # a page on this machine
    {"Origin": "http://127.0.0.1:{port}"},  # the server's own origin
    {"Origin": "https://tools.example"},  # a CORS origin
])
def test_local_names_and_pages_and_given_names_are_served(server: LocalServer, headers: dict[str, str]) -> None:
    r = httpx.get(server.url + "/models", headers={k: v.format(port=server.port) for k, v in headers.items()})
    assert r.status_code == 200, r.text


# -- row 11: deep JSON ----------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [30_000, 900])
def test_deeply_nested_json_is_a_400(server: LocalServer, depth: int) -> None:
    body = b'{"model": "target", "messages": [{"role": "user", "content": ' + b"[" * depth + b"]" * depth + b"}]}"
    err = error_of(httpx.post(server.url + "/chat/completions", content=body), 400)
    assert err["code"] in ("invalid_json", "invalid_value")
    still_serves(server)


# -- rows 3 and 12: the command line --------------------------------------------------------------
def test_all_addresses_without_a_key_warn_loudly_with_the_real_urls(tiny: TinyPair) -> None:
    proc, line, rest = start_serve(tiny, "--host", "0.0.0.0")
    try:
        url = line.split()[1]
        assert url.startswith("http://127.0.0.1:") and "0.0.0.0" not in line
        with openai.OpenAI(base_url=url, api_key="x", max_retries=0) as oai:
            assert oai.models.list().data
    finally:
        assert stop(proc) == 0
    warning = next((r for r in rest if r.startswith("WARNING")), "")
    assert "no API key" in warning and "--api-key" in warning, rest


def test_ctrl_c_mid_stream_ends_it_with_an_error_not_a_finish(tiny: TinyPair) -> None:
    proc, line, rest = start_serve(tiny, "--api-key", "k")
    chunks: list[Any] = []
    try:
        assert not any(r.startswith("WARNING") for r in rest)
        with openai.OpenAI(base_url=line.split()[1], api_key="k", max_retries=0) as oai:
            stream = oai.chat.completions.create(model="target", messages=[{"role": "user", "content": "Hi"}],
                                                 max_tokens=1800, temperature=0, stream=True)
            with pytest.raises(openai.APIError, match="stopped before the reply was finished") as info:
                for chunk in stream:
                    chunks.append(chunk)
                    if len(chunks) == 5:
                        proc.send_signal(signal.SIGINT)
        assert info.value.body is not None and "cut short" in str(info.value.message)
    finally:
        assert stop(proc, signalled=len(chunks) >= 5) == 0, "".join(rest)[-2000:]
    assert 5 <= len(chunks) < 1800
    assert all(c.choices[0].finish_reason is None for c in chunks)  # no "stop", no "length": it was cut

"""Thinking through the server: reasoning_content apart from content (whole and streamed, with the official
client), the thinking budget closing the block, reasoning tokens counted, the same reply in every mode, and a
model without a chat template answered with a plain 400."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine import Engine, EngineConfig
from engine.server import LocalServer
from tests.server_helpers import chat_body, client, error_of, serve
from tests.tiny_models import Vocab, write_model
from tests.tool_models import tools_vocab

USER_DEFINED = 4  # GGUF token type of a user-defined token (Qwen3's <think> is one: rendered in the reply's text)
MARKERS = ("<think>", "</think>", "<tool_call>", "</tool_call>")
BUDGET = 6
# A ChatML template whose generation prompt opens the thinking block (as QwQ's and R1-distill's do)
THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if tools %}<tools>{{ tools | tojson }}</tools> answer in <tool_call></tool_call>{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)


def _thinking_vocab() -> Vocab:
    v = tools_vocab()
    return Vocab(v.model, [*v.tokens, *MARKERS], [*v.scores, *[0.0] * len(MARKERS)],
                 [*v.types, *[USER_DEFINED] * len(MARKERS)], v.bos, v.eos, v.unk)


@pytest.fixture(scope="module")
def thinking_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    folder = tmp_path_factory.mktemp("thinking")
    target = write_model(folder / "t.gguf", vocab=_thinking_vocab(), seed=3, n_layer=2, logit_scale=4.0,
                         chat_template=THINKING_TEMPLATE)
    draft = write_model(folder / "d.gguf", vocab=_thinking_vocab(), seed=3, n_layer=2, logit_scale=4.0, noise=0.05,
                        chat_template=THINKING_TEMPLATE)
    with Engine(EngineConfig(str(target), str(draft), n_ctx=1024)) as eng, serve(eng) as server:
        yield server


def _body(server: LocalServer, **extra: object) -> dict[str, object]:
    return chat_body(server.model_id, "Think, then answer.", temperature=0, max_tokens=24,
                     thinking_budget=BUDGET, **extra)


def test_whole_reply_keeps_thinking_apart(thinking_server: LocalServer) -> None:
    r = httpx.post(f"{thinking_server.url}/chat/completions", json=_body(thinking_server), timeout=60)
    assert r.status_code == 200, r.text
    msg = r.json()["choices"][0]["message"]
    assert msg["reasoning_content"], msg
    assert not any(m in (msg["content"] or "") + msg["reasoning_content"] for m in MARKERS), msg
    details = r.json()["usage"]["completion_tokens_details"]
    assert details["reasoning_tokens"] == BUDGET


def test_streamed_reasoning_through_the_official_client(thinking_server: LocalServer) -> None:
    whole = httpx.post(f"{thinking_server.url}/chat/completions", json=_body(thinking_server), timeout=60).json()
    want = whole["choices"][0]["message"]
    stream = client(thinking_server).chat.completions.create(
        model=thinking_server.model_id, messages=[{"role": "user", "content": "Think, then answer."}],
        temperature=0, max_tokens=24, stream=True, extra_body={"thinking_budget": BUDGET})
    reasoning, content = [], []
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        extra = delta.model_extra or {}
        if extra.get("reasoning_content"):
            reasoning.append(extra["reasoning_content"])
        if delta.content:
            content.append(delta.content)
    assert reasoning, "no reasoning_content was streamed"
    assert "".join(reasoning).strip() == want["reasoning_content"]
    assert "".join(content).strip() == (want["content"] or "").strip()


@pytest.mark.parametrize("mode", ["sd", "ssd", "lookup", "auto"])
def test_same_split_reply_in_every_mode(thinking_server: LocalServer, mode: str) -> None:
    url = f"{thinking_server.url}/chat/completions"
    ar = httpx.post(url, json=_body(thinking_server, mode="ar"), timeout=60).json()["choices"][0]["message"]
    got = httpx.post(url, json=_body(thinking_server, mode=mode), timeout=60).json()["choices"][0]["message"]
    assert (got["content"], got["reasoning_content"]) == (ar["content"], ar["reasoning_content"])


def test_model_without_a_template_gets_a_plain_400(tmp_path: Path) -> None:
    path = write_model(tmp_path / "base.gguf", seed=1, n_layer=1, chat_template="")
    with Engine(EngineConfig(str(path), None, n_ctx=256)) as eng, serve(eng) as server:
        r = httpx.post(f"{server.url}/chat/completions", json=chat_body(server.model_id), timeout=60)
        err = error_of(r, 400)
        assert err["code"] == "no_chat_template" and "base model" in err["message"]
        done = httpx.post(f"{server.url}/completions", json={"model": server.model_id, "prompt": "Once upon",
                                                             "max_tokens": 4}, timeout=60)
        assert done.status_code == 200, done.text


def test_responses_api_has_a_reasoning_item(thinking_server: LocalServer) -> None:
    r = httpx.post(f"{thinking_server.url}/responses", json={
        "model": thinking_server.model_id, "input": "Think, then answer.", "temperature": 0, "max_output_tokens": 24,
        "reasoning": {"effort": "low"}}, timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    assert out[0]["type"] == "reasoning" and out[0]["content"][0]["text"]
    assert r.json()["usage"]["output_tokens_details"]["reasoning_tokens"] >= 1


def test_a_spent_budget_closes_each_familys_thinking() -> None:
    from engine.chat.budget import ThinkingBudget, closing_text
    from engine.chat.families import FAMILIES
    from engine.chat.family import CONTENT, THINKING
    from engine.chat.stream import ReplySplitter

    for fam in FAMILIES:
        close = closing_text(fam)
        if close is None or THINKING not in fam.transitions:
            continue
        budget = ThinkingBudget(fam, THINKING, 2)
        assert not budget.feed("a") and budget.feed("b"), fam.name
        splitter = ReplySplitter(fam, (), THINKING)
        splitter.feed("ab" + close + "answer")
        assert splitter.section == CONTENT, (fam.name, close)


def test_a_picked_template_lets_a_base_model_chat(tmp_path: Path) -> None:
    from engine.chat import builtin

    path = write_model(tmp_path / "base.gguf", seed=1, n_layer=1, chat_template="")
    with Engine(EngineConfig(str(path), None, n_ctx=256)) as eng, \
            serve(eng, chat_template=builtin.source("chatml")) as server:
        r = httpx.post(f"{server.url}/chat/completions", json=chat_body(server.model_id, max_tokens=4), timeout=60)
        assert r.status_code == 200, r.text

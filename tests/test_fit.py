"""Fitting a long conversation to the context: the system prompt stays, the fewest oldest turns go."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from engine import (
    DROP_OLDEST,
    ChatMessage,
    ContextFullError,
    Engine,
    EngineConfig,
    GenerationParams,
    TinyPair,
    fit_messages,
)
from engine.chat.fit import STOP, reply_room


def words(messages: Sequence[ChatMessage]) -> list[int]:
    """A stand-in tokenizer for the pure tests: one token per word, two per message of markup."""
    return [0] * sum(len(m["content"].split()) + 2 for m in messages)


def chat(turns: int, *, words_per_message: int = 10, system: str = "be brief") -> list[ChatMessage]:
    out: list[ChatMessage] = [{"role": "system", "content": system}] if system else []
    for n in range(turns):
        out.append({"role": "user", "content": " ".join([f"q{n}"] * words_per_message)})
        out.append({"role": "assistant", "content": " ".join([f"a{n}"] * words_per_message)})
    out.append({"role": "user", "content": "last question"})
    return out


def test_a_chat_that_fits_is_sent_whole() -> None:
    messages = chat(3)
    fitted = fit_messages(words, messages, n_ctx=4096, max_tokens=256)
    assert fitted.dropped_turns == 0 and fitted.messages == messages and len(fitted.tokens) == 80


def test_the_fewest_oldest_turns_are_left_out_and_the_system_prompt_stays() -> None:
    messages = chat(20)  # 4 + 20 * 24 + 4 = 488 "tokens"
    n_ctx, max_tokens = 400, 50
    budget = n_ctx - reply_room(n_ctx, max_tokens)
    fitted = fit_messages(words, messages, n_ctx=n_ctx, max_tokens=max_tokens)
    assert len(fitted.tokens) <= budget
    assert fitted.messages[0] == messages[0] and fitted.messages[-1] == messages[-1]
    assert fitted.messages[1]["content"].startswith(f"q{fitted.dropped_turns} ")  # whole turns, oldest first
    one_fewer = [messages[0], *messages[1 + 2 * (fitted.dropped_turns - 1):]]
    assert len(words(one_fewer)) > budget  # leaving out one turn fewer would not fit


def test_replies_without_a_user_turn_and_no_system_prompt() -> None:
    messages: list[ChatMessage] = [{"role": "assistant", "content": "hello " * 50}, *chat(5, system="")]
    fitted = fit_messages(words, messages, n_ctx=150, max_tokens=10)  # 176 "tokens", 122 fit
    assert fitted.dropped_turns >= 1 and fitted.messages[-1]["content"] == "last question"
    assert all(m["role"] != "system" for m in fitted.messages)


def test_stop_policy_and_a_last_turn_too_long_say_so() -> None:
    with pytest.raises(ContextFullError, match=r"the conversation has 488 tokens and the context holds 400") as got:
        fit_messages(words, chat(20), n_ctx=400, max_tokens=50, policy=STOP)
    assert ("400 tokens, of which 50 are kept free for the reply (Max tokens) and 18 as working room while it is"
            " written") in str(got.value)  # not 68; and no "last round's draft"
    huge: list[ChatMessage] = [{"role": "user", "content": "word " * 500}]
    with pytest.raises(ContextFullError, match="the system prompt and the last message alone have 502 tokens"):
        fit_messages(words, huge, n_ctx=400, max_tokens=50, policy=DROP_OLDEST)
    with pytest.raises(ValueError, match="unknown context overflow policy"):
        fit_messages(words, huge, n_ctx=400, max_tokens=50, policy="summarise")


def test_counts_with_the_engines_own_chat_tokens_and_the_engine_accepts_the_result(tiny: TinyPair) -> None:
    messages = chat(30, words_per_message=12)
    with Engine(EngineConfig(str(tiny.target), None, n_ctx=512)) as eng:
        assert len(eng.messages_tokens(messages)) > eng.n_ctx  # would not even start
        fitted = fit_messages(eng.messages_tokens, messages, n_ctx=eng.n_ctx, max_tokens=32)
        assert fitted.dropped_turns > 0 and fitted.tokens == eng.messages_tokens(fitted.messages)
        assert len(fitted.tokens) <= eng.n_ctx - reply_room(eng.n_ctx, 32)
        more = [messages[0], *messages[1 + 2 * (fitted.dropped_turns - 1):]]
        assert len(eng.messages_tokens(more)) > eng.n_ctx - reply_room(eng.n_ctx, 32)
        gen = eng.generate(fitted.tokens, GenerationParams(mode="ar", max_tokens=32)).run()
        assert gen.stats.new_tokens == 32 and gen.stats.finish_reason == "length"

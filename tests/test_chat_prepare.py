"""The chat fitted to the context where the model is: one request to the engine process per send, however many
turns the chat has (the fit's renders and counts stay in the child), with the chat and the reply's section the
in-process engine makes of it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from app.worker.chat_setup import PLAIN_TEXT, ChatChoice, Turn, chat_messages, prepare
from engine import Engine, EngineConfig, EngineProcess, TinyPair, fit_messages
from engine.chat.prepare import plain_text
from engine.process import protocol as p

pytestmark = pytest.mark.timeout(180)

N_CTX = 512  # a few thousand words of chat overflow it: the longer chats below drop their oldest turns
MAX_TOKENS = 64


def chat(exchanges: int) -> list[Turn]:
    """``exchanges`` questions and answers of some twenty words each, then the message being answered."""
    turns: list[Turn] = []
    for i in range(exchanges):
        turns += [("user", f"question {i} " + "word " * 20), ("assistant", f"answer {i} " + "word " * 20)]
    return [*turns, ("user", "last")]


@pytest.fixture
def counted(tiny: TinyPair) -> Iterator[tuple[EngineProcess, list[p.Request]]]:
    """The tiny target in its process, and the requests sent to it since the list was last cleared."""
    sent: list[p.Request] = []
    with EngineProcess(EngineConfig(str(tiny.target), n_ctx=N_CTX, threads=1)) as eng:
        child = eng.child
        request = child.request

        def counting(make: Callable[[int], p.Request]) -> tuple[int, object]:
            def made(rid: int) -> p.Request:
                sent.append(make(rid))
                return sent[-1]
            return request(made)

        child.request = counting  # type: ignore[method-assign,assignment]
        yield eng, sent


@pytest.mark.parametrize("choice", [ChatChoice(), ChatChoice(thinking="off"), ChatChoice(template=PLAIN_TEXT)])
def test_a_send_is_one_round_trip_however_long_the_chat(counted: tuple[EngineProcess, list[p.Request]],
                                                        tiny: TinyPair, choice: ChatChoice) -> None:
    eng, sent = counted
    dropped = []
    with Engine(EngineConfig(str(tiny.target), n_ctx=N_CTX, threads=1)) as here:
        for exchanges in (1, 4, 16, 64):
            sent.clear()
            fitted, splitter = prepare(eng, chat(exchanges), choice, max_tokens=MAX_TOKENS)
            assert [type(r) for r in sent] == [p.Call], exchanges
            dropped.append(fitted.dropped_turns)
            messages = chat_messages(chat(exchanges))  # what fitting in the parent, call by call, made of it
            tokens = (lambda ms: here.tokenize(plain_text(ms))) if choice.template == PLAIN_TEXT else \
                here.messages_tokens
            assert fitted == fit_messages(tokens, messages, n_ctx=N_CTX, max_tokens=MAX_TOKENS)
            assert splitter.section == "content"
    assert dropped[0] == 0 and dropped == sorted(dropped) and dropped[-1] > 32  # the long chats were cut


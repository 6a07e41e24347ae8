"""Fitting a conversation to the context: keep the system prompt, leave out the oldest turns.

Tokens are counted by rendering and tokenizing the chat exactly as the generation will (the
caller passes the engine's own ``messages_tokens``), so what fits here is what the engine accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.core.options import MAX_K
from engine.errors import ContextFullError

from .rendering import Message

Tokenize = Callable[[Sequence[Message]], list[int]]

DROP_OLDEST = "drop oldest turns"
STOP = "stop with a message"
OVERFLOW_POLICIES = (DROP_OLDEST, STOP)


@dataclass(frozen=True, slots=True)
class FittedChat:
    """The chat as it will be sent: its tokens, the messages kept, and how many earlier turns were left out."""

    tokens: list[int]
    messages: list[Message]
    dropped_turns: int


def reply_room(n_ctx: int, max_tokens: int) -> int:
    """Tokens kept free for the reply: up to a quarter of the context, plus one draft's worth of headroom.

    The engine ends a reply ("context") once the next round's draft could overflow, so the headroom
    is the longest draft any mode may use.
    """
    return min(max_tokens, n_ctx // 4) + MAX_K + 2


def fit_messages(tokenize: Tokenize, messages: Sequence[Message], *, n_ctx: int, max_tokens: int,
                 policy: str = DROP_OLDEST) -> FittedChat:
    """``messages`` cut to fit ``n_ctx`` with room for a reply, per ``policy``.

    A turn is a user message and the replies after it. Leading system messages are always kept, and
    so is the last turn (the message being answered). With :data:`DROP_OLDEST` the fewest oldest
    turns are left out; with :data:`STOP`, or when even the last turn alone does not fit,
    :class:`ContextFullError` says how many tokens the conversation has and how many the context holds.
    """
    if policy not in OVERFLOW_POLICIES:
        raise ValueError(f"unknown context overflow policy {policy!r}")
    budget = n_ctx - reply_room(n_ctx, max_tokens)
    head = 0
    while head < len(messages) and messages[head]["role"] == "system":
        head += 1
    system, turns = list(messages[:head]), _turns(messages[head:])

    def attempt(dropped: int) -> FittedChat:
        kept = system + [m for turn in turns[dropped:] for m in turn]
        return FittedChat(tokenize(kept), kept, dropped)

    whole = attempt(0)
    if len(whole.tokens) <= budget:
        return whole
    reply = min(max_tokens, n_ctx // 4)  # what reply_room keeps, named as the user set it (Max tokens)
    room = (f"the context holds {n_ctx} tokens, of which {reply} are kept free for the reply (Max tokens) and"
            f" {n_ctx - budget - reply} as working room while it is written")
    if policy == STOP:
        raise ContextFullError(f"the conversation has {len(whole.tokens)} tokens and {room}: start a new chat,"
                               " or let Settings drop the oldest turns")
    last = attempt(max(len(turns) - 1, 0))
    if len(last.tokens) > budget:
        raise ContextFullError(f"the system prompt and the last message alone have {len(last.tokens)} tokens"
                               f" and {room}: shorten them or raise the context length")
    lo, hi, best = 1, len(turns) - 1, last  # the fewest dropped turns that fit; best is always attempt(hi)
    while lo < hi:
        mid = (lo + hi) // 2
        fitted = attempt(mid)
        if len(fitted.tokens) <= budget:
            hi, best = mid, fitted
        else:
            lo = mid + 1
    return best


def _turns(messages: Sequence[Message]) -> list[list[Message]]:
    turns: list[list[Message]] = []
    for m in messages:
        if m["role"] == "user" or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return turns

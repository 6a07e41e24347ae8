"""What travels between the engine process and its parent: requests in, events out, each a small dataclass.

Every message carries the request id it belongs to (``rid``); the child answers each request with
exactly one :class:`Done` or :class:`Failed`, after any number of :class:`Round` and :class:`Progress`
events: a generation crosses a round at a time, not a token at a time. The first event of a child is
:class:`Hello` with :data:`VERSION`; a parent refuses a child of another version (both come from one
install, so that is a broken one). Messages are pickled by :mod:`multiprocessing.connection`; payloads
are the engine's own frozen dataclasses (``EngineConfig``, ``GenerationParams``, ``GenerationStats``),
never anything Qt.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, TypeVar, dataclass_transform

from engine import errors
from engine.config import EngineConfig, GenerationParams
from engine.core.modelfile import ModelFiles
from engine.core.placement import Placement
from engine.errors import EngineError
from engine.stats import GenerationStats

VERSION = 4  # raised whenever a message below changes shape (4: Round, a round in one message)
ALL = -1  # the rid of a Stop that stops every request
STOPPED = "the engine stopped: "  # how every EngineStopped of a dead process begins (the app looks for it)
_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def message(cls: type[_T]) -> type[_T]:
    """A frozen slotted dataclass that pickles as its class and a tuple of its fields (a third of the default's
    time: the pipe carries one per round)."""
    made = dataclass(frozen=True, slots=True)(cls)
    names = tuple(made.__slots__)  # type: ignore[attr-defined]
    fields = operator.attrgetter(*names) if len(names) > 1 else lambda m: (getattr(m, names[0]),)

    def reduce(self: object) -> tuple[type[object], tuple[object, ...]]:
        return made, fields(self)

    made.__reduce__ = reduce  # type: ignore[method-assign]
    return made


class EngineStopped(EngineError):
    """The engine process ended while a request was in flight (or before it could be sent); says why."""


# -- requests (parent -> child) ------------------------------------------------------------------
@message
class Load:
    """Load a pair; answered with ``Done(LoadedPair)``."""

    rid: int
    config: EngineConfig


@message
class Generate:
    """Generate from prompt tokens; ``Round`` per round, ``Done(GenerationStats)``."""

    rid: int
    prompt: tuple[int, ...]
    params: GenerationParams


@message
class Task:
    """Run ``module:function(engine, *args, stop, report)`` on the engine's thread; ``report`` sends Progress."""

    rid: int
    target: str
    args: tuple[Any, ...]


@message
class Call:
    """Call a quick read-only engine method (tokenize, messages_tokens...) beside any generation."""

    rid: int
    name: str
    args: tuple[Any, ...] = ()


@message
class Stop:
    """Stop request ``rid`` (or every one: :data:`ALL`) at the next round boundary."""

    rid: int


@message
class Close:
    """Stop everything, free the engine and exit."""

    rid: int = 0


Request = Load | Generate | Task | Call | Stop | Close

# Methods a Call may name: quick, read-only, safe beside a generation (as the server always ran them).
CALLS = frozenset({"tokenize", "messages_tokens", "detokenize", "top2_margin", "measured_rates", "longest_piece",
                   "chat_tokens", "chat_format", "reply_section", "markup_tokens", "slots", "prepare_chat",
                   "suggested_template", "fim_prompt", "prompt_cache_use"})


def longest_piece(engine: Any) -> int:
    """The most bytes of text one token of the target's vocabulary stands for (the ``longest_piece`` Call)."""
    model = engine.target_model
    return max((len(model.token_bytes(t)) for t in range(model.n_vocab)), default=1) or 1


# -- events (child -> parent) --------------------------------------------------------------------
@message
class Hello:
    """The child is up; its protocol version and process id."""

    version: int
    pid: int
    rid: int = 0


@message
class LoadedPair:
    """What the parent needs to know of a loaded pair without asking again."""

    config: EngineConfig
    n_ctx: int
    placement: Placement
    files: ModelFiles
    n_vocab: int
    replies_at_once: int = 1  # generations the engine runs side by side


@message
class Round:
    """One round's tokens, as the engine's ``TokenEvent``s (``drafted``: each token's ``from_draft``), and the
    generation's seconds when the round was out (the parent keeps the count and the rate in step with the tokens);
    ``stats`` is the generation's statistics so far, at most every ``child.STATS_INTERVAL_S`` (else None)."""

    rid: int
    round: int
    tokens: tuple[int, ...]
    texts: tuple[str, ...]
    drafted: tuple[bool, ...]
    seconds: float
    stats: GenerationStats | None = None


@message
class Progress:
    """A task's report (e.g. the exactness check's ``VerifyProgress``)."""

    rid: int
    value: Any


@message
class Done:
    """The request ended: its result (``LoadedPair``, final ``GenerationStats``, a task's or call's value)."""

    rid: int
    value: Any


@message
class Failed:
    """The request raised; ``kind`` names the :class:`~engine.EngineError` subclass (else a bug's type)."""

    rid: int
    kind: str
    message: str
    user_error: bool  # an EngineError: the message is for the user as it is


@message
class Log:
    """A log record of the child at WARNING or above, re-logged by the parent."""

    level: int
    name: str
    message: str
    rid: int = 0


@message
class Beat:
    """The child is alive; ``stalled_s`` is how long its work has gone without progress (0 while idle)."""

    stalled_s: float
    rid: int = 0


Event = Hello | Round | Progress | Done | Failed | Log | Beat


def failure(rid: int, exc: BaseException) -> Failed:
    """The event for an exception raised while serving ``rid``."""
    user = isinstance(exc, EngineError)
    return Failed(rid, type(exc).__name__, str(exc) if user else f"{type(exc).__name__}: {exc}", user)


def error_of(event: Failed) -> EngineError:
    """The exception the parent raises for a :class:`Failed`: the same EngineError subclass where there is one."""
    kind = getattr(errors, event.kind, None) if event.user_error else None
    if isinstance(kind, type) and issubclass(kind, EngineError):
        return kind(event.message)
    return EngineError(event.message)

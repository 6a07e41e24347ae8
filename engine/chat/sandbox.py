"""GGUF chat templates rendered as transformers renders them, in a bounded Jinja sandbox."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from functools import lru_cache, wraps
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from engine.errors import ChatTemplateError, ParameterError

from .templatesize import TooBig, check_filter, check_method

MAX_STEPS = 2_000_000
DEADLINE_S = 5.0
MAX_OUTPUT = 8 << 20
MAX_NUMBER_BITS = 1 << 14
_BIG_NUMBER = re.compile(rf"\d{{{len(str(MAX_OUTPUT))},}}")  # a format width that could be as large
RESERVED = frozenset({"messages", "tools", "documents", "add_generation_prompt", "raise_exception", "strftime_now"})
"""Names the render itself sets: a template variable may not stand in for them (nor for the sandbox's ``ssd_``
helpers)."""
clock: Callable[[], datetime] = datetime.now
"""``strftime_now``'s clock (tests fix it)."""


class BudgetExceeded(Exception):
    """The template used up its steps, time or size."""


class StoppedError(ChatTemplateError):
    """The template overran its budget (worth no second try)."""


class _Budget(threading.local):
    steps = 0
    deadline = 0.0
    active = False


def _size(value: object) -> int:
    if isinstance(value, str | list | tuple | dict):
        return len(value)
    if isinstance(value, int):
        return value.bit_length() // 3  # about its decimal digits
    return 0


def _refuse_big(size: int, what: str) -> None:
    if size > MAX_OUTPUT:
        raise BudgetExceeded(f"{what} would be larger than {MAX_OUTPUT:,} characters")


class _Environment(ImmutableSandboxedEnvironment):
    """The immutable sandbox with a step budget, size checks and For/Concat nodes rewritten to report."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self) -> None:
        super().__init__(loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True,
                         extensions=[_IgnoreGenerationTags, jinja2.ext.loopcontrols])
        self.budget = _Budget()
        self.filters = {name: self._bounded(f, name) for name, f in self.filters.items()}
        self.filters["tojson"] = self._bounded(_tojson, "tojson")
        self.globals.update(raise_exception=_raise, strftime_now=_strftime_now, ssd_iter=self._iterate,
                            ssd_concat=_concat)

    def tick(self) -> None:
        b = self.budget
        if not b.active:
            return
        b.steps += 1
        if b.steps > MAX_STEPS:
            raise BudgetExceeded(f"it took more than {MAX_STEPS:,} steps (does it loop forever?)")
        if b.steps & 1023 == 0 and time.monotonic() > b.deadline:
            raise BudgetExceeded(f"it ran longer than {DEADLINE_S:g} s (does it loop forever?)")

    def _iterate(self, items: Iterable[Any]) -> Iterator[Any]:
        for item in items:
            self.tick()
            yield item

    def _bounded(self, func: Callable[..., Any], name: str) -> Callable[..., Any]:
        @wraps(func)
        def bounded(*args: Any, **kwargs: Any) -> Any:
            self.tick()
            _check_args(func, args, kwargs)
            args, kwargs = check_filter(name, func, args, kwargs, MAX_OUTPUT)
            result = func(*args, **kwargs)
            _refuse_big(_size(result), "a filter's result")
            return result

        return bounded

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        __self.tick()
        _check_args(__obj, args, kwargs)
        args = check_method(__obj, args, kwargs, MAX_OUTPUT)
        result = super().call(__context, __obj, *args, **kwargs)
        _refuse_big(_size(result), "a call's result")
        return result

    def getattr(self, obj: Any, attribute: str) -> Any:
        self.tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.tick()
        return super().getitem(obj, argument)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        fmt = super().wrap_str_format(value)
        if fmt is not None and _BIG_NUMBER.search(str(value.__self__)):
            raise BudgetExceeded("a format width is too large")
        return fmt

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self.tick()
        if operator == "*" and isinstance(right, int) and not isinstance(left, int | float):
            _refuse_big(_size(left) * max(right, 0), "a repeated value")
        elif operator == "*" and isinstance(left, int) and not isinstance(right, int | float):
            _refuse_big(_size(right) * max(left, 0), "a repeated value")
        elif operator == "*" and isinstance(left, int) and isinstance(right, int):
            _refuse_long_number(left.bit_length() + right.bit_length())
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            _refuse_long_number(left.bit_length() * max(right, 0))
        elif operator == "+":
            _refuse_big(_size(left) + _size(right), "a joined value")
        elif operator == "%" and isinstance(left, str) and _BIG_NUMBER.search(left):
            raise BudgetExceeded("a format width is too large")
        return super().call_binop(context, operator, left, right)


def _refuse_long_number(bits: int) -> None:
    if bits > MAX_NUMBER_BITS:
        raise BudgetExceeded(f"a number would have more than {MAX_NUMBER_BITS:,} bits")


def _check_args(func: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_OUTPUT:
            raise BudgetExceeded(f"{getattr(func, '__name__', 'a function')}() got too large a number")
    if getattr(func, "__name__", "") == "do_format" and args and _BIG_NUMBER.search(str(args[0])):
        raise BudgetExceeded("a format width is too large")


def _concat(*parts: Any) -> str:
    texts = [str(p) for p in parts]
    _refuse_big(sum(map(len, texts)), "a joined text")
    return "".join(texts)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """transformers' ``tojson`` (keeps non-ASCII text as is)."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class _IgnoreGenerationTags(jinja2.ext.Extension):
    """transformers' ``{% generation %}`` tag: its body renders as usual."""

    tags = {"generation"}  # noqa: RUF012 - jinja2's declaration

    def parse(self, parser: Any) -> Any:
        parser.stream.skip(1)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class _Rewrite(NodeTransformer):
    """Route every loop's items through ``ssd_iter`` and every ``~`` through ``ssd_concat``."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Call(nodes.Name("ssd_iter", "load"), [node.iter], [], None, None)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Call(nodes.Name("ssd_concat", "load"), node.nodes, [], None, None)


class ChatTemplate:
    """One compiled chat template; :meth:`render` is bounded and thread-safe.

    A chat template is code that comes with a model file. It runs in Jinja's immutable sandbox (as in transformers
    and llama-cpp-python), and here also under a budget, because Python cannot stop a thread that never returns:
    every loop iteration, call, attribute and item lookup costs a step; rendering stops after :data:`MAX_STEPS` steps
    or :data:`DEADLINE_S` seconds; no string or list may grow past :data:`MAX_OUTPUT` characters (items) and no number
    past :data:`MAX_NUMBER_BITS` bits, checked before ``*``, ``**``, ``+``, ``~`` and ``%`` build one, before a filter
    or string method that can build many times its inputs (:mod:`.templatesize`), after each call and filter, and over
    the rendered text. Every failure is a :class:`ChatTemplateError` with one plain line: a syntax error, an exception
    the template raises (``raise_exception``), an operation the sandbox forbids, or a budget overrun.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self._env = _Environment()
        try:
            self._template = self._env.from_string(_Rewrite().visit(self._env.parse(source)))
        except jinja2.TemplateSyntaxError as exc:
            raise ChatTemplateError(f"the model's chat template has a syntax error (line {exc.lineno}): "
                                    f"{exc.message}") from None
        except Exception as exc:  # a template that cannot compile is the model's problem, not a crash
            raise ChatTemplateError(f"the model's chat template cannot be compiled: {_describe(exc)}") from None

    def render(self, messages: list[dict[str, Any]], bos_token: str, eos_token: str,
               add_generation_prompt: bool = True, tools: list[dict[str, Any]] | None = None,
               documents: list[dict[str, Any]] | None = None, variables: Mapping[str, Any] | None = None) -> str:
        """The prompt text, given the globals transformers' ``apply_chat_template`` gives: ``messages``, ``tools``
        (OpenAI's form; an empty list is no tools), ``documents``, ``add_generation_prompt``, ``bos_token``,
        ``eos_token``, ``raise_exception``, ``strftime_now``, and ``variables`` (``enable_thinking``,
        ``reasoning_effort``, a request's ``chat_template_kwargs``...), which may not set :data:`RESERVED` names.

        Raises:
            ChatTemplateError: The template fails, is forbidden something, or overruns its budget.
            ParameterError: A variable would set a name the render sets itself.
        """
        context = {"bos_token": bos_token, "eos_token": eos_token, **_checked(variables or {}),
                   "messages": messages, "tools": tools or None, "documents": documents,
                   "add_generation_prompt": add_generation_prompt}
        budget = self._env.budget
        budget.steps, budget.deadline, budget.active = 0, time.monotonic() + DEADLINE_S, True
        out: list[str] = []
        size = 0
        try:
            for chunk in self._template.generate(context):
                self._env.tick()
                size += len(chunk)
                if size > MAX_OUTPUT:
                    raise BudgetExceeded(f"its output is longer than {MAX_OUTPUT:,} characters")
                out.append(chunk)
        except (BudgetExceeded, TooBig) as exc:
            raise StoppedError(f"the model's chat template was stopped: {exc}") from None
        except _TemplateRaised as exc:
            raise ChatTemplateError(f"the model's chat template refused these messages: {exc}") from None
        except SecurityError as exc:
            raise ChatTemplateError(f"the model's chat template did something the sandbox forbids: {exc}") from None
        except RecursionError:
            raise ChatTemplateError("the model's chat template recursed too deeply") from None
        except MemoryError:
            raise ChatTemplateError("the model's chat template ran out of memory") from None
        except Exception as exc:  # any other failure of the model's code is reported, never a traceback
            raise ChatTemplateError(f"the model's chat template failed: {_describe(exc)}") from None
        finally:
            budget.active = False
        return "".join(out)


class _TemplateRaised(Exception):
    """``raise_exception(message)`` called by the template."""


def _raise(message: object) -> None:
    raise _TemplateRaised(str(message))


def _strftime_now(fmt: str) -> str:
    return clock().strftime(fmt)


def _checked(variables: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in variables:
        if not isinstance(key, str) or key in RESERVED or key.startswith("ssd_"):
            raise ParameterError(f"chat_template_kwargs: {key!r} is set by the chat itself, not by a template "
                                 "variable")
    return variables


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@lru_cache(maxsize=16)
def compiled(source: str) -> ChatTemplate:
    """The compiled template for ``source`` (kept: the app renders every turn with the same one)."""
    return ChatTemplate(source)


def render_messages(source: str, messages: Iterable[Mapping[str, Any]], bos_token: str, eos_token: str,
                    tools: list[dict[str, Any]] | None = None, variables: Mapping[str, Any] | None = None,
                    add_generation_prompt: bool = True) -> str:
    """Render ``messages`` (and ``tools`` and ``variables``, where given), the assistant's turn opened by default."""
    return compiled(source).render([dict(m) for m in messages], bos_token, eos_token, add_generation_prompt, tools,
                                   variables=variables)

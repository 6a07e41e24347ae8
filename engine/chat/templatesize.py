"""The size of what a chat template's filter or string method is about to build, known before it runs.

Python builds a joined or replaced string in one allocation, so a size cap checked on the result
comes after the memory is taken. Each operation here whose result can be many times its inputs
(``join``, ``replace``, ``indent``, ``wordwrap``, ``sum``, ``expandtabs``, ``tojson``'s indent) gets
its result's size from its arguments first; :func:`refuse_big` is the sandbox's cap.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import Any

MAX_JSON_INDENT = 64  # templates indent tools' JSON by 2 or 4; each nesting level repeats the indent


class TooBig(Exception):
    """An operation would build a value past the sandbox's size cap."""


def _len(value: object) -> int:
    return len(value) if isinstance(value, str | list | tuple | dict) else 0


def _listed(value: Any) -> Any:
    """An iterator as a list (so its items can be counted and the operation still gets them)."""
    return list(value) if isinstance(value, Iterator) else value


def _joined(items: Iterable[Any], sep: object) -> int:
    items = list(items) if not isinstance(items, list | tuple | str | dict) else items
    n = len(items)
    return len(str(sep)) * max(n - 1, 0) + sum(len(x) if isinstance(x, str) else 0 for x in items)


def _replaced(s: object, old: object, new: object, count: object) -> int:
    text, old, new = str(s), str(old), str(new)
    found = len(text) + 1 if not old else text.count(old)
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * max(len(new) - len(old), 0)


def _indented(s: object, width: object) -> int:
    text = str(s)
    step = width if isinstance(width, int) else len(str(width))
    return len(text) + (text.count("\n") + 1) * max(step, 0)


def _wrapped(s: object, wrapstring: object) -> int:
    text = str(s)
    return len(text) * (1 + len(str(wrapstring or "\n")))  # at most one break per character


def _summed(items: Iterable[Any], start: object) -> int:
    return sum(_len(x) for x in items) + _len(start)


def _json_indent(indent: object) -> int:
    step = indent if isinstance(indent, int) else len(str(indent or ""))
    if step > MAX_JSON_INDENT:
        raise TooBig(f"a JSON indent of {step} is larger than {MAX_JSON_INDENT}")
    return 0


# filter name -> (the arguments whose iterators are listed first, the result's size from the bound arguments)
FILTERS: dict[str, tuple[tuple[str, ...], Callable[[dict[str, Any]], int]]] = {
    "join": (("value",), lambda a: _joined(a["value"], a.get("d", ""))),
    "replace": ((), lambda a: _replaced(a["s"], a["old"], a["new"], a.get("count"))),
    "indent": ((), lambda a: _indented(a["s"], a.get("width", 4))),
    "wordwrap": ((), lambda a: _wrapped(a["s"], a.get("wrapstring"))),
    "sum": (("iterable",), lambda a: _summed(a["iterable"], a.get("start", 0))),
    "tojson": ((), lambda a: _json_indent(a.get("indent"))),
}


@lru_cache(maxsize=64)
def _signature(func: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(func)


def check_filter(name: str, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 limit: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The filter's arguments (iterators listed) once its result is known to fit ``limit``; else :class:`TooBig`."""
    rule = FILTERS.get(name)
    if rule is None:
        return args, kwargs
    listed, size_of = rule
    try:
        bound = _signature(func).bind(*args, **kwargs)
    except TypeError:
        return args, kwargs  # the filter itself will say what is wrong with its arguments
    for key in listed:
        if key in bound.arguments:
            bound.arguments[key] = _listed(bound.arguments[key])
    if size_of(bound.arguments) > limit:
        raise TooBig(f"the {name} filter would build more than {limit:,} characters")
    return bound.args, bound.kwargs


def check_method(obj: object, args: tuple[Any, ...], kwargs: dict[str, Any], limit: int) -> tuple[Any, ...]:
    """The same for ``text.join(...)``, ``text.replace(...)`` and ``text.expandtabs(...)`` called by a template."""
    owner, name = getattr(obj, "__self__", None), getattr(obj, "__name__", "")
    if not isinstance(owner, str) or name not in ("join", "replace", "expandtabs"):
        return args
    if name == "join" and args:
        args = (_listed(args[0]), *args[1:])
        size = _joined(args[0], owner)
    elif name == "replace" and len(args) >= 2:
        size = _replaced(owner, args[0], args[1], args[2] if len(args) > 2 else kwargs.get("count"))
    elif name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        size = len(owner) + owner.count("\t") * (tab if isinstance(tab, int) else 0)
    else:
        return args
    if size > limit:
        raise TooBig(f"the string method {name} would build more than {limit:,} characters")
    return args

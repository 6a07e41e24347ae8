"""Composing GBNF grammars: every rule of one grammar renamed under a prefix, so that two grammars (a tool call's
and a JSON Schema's) can sit side by side as alternatives of one root.

A rule's body names other rules by bare identifiers; quoted literals and character classes are copied untouched.
"""

from __future__ import annotations

import re

_RULE = re.compile(r"^([A-Za-z0-9-]+)\s*::=\s*(.*)$")
_NAME = re.compile(r"[A-Za-z0-9-]+")


def rules(gbnf: str) -> list[tuple[str, str]]:
    """The (name, body) of every rule; a body may run over several lines (its continuation lines are joined)."""
    out: list[tuple[str, str]] = []
    for line in gbnf.splitlines():
        text = _code(line)
        m = _RULE.match(text.strip())
        if m:
            out.append((m.group(1), m.group(2)))
        elif text.strip() and out:
            out[-1] = (out[-1][0], out[-1][1] + " " + text.strip())
    return out


def _skip(text: str, i: int) -> int:
    """The index past the literal or class that opens at ``i`` (its escapes followed)."""
    end = "\"" if text[i] == "\"" else "]"
    j = i + 1
    while j < len(text) and text[j] != end:
        j += 2 if text[j] == "\\" else 1
    return j + 1


def _code(line: str) -> str:
    """``line`` without its comment (a ``#`` outside literals and classes)."""
    i = 0
    while i < len(line):
        if line[i] in "\"[":
            i = _skip(line, i)
        elif line[i] == "#":
            return line[:i]
        else:
            i += 1
    return line


def _renamed(body: str, names: set[str], prefix: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c in "\"[":  # a literal or a class: copied as it is
            j = _skip(body, i)
            out.append(body[i:j])
            i = j
            continue
        m = _NAME.match(body, i)
        if m:
            word = m.group(0)
            out.append(prefix + word if word in names else word)
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


def prefixed(gbnf: str, prefix: str) -> str:
    """``gbnf`` with every rule named ``prefix`` + its name (the root becomes ``prefix`` + ``root``)."""
    found = rules(gbnf)
    names = {name for name, _ in found}
    return "\n".join(f"{prefix}{name} ::= {_renamed(body, names, prefix)}" for name, body in found)


def either(*grammars: str) -> str:
    """One grammar whose root is any one of ``grammars``' roots."""
    parts = [prefixed(g, f"g{i}-") for i, g in enumerate(grammars)]
    root = "root ::= " + " | ".join(f"g{i}-root" for i in range(len(grammars)))
    return "\n".join([root, *parts])

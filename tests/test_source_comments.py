"""Comments state the rule the code follows: the incident that taught it (a host, a sitting, a results file, a
scenario's figures) belongs in the commit message and docs/benchmarks.md."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# "session" where it means nothing in the product; the reply session and an HTTP session are product words.
HISTORY_WORDS = re.compile(r"(?<!reply )(?<!HTTP )\bsessions?\b|\bZen\b|B-q4|results/", re.IGNORECASE)
NOT_IN_DOCSTRINGS = re.compile(r"(?<!reply )(?<!HTTP )\bsessions?\b|\bZen\b", re.IGNORECASE)


def sources() -> list[Path]:
    return sorted(p for folder in ("engine", "app") for p in (ROOT / folder).rglob("*.py"))


def comments(source: str) -> list[tuple[int, str]]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]


def docstrings(source: str) -> list[tuple[int, str]]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, kinds) and (text := ast.get_docstring(node, clean=False)):
            found.append((getattr(node, "lineno", 1), text))
    return found


def test_the_scan_finds_what_it_looks_for() -> None:
    source = '"""A B-q4 figure is fine here."""\nx = 1  # on the Zen 4 host (results/a.txt)\n# the reply session\n'
    assert [line for line, text in comments(source) if HISTORY_WORDS.search(text)] == [2]
    assert not [line for line, text in docstrings(source) if NOT_IN_DOCSTRINGS.search(text)]
    assert NOT_IN_DOCSTRINGS.search("kept between sessions")


def test_no_comment_tells_an_incident() -> None:
    assert len(sources()) > 100, "the walk no longer reaches engine/ and app/"
    found = [f"{p.relative_to(ROOT)}:{line}: {text.strip()}" for p in sources()
             for line, text in comments(p.read_text(encoding="utf-8")) if HISTORY_WORDS.search(text)]
    assert not found, "\n".join(found)


def test_no_docstring_names_a_sitting_or_a_host() -> None:
    found = [f"{p.relative_to(ROOT)}:{line}" for p in sources()
             for line, text in docstrings(p.read_text(encoding="utf-8")) if NOT_IN_DOCSTRINGS.search(text)]
    assert not found, found

"""Markdown rendering: highlighted code with copy anchors, and draft tinting that never breaks the syntax."""

from __future__ import annotations

from app.chat.render import DRAFT_ON, Renderer, mark_runs

REPLY = "Here:\n```python\ndef f(x):\n    return x + 1\n```\n# Done\n- ok"


def test_code_blocks_are_highlighted_and_collected() -> None:
    r = Renderer()
    html = r.markdown(REPLY)
    assert 'href="copy:0"' in html and "font-weight:bold" in html
    assert r.code_blocks == ["def f(x):\n    return x + 1"]
    assert "<h1>Done</h1>" in html and "<li>ok</li>" in html


def test_tinting_everything_keeps_the_same_structure() -> None:
    marked = mark_runs(REPLY, [(len(REPLY), True)])
    assert "```python\n" in marked and "\n```\n" in marked, "fence lines carry no markers"
    assert f"# {DRAFT_ON}Done" in marked and f"- {DRAFT_ON}ok" in marked
    plain, tinted = Renderer(), Renderer()
    html = tinted.markdown(marked)
    plain.markdown(REPLY)
    assert tinted.code_blocks == plain.code_blocks
    assert "background-color:#d9f2d9" in html and "<h1>" in html and "<li>" in html
    assert html.count("<table") == 1


def test_partial_runs_tint_only_draft_text() -> None:
    marked = mark_runs("abcdef", [(2, False), (2, True), (2, False)])
    assert marked == f"ab{DRAFT_ON}cd\ue001ef"

"""Markdown to Qt rich-text HTML: markdown-it-py for structure, pygments for highlighted code.

Code blocks get a "Copy" anchor (``copy:<n>``) that the chat view handles. Text that came from
accepted drafts can be tinted: the caller brackets it with :data:`DRAFT_ON` / :data:`DRAFT_OFF`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.style import StyleMeta
from pygments.styles import get_style_by_name
from pygments.util import ClassNotFound

DRAFT_ON = "\ue000"
DRAFT_OFF = "\ue001"
DRAFT_TINT = "#d9f2d9"
CODE_BG = "#f6f8fa"
EDGES = "`*"  # Markdown delimiters a tint skips, so its span tags nest inside or outside code and emphasis
_MARKERS = re.compile(f"[{DRAFT_ON}{DRAFT_OFF}]")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BLOCK_PREFIX = re.compile(r"^[ \t]*(?:#{1,6}|>|[-*+]|\d+[.)])?[ \t]*")


def mark_runs(text: str, runs: Sequence[tuple[int, bool]]) -> str:
    """``text`` with draft runs bracketed by markers that never break Markdown syntax.

    Markers stay within one line, skip a line's block prefix (heading, quote, list, indentation),
    never touch fence lines, and leave :data:`EDGES` untinted, so a tint's span nests inside or outside
    inline code and ``*`` emphasis instead of straddling them.
    """
    flags: list[bool] = []
    for length, from_draft in runs:
        flags.extend([from_draft] * length)
    flags.extend([False] * (len(text) - len(flags)))
    out: list[str] = []
    pos = 0
    for n, line in enumerate(text.split("\n")):
        if n:
            out.append("\n")
        line_flags = flags[pos:pos + len(line)]
        pos += len(line) + 1
        if _FENCE.match(line):
            out.append(line)
            continue
        match = _BLOCK_PREFIX.match(line)
        skip = match.end() if match else 0
        out.append(line[:skip])
        tinted = False
        for ch, want in zip(line[skip:], line_flags[skip:], strict=True):
            want = want and ch not in EDGES  # Qt drops the format of an element a span straddles
            if want != tinted:
                out.append(DRAFT_ON if want else DRAFT_OFF)
                tinted = want
            out.append(ch)
        if tinted:
            out.append(DRAFT_OFF)
    return "".join(out)


class Renderer:
    """Renders Markdown messages; collects code blocks so "Copy" anchors can find them."""

    def __init__(self, style: str = "friendly") -> None:
        self.style: StyleMeta = get_style_by_name(style)
        self.code_blocks: list[str] = []
        self._md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

        def fence(_r: RendererHTML, tokens: Sequence[Token], idx: int, _o: OptionsDict, _env: EnvType) -> str:
            return self._fence(tokens[idx])

        self._md.add_render_rule("fence", fence)
        self._md.add_render_rule("code_block", fence)

    def reset(self) -> None:
        """Forget collected code blocks (call before re-rendering a whole page)."""
        self.code_blocks.clear()

    def markdown(self, text: str) -> str:
        """HTML for ``text``; draft markers become tinted spans."""
        body = str(self._md.render(text))
        return body.replace(DRAFT_ON, f'<span style="background-color:{DRAFT_TINT}">').replace(
            DRAFT_OFF, "</span>")

    def _fence(self, token: Token) -> str:
        lang = _MARKERS.sub("", token.info).strip().split(" ")[0] if token.info else ""
        code = token.content.rstrip("\n")
        n = len(self.code_blocks)
        self.code_blocks.append(_MARKERS.sub("", code))
        head = (f'<tr><td width="90%" style="color:#57606a">{html.escape(lang or "code")}</td>'
                f'<td align="right"><a href="copy:{n}">Copy</a></td></tr>')
        return (f'<table width="100%" cellspacing="0" cellpadding="6" style="background-color:{CODE_BG};'
                f'border:1px solid #d0d7de">{head}<tr><td colspan="2">'
                f'<pre style="margin:0; white-space:pre-wrap">'
                f"{self.highlight(code, lang)}</pre></td></tr></table>\n")

    def highlight(self, code: str, lang: str) -> str:
        """Pygments tokens as inline-styled spans; draft markers tint the background."""
        lexer: Lexer
        try:
            lexer = get_lexer_by_name(lang) if lang else TextLexer()
        except ClassNotFound:
            lexer = TextLexer()
        out: list[str] = []
        tinted = False
        for ttype, value in lexer.get_tokens(code):
            style: dict[str, Any] = dict(self.style.style_for_token(ttype))
            css = []
            if style.get("color"):
                css.append(f"color:#{style['color']}")
            if style.get("bold"):
                css.append("font-weight:bold")
            if style.get("italic"):
                css.append("font-style:italic")
            for piece in re.split(f"([{DRAFT_ON}{DRAFT_OFF}])", value):
                if piece == DRAFT_ON:
                    tinted = True
                elif piece == DRAFT_OFF:
                    tinted = False
                elif piece:
                    bits = [*css, f"background-color:{DRAFT_TINT}"] if tinted else css
                    escaped = html.escape(piece)
                    out.append(f'<span style="{";".join(bits)}">{escaped}</span>' if bits else escaped)
        return "".join(out).rstrip("\n")

"""A message's bubble in the conversation view, as HTML: who wrote it, its links (Edit, Copy, Regenerate, the
versions' arrows), its body and its status line."""

from __future__ import annotations

from app.history.records import Message

USER_BG = "#eef4ff"
ASSISTANT_BG = "#ffffff"
MUTED = "#6e7781"


def user_links(m: Message) -> str:
    return f'<a href="edit:{m.id}">Edit</a> &nbsp; <a href="copymsg:{m.id}">Copy</a>'


def reply_links(m: Message, *, is_last: bool) -> str:
    """Copy, Regenerate on the last reply, and the arrows between its versions where it has several."""
    links = f'<a href="copymsg:{m.id}">Copy</a>'
    if is_last:
        links += ' &nbsp; <a href="regen:">Regenerate</a>'
    if m.versions > 1:
        links = version_links(m) + " &nbsp; " + links
    return links


def version_links(m: Message) -> str:
    """``← 2/3 →``: the arrows are links where there is a version to go to."""
    back = f'<a href="version:{m.id}:-1">←</a>' if m.version > 1 else f'<span style="color:{MUTED}">←</span>'
    ahead = (f'<a href="version:{m.id}:1">→</a>' if m.version < m.versions
             else f'<span style="color:{MUTED}">→</span>')
    return f"{back} {m.version}/{m.versions} {ahead}"


def bubble(who: str, links: str, body: str, status: str, bg: str) -> str:
    """A message as a full-width table cell: who, its links, its body and its status line, on ``bg``."""
    status_html = f'<p style="color:{MUTED}; font-size:small">{status}</p>' if status else ""
    return (f'<table width="100%" cellspacing="0" cellpadding="10" style="background-color:{bg};'
            f' margin-bottom:6px"><tr><td><b>{who}</b> &nbsp; <span style="font-size:small">{links}</span>'
            f"{body}{status_html}</td></tr></table>")

"""Repository ids and file names: a typed one checked before it is asked for, a Hub's one made safe to print."""

from __future__ import annotations

import re
import unicodedata

from engine.errors import EngineError

MAX_NAME = 96  # characters of an owner or a repository name: huggingface_hub's own check allows 1 to 96
MAX_SHOWN = 2 * MAX_NAME + 1  # a Hub's id is cut here: longer than any OWNER/NAME the Hub accepts
MAX_FILE = 1024  # characters of a file's path inside a repository, far past any real model's
_PART = re.compile(rf"^[A-Za-z0-9](?:[A-Za-z0-9._-]{{0,{MAX_NAME - 2}}}[A-Za-z0-9])?$")
EXAMPLE = "Qwen/Qwen2.5-7B-Instruct-GGUF"


def is_repo_id(text: str) -> bool:
    """Whether ``text`` is OWNER/NAME as the Hub spells ids: letters, digits, ``.``, ``_`` and ``-``, neither
    end a punctuation mark, no ``--`` or ``..``."""
    parts = text.split("/")
    return len(parts) == 2 and all(_PART.match(p) and "--" not in p and ".." not in p for p in parts)


def repo_id(text: str) -> str:
    """``text`` (a typed id) without its surrounding slashes and spaces, refused unless it :func:`is_repo_id`."""
    repo = text.strip().strip("/")
    if not is_repo_id(repo):
        raise EngineError(f"not a repository id: {shown(repo)!r} (expected OWNER/NAME, e.g. {EXAMPLE})")
    return repo


def file_name(text: str) -> str:
    """``text`` (a file inside a repository), refused when it could leave the download folder or is not text."""
    parts = text.split("/")
    if (not text or len(text) > MAX_FILE or text != shown(text, MAX_FILE) or "\\" in text
            or any(p in ("", ".", "..") for p in parts)):
        raise EngineError(f"not a file name inside a repository: {shown(text)!r} (e.g. model-Q4_K_M.gguf)")
    return text


def shown(value: object, limit: int = MAX_SHOWN) -> str:
    """``value`` as one line of plain text: control and format characters dropped, cut at ``limit`` with ``...``."""
    text = "".join(c for c in str(value) if not unicodedata.category(c).startswith("C"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def count(value: object) -> int:
    """A count from the Hub's JSON: a whole number, anything else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

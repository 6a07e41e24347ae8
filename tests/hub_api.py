"""The stand-in Hub's API (``/api/models``, model info, the repository tree) for tests/hub_server.py.

Answers what ``HfApi.list_models``, ``model_info`` and ``list_repo_tree`` ask, over real HTTP: search by every word
of ``search`` in the repository id, ``author``, ``filter=gguf`` (a repository with a ``.gguf`` file), most
downloaded first, pages of ``page_size`` linked with ``Link: <...>; rel="next"`` as the Hub does; gated
repositories (listed, their files refused without the token) and private ones (404 to strangers, 401 in
files); ``rate_limited`` answers of HTTP 429 with ``Retry-After``; ``api_slow_s`` of delay.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit

if TYPE_CHECKING:
    from tests.hub_server import HubState, _Handler

_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/tree/(?P<rev>[^/]+))?/?$")


def _send(h: _Handler, status: int, body: Any, extra: dict[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    for k, v in (extra or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)


def _repos(st: HubState) -> list[str]:
    return sorted({repo for repo, _ in st.files} | set(st.repo_meta))


def _allowed(h: _Handler, st: HubState, repo: str) -> bool:
    need = st.tokens.get(repo)
    return need is None or repo in st.gated or h.headers.get("Authorization") == f"Bearer {need}"


def _summary(st: HubState, repo: str) -> dict[str, Any]:
    meta = st.repo_meta.get(repo, {})
    return {"id": repo, "author": repo.split("/")[0], "downloads": meta.get("downloads", 0),
            "likes": meta.get("likes", 0), "gated": "manual" if repo in st.gated else False,
            "private": repo in st.tokens and repo not in st.gated}


def _search(h: _Handler, st: HubState, query: dict[str, list[str]]) -> None:
    words = " ".join(query.get("search", [""])).lower().split()
    author = query.get("author", [None])[0]
    gguf = "gguf" in query.get("filter", [])
    found = [r for r in _repos(st) if all(w in r.lower() for w in words) and _allowed(h, st, r)
             and (author is None or r.split("/")[0] == author)
             and (not gguf or any(rr == r and f.endswith(".gguf") for rr, f in st.files))]
    found.sort(key=lambda r: -int(st.repo_meta.get(r, {}).get("downloads", 0)))
    limit = int(query.get("limit", ["1000"])[0])
    start = int(query.get("cursor", ["0"])[0])
    size = min(limit, st.page_size)
    page = [_summary(st, r) for r in found[start : start + size]]
    extra = {}
    if start + size < len(found):
        nxt = {k: v for k, v in query.items() if k != "cursor"} | {"cursor": [str(start + size)]}
        extra["Link"] = f'<{h.server_url}/api/models?{urlencode(nxt, doseq=True)}>; rel="next"'
    _send(h, 200, page, extra)


def _private_ok(h: _Handler, st: HubState, repo: str) -> bool:
    return h.headers.get("Authorization") == f"Bearer {st.tokens[repo]}"


def _tree(st: HubState, repo: str) -> list[dict[str, Any]]:
    out = []
    for (r, name), data in sorted(st.files.items()):
        if r == repo:
            sha = hashlib.sha256(data).hexdigest()
            out.append({"type": "file", "path": name, "size": len(data), "oid": sha[:40],
                        "lfs": {"oid": sha, "size": len(data), "pointerSize": 134}})
    return out


def answer(h: _Handler, st: HubState) -> None:
    """Answer one ``/api/...`` request."""
    if st.api_slow_s:
        time.sleep(st.api_slow_s)
    with st.lock:
        limited = st.rate_limited > 0
        st.rate_limited -= 1 if limited else 0
    if limited:
        _send(h, 429, {"error": "rate limited"}, {"Retry-After": st.retry_after} if st.retry_after else None)
        return
    parts = urlsplit(h.path)
    query = parse_qs(parts.query)
    if parts.path.rstrip("/") == "/api/models":
        _search(h, st, query)
        return
    m = _INFO.match(parts.path)
    repo = m["repo"] if m else ""
    if not m or repo not in _repos(st):
        _send(h, 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
        return
    if repo in st.tokens and repo not in st.gated and not _private_ok(h, st, repo):
        _send(h, 401, {"error": "Invalid username or password."}, {"X-Error-Code": "RepoNotFound"})
        return
    if m["rev"] is not None:
        _send(h, 200, _tree(st, repo))
        return
    meta = st.repo_meta.get(repo, {})
    info = _summary(st, repo) | {
        "sha": "0123456789abcdef0123456789abcdef01234567", "tags": ["gguf"],
        "siblings": [{"rfilename": f["path"]} for f in _tree(st, repo)],
    }
    if meta.get("base_model"):
        info["cardData"] = {"base_model": meta["base_model"]}
    _send(h, 200, info)

"""Reply bodies: whole completions, SSE chunks, usage and the ``speculation`` extra field."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engine import GenerationStats
from engine.stats import link_figures

CHAT = "chat.completions"
TEXT = "completions"


def speculation(stats: GenerationStats) -> dict[str, Any]:
    """How speculation went for this reply (an extension; OpenAI clients keep unknown fields); ``link``: the bytes
    each way over the link to a remote target's machines."""
    out: dict[str, Any] = {
        "mode": stats.mode,
        "rounds_by_mode": dict(stats.rounds_by_mode),
        "mode_switches": list(stats.mode_switches),
        "acceptance_rate": stats.acceptance_rate,
        "hit_rate": stats.hit_rate,
        "mean_accepted": stats.mean_accepted,
        "tokens_per_second": stats.tokens_per_second,
        "ttft_s": stats.ttft_s,
        "seconds": stats.seconds,
        "rounds": stats.rounds,
        "drafted": stats.drafted,
        "accepted": stats.accepted,
        "backup_uses": stats.backup_uses,
    }
    if stats.link_sent is not None:
        out["link"] = link_figures(stats)
    return out


def usage(prompt_tokens: int, stats: GenerationStats | Sequence[GenerationStats | None] | None,
          reasoning_tokens: int = 0) -> dict[str, Any]:
    """Token counts (``stats``: one reply's, or each choice's: their completions add up); ``reasoning_tokens``: the
    completion's tokens that were thinking (counted in completion); ``cached_tokens``: the prompt's tokens the engine
    found already read (a prefix shared with the request before), as the first choice found them."""
    every = [stats] if stats is None or isinstance(stats, GenerationStats) else list(stats)
    completion = sum(s.new_tokens for s in every if s is not None)
    first = every[0] if every else None
    cached = first.prompt_cached if first is not None else 0  # the prompt's prefix the engine did not read again
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion, "total_tokens": prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": min(cached, prompt_tokens)},
            "completion_tokens_details": {"reasoning_tokens": min(reasoning_tokens, completion)}}


def _head(kind: str, rid: str, created: int, model: str, fingerprint: str, chunk: bool) -> dict[str, Any]:
    """``fingerprint``: the files, build and sampling scheme a seeded reply depends on (engine.core.gumbel)."""
    obj = ("chat.completion.chunk" if chunk else "chat.completion") if kind == CHAT else "text_completion"
    return {"id": rid, "object": obj, "created": created, "model": model, "system_fingerprint": fingerprint}


def choice(kind: str, index: int, text: str, finish: str, calls: dict[str, Any] | None = None,
           reasoning: str = "", logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """One choice of a non-streamed reply; ``calls``: the message's tool-call fields (:mod:`.chatreply`; content
    None with calls and no text, as OpenAI sends it)."""
    out: dict[str, Any] = {"index": index, "finish_reason": finish, "logprobs": logprobs}
    if kind == CHAT:
        content = None if calls and not text else text
        out["message"] = {"role": "assistant", "content": content, "refusal": None, **(calls or {})}
        if reasoning:
            out["message"]["reasoning_content"] = reasoning
    else:
        out["text"] = text
    return out


def whole(kind: str, rid: str, created: int, model: str, fingerprint: str, choices: list[dict[str, Any]],
          prompt_tokens: int, stats: Sequence[GenerationStats | None], reasoning_tokens: int = 0) -> dict[str, Any]:
    """A non-streamed reply of ``choices`` (:func:`choice`), ``stats`` each one's; ``speculation`` is the first's
    (and each choice carries its own when there are several)."""
    out = _head(kind, rid, created, model, fingerprint, chunk=False)
    if len(choices) > 1:
        for c, st in zip(choices, stats, strict=True):
            if st is not None:
                c["speculation"] = speculation(st)
    out["choices"] = choices
    out["usage"] = usage(prompt_tokens, stats, reasoning_tokens)
    if stats and stats[0] is not None:
        out["speculation"] = speculation(stats[0])
    return out


def chunk(
    kind: str, rid: str, created: int, model: str, fingerprint: str, *, text: str | None = None, role: bool = False,
    finish: str | None = None, stats: GenerationStats | None = None, calls: dict[str, Any] | None = None,
    reasoning: str | None = None, index: int = 0, logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One streamed piece of choice ``index``: text, the opening role (chat), tool calls (``calls``:
    :func:`.chatreply.delta_calls`), or the closing finish reason with stats."""
    out_choice: dict[str, Any] = {"index": index, "finish_reason": finish, "logprobs": logprobs}
    if kind == CHAT:
        delta: dict[str, Any] = {}
        if role:
            delta["role"] = "assistant"
        if text is not None:
            delta["content"] = text
        if reasoning is not None:
            delta["reasoning_content"] = reasoning
        delta.update(calls or {})
        out_choice["delta"] = delta
    else:
        out_choice["text"] = text or ""
    out = _head(kind, rid, created, model, fingerprint, chunk=True)
    out["choices"] = [out_choice]
    if stats is not None:
        out["speculation"] = speculation(stats)
    return out


def usage_chunk(kind: str, rid: str, created: int, model: str, fingerprint: str, prompt_tokens: int,
                stats: Sequence[GenerationStats | None], reasoning_tokens: int = 0) -> dict[str, Any]:
    """The last chunk when ``stream_options.include_usage`` is set: no choices, only usage."""
    out = _head(kind, rid, created, model, fingerprint, chunk=True)
    out["choices"] = []
    out["usage"] = usage(prompt_tokens, stats, reasoning_tokens)
    return out


def sse(data: dict[str, Any] | str) -> str:
    """One server-sent event."""
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"

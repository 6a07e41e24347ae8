"""Recent conversations' prompt states in host memory: a sequence about to read another conversation keeps its
state here first, and a prompt that one of them begins is restored instead of read again.

Only a sequence's exact prefix (whole grid chunks, :class:`~engine.core.kvtrack.KVTrack`) is kept, byte for byte
as llama.cpp holds it, so a restored prompt is the one a fresh read makes. Bounded in bytes; the least recently
used state goes first.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import llama_cpp as ll

from engine.core.kvtrack import common_prefix
from engine.speculative.target import Target

MB = 1 << 20


@dataclass(frozen=True, slots=True)
class CacheUse:
    """What the prompt cache holds and has saved: Settings shows it beside its size."""

    used_bytes: int
    limit_bytes: int
    conversations: int  # prompt states kept now
    restored: int  # states read back instead of prompts read again
    restored_tokens: int  # prompt tokens those restores did not read again


class PromptCache:
    """Saved sequence states, keyed by the tokens they hold (see the module's text)."""

    def __init__(self, limit_mb: int) -> None:
        self.limit = limit_mb * MB
        self._states: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self.saved = self.restored = 0  # states kept and states read back
        self.restored_tokens = 0  # prompt tokens not read again thanks to a restore

    @property
    def used(self) -> int:
        """Bytes held now."""
        return sum(len(b) for b in self._states.values())

    def __len__(self) -> int:
        return len(self._states)

    def use(self) -> CacheUse:
        return CacheUse(self.used, self.limit, len(self._states), self.restored, self.restored_tokens)

    def swap(self, target: Target, prompt: Sequence[int]) -> None:
        """Before ``target`` reads ``prompt`` (the context's lock held): keep what it holds if the prompt would cut
        into it, and bring back the saved state that gives the prompt its longest start, where it beats the
        sequence's own."""
        kv = target.kv
        if not self.limit or not kv.grid:
            return
        own = kv.reusable(prompt)
        best = max(self._states, key=lambda k: len(k) if _begins(prompt, k) else -1, default=None)
        gain = len(best) - own if best is not None and _begins(prompt, best) else 0
        if kv.exact - own >= kv.grid or gain >= kv.grid:
            self._save(target)
        if best is not None and gain >= kv.grid:
            self._restore(target, best)

    def _save(self, target: Target) -> None:
        kv, ctx = target.kv, target.ctx
        kv.trim(kv.exact)
        key = tuple(kv.tokens)
        if not key or key in self._states:
            if key:
                self._states.move_to_end(key)
            return
        size = ll.llama_state_seq_get_size(ctx._ptr, target.seq)
        if size > self.limit:
            return
        buf = (ctypes.c_ubyte * size)()
        got = ll.llama_state_seq_get_data(ctx._ptr, buf, size, target.seq)
        if not got:
            return
        # a saved state that the new one begins is held within it
        for old in [k for k in self._states if common_prefix(k, key) == len(k)]:
            del self._states[old]
        self._states[key] = bytes(buf)[:got]
        self.saved += 1
        while self.used > self.limit:
            self._states.popitem(last=False)

    def _restore(self, target: Target, key: tuple[int, ...]) -> None:
        kv, ctx = target.kv, target.ctx
        data = self._states[key]
        kv.trim(0)
        buf = (ctypes.c_ubyte * len(data)).from_buffer_copy(data)
        if not ll.llama_state_seq_set_data(ctx._ptr, buf, len(data), target.seq):
            ctx.seq_rm(target.seq, -1, -1)  # nothing half-read is left claimed
            return
        kv.tokens[:] = key
        kv.exact = len(key)
        self._states.move_to_end(key)
        self.restored += 1
        self.restored_tokens += len(key)


def _begins(prompt: Sequence[int], key: tuple[int, ...]) -> bool:
    """Whether ``key`` is a start of ``prompt`` that leaves at least its last token to read."""
    return len(key) < len(prompt) and tuple(prompt[: len(key)]) == key

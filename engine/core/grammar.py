"""llama.cpp's grammar sampler (GBNF) as an owned handle: which token ids a grammar allows next, and its advance.

A :class:`Grammar` is the parse state of one path of tokens. It never samples: :meth:`allowed` asks llama.cpp
which of some candidate ids may come next (an end-of-generation id only once the grammar is complete), and
:meth:`accept` moves the state past one token that was allowed. llama.cpp aborts the process on a token its
grammar refuses, so :meth:`accept` checks first and raises instead. :meth:`clone` copies the state for a branch.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import llama_cpp as ll
import numpy as np
import numpy.typing as npt

from engine.errors import ParameterError

ROOT = b"root"
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])  # llama_token_data


class GrammarError(ParameterError):
    """A grammar llama.cpp cannot parse, or a token the grammar does not allow."""


_REGEX_SPECIAL = frozenset("\\^$.|?*+()[]{}/")  # characters ECMAScript regexes (std::regex) treat specially


def trigger_pattern(text: str) -> str:
    """A regex that finds ``text`` anywhere, its capture group where the grammar starts (llama.cpp's convention)."""
    return "(" + "".join("\\" + c if c in _REGEX_SPECIAL else c for c in text) + ")"


def _init(vocab: Any, gbnf: str, triggers: Sequence[str]) -> Any:
    if not triggers:
        return ll.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), ROOT)
    patterns = [trigger_pattern(t).encode("utf-8") for t in triggers]
    array = (ctypes.c_char_p * len(patterns))(*patterns)
    return ll.llama_sampler_init_grammar_lazy_patterns(vocab, gbnf.encode("utf-8"), ROOT, array, len(patterns),
                                                       (ll.llama_token * 1)(), 0)


class Grammar:
    """The state of a GBNF grammar over one vocabulary; close it (or let it be collected) to free it."""

    def __init__(self, vocab: Any, gbnf: str, *, triggers: Sequence[str] = (), _ptr: Any = None) -> None:
        self._ptr: Any = None
        self._vocab = vocab
        self.gbnf = gbnf
        self.triggers = tuple(triggers)
        ptr = _ptr if _ptr is not None else _init(vocab, gbnf, self.triggers)
        if not ptr:
            raise GrammarError("llama.cpp could not parse the grammar (its log says where)")
        self._ptr = ptr

    @classmethod
    def for_model(cls, model_ptr: Any, gbnf: str, triggers: Sequence[str] = ()) -> Grammar:
        """``triggers``: the grammar is lazy, every token allowed until the reply writes one of these texts; from
        there on (the text included) the reply follows the grammar (llama.cpp's triggered grammars)."""
        return cls(ll.llama_model_get_vocab(model_ptr), gbnf, triggers=triggers)

    def clone(self) -> Grammar:
        return Grammar(self._vocab, self.gbnf, triggers=self.triggers, _ptr=ll.llama_sampler_clone(self._live()))

    def allowed(self, ids: Sequence[int] | npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.bool_]:
        """For each of ``ids``: whether the grammar allows it next."""
        data = np.zeros(len(ids), dtype=_TOKEN_DATA)
        if not len(data):
            return np.zeros(0, dtype=np.bool_)
        data["id"] = ids
        arr = ll.llama_token_data_array(
            data=data.ctypes.data_as(ctypes.POINTER(ll.llama_token_data)), size=len(data), selected=-1, sorted=False)
        ll.llama_sampler_apply(self._live(), ctypes.byref(arr))
        if arr.size != len(data):  # the grammar sampler masks in place; it never drops or reorders
            raise GrammarError("llama.cpp's grammar sampler changed the candidate array's size")
        mask: npt.NDArray[np.bool_] = np.isfinite(data["logit"])
        return mask

    def allows(self, token: int) -> bool:
        return bool(self.allowed([token])[0])

    def accept(self, token: int) -> None:
        """Move past ``token``; a token the grammar does not allow raises (llama.cpp would abort)."""
        if not self.allows(token):
            raise GrammarError(f"the grammar does not allow token {token} here")
        ll.llama_sampler_accept(self._ptr, token)

    def _live(self) -> Any:
        if self._ptr is None:
            raise GrammarError("the grammar was closed")
        return self._ptr

    def close(self) -> None:
        if self._ptr is not None:
            ll.llama_sampler_free(self._ptr)
            self._ptr = None

    def __del__(self) -> None:
        self.close()

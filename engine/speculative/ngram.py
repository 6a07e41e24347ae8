"""Prompt-lookup drafting: propose the tokens that followed an earlier occurrence of the last n-gram.

The algorithm of llama-cpp-python's ``LlamaPromptLookupDecoding`` as a pure function.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def lookup(tokens: Sequence[int], max_ngram: int = 3, num_pred: int = 8) -> list[int]:
    """Up to ``num_pred`` tokens following the latest earlier match of the last 1..max_ngram tokens."""
    arr = np.asarray(tokens, dtype=np.int64)
    n = len(arr)
    for size in range(min(max_ngram, n - 1), 0, -1):
        tail = arr[n - size :]
        windows = np.lib.stride_tricks.sliding_window_view(arr[: n - 1], size)
        hits = np.nonzero((windows == tail).all(axis=1))[0]
        if len(hits) == 0:
            continue
        start = int(hits[-1]) + size
        out = arr[start : min(start + num_pred, n)].tolist()
        if out:
            return [int(t) for t in out]
    return []

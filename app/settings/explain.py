"""Words the settings dialog shows beside its fields: GPU layers as the command line takes them (auto, all, none or
a number), one line on what the speculation settings do, and what a change that reloads the model says."""

from __future__ import annotations

from collections.abc import Iterable

from engine import ALL_LAYERS, AUTO_LAYERS, CacheUse, ParameterError

LAYER_WORDS = {"auto": AUTO_LAYERS, "all": ALL_LAYERS, "none": 0}  # as python -m engine --gpu-layers takes them
LAYERS_NOTE = "auto, all, none or a number"
LAYERS_HELP = ("auto: every layer that fits in free GPU memory, the target's first; all: every layer; none: the CPU "
               "only; or a number of layers")
MODE_SHORT = {  # the mode list's own text: short enough to show whole (the full line is under the list)
    "ar": "plain decoding", "sd": "speculative decoding", "ssd": "speculative speculative decoding",
    "lookup": "drafts from the chat's own text", "auto": "the fastest, measured here",
}
# One line under a speculation setting, for someone who has not read about speculation.
FIELD_LINES = {
    "fanout": "ssd: guesses the draft prepares ahead per position of the next draft (more: more hits, more work).",
    "geometric": "ssd: more of those guesses where a draft is likely to be cut short, fewer elsewhere.",
    "adaptive": "auto: picks the draft length K each round from what it measured, instead of the K above.",
}
PLAN_LINE = "In a plan such as ssd(K=4, M=12), K is the draft length and M the branches of ssd's tree of guesses."


def cache_words(use: CacheUse | None) -> str:
    """What the prompt cache holds now, under its size ("" before the first reply since the app started)."""
    if use is None:
        return ""
    if not use.limit_bytes:
        return "Off: a conversation switched back to is read again."
    mb = 1 << 20
    line = (f"In use: {use.used_bytes / mb:.1f} of {use.limit_bytes / mb:.0f} MB, "
            f"{use.conversations} conversation{'s' * (use.conversations != 1)} kept")
    if use.restored:
        line += (f"; {use.restored} brought back instead of read again, "
                 f"{use.restored_tokens:,} prompt tokens not read twice")
    return line + "."


def layers_text(value: int) -> str:
    """``auto``, ``all``, ``none`` or the number."""
    return next((word for word, n in LAYER_WORDS.items() if n == value), str(value))


def parse_layers(text: str, noun: str) -> int:
    """A GPU-layers field: a word of :data:`LAYER_WORDS` or a whole number (ParameterError otherwise)."""
    word = text.strip().lower()
    if word in LAYER_WORDS:
        return LAYER_WORDS[word]
    try:
        value = int(word)
    except ValueError:
        raise ParameterError(f"{noun}: enter {LAYERS_NOTE}") from None
    if value < AUTO_LAYERS:  # -2 and -1 are the engine's own auto and all
        raise ParameterError(f"{noun} must be {LAYERS_NOTE} (0 or more), got {value}")
    return value


def reload_note(labels: Iterable[str]) -> str:
    """The line above OK when a changed setting is read only when the model loads ("" when none is)."""
    names = list(labels)
    if not names:
        return ""
    what = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"OK reloads the model pair: {what} changed (read when the model loads)."

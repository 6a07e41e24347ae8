"""The registry of families: each module of this package declares one :class:`~engine.chat.family.Family` as
``FAMILY``; the first (in :data:`ORDER`) whose signature a template's source holds is its family."""

from __future__ import annotations

import importlib

from engine.chat.family import Family

from . import plain

ORDER = (
    "gpt_oss", "seed_oss", "qwen3_coder", "glm45", "kimi_k2", "deepseek_v31", "deepseek_r1", "minimax", "command_r",
    "functionary", "functionary_v32", "mistral", "lfm2", "gemma4", "granite", "phi4", "nemotron", "smollm3",
    "llama3", "hermes",
)
"""Most specific first: a template that holds several families' markers is the first one's (Qwen3-Coder and
GLM write ``<tool_call>`` too, so they come before hermes)."""


def _load() -> tuple[Family, ...]:
    out = []
    for name in ORDER:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        out.append(module.FAMILY)
    return tuple(out)


FAMILIES: tuple[Family, ...] = _load()


def detect(template: str | None) -> Family:
    """The family of a chat template's source; :data:`plain.FAMILY` (no thinking, no calls) when none matches."""
    if template:
        for fam in FAMILIES:
            if fam.matches(template):
                return fam
    return plain.FAMILY


def by_name(name: str) -> Family | None:
    return next((f for f in (*FAMILIES, plain.FAMILY) if f.name == name), None)

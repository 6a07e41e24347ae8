"""Tiny models for the tool-calling, structured-output and fill-in-the-middle tests: the 4k SPM vocabulary plus
ChatML's and Qwen2.5-Coder's FIM control tokens, and Qwen2.5's own chat template (which renders tools)."""

from __future__ import annotations

from pathlib import Path

from tests.tiny_models import Vocab, spm_vocab, write_model

FIM_TEXTS = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")
CONTROL = 3  # GGUF token type of a control token

# Qwen2.5's chat template as its GGUF carries it (Qwen2.5-Coder-1.5B-Instruct): tools, tool calls, tool replies.
QWEN_TEMPLATE = (Path(__file__).parent / "data" / "qwen2.5-chat-template.jinja").read_text(encoding="utf-8")


def tools_vocab() -> Vocab:
    """The 4k SPM vocabulary plus ChatML's turn tokens and the FIM tokens, all control tokens."""
    v = spm_vocab()
    extra = ["<|im_start|>", "<|im_end|>", *FIM_TEXTS]
    return Vocab(v.model, [*v.tokens, *extra], [*v.scores, *[0.0] * len(extra)], [*v.types, *[CONTROL] * len(extra)],
                 v.bos, v.eos, v.unk)


def write_tools_model(path: Path, *, seed: int = 1, noise: float = 0.0) -> Path:
    """A tiny target (or, with ``noise``, a related draft) whose template renders tools and whose vocabulary has
    FIM tokens."""
    return write_model(path, vocab=tools_vocab(), seed=seed, n_layer=3, logit_scale=6.0, noise=noise,
                       chat_template=QWEN_TEMPLATE)

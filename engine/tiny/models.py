"""Tiny random GGUF models (tests, the frozen app's ``--self-test``), written with ``gguf``.

``write_model`` makes a llama-architecture model (a few layers, n_embd 64) whose vocabulary is
copied from a vocab-only GGUF (llama.cpp's ``models/ggml-vocab-llama-spm.gguf``, kept in
``tests/data``) or made up as a tiny SentencePiece vocabulary for distribution tests. Models with
the same ``seed`` have identical weights; ``noise`` perturbs them to make a related draft.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import gguf
import numpy as np

from engine.core.paths import resources_dir

VOCAB_GGUF = Path(__file__).resolve().parents[2] / "tests" / "data" / "ggml-vocab-llama-spm.gguf"
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class Vocab:
    model: str
    tokens: list[str]
    scores: list[float]
    types: list[int]
    bos: int
    eos: int
    unk: int


VOCAB_JSON = resources_dir() / "llama-spm-vocab-4k.json"
VOCAB_SIZE = 4096


def extract_vocab(n_tokens: int = VOCAB_SIZE) -> dict[str, object]:
    """Read the first ``n_tokens`` of the vocab-only GGUF (specials, 256 byte pieces, then merges)."""
    r = gguf.GGUFReader(VOCAB_GGUF)

    def arr(key: str) -> list[object]:
        f = r.fields[key]
        return [f.contents(i) for i in range(min(n_tokens, len(f.data)))]

    return {
        "source": VOCAB_GGUF.name,
        "tokens": [str(t) for t in arr("tokenizer.ggml.tokens")],
        "scores": [float(s) for s in arr("tokenizer.ggml.scores")],  # type: ignore[arg-type]
        "types": [int(t) for t in arr("tokenizer.ggml.token_type")],  # type: ignore[call-overload]
        "bos": int(r.fields["tokenizer.ggml.bos_token_id"].contents()),
        "eos": int(r.fields["tokenizer.ggml.eos_token_id"].contents()),
        "unk": int(r.fields["tokenizer.ggml.unknown_token_id"].contents()),
    }


@cache
def spm_vocab() -> Vocab:
    """The first 4,096 tokens of llama.cpp's vocab-only SPM GGUF, from the JSON extracted from it.

    GGUFReader takes seconds on a 32k vocabulary, so the extraction is kept in ``resources/``
    (the GGUF itself stays in ``tests/data``); ``tests/test_tiny_models.py`` checks that they agree.
    """
    d = json.loads(VOCAB_JSON.read_text(encoding="utf-8"))
    return Vocab("llama", d["tokens"], d["scores"], d["types"], d["bos"], d["eos"], d["unk"])


def chatml_vocab() -> Vocab:
    """The 4k SPM vocabulary plus ChatML's ``<|im_start|>`` and ``<|im_end|>`` as control tokens."""
    v = spm_vocab()
    return Vocab(v.model, [*v.tokens, "<|im_start|>", "<|im_end|>"], [*v.scores, 0.0, 0.0], [*v.types, 3, 3],
                 v.bos, v.eos, v.unk)


def small_vocab(n_letters: int = 13) -> Vocab:
    """A tiny SentencePiece vocabulary: <unk>, <s>, </s>, then single letters."""
    letters = [chr(ord("a") + i) for i in range(n_letters)]
    tokens = ["<unk>", "<s>", "</s>", *letters]
    types = [2, 3, 3] + [1] * n_letters  # unknown, control, control, normal
    scores = [0.0, 0.0, 0.0] + [-float(i) for i in range(n_letters)]
    return Vocab("llama", tokens, scores, types, 1, 2, 0)


def add_vocab(writer: gguf.GGUFWriter, vocab: Vocab, chat_template: str) -> None:
    """The tokenizer's keys (a BOS added, no EOS) and the chat template ("" writes none: a base model)."""
    writer.add_tokenizer_model(vocab.model)
    writer.add_tokenizer_pre("default")
    writer.add_token_list(vocab.tokens)
    writer.add_token_scores(vocab.scores)
    writer.add_token_types(vocab.types)
    writer.add_bos_token_id(vocab.bos)
    writer.add_eos_token_id(vocab.eos)
    writer.add_unk_token_id(vocab.unk)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(chat_template)


def write_model(
    path: Path,
    *,
    vocab: Vocab | None = None,
    seed: int = 0,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_ff: int = 128,
    n_ctx: int = 2048,
    logit_scale: float = 1.0,
    noise: float = 0.0,
    noise_seed: int = 1000,
    chat_template: str = CHATML,
) -> Path:
    """Write a random llama GGUF (F32) and return its path.

    ``logit_scale`` multiplies the output matrix: large values give peaked next-token
    distributions (clear argmax margins for greedy tests), small ones spread them out.
    """
    vocab = vocab or spm_vocab()
    n_vocab = len(vocab.tokens)
    rng = np.random.default_rng(seed)
    nrng = np.random.default_rng(noise_seed)

    def w(*shape: int, scale: float = 1.0) -> np.ndarray:
        base = rng.standard_normal(shape).astype(np.float32)
        if noise:
            base = base + noise * nrng.standard_normal(shape).astype(np.float32)
        return (base * scale).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"tiny-{seed}")
    writer.add_context_length(n_ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_vocab(writer, vocab, chat_template)

    s = 1.0 / np.sqrt(n_embd)
    writer.add_tensor("token_embd.weight", w(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", w(n_vocab, n_embd, scale=s * logit_scale))
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", w(n_embd, n_embd, scale=s))
        writer.add_tensor(f"blk.{i}.attn_k.weight", w(n_embd, n_embd, scale=s))
        writer.add_tensor(f"blk.{i}.attn_v.weight", w(n_embd, n_embd, scale=s))
        writer.add_tensor(f"blk.{i}.attn_output.weight", w(n_embd, n_embd, scale=s))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", w(n_ff, n_embd, scale=s))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", w(n_ff, n_embd, scale=s))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", w(n_embd, n_ff, scale=1.0 / np.sqrt(n_ff)))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@dataclass(frozen=True)
class TinyPair:
    """Paths of a generated target and its drafts."""

    target: Path
    draft_same: Path  # identical weights: every prediction right
    draft_related: Path  # perturbed target: partial acceptance
    draft_random: Path  # unrelated weights: mostly rejected
    small_target: Path  # 16-token vocabulary, spread-out distributions (chi-square tests)
    small_draft: Path


def make_pair(folder: Path) -> TinyPair:
    folder.mkdir(parents=True, exist_ok=True)
    small = small_vocab()
    return TinyPair(
        target=write_model(folder / "target.gguf", seed=1, n_layer=3, logit_scale=6.0),
        draft_same=write_model(folder / "draft_same.gguf", seed=1, n_layer=3, logit_scale=6.0),
        draft_related=write_model(folder / "draft_related.gguf", seed=1, n_layer=3, logit_scale=6.0, noise=0.05),
        draft_random=write_model(folder / "draft_random.gguf", seed=2, n_layer=2, logit_scale=6.0),
        small_target=write_model(folder / "small_target.gguf", vocab=small, seed=3, n_layer=2, logit_scale=2.0),
        small_draft=write_model(folder / "small_draft.gguf", vocab=small, seed=3, n_layer=2, logit_scale=2.0,
                                noise=0.8),
    )


def main(argv: list[str] | None = None) -> int:
    """Regenerate the tiny models' vocabulary file from llama.cpp's vocab-only GGUF, or write a tiny pair."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m engine.tiny.models", description=main.__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    vocab = sub.add_parser("vocab", help=f"rewrite {VOCAB_JSON.name} from {VOCAB_GGUF.name}")
    vocab.add_argument("--out", type=Path, default=VOCAB_JSON, help="where to write it (default: %(default)s)")
    pair = sub.add_parser("pair", help="write the tests' tiny target and drafts into a folder")
    pair.add_argument("folder", type=Path)
    args = p.parse_args(argv)
    if args.command == "vocab":
        args.out.write_text(json.dumps(extract_vocab(), ensure_ascii=False), encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print("\n".join(str(path) for path in vars(make_pair(args.folder)).values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

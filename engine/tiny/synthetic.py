"""Random llama GGUFs that carry a real vocabulary: the overhead bench's tiny pair and the accelerator's synthetic pair.

:func:`read_tokenizer` copies a GGUF's tokenizer (tokens, types, merges, special ids, template) —
the offline pair's 151,936-token Qwen vocabulary, so that every logits row is as wide as the real
one; :func:`synthetic_tokenizer` makes a vocabulary of the same width where no pair is installed
(an accelerator machine without downloads). :func:`write_llama` writes a random llama model over
it. Layer ``i`` of every model written with the same ``seed`` has the same weights, so a target of
``n_layer`` layers whose first layers are a draft's, whose later layers add a small residual
(``extra_scale``), and whose embedding and head are the draft's, predicts nearly what the draft
predicts: acceptance stays high while the cost ratio is that of a real pair (:func:`write_pair`).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt

from .models import CHATML

QWEN_VOCAB = 151_936


@dataclass(frozen=True)
class Tokenizer:
    """A GGUF tokenizer's fields (``merges`` empty for SentencePiece-style vocabularies)."""

    model: str
    pre: str
    tokens: list[str]
    types: list[int]
    merges: list[str]
    bos: int
    eos: int
    add_bos: bool
    template: str
    source: str


def read_tokenizer(path: Path) -> Tokenizer:
    """The tokenizer of a GGUF file (GGUFReader: ~10 s for a 152k vocabulary; cache the result)."""
    r = gguf.GGUFReader(path)

    def one(key: str, default: object) -> object:
        f = r.fields.get(key)
        return f.contents() if f is not None else default

    def arr(key: str) -> list[object]:
        f = r.fields.get(key)
        return [] if f is None else list(f.contents())

    return Tokenizer(
        model=str(one("tokenizer.ggml.model", "gpt2")), pre=str(one("tokenizer.ggml.pre", "default")),
        tokens=[str(t) for t in arr("tokenizer.ggml.tokens")],
        types=[int(t) for t in arr("tokenizer.ggml.token_type")],  # type: ignore[call-overload]
        merges=[str(m) for m in arr("tokenizer.ggml.merges")],
        bos=int(one("tokenizer.ggml.bos_token_id", 0)),  # type: ignore[call-overload]
        eos=int(one("tokenizer.ggml.eos_token_id", 0)),  # type: ignore[call-overload]
        add_bos=bool(one("tokenizer.ggml.add_bos_token", False)),
        template=str(one("tokenizer.chat_template", CHATML)), source=path.name,
    )


def synthetic_tokenizer(n_tokens: int = QWEN_VOCAB) -> Tokenizer:
    """A SentencePiece-style vocabulary of ``n_tokens``: <unk>, <s>, </s>, the 256 byte pieces, then made-up words."""
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{i:02X}>" for i in range(256))]
    tokens += [f"\u2581w{i}" for i in range(n_tokens - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (n_tokens - 259)
    return Tokenizer("llama", "default", tokens, types, [], 1, 2, True, CHATML, f"synthetic-{n_tokens}")


def cached_tokenizer(gguf_path: Path | None, cache: Path) -> Tokenizer:
    """:func:`read_tokenizer` of ``gguf_path`` (or :func:`synthetic_tokenizer` when None), kept as JSON in ``cache``."""
    if gguf_path is None:
        return synthetic_tokenizer()
    if cache.exists():
        return Tokenizer(**json.loads(cache.read_text(encoding="utf-8")))
    tok = read_tokenizer(gguf_path)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(asdict(tok), ensure_ascii=False), encoding="utf-8")
    return tok


@dataclass(frozen=True)
class Shape:
    """A llama model's dimensions."""

    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_head_kv: int = 4
    n_ff: int = 128


TINY = Shape()
QWEN_05B = Shape(n_layer=24, n_embd=896, n_head=14, n_head_kv=2, n_ff=4864)  # Qwen2.5-0.5B's shape


def write_llama(path: Path, tok: Tokenizer, shape: Shape, *, seed: int = 0, logit_scale: float = 1.0,
                noise: float = 0.0, base_layers: int | None = None, extra_scale: float = 1.0,
                f16: bool = False) -> Path:
    """Write a random llama GGUF. Layers ``base_layers..`` (default: none) have their output projections
    scaled by ``extra_scale``; ``noise`` perturbs every weight (a related draft); ``f16`` halves the file."""
    n_vocab = len(tok.tokens)
    dtype = np.float16 if f16 else np.float32
    e, kv = shape.n_embd, shape.n_embd // shape.n_head * shape.n_head_kv
    s = 1.0 / np.sqrt(e)

    def w(key: int, *dims: int, scale: float = 1.0) -> npt.NDArray[np.floating]:
        base = np.random.default_rng([seed, key]).standard_normal(dims, dtype=np.float32)
        if noise:
            base += noise * np.random.default_rng([seed, key, 7919]).standard_normal(dims, dtype=np.float32)
        base *= scale
        return base.astype(dtype, copy=False)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"synthetic-{seed}-{shape.n_layer}x{e}")
    writer.add_context_length(4096)
    writer.add_embedding_length(e)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_dimension_count(e // shape.n_head)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model(tok.model)
    writer.add_tokenizer_pre(tok.pre)
    writer.add_token_list(tok.tokens)
    writer.add_token_types(tok.types)
    if tok.merges:
        writer.add_token_merges(tok.merges)
    else:
        writer.add_token_scores([0.0] * 259 + [-float(i) for i in range(n_vocab - 259)])
        writer.add_unk_token_id(0)
    writer.add_bos_token_id(tok.bos)
    writer.add_eos_token_id(tok.eos)
    writer.add_add_bos_token(tok.add_bos)
    writer.add_add_eos_token(False)
    writer.add_chat_template(tok.template)
    ones = np.ones(e, dtype=np.float32)
    writer.add_tensor("token_embd.weight", w(0, n_vocab, e))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", w(1, n_vocab, e, scale=s * logit_scale))
    for i in range(shape.n_layer):
        k = 100 + 16 * i
        extra = extra_scale if base_layers is not None and i >= base_layers else 1.0
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        writer.add_tensor(f"blk.{i}.attn_q.weight", w(k, e, e, scale=s))
        writer.add_tensor(f"blk.{i}.attn_k.weight", w(k + 1, kv, e, scale=s))
        writer.add_tensor(f"blk.{i}.attn_v.weight", w(k + 2, kv, e, scale=s))
        writer.add_tensor(f"blk.{i}.attn_output.weight", w(k + 3, e, e, scale=s * extra))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", w(k + 4, shape.n_ff, e, scale=s))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", w(k + 5, shape.n_ff, e, scale=s))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", w(k + 6, e, shape.n_ff, scale=extra / np.sqrt(shape.n_ff)))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_pair(folder: Path, tok: Tokenizer, draft: Shape, target_layers: int, *, extra_scale: float = 0.02,
               logit_scale: float = 4.0, f16: bool = True, seed: int = 11) -> tuple[Path, Path]:
    """A synthetic (target, draft): the draft of shape ``draft``; the target its layers, embedding and head
    plus ``target_layers - draft.n_layer`` layers whose residual contribution is scaled by ``extra_scale``."""
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    d = write_llama(folder / "synth-draft.gguf", tok, draft, seed=seed, logit_scale=logit_scale, f16=f16)
    big = Shape(target_layers, draft.n_embd, draft.n_head, draft.n_head_kv, draft.n_ff)
    t = write_llama(folder / "synth-target.gguf", tok, big, seed=seed, logit_scale=logit_scale, f16=f16,
                    base_layers=draft.n_layer, extra_scale=extra_scale)
    print(f"wrote {t.name} and {d.name} in {time.perf_counter() - t0:.0f} s")
    return t, d


def main(argv: list[str] | None = None) -> int:
    """``python -m engine.tiny.synthetic DIR [--target-layers N]``: write the synthetic pair (F16, no download)."""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("folder", type=Path)
    p.add_argument("--target-layers", type=int, default=64, help="the draft's 24 layers plus small-residual ones")
    p.add_argument("--extra-scale", type=float, default=0.02)
    p.add_argument("--tokenizer-from", type=Path, help="a GGUF whose vocabulary to copy (default: synthetic)")
    a = p.parse_args(argv)
    tok = read_tokenizer(a.tokenizer_from) if a.tokenizer_from else synthetic_tokenizer()
    write_pair(a.folder, tok, QWEN_05B, a.target_layers, extra_scale=a.extra_scale)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

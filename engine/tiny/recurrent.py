"""Tiny random recurrent (``mamba``) and hybrid (``lfm2``) GGUFs, in llama.cpp's tensor layout, for the tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np

from .models import CHATML, Vocab, add_vocab, spm_vocab

MAMBA_D_CONV = 4  # llama.cpp's mamba conv kernel (the released models' value)
MAMBA_D_STATE = 16  # the released models' SSM state size
LFM2_L_CACHE = 3  # LFM2's short-convolution cache (the released models' value)


def _header(writer: gguf.GGUFWriter, vocab: Vocab, *, seed: int, n_layer: int, n_embd: int, n_ctx: int) -> None:
    writer.add_name(f"tiny-{writer.arch}-{seed}")
    writer.add_context_length(n_ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(vocab.tokens))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_vocab(writer, vocab, CHATML)


def _finish(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _weights(seed: int, noise: float) -> Callable[..., np.ndarray]:
    """A maker of random weights: the same ``seed`` gives the same weights; ``noise`` perturbs them (a related
    draft)."""
    rng, nrng = np.random.default_rng(seed), np.random.default_rng(seed + 1000)

    def w(*shape: int, scale: float = 1.0) -> np.ndarray:
        base = rng.standard_normal(shape).astype(np.float32)
        if noise:
            base = base + noise * nrng.standard_normal(shape).astype(np.float32)
        return (base * scale).astype(np.float32)

    return w


def write_mamba(path: Path, *, vocab: Vocab | None = None, seed: int = 0, n_layer: int = 2, n_embd: int = 64,
                n_ctx: int = 2048, logit_scale: float = 6.0, noise: float = 0.0) -> Path:
    """A random llama.cpp ``mamba`` model (F32; expansion 2, as llama.cpp requires); same ``seed``, same weights."""
    vocab = vocab or spm_vocab()
    w = _weights(seed, noise)

    d_inner, dt_rank = 2 * n_embd, max(1, n_embd // 16)
    writer = gguf.GGUFWriter(str(path), "mamba")
    _header(writer, vocab, seed=seed, n_layer=n_layer, n_embd=n_embd, n_ctx=n_ctx)
    writer.add_feed_forward_length(0)
    writer.add_head_count(0)
    writer.add_ssm_conv_kernel(MAMBA_D_CONV)
    writer.add_ssm_inner_size(d_inner)
    writer.add_ssm_state_size(MAMBA_D_STATE)
    writer.add_ssm_time_step_rank(dt_rank)
    s = 1.0 / np.sqrt(n_embd)
    n_vocab = len(vocab.tokens)
    writer.add_tensor("token_embd.weight", w(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", w(n_vocab, n_embd, scale=s * logit_scale))
    for i in range(n_layer):  # numpy shapes are llama.cpp's ne reversed
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ssm_in.weight", w(2 * d_inner, n_embd, scale=s))
        writer.add_tensor(f"blk.{i}.ssm_conv1d.weight", w(d_inner, MAMBA_D_CONV, scale=0.5))
        writer.add_tensor(f"blk.{i}.ssm_conv1d.bias", w(d_inner, scale=0.1))
        writer.add_tensor(f"blk.{i}.ssm_x.weight", w(dt_rank + 2 * MAMBA_D_STATE, d_inner, scale=1 / np.sqrt(d_inner)))
        writer.add_tensor(f"blk.{i}.ssm_dt.weight", w(d_inner, dt_rank, scale=0.5))
        writer.add_tensor(f"blk.{i}.ssm_dt.bias", w(d_inner, scale=0.1))
        # A < 0 keeps the state decaying (stable); llama.cpp stores A itself, not log(-A)
        a = -np.tile(np.arange(1, MAMBA_D_STATE + 1, dtype=np.float32), (d_inner, 1))
        writer.add_tensor(f"blk.{i}.ssm_a", a)
        writer.add_tensor(f"blk.{i}.ssm_d", np.ones(d_inner, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ssm_out.weight", w(n_embd, d_inner, scale=1 / np.sqrt(d_inner)))
    _finish(writer)
    return path


def write_lfm2(path: Path, *, vocab: Vocab | None = None, seed: int = 0, n_layer: int = 3, n_embd: int = 64,
               n_head: int = 4, n_ff: int = 128, n_ctx: int = 2048, logit_scale: float = 6.0,
               noise: float = 0.0) -> Path:
    """A random llama.cpp ``lfm2`` hybrid: short-convolution layers, every third layer attention (F32)."""
    vocab = vocab or spm_vocab()
    w = _weights(seed, noise)

    attention = [i % 3 == 2 for i in range(n_layer)]
    writer = gguf.GGUFWriter(str(path), "lfm2")
    _header(writer, vocab, seed=seed, n_layer=n_layer, n_embd=n_embd, n_ctx=n_ctx)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv([n_head if a else 0 for a in attention])  # 0: a short-convolution layer
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_rope_freq_base(10000.0)
    writer.add_shortconv_l_cache(LFM2_L_CACHE)
    s = 1.0 / np.sqrt(n_embd)
    n_vocab, head = len(vocab.tokens), n_embd // n_head
    writer.add_tensor("token_embd.weight", w(n_vocab, n_embd))
    writer.add_tensor("token_embd_norm.weight", np.ones(n_embd, dtype=np.float32))  # llama.cpp's LFM2 output norm
    writer.add_tensor("output.weight", w(n_vocab, n_embd, scale=s * logit_scale))
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", w(n_ff, n_embd, scale=s))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", w(n_ff, n_embd, scale=s))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", w(n_embd, n_ff, scale=1.0 / np.sqrt(n_ff)))
        if attention[i]:
            writer.add_tensor(f"blk.{i}.attn_q_norm.weight", np.ones(head, dtype=np.float32))
            writer.add_tensor(f"blk.{i}.attn_k_norm.weight", np.ones(head, dtype=np.float32))
            for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
                writer.add_tensor(f"blk.{i}.{name}.weight", w(n_embd, n_embd, scale=s))
        else:
            writer.add_tensor(f"blk.{i}.shortconv.conv.weight", w(n_embd, LFM2_L_CACHE, scale=0.5))
            writer.add_tensor(f"blk.{i}.shortconv.in_proj.weight", w(3 * n_embd, n_embd, scale=s))
            writer.add_tensor(f"blk.{i}.shortconv.out_proj.weight", w(n_embd, n_embd, scale=s))
    _finish(writer)
    return path

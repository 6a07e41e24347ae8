"""``ssd-chat --self-test``: greedy ssd must reproduce greedy ar on a tiny generated model.

Run by the frozen build (CI and ``installer/build.py``) before it is packaged, and by users who want
to check an install. It needs no model download and no Qt: it loads llama.cpp's shared library,
writes a tiny random llama GGUF and a perturbed draft of it into a temporary folder, renders a chat
prompt with the model's template, decodes it with ``ar`` and with ``ssd``, and compares the tokens.
Greedy speculation is lossless, so any difference is a bug (or a broken build of llama.cpp).
It also runs the engine's CPU check and decodes a tiny Q4_K_M model with its verdict applied, since
K-quant models take llama.cpp code paths (AMX, repacked weights) that the F32 models never reach.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

PROMPT = "The quick brown fox"
MAX_TOKENS = 48
TAG = "ssd-chat self-test:"


@dataclass(frozen=True, slots=True)
class SelfTestResult:
    """What one self-test run found; ``ok`` only when both modes produced the same non-empty tokens."""

    ar_tokens: list[int]
    ssd_tokens: list[int]
    hit_rate: float | None
    acceptance_rate: float | None
    seconds: float

    @property
    def first_difference(self) -> int | None:
        """The first position where the two token lists differ (or one ends early); None if equal."""
        return first_difference(self.ar_tokens, self.ssd_tokens)

    @property
    def ok(self) -> bool:
        return bool(self.ar_tokens) and self.first_difference is None

    def summary(self) -> str:
        """One line for humans and CI logs."""
        hit = "n/a" if self.hit_rate is None else f"{self.hit_rate:.2f}"
        acc = "n/a" if self.acceptance_rate is None else f"{self.acceptance_rate:.2f}"
        counts = f"ar {len(self.ar_tokens)} tokens, ssd {len(self.ssd_tokens)} tokens"
        stats = f"hit rate {hit}, acceptance {acc}, {self.seconds:.2f} s"
        pos = self.first_difference
        if not self.ar_tokens:
            return f"{TAG} FAIL: ar produced no tokens ({counts}, {stats})"
        if pos is None:
            return f"{TAG} PASS: ssd greedy == ar greedy ({counts}, all equal; {stats})"
        a = _at(self.ar_tokens, pos)
        s = _at(self.ssd_tokens, pos)
        return f"{TAG} FAIL: ssd differs from ar at position {pos} (ar {a}, ssd {s}; {counts}; {stats})"


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The engine's comparison, imported late: this module must load even when llama.cpp cannot."""
    from engine import first_difference as compare

    return compare(a, b)


def _at(tokens: Sequence[int], pos: int) -> str:
    return str(tokens[pos]) if pos < len(tokens) else "<end>"


def check_llama_cpp() -> str:
    """Load llama.cpp's shared library and describe it; raises if it cannot be loaded."""
    import llama_cpp

    from engine import supports_gpu_offload

    lib = llama_cpp.llama_cpp._lib
    gpu = supports_gpu_offload()
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    return (
        f"{TAG} llama-cpp-python {llama_cpp.__version__}, library {getattr(lib, '_name', '?')}\n"
        f"{TAG} GPU offload supported: {'yes' if gpu else 'no'}; system info: {info}"
    )


def check_kquant(folder: Path) -> str:
    """The CPU check's verdict, then a greedy decode of a tiny Q4_K_M model with it applied."""
    from engine import Engine, EngineConfig, GenerationParams, Mode, check_cpu, write_kquant_model

    verdict = check_cpu()
    path = write_kquant_model(folder)
    with Engine(EngineConfig(str(path), None, n_ctx=256)) as eng:
        gen = eng.generate(eng.tokenize(PROMPT), GenerationParams(mode=Mode.AR, max_tokens=8, early_stop=False)).run()
    kernels = "extra CPU buffer types (AMX, repack) on" if verdict.safe else "plain CPU kernels"
    if verdict.safe and verdict.dropped:
        kernels = f"extra CPU buffer types on except {', '.join(verdict.dropped)}"
    return (f"{TAG} K-quant (Q4_K_M) decode: {len(gen.tokens)} tokens with {kernels} "
            f"(CPU check: {verdict.detail})")


def compare_modes(folder: Path, *, max_tokens: int = MAX_TOKENS) -> SelfTestResult:
    """Write a tiny target and a related draft into ``folder`` and decode with ``ar`` and ``ssd``."""
    from engine import Engine, EngineConfig, GenerationParams, Mode, write_model

    target = write_model(folder / "target.gguf", seed=1, n_layer=3, logit_scale=6.0)
    # A perturbed copy of the target: it agrees often but not always, so ssd both accepts and
    # rejects drafts (an identical draft would never exercise the rollback path).
    draft = write_model(folder / "draft.gguf", seed=1, n_layer=3, logit_scale=6.0, noise=0.05)
    start = time.perf_counter()
    with Engine(EngineConfig(str(target), str(draft), n_ctx=512)) as eng:
        # The chat prompt goes through the GGUF's Jinja template, so a frozen build missing jinja2
        # or llama_cpp.llama_chat_format fails here rather than in the user's first chat.
        prompt = eng.chat_tokens(PROMPT)
        ar = eng.generate(prompt, GenerationParams(mode=Mode.AR, max_tokens=max_tokens, early_stop=False)).run()
        ssd = eng.generate(
            prompt, GenerationParams(mode=Mode.SSD, max_tokens=max_tokens, k=4, early_stop=False)
        ).run()
    return SelfTestResult(
        ar_tokens=list(ar.tokens),
        ssd_tokens=list(ssd.tokens),
        hit_rate=ssd.stats.hit_rate,
        acceptance_rate=ssd.stats.acceptance_rate,
        seconds=time.perf_counter() - start,
    )


def check_engine_process(folder: Path, ar_tokens: Sequence[int]) -> str:
    """Greedy ``ar`` on the target of :func:`compare_modes` in the engine process, which this program starts as a
    child of itself (frozen or not): its tokens must be the in-process ones."""
    from engine import EngineConfig, EngineProcess, GenerationParams, Mode

    with EngineProcess(EngineConfig(str(folder / "target.gguf"), None, n_ctx=512)) as eng:
        params = GenerationParams(mode=Mode.AR, max_tokens=len(ar_tokens), early_stop=False)
        tokens = [ev.token for ev in eng.generate(eng.chat_tokens(PROMPT), params)]
        pid = eng.pid
    at = first_difference(ar_tokens, tokens)
    if at is not None:
        raise RuntimeError(f"the engine process differs from the engine in-process at token {at}")
    return f"{TAG} engine process (pid {pid}): {len(tokens)} tokens, equal to the engine in-process"


def _log_path() -> Path:
    """Where the report goes when there is no stdout (the windowed Windows build has no console)."""
    from engine import user_data_dir

    path = user_data_dir() / "selftest.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def run_self_test(*, max_tokens: int = MAX_TOKENS, out: TextIO | None = None) -> int:
    """Run the self-test, print what it found, and return the process exit code (0 only on success).

    The report goes to ``out``, else stdout, else ``<user data dir>/selftest.log``.
    """
    if out is not None:
        return _run(out, max_tokens)
    if sys.stdout is not None:
        return _run(sys.stdout, max_tokens)
    with _log_path().open("w", encoding="utf-8") as log:
        return _run(log, max_tokens)


def _run(stream: TextIO, max_tokens: int) -> int:
    def say(line: str) -> None:
        print(line, file=stream, flush=True)

    # Broad catches: this is a top-level boundary whose whole job is to turn any failure (missing
    # DLL, bad bundle, engine error) into a readable line and a non-zero exit code.
    try:
        say(check_llama_cpp())
    except Exception as exc:
        say(f"{TAG} FAIL: llama.cpp could not be loaded: {type(exc).__name__}: {exc}")
        return 2
    try:
        with tempfile.TemporaryDirectory(prefix="ssd-chat-selftest-") as tmp:
            say(check_kquant(Path(tmp)))
            result = compare_modes(Path(tmp), max_tokens=max_tokens)
            if result.ok:
                say(check_engine_process(Path(tmp), result.ar_tokens))
    except Exception as exc:
        say(f"{TAG} FAIL: {type(exc).__name__}: {exc}")
        return 1
    say(result.summary())
    return 0 if result.ok else 1

"""The exactness check: a speculative reply against the ar reply for the same prompt, token by token; the app's
"Verify exactness" runs :func:`run_check` in the engine process.

Not verification (which accepts drafts inside a round): this compares two finished outputs, as the
bench, the app's "Verify exactness" and the self-test do. Greedy, or sampled with one seed under the coupled
scheme, where every mode's reply is ``ar``'s for that seed. Each pass reports its progress; a stop between
rounds cancels the check (no verdict). Where the tokens first differ, the target's top-2 logit margin there
tells a numeric near-tie (batched verify and single-token decoding round differently) from a real difference.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from threading import Event
from typing import Protocol

from engine.chat.rendering import Message
from engine.config import GenerationParams
from engine.core.backend import Model, loaded
from engine.core.context import Context
from engine.core.gumbel import score_margin
from engine.core.mode import Mode

from .target import Target


class _Reply(Protocol):
    tokens: list[int]

    def __iter__(self) -> Iterator[object]: ...


class CheckedEngine(Protocol):
    """What the check asks of the engine it runs on (:class:`~engine.Engine`, in the engine process)."""

    target_model: Model
    draft_model: Model | None
    target_ctx: Context
    target: Target

    def messages_tokens(self, messages: Sequence[Message]) -> list[int]: ...

    def generate(self, prompt: Sequence[int], params: GenerationParams, stop: Event | None = None) -> _Reply: ...

    def detokenize(self, tokens: Sequence[int]) -> str: ...

    def top2_margin(self, tokens: Sequence[int]) -> float: ...


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first mismatch between two token lists; a length difference counts; None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


REPORT_INTERVAL_S = 0.1
CONTEXT_TOKENS = 24  # tokens shown before the first difference
AFTER_TOKENS = 8  # tokens of each continuation shown from it


@dataclass(frozen=True, slots=True)
class VerifyProgress:
    """How far the check is: pass 1 decodes with ``ar`` (the reference), pass 2 with the speculative mode."""

    pass_no: int
    mode: str
    tokens: int
    max_tokens: int


@dataclass(frozen=True, slots=True)
class Verification:
    """Result of "Verify exactness": ``ar`` against speculative decoding, both greedy or both sampled with one seed.

    ``context`` is the text just before the first difference, ``ar_text`` and ``spec_text`` what each
    mode produced from there (the whole reply when identical); ``margin`` is the target's logit gap
    between its two best tokens at that position. ``stopped``: cancelled, no verdict. ``device``: where the
    models ran (a near-tie may flip on a GPU, never on the CPU).
    """

    mode: str
    identical: bool
    ar_tokens: int
    spec_tokens: int
    first_difference: int | None
    ar_text: str
    spec_text: str
    stopped: bool
    context: str = ""
    margin: float | None = None
    passes_done: int = 2
    device: str = "CPU"  # where the target ran: "CPU", or "GPU" (any layer there), whose kernels round differently
    setting: str = "greedy"  # how both passes decoded: "greedy" or "sampled (seed N)"


def cancelled_check(params: GenerationParams, *, ar_tokens: int = 0, passes_done: int = 0) -> Verification:
    """The result of a check that was stopped before its verdict."""
    return Verification(mode=params.mode, identical=False, ar_tokens=ar_tokens, spec_tokens=0, first_difference=None,
                        ar_text="", spec_text="", stopped=True, passes_done=passes_done, setting=setting_of(params))


def setting_of(params: GenerationParams) -> str:
    """How a check decodes: greedy, or sampled with the seed both passes share."""
    return "greedy" if params.sampling.greedy else f"sampled (seed {params.sampling.seed})"


def run_check(eng: CheckedEngine, messages: Sequence[Message], params: GenerationParams, stop: Event,
              report: Callable[[VerifyProgress], object]) -> Verification:
    """Decode ``messages`` with ``ar`` and with ``params.mode`` under the same sampling and seed; compare the tokens."""
    prompt = eng.messages_tokens(messages)
    outputs: list[list[int]] = []
    for pass_no, mode in enumerate(("ar", params.mode), start=1):
        gen = eng.generate(prompt, replace(params, mode=Mode(mode)), stop)
        last = time.perf_counter()
        for _ in gen:
            if time.perf_counter() - last >= REPORT_INTERVAL_S:
                last = time.perf_counter()
                report(VerifyProgress(pass_no, mode, len(gen.tokens), params.max_tokens))
        report(VerifyProgress(pass_no, mode, len(gen.tokens), params.max_tokens))
        outputs.append(list(gen.tokens))
        if stop.is_set():
            return cancelled_check(params, ar_tokens=len(outputs[0]), passes_done=pass_no - 1)
    a, b = outputs
    at = first_difference(a, b)
    where = loaded(eng.target_model, eng.draft_model)
    device = "GPU" if where.target_on_gpu or where.draft_on_gpu else "CPU"
    if at is None:
        text = eng.detokenize(a)
        return Verification(params.mode, True, len(a), len(b), None, text, text, stopped=False, device=device,
                            setting=setting_of(params))
    return Verification(
        params.mode, False, len(a), len(b), at, ar_text=eng.detokenize(a[at:at + AFTER_TOKENS]),
        spec_text=eng.detokenize(b[at:at + AFTER_TOKENS]), stopped=False,
        context=eng.detokenize(a[max(0, at - CONTEXT_TOKENS):at]), margin=_margin(eng, prompt + a[:at], params),
        device=device, setting=setting_of(params))


def _margin(eng: CheckedEngine, tokens: list[int], params: GenerationParams) -> float:
    """Where the passes part: greedy, the target's top-2 logit gap; sampled, the gap between its two best perturbed
    scores (the choice coupled sampling made there). Run between generations, on the engine's thread."""
    if params.sampling.greedy:
        return eng.top2_margin(tokens)
    eng.target_ctx.set_sampling(None)  # logits rows; the next generation attaches its sampler chain again
    return score_margin(eng.target.kv.sync(tokens), params.sampling, len(tokens))

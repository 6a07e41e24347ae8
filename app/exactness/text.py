"""How "Verify exactness" reads: a one-line verdict for the readout and the first difference, readably, with
the target's top-2 logit margin there and what it means."""

from __future__ import annotations

import html

from engine import Verification, VerifyProgress

NEAR_TIE = 0.5  # logits: batch-shape rounding flips choices this close (tests/test_realpair.py uses the same bound)
PASSES = 2


def pass_text(p: VerifyProgress) -> str:
    """``Pass 1 of 2 — ar (the reference): 37 of 128 tokens``."""
    what = "ar (the reference)" if p.pass_no == 1 else p.mode
    return f"Pass {p.pass_no} of {PASSES} — {what}: {p.tokens} of {p.max_tokens} tokens"


PROMISE = ("Greedy decoding is token-identical on the CPU, except with a Q4_K target such as the shipped Q4_K_M "
           "one, whose repacked CPU kernels sum a batch in another order than one token; there, and on a GPU, it is "
           "identical up to floating-point near-ties (a divergence is shown with its top-2 margin). Sampled decoding "
           "with one seed (coupled scheme) is identical up to near-ties of the perturbed scores, on the CPU too.")


def near_tie_on_gpu(result: Verification) -> bool:
    """Whether a difference is rounding at a near-tie: within the promise, not a failure. Greedy: on a GPU only;
    sampled: anywhere, since perturbed scores tie far more often than greedy logits (tests/test_coupled.py)."""
    return (not result.identical and not result.stopped and (result.device == "GPU" or result.setting != "greedy")
            and result.margin is not None and result.margin < NEAR_TIE)


def _margin_words(result: Verification) -> str:
    """What the margin measures: the target's top-2 logits (greedy), or its two best perturbed scores (sampled)."""
    return "top-2 margin" if result.setting == "greedy" else "perturbed-score margin"


def passed(result: Verification) -> bool:
    """Whether the check kept the promise (:data:`PROMISE`): identical, or a near-tie on a GPU."""
    return result.identical or near_tie_on_gpu(result)


def summary(result: Verification) -> str:
    """The verdict in one plain line."""
    if result.stopped:
        return f"Verify exactness cancelled during pass {result.passes_done + 1} of {PASSES}: no verdict."
    if result.identical:
        return f"Identical: {result.setting} {result.mode} produced the same {result.ar_tokens} tokens as ar."
    if near_tie_on_gpu(result):
        return (f"Identical up to a floating-point near-tie: {result.setting} {result.mode} and ar first differ at "
                f"token {result.first_difference}, where the target's {_margin_words(result)} is {result.margin:.3g} "
                f"logits ({result.device}).")
    line = f"Different: {result.setting} {result.mode} and ar first differ at token {result.first_difference}"
    if result.margin is not None:
        kind = "a near-tie" if result.margin < NEAR_TIE else "not a near-tie"
        line += (f" (the target's {_margin_words(result)} there: {result.margin:.3g} logits, {kind}; on the "
                 f"{result.device})")
    return line + "."


def meaning(margin: float, device: str = "CPU") -> str:
    """What the target's top-2 logit margin at the first difference says about it, on ``device``."""
    if margin < NEAR_TIE and device == "GPU":
        return (f"There the target's two best next tokens are only {margin:.3g} logits apart: a near-tie. "
                "On a GPU, llama.cpp's kernels round differently for a batch of drafted tokens than for one token, "
                "enough to flip a choice this close. Both continuations are the target's own choice within "
                "floating-point rounding: this is not a speculation error.")
    if margin < NEAR_TIE:
        return (f"There the target's two best next tokens are only {margin:.3g} logits apart: a near-tie. On the "
                "CPU speculation reproduces ar token for token even so, unless the target is Q4_K quantized (the "
                "shipped Q4_K_M): llama.cpp's repacked Q4_K kernels sum a batch in another order than one token and "
                "can flip a choice this close. With any other target this is a failure; please report it with the "
                "prompt.")
    return (f"There the target's two best next tokens are {margin:.3g} logits apart: a clear choice that rounding "
            "does not explain. Speculation should have reproduced ar here; please report it with the prompt.")


def shown(text: str, *, mark_spaces: bool = False) -> str:
    """``text`` as HTML with its whitespace visible: ↵ for a line break (kept as one), → for a tab, ␣ for spaces."""
    out = html.escape(text, quote=False).replace("\t", "→")
    if mark_spaces:
        out = out.replace(" ", "␣")
    return out.replace("\n", "↵<br>" if not mark_spaces else "↵")


def details_html(result: Verification) -> str:
    """The verdict for the result box: the first difference in context and the margin's meaning."""
    head = f"<p><b>{html.escape(summary(result), quote=False)}</b></p>"
    if result.stopped:
        return head
    promise = f'<p style="color:#57606a">{html.escape(PROMISE, quote=False)}</p>'
    if result.identical:
        return head + promise
    mode = html.escape(result.mode)
    mono = "font-family:monospace; white-space:pre-wrap"
    return (f"{head}<p>The text up to there:</p>"
            f'<p style="{mono}; color:#57606a">…{shown(result.context)}</p>'
            f"<p>Then <b>ar</b> continues with "
            f'<span style="{mono}; background:#dafbe1">{shown(result.ar_text, mark_spaces=True) or "(the end)"}</span>'
            f"<br>and <b>{mode}</b> with "
            f'<span style="{mono}; background:#ffebe9">{shown(result.spec_text, mark_spaces=True) or "(the end)"}'
            f"</span></p>"
            + (f"<p>{html.escape(meaning(result.margin, result.device), quote=False)}</p>"
               if result.margin is not None else "") + promise)

"""How "Verify exactness" reads: a one-line verdict for the readout and the first difference, readably, with
the target's top-2 logit margin there and what it means."""

from __future__ import annotations

import html

from app.exactness.run import Verification, VerifyProgress

NEAR_TIE = 0.5  # logits: batch-shape rounding flips choices this close (tests/test_realpair.py uses the same bound)
PASSES = 2


def pass_text(p: VerifyProgress) -> str:
    """``Pass 1 of 2 — ar (the reference): 37 of 128 tokens``."""
    what = "ar (the reference)" if p.pass_no == 1 else p.mode
    return f"Pass {p.pass_no} of {PASSES} — {what}: {p.tokens} of {p.max_tokens} tokens"


def summary(result: Verification) -> str:
    """The verdict in one plain line."""
    if result.stopped:
        return f"Verify exactness cancelled during pass {result.passes_done + 1} of {PASSES}: no verdict."
    if result.identical:
        return f"Identical: greedy {result.mode} produced the same {result.ar_tokens} tokens as ar."
    line = f"Different: greedy {result.mode} and ar first differ at token {result.first_difference}"
    if result.margin is not None:
        kind = "a near-tie" if result.margin < NEAR_TIE else "not a near-tie"
        line += f" (the target's top-2 margin there: {result.margin:.3g} logits, {kind})"
    return line + "."


def meaning(margin: float) -> str:
    """What the target's top-2 logit margin at the first difference says about it."""
    if margin < NEAR_TIE:
        return (f"There the target's two best next tokens are only {margin:.3g} logits apart: a near-tie. "
                "Speculative decoding scores drafted tokens in one batch, and llama.cpp's batched kernels round "
                "differently from one-token decoding, enough to flip a choice this close. Both continuations are "
                "the target's own choice within rounding: this is not a speculation error.")
    return (f"There the target's two best next tokens are {margin:.3g} logits apart: a clear choice that rounding "
            "does not explain. Greedy speculation should have reproduced ar here; please report it with the prompt.")


def shown(text: str, *, mark_spaces: bool = False) -> str:
    """``text`` as HTML with its whitespace visible: ↵ for a line break (kept as one), → for a tab, ␣ for spaces."""
    out = html.escape(text, quote=False).replace("\t", "→")
    if mark_spaces:
        out = out.replace(" ", "␣")
    return out.replace("\n", "↵<br>" if not mark_spaces else "↵")


def details_html(result: Verification) -> str:
    """The verdict for the result box: the first difference in context and the margin's meaning."""
    head = f"<p><b>{html.escape(summary(result), quote=False)}</b></p>"
    if result.stopped or result.identical:
        return head
    mode = html.escape(result.mode)
    mono = "font-family:monospace; white-space:pre-wrap"
    return (f"{head}<p>The text up to there:</p>"
            f'<p style="{mono}; color:#57606a">…{shown(result.context)}</p>'
            f"<p>Then <b>ar</b> continues with "
            f'<span style="{mono}; background:#dafbe1">{shown(result.ar_text, mark_spaces=True) or "(the end)"}</span>'
            f"<br>and <b>{mode}</b> with "
            f'<span style="{mono}; background:#ffebe9">{shown(result.spec_text, mark_spaces=True) or "(the end)"}'
            f"</span></p>"
            + (f"<p>{html.escape(meaning(result.margin), quote=False)}</p>" if result.margin is not None else ""))

"""Generation statistics: every round reports one :class:`RoundResult`; one recorder derives the rates.

:class:`StatsRecorder` is the only place where acceptance, hit rate, tokens per second, mean
timings and mode switches are computed. It updates the :class:`GenerationStats` after every token
and every round, so a reader sees consistent live figures while a generation runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from .core.mode import DRAFTING, Mode
from .core.placement import Placement, cannot_pay
from .remote import relay
from .speculative.types import NGRAM, RoundResult

MIN_WARN_ROUNDS = 4  # rounds measured before a reply's figures may say its mode cannot pay


@dataclass(slots=True)
class GenerationStats:
    """What a generation did, live while it runs and complete when it ends."""

    mode: str = ""  # the requested mode ("auto" stays "auto")
    current_mode: str = ""  # the step the latest round ran: "ar", "sd" or "ssd"
    prompt_tokens: int = 0
    prompt_cached: int = 0  # of them, the prefix the target's context already held: not read again
    new_tokens: int = 0
    seconds: float = 0.0
    tokens_per_second: float = 0.0
    ttft_s: float = 0.0
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    accepted_lookup: int = 0  # of them, drafted by the n-gram pool (the prompt, tool results, earlier turns)
    acceptance_rate: float | None = None  # accepted / drafted
    mean_accepted: float | None = None  # accepted drafts per speculative round
    hit_rate: float | None = None  # ssd cache hits / lookups
    hits: int = 0
    lookups: int = 0
    backup_uses: int = 0  # ssd rounds whose draft came from the backup speculator
    mean_verify_ms: float = 0.0
    mean_restore_ms: float | None = None  # of it, a recurrent state's checkpoint and restore (None: none needed)
    mean_draft_ms: float = 0.0  # the target waiting for a draft, per round
    mean_tree_ms: float | None = None  # trees finished before a later round (the last, cut-short one is left out)
    target_decode_s: float = 0.0  # inside llama_decode on the target
    draft_decode_s: float = 0.0  # inside llama_decode on the draft (any thread)
    draft_wait_s: float = 0.0  # target thread waiting for a draft (sd: drafting itself)
    python_share: float | None = None  # the target thread's loop outside llama.cpp and draft waits
    loop_cpu_s: float | None = None  # CPU time of the generating thread from the first token on
    host_cpu_s: float | None = None  # ... of it outside llama_decode (load-independent, unlike python_share)
    mode_switches: list[str] = field(default_factory=list)  # one entry per change of current_mode
    finish_reason: str = ""
    rounds_by_mode: dict[str, int] = field(default_factory=dict)
    # each step's tokens and wall time over its rounds: a round's time runs from the end of the one before (from the
    # first token for the first round), the handing out of its tokens included, so any step's rate is measured alike
    tokens_by_mode: dict[str, int] = field(default_factory=dict)
    seconds_by_mode: dict[str, float] = field(default_factory=dict)
    sampling_path: str = ""  # host (numpy on the logits rows) or backend (llama.cpp's chain); "target/draft"
    plan_rates: dict[str, float] = field(default_factory=dict)  # auto: predicted tok/s of its best plan per mode
    # with a remote target (else None): bytes over the link to the remote machines, as their relays counted them
    link_sent: int | None = None  # this machine -> remote machines, the whole generation (its prompt read too)
    link_received: int | None = None  # remote machines -> this machine
    link_sent_per_round: float | None = None  # over the rounds (after the first token), per round
    link_received_per_round: float | None = None
    link_bytes_per_token: float | None = None  # both ways, the whole generation, per generated token

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict, its lists and dicts copied (sent after every token: a tenth of asdict's time)."""
        return {name: _copied(getattr(self, name)) for name in _FIELDS}

    def set_count(self, new_tokens: int) -> None:
        """``new_tokens`` generated in ``seconds``: the count and the rate that follows from it."""
        self.new_tokens = new_tokens
        self.tokens_per_second = new_tokens / self.seconds if self.seconds > 0 else 0.0


_FIELDS = tuple(f.name for f in fields(GenerationStats))


def _copied(value: Any) -> Any:
    """``value``, or a copy where it is a list or a dict (of plain values: the stats hold nothing deeper)."""
    if isinstance(value, dict):
        return dict(value)
    return list(value) if isinstance(value, list) else value


@dataclass(frozen=True, slots=True)
class DecodeTimes:
    """Seconds inside llama_decode, as read from the two contexts' counters: wall time, and CPU time of the
    threads that called it."""

    target: float = 0.0
    draft: float = 0.0
    target_cpu: float = 0.0
    draft_cpu: float = 0.0


class StatsRecorder:
    """Fills one :class:`GenerationStats` from tokens and round events."""

    def __init__(self, stats: GenerationStats, clock: Callable[[], float] = time.perf_counter,
                 cpu_clock: Callable[[], float] = time.thread_time) -> None:
        self.stats = stats
        self._clock = clock
        self._cpu_clock = cpu_clock  # CPU time of the generating thread (the one that calls the recorder)
        self._t0 = clock()
        self._verify_s = 0.0
        self._restore_s = 0.0
        self._wait_s = 0.0
        # ... of it for a draft made off this thread's Python: a lookup round's wait is the n-gram pool's draft,
        # made here by Python (counted as the loop's, as any host work is)
        self._model_wait_s = 0.0
        self._tree_s: list[float] = []
        self._spec_rounds = 0
        self._loop_t0 = 0.0
        self._loop_c0 = 0.0
        self._loop_dec = DecodeTimes()
        self._ahead_wait_s = 0.0
        self._loop_thread = 0
        self._round_end = 0.0  # when the last round was recorded (the first token's time before any)
        self._link0 = relay.totals()  # None: this process has no remote machine
        self._link_loop0 = self._link0

    def first_token(self, decode: DecodeTimes) -> None:
        """The prompt is in and the first token sampled; the decoding loop starts now (on this thread)."""
        self._loop_t0 = self._clock()
        self._loop_c0 = self._cpu_clock()
        self._loop_thread = threading.get_ident()
        self._loop_dec = decode
        self.stats.ttft_s = self._loop_t0 - self._t0
        self._round_end = self._loop_t0
        if self._link0 is not None:
            self._link_loop0 = relay.totals()

    def draft_free(self, decode: DecodeTimes, waited_s: float) -> None:
        """The draft model's prompt read on a thread of its own (engine.speculative.drafter.PromptRead) was joined after
        waiting ``waited_s``: its decodes, which may end after the first token, are not this loop's llama.cpp time,
        but the wait for them is (as a wait for a draft is)."""
        d = self._loop_dec
        self._loop_dec = DecodeTimes(d.target, decode.draft, d.target_cpu, decode.draft_cpu)
        self._ahead_wait_s += waited_s

    def token(self) -> None:
        s = self.stats
        s.seconds = self._clock() - self._t0
        s.set_count(s.new_tokens + 1)

    def round(self, rr: RoundResult) -> None:
        s = self.stats
        if s.current_mode and rr.mode != s.current_mode:
            s.mode_switches.append(f"{s.current_mode}->{rr.mode}" + (f" ({rr.why})" if rr.why else ""))
        s.current_mode = rr.mode
        s.rounds += 1
        s.rounds_by_mode[rr.mode] = s.rounds_by_mode.get(rr.mode, 0) + 1
        now = self._clock()
        took, self._round_end = now - (self._round_end or now), now
        s.tokens_by_mode[rr.mode] = s.tokens_by_mode.get(rr.mode, 0) + len(rr.tokens)
        s.seconds_by_mode[rr.mode] = s.seconds_by_mode.get(rr.mode, 0.0) + took
        s.drafted += rr.drafted
        s.accepted += rr.accepted
        if rr.speculator == NGRAM:
            s.accepted_lookup += rr.accepted
        if rr.mode != Mode.AR and rr.drafted:  # a lookup round with nothing in the pool is a plain step
            self._spec_rounds += 1
        if rr.rates:
            s.plan_rates = dict(rr.rates)
        if rr.hit is not None:
            s.lookups += 1
            s.hits += int(rr.hit)
        if rr.mode == Mode.SSD and rr.speculator != "cache":
            s.backup_uses += 1
        self._tree_s.extend(t.seconds for t in rr.trees)
        self._verify_s += rr.verify_s
        self._restore_s += rr.restore_s
        self._wait_s += rr.wait_s
        if rr.mode != Mode.LOOKUP:
            self._model_wait_s += rr.wait_s
        self._rates()
        self._link()

    def _link(self) -> None:
        """The link's bytes since the generation began, and per round since the first token; only where a remote
        machine was used (a process whose remote machines carried nothing is running a local pair)."""
        if self._link0 is None or self._link_loop0 is None:
            return
        now, t0, l0 = relay.totals() or self._link0, self._link0, self._link_loop0
        if now == t0:
            return
        s = self.stats
        s.link_sent, s.link_received = now[0] - t0[0], now[1] - t0[1]
        s.link_bytes_per_token = (s.link_sent + s.link_received) / s.new_tokens if s.new_tokens else None
        if s.rounds:
            s.link_sent_per_round = (now[0] - l0[0]) / s.rounds
            s.link_received_per_round = (now[1] - l0[1]) / s.rounds

    def _rates(self) -> None:
        s = self.stats
        s.acceptance_rate = s.accepted / s.drafted if s.drafted else None
        s.mean_accepted = s.accepted / self._spec_rounds if self._spec_rounds else None
        s.hit_rate = s.hits / s.lookups if s.lookups else None
        if s.rounds:
            s.mean_verify_ms = 1000.0 * self._verify_s / s.rounds
            s.mean_restore_ms = 1000.0 * self._restore_s / s.rounds if self._restore_s else None
            s.mean_draft_ms = 1000.0 * self._wait_s / s.rounds
        if self._tree_s:
            s.mean_tree_ms = 1000.0 * sum(self._tree_s) / len(self._tree_s)
        s.draft_wait_s = self._wait_s

    def finish(self, start: DecodeTimes, end: DecodeTimes, *, draft_on_this_thread: bool) -> None:
        """The generation ended: total time, decode split, and the share of the loop outside llama.cpp.

        ``draft_on_this_thread``: plain sd drafts on the target's thread, so the draft's decode time is
        llama.cpp time of this loop; otherwise the loop only waited for the draft thread.
        """
        s = self.stats
        now = self._clock()
        s.seconds = now - self._t0
        s.set_count(s.new_tokens)
        s.target_decode_s = end.target - start.target
        s.draft_decode_s = end.draft - start.draft
        self._rates()
        self._link()
        if self._loop_t0 and s.rounds:
            loop, d = now - self._loop_t0, self._loop_dec
            inside = end.target - d.target + self._ahead_wait_s
            inside += end.draft - d.draft if draft_on_this_thread else self._model_wait_s
            s.python_share = max(0.0, 1.0 - inside / loop) if loop > 0 else None
            if threading.get_ident() == self._loop_thread:  # a generation closed from another thread ends there
                s.loop_cpu_s = self._cpu_clock() - self._loop_c0
                decode_cpu = end.target_cpu - d.target_cpu
                decode_cpu += end.draft_cpu - d.draft_cpu if draft_on_this_thread else 0.0
                s.host_cpu_s = s.loop_cpu_s - decode_cpu


def link_figures(stats: GenerationStats) -> dict[str, float | None]:
    """A remote target's bytes on the link, as the server's ``speculation.link`` names them."""
    return {"bytes_sent": stats.link_sent, "bytes_received": stats.link_received,
            "bytes_sent_per_round": stats.link_sent_per_round,
            "bytes_received_per_round": stats.link_received_per_round, "bytes_per_token": stats.link_bytes_per_token}


def drafting_warning(stats: GenerationStats, placement: Placement) -> str | None:
    """:func:`~engine.core.placement.cannot_pay` on a reply's measured times, else None. A drafted token's cost is
    sd's drafting time per drafted token, or ssd's draft decode time per served token (its tree's work included);
    the target's step is its mean verify."""
    if stats.mode not in DRAFTING or stats.rounds < MIN_WARN_ROUNDS or not stats.drafted:
        return None
    spent = stats.draft_wait_s if stats.mode == Mode.SD else stats.draft_decode_s
    return cannot_pay(stats.mode, placement, spent / stats.drafted, stats.mean_verify_ms / 1000.0)

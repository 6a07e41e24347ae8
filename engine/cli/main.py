"""Command line: ``generate``, ``models ...`` and ``bench``. Errors are one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import sys
import threading
from collections.abc import Sequence

from engine.core import options as opt
from engine.core.options import MODES
from engine.errors import EngineError, ParameterError

from . import chat_format, models, rpc_server
from .help import LAYERS_HELP, HelpFormatter, gpu_layers, one_line
from .rpc import add_rpc_argument
from .serve import add_serve_parser


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"error: {one_line(message)}", file=sys.stderr)
        raise SystemExit(2)


def _add_generate(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("generate", help="generate text with ar, sd, ssd, lookup or auto", formatter_class=HelpFormatter,
                       description="Generate a reply with the target model; a draft model speeds it up.")
    p.add_argument("--target", required=True, help="target GGUF file")
    p.add_argument("--draft", help="draft GGUF file (needed for sd and ssd; auto without one picks ar or lookup)")
    p.add_argument("--mode", choices=MODES, default=opt.MODE.default, help=opt.MODE.help)
    p.add_argument("--prompt", required=True, help="the prompt (UTF-8 text); with --chat, the user's message")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the target's chat template")
    p.add_argument("--system", help="system prompt (with --chat)")
    p.add_argument("--max-tokens", type=int, default=128, help="the longest reply, in tokens")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature; 0 is greedy (the same "
                   "reply every time, token-identical in every mode)")
    p.add_argument("--top-k", type=int, default=0, help="sample among the k likeliest tokens only (0 = off)")
    p.add_argument("--top-p", type=float, default=1.0,
                   help="sample among the likeliest tokens that hold this much probability (1 = off)")
    p.add_argument("--min-p", type=float, default=0.0,
                   help="drop tokens less likely than this share of the best one (0 = off)")
    p.add_argument("--seed", type=int, help="seed of the sampler: one seed gives one reply in every mode (default: a "
                   "fresh one each run, reported in --json output)")
    p.add_argument("--k", type=int, default=4, help="draft length K")
    p.add_argument("--fanout", type=int, default=2, help="pre-speculated candidates per outcome position")
    p.add_argument("--geometric", action="store_true", help="geometric (Saguaro) fan-out allocation")
    p.add_argument("--budget", type=int, default=0,
                   help="ssd tree branches per round (0 = fanout x (K+1), cut to what pays here once measured)")
    p.add_argument("--backup", choices=["jit", "ngram"], default="jit", help="speculator used on a cache miss")
    p.add_argument("--miss-limit", type=int, default=3, help="consecutive misses before rolling back to sd")
    p.add_argument("--ctx", type=int, default=4096, help="context length")
    p.add_argument("--threads", type=int, default=0, help="target CPU threads (0 = all cores)")
    p.add_argument("--draft-threads", type=int, default=0, help="draft CPU threads (0 = all cores)")
    p.add_argument("--gpu-layers", type=gpu_layers, default="auto", help=f"target layers on the GPU ({LAYERS_HELP})")
    p.add_argument("--draft-gpu-layers", type=gpu_layers, default="auto",
                   help=f"draft layers on the GPU ({LAYERS_HELP})")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of streaming")
    add_rpc_argument(p)
    p.set_defaults(func=cmd_generate)


def _utf8(flag: str, value: str | None) -> None:
    """A command-line value with bytes that are not UTF-8 (they arrive as lone surrogates) is refused."""
    try:
        (value or "").encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = (value or "")[exc.start].encode("utf-8", "surrogateescape")
        raise ParameterError(f"{flag} is not valid UTF-8 text (byte {bad!r} at character {exc.start})") from None


def cmd_generate(args: argparse.Namespace) -> int:
    _utf8("--prompt", args.prompt)
    _utf8("--system", args.system)
    from engine.core import backend
    from engine.core.mode import Mode
    from engine.core.sampling import SamplingParams
    from engine.engine import Engine, EngineConfig, GenerationParams
    from engine.native import abort
    from engine.process.faults import ABORT_MARK
    from engine.process.protocol import STOPPED
    from engine.stats import drafting_warning

    # the engine runs here: a llama.cpp fault (GGML_ABORT, an RPC error) says one line and exits 2, no backtrace
    abort.install(abort.write_line_and_exit(f"error: {STOPPED}{ABORT_MARK}", 2))

    seed = secrets.randbelow(2**32) if args.seed is None else args.seed  # no seed: a fresh reply each run
    sampling = SamplingParams(args.temperature, args.top_k, args.top_p, args.min_p, seed)
    mode = Mode(args.mode)
    params = GenerationParams(
        mode=mode, max_tokens=args.max_tokens, sampling=sampling, k=args.k, fanout=args.fanout,
        geometric=args.geometric, backup=args.backup, miss_limit=args.miss_limit, budget=args.budget,
    )
    if mode.needs_draft and not args.draft:
        raise EngineError(f"--mode {mode} needs --draft")
    config = EngineConfig(
        args.target, args.draft if mode.may_draft else None, n_ctx=args.ctx, threads=args.threads,
        draft_threads=args.draft_threads, gpu_layers=args.gpu_layers, draft_gpu_layers=args.draft_gpu_layers,
        remember_machine=True, rpc=args.rpc, tensor_split=args.tensor_split,
    )
    with Engine(config) as eng:
        where = backend.loaded(eng.target_model, eng.draft_model)
        if not args.json:
            print(f"[{where.text}]", file=sys.stderr)
        prompt = eng.chat_tokens(args.prompt, args.system) if args.chat else eng.tokenize(args.prompt)
        stop = threading.Event()
        gen = eng.generate(prompt, params, stop)
        fault_at = abort.fault_after()  # tests: a real ggml abort after this many tokens
        try:
            for n, ev in enumerate(gen, 1):
                if n == fault_at:
                    abort.raise_abort(f"test fault after {n} tokens")
                if not args.json:
                    sys.stdout.write(ev.text)
                    sys.stdout.flush()
        except KeyboardInterrupt:
            stop.set()
        s = gen.stats
        warning = drafting_warning(s, where)
        if args.json:
            print(json.dumps({"text": gen.text, "tokens": gen.tokens, "stats": s.to_dict(), "placement": where.text,
                              "warning": warning, "seed": seed}))
        else:
            hit = "-" if s.hit_rate is None else f"{s.hit_rate:.0%}"
            acc = "-" if s.acceptance_rate is None else f"{s.acceptance_rate:.0%}"
            link = "" if s.link_sent_per_round is None or s.link_received_per_round is None else (
                f", link {s.link_sent_per_round / 1000:.1f} KB up and {s.link_received_per_round / 1000:.1f} KB down "
                "a round")
            print(
                f"\n[{s.mode}] {s.new_tokens} tokens in {s.seconds:.2f}s = {s.tokens_per_second:.2f} tok/s, "
                f"ttft {s.ttft_s * 1000:.0f} ms, rounds {s.rounds}, accepted {s.accepted}/{s.drafted} ({acc}), "
                f"hit rate {hit}, backup uses {s.backup_uses}{link}",
                file=sys.stderr,
            )
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m engine", description="ssd-chat engine")
    parser.add_argument("-v", "--verbose", action="store_true", help="log llama.cpp and engine details")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_generate(sub)
    models.register(sub)
    add_serve_parser(sub)
    rpc_server.register(sub)
    chat_format.register(sub)
    try:
        from . import bench
    except ImportError:  # pragma: no cover - bench is optional while it is built
        pass
    else:
        bench.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors (exit 2) and --help (exit 0)
        return int(exc.code or 0)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(name)s: %(message)s")
    if not args.verbose:
        logging.getLogger("engine.llama_cpp").setLevel(logging.CRITICAL)
    try:
        return int(args.func(args))
    except EngineError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file the engine could not read or write, said in one line
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {one_line(exc.strerror or exc)}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

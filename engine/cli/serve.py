"""``python -m engine serve``: load a model pair and serve it until Ctrl+C."""

from __future__ import annotations

import argparse
import errno
import sys


def add_serve_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``serve`` on the engine CLI's subcommands (imports nothing heavy)."""
    from engine.core import options as opt

    from .help import LAYERS_HELP, gpu_layers
    from .rpc import add_rpc_argument

    p = subparsers.add_parser("serve", help="serve a model pair over an OpenAI-compatible HTTP API")
    p.add_argument("--target", required=True, help="target GGUF file")
    p.add_argument("--draft", help="draft GGUF file (needed for sd, ssd, auto)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="port (0 = any free port) (default: %(default)s)")
    p.add_argument("--mode", choices=["ar", "sd", "ssd", "lookup", "auto"], default=None,
                   help="speculation mode (default: auto with a draft, ar without)")
    p.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on /v1/*")
    p.add_argument("--model-id", default="", help="the model name clients send (default: the target's file name)")
    p.add_argument("--any-model-name", action="store_true",
                   help="accept any model name in requests (clients that send their own default, e.g. gpt-3.5-turbo)")
    p.add_argument("--queue", type=int, default=8,
                   help="requests that may wait for the engine before 429 (default: %(default)s)")
    p.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="allow browser requests from ORIGIN (repeatable; CORS is off by default)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="accept requests that name this server NAME in their Host header (repeatable; addresses, "
                        "localhost and this machine's name are always accepted)")
    p.add_argument("--max-body-mb", type=float, default=None,
                   help="largest request body in MB (default 4); a larger one is answered 413")
    p.add_argument("--k", type=int, default=4, help="draft length K (default: %(default)s)")
    p.add_argument("--fanout", type=int, default=2,
                   help="pre-speculated candidates per outcome position (default: %(default)s)")
    p.add_argument("--ctx", type=int, default=4096, help="context length of each reply (default: %(default)s)")
    p.add_argument("--parallel", type=int, default=0, metavar="N",
                   help="replies made at once (each beside others runs plain rounds in shared decodes; more wait); "
                        f"0 = {opt.AUTO_GPU_REPLIES} with the target on a GPU, {opt.AUTO_CPU_REPLIES} on a CPU "
                        "(default: %(default)s)")
    p.add_argument("--cache-ram", type=int, default=opt.PROMPT_CACHE.default, metavar="MB",
                   help="host memory keeping recent conversations' prompts (0 = off) (default: %(default)s)")
    p.add_argument("--threads", type=int, default=0, help="target CPU threads (0 = all cores) (default: %(default)s)")
    p.add_argument("--draft-threads", type=int, default=0,
                   help="draft CPU threads (0 = all cores) (default: %(default)s)")
    p.add_argument("--gpu-layers", type=gpu_layers, default="auto",
                   help=f"target layers on the GPU ({LAYERS_HELP}; default: %(default)s)")
    p.add_argument("--draft-gpu-layers", type=gpu_layers, default="auto",
                   help=f"draft layers on the GPU ({LAYERS_HELP}; default: %(default)s)")
    p.add_argument("--chat-template", metavar="NAME|FILE",
                   help="a chat template for a model without one (a base model), or instead of its own: a builtin "
                        "(chatml, llama3, gemma, mistral, phi3) or a .jinja file")
    p.add_argument("--thinking-budget", type=int, default=None, metavar="N",
                   help="the most tokens a reply may think before its answer (default: no limit)")
    add_rpc_argument(p)
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Load the engine (in its own process), serve until interrupted; errors are ``EngineError`` (one line, exit 2)."""
    from engine import EngineConfig, EngineError, GenerationParams
    from engine.chat import builtin
    from engine.core.mode import Mode
    from engine.process import EngineProcess
    from engine.server.config import MAX_BODY_BYTES, ServerConfig
    from engine.server.local import WILDCARDS, LocalServer, ServerError

    mode = Mode(args.mode) if args.mode else Mode.AUTO if args.draft else Mode.AR
    if mode.needs_draft and not args.draft:
        raise EngineError(f"--mode {mode} needs --draft")
    gen = GenerationParams(mode=mode, k=args.k, fanout=args.fanout)
    body = MAX_BODY_BYTES if args.max_body_mb is None else int(args.max_body_mb * (1 << 20))
    if args.thinking_budget is not None and args.thinking_budget < 0:
        raise EngineError(f"--thinking-budget must be 0 or more, got {args.thinking_budget}")
    template = builtin.source(args.chat_template) if args.chat_template else None
    config = ServerConfig(host=args.host, port=args.port, api_key=args.api_key, model_id=args.model_id,
                          any_model_name=args.any_model_name,
                          generation=gen, max_queue=args.queue, cors_origins=tuple(args.cors_origin),
                          allowed_hosts=tuple(args.allow_host), max_body_bytes=body,
                          access_log=bool(getattr(args, "verbose", False)), chat_template=template,
                          thinking_budget=args.thinking_budget)
    engine_config = EngineConfig(
        args.target, args.draft if mode is not Mode.AR else None, n_ctx=args.ctx, threads=args.threads,
        parallel=args.parallel,
        prompt_cache_mb=args.cache_ram,
        draft_threads=args.draft_threads, gpu_layers=args.gpu_layers, draft_gpu_layers=args.draft_gpu_layers,
        remember_machine=True, rpc=args.rpc, tensor_split=args.tensor_split,
    )
    # the engine runs in a process of its own: a native fault there ends the requests in flight with an error,
    # and the server stays up while that process is started again
    with EngineProcess(engine_config, auto_restart=True) as engine:
        server = LocalServer(engine, config)
        try:
            server.start()
        except ServerError as exc:  # a port that is taken (or reserved): the way out is another one
            cause = exc.__cause__
            if isinstance(cause, OSError) and cause.errno in (errno.EADDRINUSE, errno.EACCES):
                raise ServerError(f"{exc}; serve on another port with --port N") from exc
            raise
        if template is None and not engine.chat_format().has_template:
            print("note: this model file has no chat template (a base model?): chat requests are refused with a "
                  "400 that says so; /v1/completions takes plain text, or restart with --chat-template NAME|FILE",
                  file=sys.stderr, flush=True)
        urls = server.urls
        more = f" (also {', '.join(urls[1:])})" if len(urls) > 1 else ""
        print(f"serving {urls[0]}{more} (model {server.model_id!r}, mode {mode}); "
              "Ctrl+C stops", file=sys.stderr, flush=True)
        if args.host in WILDCARDS and not args.api_key:
            print(f"WARNING: listening on every network address ({args.host}) with no API key: anyone who can "
                  "reach this machine can use the model. Add --api-key KEY, or serve on 127.0.0.1.",
                  file=sys.stderr, flush=True)
        try:
            server.wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
    return 0

"""The ``--rpc HOST:PORT[,…]`` option that generate, serve and bench share."""

from __future__ import annotations

import argparse

from engine.errors import ParameterError
from engine.remote.endpoints import parse_endpoints

RPC_HELP = ("run the target's layers on remote machines (llama.cpp RPC servers: 'python -m engine rpc-server' "
            "there), comma-separated HOST:PORT; the draft stays here (docs/remote.md)")


def rpc_list(text: str) -> tuple[str, ...]:
    """argparse's type for ``--rpc``: the endpoints as ``HOST:PORT`` strings (a bad one is a usage error)."""
    try:
        return tuple(str(ep) for ep in parse_endpoints(text))
    except ParameterError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def shares(text: str) -> tuple[float, ...]:
    """argparse's type for ``--tensor-split``: comma-separated numbers."""
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


def add_rpc_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rpc", type=rpc_list, default=(), metavar="HOST:PORT[,...]", help=RPC_HELP + " (default: none)")
    p.add_argument("--tensor-split", type=shares, default=(), metavar="N[,...]",
                   help="with --rpc: each remote device's share of the target's layers, in --rpc's order (default: "
                        "by their free memory)")

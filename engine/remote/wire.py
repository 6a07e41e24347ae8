"""Asking an RPC server who it is before llama.cpp connects: TCP connect, HELLO, device count and memory.

llama.cpp aborts the whole process on any RPC error at connect (and hangs in ``add_server`` while the
server serves someone else), so every endpoint is asked here first, with timeouts. The messages are
llama.cpp's own (ggml-rpc.cpp, protocol 7): a request is ``cmd (1 byte) | size (u64 LE) | payload``, a
reply ``size (u64 LE) | payload``; HELLO's payload is 24 bytes of transport capabilities (zeros: plain
TCP) and its reply is ``major, minor, patch, pad`` and the server's 24 capability bytes.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from engine.errors import EngineError

from .endpoints import Endpoint

PROTOCOL_MAJOR = 7  # RPC_PROTO_MAJOR_VERSION of the llama.cpp this engine is built on
CMD_GET_DEVICE_MEMORY, CMD_HELLO, CMD_DEVICE_COUNT = 11, 14, 15
CMD_COUNT = 19  # RPC_CMD_COUNT: a command byte at or above it is not protocol 7
# The commands the server answers (ggml-rpc.cpp's rpc_serve_client, protocol 7): ALLOC_BUFFER, GET_ALIGNMENT,
# GET_MAX_SIZE, BUFFER_GET_BASE, SET_TENSOR_HASH, GET_TENSOR, COPY_TENSOR, GET_DEVICE_MEMORY, GET_ALLOC_SIZE, HELLO,
# DEVICE_COUNT; the rest (SET_TENSOR, GRAPH_COMPUTE, GRAPH_RECOMPUTE, FREE_BUFFER, ...) get no reply.
ANSWERED = frozenset({0, 1, 2, 3, 7, 8, 9, 11, 13, 14, 15})
CAPS_SIZE = 24  # RPC_CONN_CAPS_SIZE
CONNECT_TIMEOUT_S = 5.0  # a machine on a LAN or a tunnel answers a TCP connect well within this
HELLO_TIMEOUT_S = 3.0  # a free server answers HELLO at once; one serving another client never does
MAX_DEVICES = 16  # more than any server reports; a larger count is a garbled reply


class RemoteError(EngineError):
    """A remote machine cannot be used: unreachable, busy, another protocol, or gone mid-reply."""


@dataclass(frozen=True, slots=True)
class RemoteDevice:
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What one RPC server said: its protocol version and each device's memory."""

    endpoint: Endpoint
    version: tuple[int, int, int]
    devices: tuple[RemoteDevice, ...]

    @property
    def free_bytes(self) -> int:
        return sum(d.free_bytes for d in self.devices)

    @property
    def text(self) -> str:
        """One line: ``127.0.0.1:50052: RPC 7.0.0, 1 device, 12.3 GiB free of 15.5 GiB``."""
        total = sum(d.total_bytes for d in self.devices)
        n = len(self.devices)
        return (f"{self.endpoint}: RPC {'.'.join(map(str, self.version))}, {n} device{'s' if n != 1 else ''}, "
                f"{self.free_bytes / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB")


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return bytes(data)


def _call(sock: socket.socket, cmd: int, payload: bytes, reply_size: int) -> bytes:
    sock.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)
    (size,) = struct.unpack("<Q", _recv_exact(sock, 8))
    if size != reply_size:
        raise ConnectionError(f"a reply of {size} bytes where {reply_size} were expected")
    return _recv_exact(sock, size)


def probe(endpoint: Endpoint, *, connect_timeout: float = CONNECT_TIMEOUT_S,
          hello_timeout: float = HELLO_TIMEOUT_S, devices: bool = True) -> ServerInfo:
    """Connect, say HELLO and (with ``devices``) read each device's memory; :class:`RemoteError` names the endpoint.

    The connection is closed at once: the server serves one client at a time and takes the next when it ends.
    """
    try:
        sock = socket.create_connection((endpoint.host, endpoint.port), timeout=connect_timeout)
    except TimeoutError:
        raise RemoteError(f"remote machine {endpoint} did not answer within {connect_timeout:g} s "
                          "(switched off, another network, or a firewall in the way)") from None
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise RemoteError(f"cannot reach remote machine {endpoint} ({why}): is 'python -m engine rpc-server' "
                          "running there, on that port?") from None
    with sock:
        sock.settimeout(hello_timeout)
        try:
            reply = _call(sock, CMD_HELLO, bytes(CAPS_SIZE), 4 + CAPS_SIZE)
        except TimeoutError:
            raise RemoteError(f"remote machine {endpoint} is busy: its RPC server serves one client at a time and "
                              f"another is connected (no answer to HELLO within {hello_timeout:g} s)") from None
        except OSError as exc:
            raise RemoteError(f"remote machine {endpoint} is not a llama.cpp RPC server of protocol "
                              f"{PROTOCOL_MAJOR} ({exc})") from None
        version = (reply[0], reply[1], reply[2])
        if version[0] != PROTOCOL_MAJOR:
            raise RemoteError(f"remote machine {endpoint} speaks llama.cpp RPC protocol {version[0]}.{version[1]}; "
                              f"this engine speaks {PROTOCOL_MAJOR}.x: run the same llama.cpp version on both")
        found: list[RemoteDevice] = []
        if devices:
            try:
                (count,) = struct.unpack("<I", _call(sock, CMD_DEVICE_COUNT, b"", 4))
                for i in range(min(count, MAX_DEVICES)):
                    free, total = struct.unpack("<QQ", _call(sock, CMD_GET_DEVICE_MEMORY, struct.pack("<I", i), 16))
                    found.append(RemoteDevice(free, total))
            except OSError as exc:
                raise RemoteError(f"remote machine {endpoint} stopped answering while listing its devices "
                                  f"({exc})") from None
    return ServerInfo(endpoint, version, tuple(found))

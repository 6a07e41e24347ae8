"""The MCP servers' connections, on a thread of their own with their own asyncio loop (the SDK is asyncio).

Every method may be called from any thread and returns a :class:`concurrent.futures.Future` that never raises:
each failure (a server that will not start, hangs, crashes mid-call, answers with an error, or takes too long)
becomes a one-line message in the result. A connection starts on its first use and lives until :meth:`McpHub.close`
or a change to its server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED

from app.tools.config import ServerSpec
from app.tools.results import ToolInfo, ToolOutcome, bounded_text, one_line

log = logging.getLogger(__name__)

START_TIMEOUT_S = 20.0  # starting a server and listing its tools: npx and uvx may fetch a package first
GONE_GRACE_S = 0.2  # a crashed server's stderr is flushed by the time its pipe closes, or very soon after
CLOSE_TIMEOUT_S = 5.0  # ending every connection when the app quits (the SDK waits for a stdio process to exit)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Listing:
    """A server's tools, or why they could not be listed."""

    server: str
    tools: tuple[ToolInfo, ...] = ()
    error: str | None = None


@dataclass(eq=False)
class _Session:
    """One server's connection, owned by the loop's thread."""

    spec: ServerSpec
    ready: asyncio.Future[Listing]
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    gone: asyncio.Future[str] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    client: Client | None = None
    task: asyncio.Task[None] | None = None


class McpHub:
    """The connections of the user's MCP servers; ``log_dir`` keeps each stdio server's stderr (its last line says
    why it stopped)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._loop = asyncio.new_event_loop()
        self._sessions: dict[str, _Session] = {}  # touched on the loop's thread only
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()
        self._closed = False
        self._pending: set[Future[Any]] = set()  # what was asked and has not ended: cancelled at close

    # -- any thread -------------------------------------------------------------------------------
    def list_tools(self, spec: ServerSpec) -> Future[Listing]:
        """The server's tools (the server starts if it is not running)."""
        return self._submit(self._list(spec), Listing(spec.name))  # closed: the app is quitting, no tools

    def call(self, spec: ServerSpec, tool: str, arguments: dict[str, Any], timeout_s: float) -> Future[ToolOutcome]:
        """Run one call; cancelling the future stops it."""
        return self._submit(self._call(spec, tool, arguments, timeout_s),
                            ToolOutcome("The tools are shut down.", error=True))

    def stop(self, name: str) -> None:
        """End a server's connection (it starts again on its next use)."""
        self._submit(self._stop(name), None)

    def close(self) -> None:
        """End every connection and the loop's thread (idempotent)."""
        if self._closed:
            return
        done = self._submit(self._stop_all(), None)
        self._closed = True
        with contextlib.suppress(Exception):
            done.result(CLOSE_TIMEOUT_S)
        for future in list(self._pending):
            future.cancel()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CLOSE_TIMEOUT_S)
        if not self._thread.is_alive():  # a loop still running (a server that would not stop) is left to exit
            self._loop.close()

    def _submit(self, coro: Coroutine[Any, Any, T], closed: T) -> Future[T]:
        if self._closed:
            coro.close()
            done: Future[T] = Future()
            done.set_result(closed)
            return done
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return future

    # -- the loop's thread ------------------------------------------------------------------------
    async def _session(self, spec: ServerSpec) -> _Session:
        s = self._sessions.get(spec.name)
        if s is not None and (s.gone.done() or s.spec.session_key() != spec.session_key()):
            await self._stop(spec.name)
            s = None
        if s is None:
            s = _Session(spec, asyncio.get_running_loop().create_future())
            s.task = asyncio.create_task(self._serve(s), name=f"mcp-{spec.name}")
            self._sessions[spec.name] = s
        s.spec = spec
        return s

    async def _list(self, spec: ServerSpec) -> Listing:
        s = await self._session(spec)
        return await asyncio.shield(s.ready)

    async def _call(self, spec: ServerSpec, tool: str, arguments: dict[str, Any], timeout_s: float) -> ToolOutcome:
        s = await self._session(spec)
        listing = await asyncio.shield(s.ready)
        if listing.error is not None or s.client is None:
            return ToolOutcome(listing.error or f"{spec.name} is not running.", error=True)
        mark = self._log_size(spec)
        call = asyncio.ensure_future(s.client.call_tool(tool, arguments))
        racing: set[asyncio.Future[Any]] = {call, s.gone}
        try:
            done, _ = await asyncio.wait(racing, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            call.cancel()  # stopped, timed out, or the server went: the call ends here
        if call in done and not call.cancelled() and call.exception() is None:
            result = call.result()
            text = "\n".join(_block_text(b) for b in result.content)
            return ToolOutcome(bounded_text(text or "(no output)"), error=bool(result.is_error))
        closed = call in done and not call.cancelled() and getattr(call.exception(), "code", None) == CONNECTION_CLOSED
        if s.gone.done() or closed:
            await asyncio.sleep(GONE_GRACE_S)  # the process's last words reach its log
            why = self._last_line(spec, mark) or (s.gone.result() if s.gone.done() else "the connection closed")
            await self._stop(spec.name)  # the next call starts it again
            return ToolOutcome(f"The tool server {spec.name} stopped during {tool}: {why}", error=True)
        if call in done:
            return ToolOutcome(f"{tool} on {spec.name} failed: {one_line(call.exception())}", error=True)
        return ToolOutcome(f"{tool} on {spec.name} took longer than {timeout_s:g} s and was stopped.", error=True)

    async def _serve(self, s: _Session) -> None:
        """Hold the connection open until it is closed; every way it ends is put in ``s.gone`` (and ``s.ready``)."""
        name, errlog = s.spec.name, self._errlog(s.spec)
        why = "it was stopped"
        try:
            async with contextlib.AsyncExitStack() as stack:
                if errlog is not None:
                    stack.callback(errlog.close)
                async with asyncio.timeout(START_TIMEOUT_S):
                    client = Client(await self._transport(s.spec, stack, errlog))
                    await stack.enter_async_context(client)
                    listed = await client.list_tools()
                s.client = client
                tools = tuple(ToolInfo(name, t.name, t.description or "", dict(t.input_schema or {}))
                              for t in listed.tools)
                s.ready.set_result(Listing(name, tools))
                await s.closing.wait()
        except TimeoutError:
            why = f"it did not answer within {START_TIMEOUT_S:g} s"
        except asyncio.CancelledError:
            why = "it was stopped"
        except BaseException as exc:  # the SDK's transports raise what their process or network gives them
            why = self._last_line(s.spec) or one_line(exc)
            log.info("the tool server %s ended: %r", name, exc)
        if not s.ready.done():
            s.ready.set_result(Listing(name, error=f"The tool server {name} could not start: {why}."))
        if not s.gone.done():
            s.gone.set_result(self._last_line(s.spec) or why)

    async def _transport(self, spec: ServerSpec, stack: contextlib.AsyncExitStack, errlog: TextIO | None) -> Any:
        if spec.url:
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=dict(spec.headers)))
            return streamable_http_client(spec.url, http_client=http)
        params = StdioServerParameters(command=spec.command, args=list(spec.args), env=dict(spec.env) or None)
        return stdio_client(params, errlog=errlog or sys.stderr)

    async def _stop(self, name: str) -> None:
        s = self._sessions.pop(name, None)
        if s is None or s.task is None:
            return
        s.closing.set()
        try:
            await asyncio.wait_for(s.task, CLOSE_TIMEOUT_S)
        except (TimeoutError, asyncio.CancelledError):
            log.warning("the tool server %s did not stop in time", name)

    async def _stop_all(self) -> None:
        await asyncio.gather(*(self._stop(n) for n in list(self._sessions)), return_exceptions=True)

    # -- stderr -----------------------------------------------------------------------------------
    def _log_path(self, spec: ServerSpec) -> Path:
        return self.log_dir / f"{''.join(c if c.isalnum() else '_' for c in spec.name)}.log"

    def _errlog(self, spec: ServerSpec) -> TextIO | None:
        if spec.url:
            return None
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            return open(self._log_path(spec), "w", encoding="utf-8")  # closed by the connection
        except OSError:
            return None

    def _log_size(self, spec: ServerSpec) -> int:
        try:
            return self._log_path(spec).stat().st_size
        except OSError:
            return 0

    def _last_line(self, spec: ServerSpec, since: int = 0) -> str:
        """The server's last line on stderr after byte ``since`` ("" where there is none)."""
        if spec.url:
            return ""
        try:
            with open(self._log_path(spec), "rb") as f:
                f.seek(since)
                lines = f.read().decode("utf-8", errors="replace").strip().splitlines()
        except OSError:
            return ""
        return one_line(RuntimeError(lines[-1])) if lines else ""


def _block_text(block: Any) -> str:
    """A result's content block as text: text as it is, anything else named by its kind."""
    text = getattr(block, "text", None)
    return text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]"

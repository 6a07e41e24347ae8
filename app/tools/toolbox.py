"""ToolBox: the user's tool servers as the chat uses them: the enabled tools offered to the model, each call run
on its server, the "always allow" list; the UI's handle on the :class:`~app.tools.hub.McpHub` thread.

It lives on the UI thread; its signals are emitted from the hub's and the engine worker's threads, so whatever
connects to them runs queued on the UI thread.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import CancelledError, Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.tools import config, secrets
from app.tools.config import ServerSpec
from app.tools.hub import START_TIMEOUT_S, Listing, McpHub
from app.tools.results import ToolInfo, ToolOutcome
from engine import user_data_dir

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 60.0  # one call: a search or a build may take a while; past this it is stopped
LIST_SLACK_S = 5.0  # beyond the hub's own start timeout, for the hop between threads
STOPPED = "The call was stopped."


class ToolBox(QObject):
    """The tool servers of the app (``path``: their mcp.json; None: the user data folder's).

    Signals:
        problem(str): a server could not start or list its tools (one line for the chat).
        listed(Listing): a server's tools were listed (for Settings).
        call_finished(str, ToolOutcome): a call ended (its id, its result or why it failed).
    """

    problem = Signal(str)
    listed = Signal(object)
    call_finished = Signal(str, object)

    def __init__(self, path: Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.path = path
        self._lock = threading.Lock()
        self._specs: tuple[ServerSpec, ...] = tuple(config.load(path))
        self._routes: dict[str, ServerSpec] = {}  # a tool's name -> its server, from the last listing
        self._tools: dict[str, tuple[ToolInfo, ...]] = {}  # each server's last listing
        self._running: dict[str, Future[ToolOutcome]] = {}
        self.hub = McpHub(user_data_dir() / "mcp-logs")
        self.call_timeout_s = CALL_TIMEOUT_S

    # -- the servers ------------------------------------------------------------------------------
    @property
    def specs(self) -> tuple[ServerSpec, ...]:
        with self._lock:
            return self._specs

    def set_specs(self, specs: Sequence[ServerSpec]) -> None:
        """Replace the servers and save them; a removed or changed server's connection ends, and the header
        values of one no longer over HTTP under its name (removed, renamed) leave the secret store."""
        old = {s.name: s for s in self.specs}
        with self._lock:
            self._specs = tuple(specs)
        config.save(list(specs), self.path)
        for name, spec in old.items():
            now = next((s for s in specs if s.name == name), None)
            if now is None or now.session_key() != spec.session_key() or not now.enabled:
                self.hub.stop(name)
            if spec.headers and (now is None or not now.url):
                secrets.set_headers(name, {})

    def tools_of(self, server: str) -> tuple[ToolInfo, ...]:
        """A server's tools as last listed (none before its first listing)."""
        with self._lock:
            return self._tools.get(server, ())

    def refresh(self, spec: ServerSpec) -> None:
        """List a server's tools (the answer comes as ``listed``; starts it if needed)."""
        self.hub.list_tools(spec).add_done_callback(self._on_listed)

    def _on_listed(self, future: Future[Listing]) -> None:
        if future.cancelled():
            return
        listing = future.result()
        if listing.error is None:
            with self._lock:
                self._tools[listing.server] = listing.tools
        self.listed.emit(listing)

    # -- the chat (any thread) --------------------------------------------------------------------
    def enabled(self) -> bool:
        return any(s.enabled for s in self.specs)

    def offered(self) -> list[dict[str, Any]]:
        """The enabled tools of the enabled servers, in OpenAI's form; blocks while servers start (never on the UI
        thread). A server that fails is told through ``problem`` and left out; a name two servers share goes to
        the first."""
        specs = [s for s in self.specs if s.enabled]
        futures = [(s, self.hub.list_tools(s)) for s in specs]
        routes: dict[str, ServerSpec] = {}
        out: list[dict[str, Any]] = []
        for spec, future in futures:
            try:
                listing = future.result(START_TIMEOUT_S + LIST_SLACK_S)
            except CancelledError:  # the app is closing
                continue
            except TimeoutError:
                listing = Listing(spec.name, error=f"The tool server {spec.name} did not start in time.")
            if listing.error is not None:
                self.problem.emit(listing.error)
                continue
            with self._lock:
                self._tools[spec.name] = listing.tools
            for tool in listing.tools:
                if tool.name in spec.disabled_tools or tool.name in routes:
                    continue
                routes[tool.name] = spec
                out.append(tool.openai())
        with self._lock:
            self._routes = routes
        return out

    def server_of(self, tool: str) -> ServerSpec | None:
        with self._lock:
            return self._routes.get(tool)

    # -- the UI thread ----------------------------------------------------------------------------
    def always_allowed(self, tool: str) -> bool:
        spec = self.server_of(tool)
        return spec is not None and tool in spec.always_allow

    def allow_always(self, tool: str) -> None:
        """Run ``tool`` without asking from now on (revocable in Settings > Tools)."""
        spec = self.server_of(tool)
        if spec is None:
            return
        now = replace(spec, always_allow=spec.always_allow | {tool})
        self.set_specs([now if s.name == spec.name else s for s in self.specs])
        with self._lock:
            self._routes = {name: now if s.name == spec.name else s for name, s in self._routes.items()}

    def run(self, call_id: str, tool: str, arguments: str) -> None:
        """Run a call; its result comes as ``call_finished``."""
        spec = self.server_of(tool)
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            args = None
        if spec is None or not isinstance(args, dict):
            why = f"No enabled tool is named {tool}." if spec is None else "The call's arguments are not a JSON object."
            self.call_finished.emit(call_id, ToolOutcome(why, error=True))
            return
        future = self.hub.call(spec, tool, args, self.call_timeout_s)
        self._running[call_id] = future
        future.add_done_callback(lambda f: self._on_done(call_id, f))

    def _on_done(self, call_id: str, future: Future[ToolOutcome]) -> None:
        self._running.pop(call_id, None)
        self.call_finished.emit(call_id, ToolOutcome(STOPPED, error=True) if future.cancelled() else future.result())

    def stop_calls(self) -> bool:
        """Stop every running call (each ends with :data:`STOPPED`); whether one was running."""
        running = list(self._running.values())
        for future in running:
            future.cancel()
        return bool(running)

    def running(self) -> bool:
        return bool(self._running)

    def close(self) -> None:
        """Stop the calls and every server (the app is closing)."""
        self.stop_calls()
        self.hub.close()

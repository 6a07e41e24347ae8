"""The endpoints' shared logic around one engine and its gate (the :class:`Service` that every endpoint module
is handed), below the endpoints and the app that registers them."""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from engine import GenerationParams, ParameterError, SamplingParams
from engine.chat.format import ChatFormat
from engine.core.mode import Mode
from engine.process import EngineStopped

from .config import ServerConfig
from .errors import APIError
from .gate import Gate, QueueFull
from .health import check_engine
from .job import Job, Outcome, ServedEngine, engine_failure, longest_piece
from .schemas import ChatCompletionRequest, CompletionRequest


async def client_gone(request: Request) -> None:
    """Return when the client disconnects (the body has been read, so only a disconnect can arrive)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class Service:
    """The endpoints' logic around one engine and its gate."""

    def __init__(self, engine: ServedEngine, config: ServerConfig, gate: Gate) -> None:
        self.engine = engine
        self.config = config
        self.gate = gate
        self.model_id = config.model_id or Path(engine.config.target_path).stem
        self.created = int(time.time())
        self.jobs: dict[str, Job] = {}  # the generation running (and, while it winds down, the one before)
        self.closing = False  # set while the server stops: nothing new starts
        self._longest_piece = 0  # bytes of the vocabulary's longest token, looked up on the first long prompt
        self._chat_format: ChatFormat | None = None

    def model_card(self) -> dict[str, Any]:
        draft = self.engine.config.draft_path
        return {"id": self.model_id, "object": "model", "created": self.created, "owned_by": "ssd-chat",
                "draft": Path(draft).stem if draft else None, "context_length": self.engine.n_ctx,
                "modes": list(Mode.runnable(bool(draft)))}

    async def chat_format(self) -> ChatFormat:
        """The served model's chat format (looked up once: the model and the template do not change)."""
        if self._chat_format is None:
            self._chat_format = await self.ask(self.engine.chat_format, self.config.chat_template)
        return self._chat_format

    def check_engine(self) -> None:
        """503 while the engine process is being started again after it stopped (:func:`.health.check_engine`)."""
        check_engine(self.engine, self.config.retry_after_s)

    async def ask(self, work: Any, *args: Any) -> Any:
        """Ask the engine (tokenize...) on a thread; 503 if its process is gone meanwhile."""
        self.check_engine()
        try:
            return await run_in_threadpool(work, *args)
        except EngineStopped as exc:
            raise engine_failure(exc) from exc

    def check_model(self, name: str) -> None:
        if name != self.model_id and not self.config.any_model_name:
            raise APIError(404, f"the model {name!r} does not exist; this server has {self.model_id!r}",
                           param="model", code="model_not_found")

    async def check_size(self, texts: list[str], field: str) -> None:
        """Refuse, before tokenizing it, a prompt whose text alone needs more tokens than the context holds."""
        size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
        n_ctx = self.engine.n_ctx
        if size < n_ctx:  # a token covers at least one byte: nothing to learn without tokenizing
            return
        if not self._longest_piece:
            self._longest_piece = await self.ask(longest_piece, self.engine)
        least = -(-size // self._longest_piece)  # no token covers more bytes than the longest one
        if least + 1 >= n_ctx:
            raise APIError(400, f"the prompt has at least {least:,} tokens ({size:,} bytes) but the context holds "
                           f"only {n_ctx}", param=field, code="context_length_exceeded")

    def params(self, body: ChatCompletionRequest | CompletionRequest, n_prompt: int, prompt_field: str,
               extras: dict[str, Any]) -> GenerationParams:
        n_ctx = self.engine.n_ctx
        if n_prompt + 1 >= n_ctx:
            raise APIError(400, f"the prompt has {n_prompt} tokens but the context holds only {n_ctx}",
                           param=prompt_field, code="context_length_exceeded")
        limit = body.token_limit[1]
        room = n_ctx - n_prompt  # a larger max_tokens is capped at the room left, as local servers do
        limit = min(limit, room) if limit is not None else None
        base = self.config.generation
        mode = Mode(body.mode or base.mode)
        if mode.needs_draft and not self.engine.config.draft_path:
            if body.mode is not None:
                raise APIError(400, f"mode {mode!r} needs a draft model and this server has none", param="mode")
            mode = Mode.AR
        seed = body.seed if body.seed is not None else secrets.randbelow(1 << 31)
        try:
            sampling = SamplingParams(temperature=body.temperature, top_k=body.top_k, top_p=body.top_p,
                                      min_p=body.min_p, seed=seed, **extras)
            return replace(base, mode=mode, max_tokens=limit or room, sampling=sampling)
        except ParameterError as exc:
            raise APIError(400, str(exc)) from exc

    async def wait_turn(self, request: Request) -> bool:
        """Wait for the engine; False if the client left meanwhile. Raises 429 when the line is full."""
        task = asyncio.ensure_future(self.gate.acquire())
        gone = asyncio.ensure_future(client_gone(request))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                task.result()
                return True
            task.cancel()
            await asyncio.wait({task})
            if not task.cancelled() and task.exception() is None:  # it got the engine just then
                self.gate.release()
            return False
        except QueueFull:
            running = "one generation is" if self.gate.places == 1 else f"{self.gate.places} generations are"
            raise APIError(429, f"the server is busy: {running} running and {self.gate.max_queue} "
                           "requests are waiting; retry later", code="queue_full",
                           headers={"Retry-After": str(self.config.retry_after_s)}) from None
        finally:
            task.cancel()  # no-op once done
            gone.cancel()

    def failure(self, out: Outcome) -> APIError:
        """The error for a generation that failed, or that the server cut short because it is stopping."""
        if out.error is not None:
            return engine_failure(out.error)
        return APIError(503, "the server stopped before the reply was finished: it was cut short",
                        code="server_stopping")

    def cancel_all(self) -> None:
        """Stop every generation and start no new one (the server is stopping)."""
        self.closing = True
        for job in list(self.jobs.values()):
            job.cancel()

"""A request's choices on the engine: ``n`` generations one after another under one hold of the gate, whole or
streamed, each with its own seed (choice i samples with the request's seed + i, mod 2**32: choice 0 is the reply
n=1 gives), and with ``logprobs`` the figures of each token (:mod:`.logprobs`)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from engine import GenerationParams, GenerationStats
from engine.chat.budget import ThinkingBudget
from engine.chat.family import CONTENT, THINKING, ToolCall
from engine.core.gumbel import fingerprint
from engine.errors import ModelFileChangedError
from engine.speculative.logprobs import Figures

from . import replies
from .chatreply import ChatReply, delta_calls, finish_reason, joined, message_calls, piece_chunk
from .config import FinishedRequest, RunningRequest
from .errors import APIError
from .job import Job, MiddleEnd, Outcome
from .logprobs import Recorder, TappedEngine, chat_logprobs, text_logprobs
from .schemas import ChatCompletionRequest, CompletionRequest
from .service import Service, client_gone
from .structured import ChatPlan

SEED_SPAN = 1 << 32  # a seed's range (0 to 2**32 - 1): choice i's seed wraps within it
Head = tuple[str, str, int, str, str]  # kind, id, created, model, fingerprint


class Run:
    """The choices of one request; the gate (held when this is made) is released once: after the last choice, or
    when one fails, is cancelled, or the reply stops asking for more (:meth:`stop`)."""

    def __init__(self, service: Service, kind: str, body: ChatCompletionRequest | CompletionRequest,
                 prompt: list[int], params: GenerationParams, plan: ChatPlan | None,
                 middle: MiddleEnd | None) -> None:
        self.service, self.kind, self.body, self.prompt, self.params = service, kind, body, prompt, params
        self.plan, self.middle = plan, middle
        self.rid = ("chatcmpl-" if kind == replies.CHAT else "cmpl-") + uuid.uuid4().hex[:24]
        self.n = body.n
        self.job: Job | None = None
        self.tap: TappedEngine | None = None
        self.outcomes: list[Outcome] = []  # each choice's, once it has ended
        self.recorders: list[Recorder] = []  # each choice's text as read, where the request has stop strings
        self.released = self.stopped = self.running = False
        self._offset = 0  # completions' text_offset: characters of the choice's tokens reported so far
        self._loop = asyncio.get_running_loop()

    def start(self, i: int) -> Job:
        """Start choice ``i`` (the engine is free: the one before has ended)."""
        svc = self.service
        params = replace(self.params, sampling=replace(self.params.sampling,
                                                       seed=(self.params.sampling.seed + i) % SEED_SPAN))
        last = i == self.n - 1

        def on_end(out: Outcome) -> None:  # worker thread, once the engine is free
            st = out.stats
            finish = "error" if out.error else "cancelled" if out.cancelled else out.finish_reason
            svc.gate.finished(FinishedRequest(
                self.rid, self.kind, len(self.prompt), st.new_tokens if st else 0, finish, st.seconds if st else 0.0,
                st.tokens_per_second if st else 0.0, params.mode))
            try:
                self._loop.call_soon_threadsafe(self._ended, out, last)
            except RuntimeError:  # the server's loop has closed
                pass

        try:
            plan = self.plan
            budget = None if plan is None else ThinkingBudget(plan.family, plan.section, plan.thinking_budget)
            top = self.body.logprob_top
            self.tap = TappedEngine(svc.engine, top) if top is not None else None
            self._offset = 0
            engine = self.tap.served() if self.tap is not None else svc.engine
            if self.body.stop_strings:
                self.recorders.append(Recorder(self.tap if self.tap is not None else svc.engine))
                engine = self.recorders[-1].served()
            job = Job(engine, self.prompt, params, self.body.stop_strings,
                      lambda n: svc.gate.progressed(self.rid, n), on_end, budget, self.middle)
            svc.gate.started(RunningRequest(self.rid, self.kind, self.body.stream, len(self.prompt), 0, time.time(),
                                           params.mode))
            job.start()
        except BaseException:
            self.release()
            raise
        self.running = True
        self.job = svc.jobs[self.rid] = job
        return job

    def _ended(self, out: Outcome, last: bool) -> None:
        """On the loop, once a choice's generation has freed the engine."""
        self.running = False
        self.outcomes.append(out)
        if self.service.jobs.get(self.rid) is self.job:
            del self.service.jobs[self.rid]
        if last or out.error is not None or out.cancelled or self.stopped or self.service.closing:
            self.release()

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.service.gate.release()

    def stop(self) -> None:
        """No more choices: the one running stops within a round, and the gate goes once it has ended."""
        self.stopped = True
        if self.job is not None:
            self.job.cancel()
        if not self.running:
            self.release()

    def stop_hit(self, i: int) -> str | None:
        """The stop string that ended choice ``i`` (None: another end, or no stop strings)."""
        return self.recorders[i].stop_hit(self.body.stop_strings) if i < len(self.recorders) else None

    def logprobs(self) -> dict[str, Any] | None:
        """The figures of the tokens since the last call, in the endpoint's shape (None without logprobs)."""
        if self.tap is None:
            return None
        skip = self.middle.tokens if self.middle is not None else frozenset()
        figures: list[Figures | None] = [f for f in self.tap.take() if f is not None and f[0] not in skip]
        known = self.tap.pieces(figures)
        if self.kind == replies.CHAT:
            return chat_logprobs(known, figures)
        out = text_logprobs(known, figures, self._offset)
        self._offset += sum(len(t) for t in out["tokens"])
        return out

    def choice(self, i: int, text: str, out: Outcome) -> dict[str, Any]:
        """A whole choice: a chat reply's thinking and tool calls leave its text."""
        found: list[ToolCall] = []
        reasoning = ""
        if self.plan is not None:
            reply = ChatReply(self.plan)
            pieces = reply.feed(text)
            rest, found = reply.finish()
            text, reasoning = joined([*pieces, *rest], CONTENT), joined([*pieces, *rest], THINKING)
            if found:
                text = text.strip()
        legacy = self.plan is not None and self.plan.legacy
        return replies.choice(self.kind, i, text, finish_reason(found, legacy, out.finish_reason),
                              message_calls(found, legacy), reasoning.strip(), self.logprobs())


async def whole(run: Run, request: Request, head: Head) -> Response:
    svc = run.service
    gone = asyncio.ensure_future(client_gone(request))
    made: list[dict[str, Any]] = []
    stats: list[GenerationStats | None] = []
    thinking = 0
    try:
        for i in range(run.n):
            job = run.job if i == 0 else run.start(i)
            assert job is not None
            task = asyncio.ensure_future(_collect(job))
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():  # the client left: stop the generation, then let it wind down
                job.cancel()
            text = await task
            out = job.outcome
            if out.error is not None or (out.cancelled and svc.closing):
                raise svc.failure(out)
            made.append(run.choice(i, text, out))
            stats.append(out.stats)
            thinking += out.reasoning_tokens
            if run.released:
                break
    finally:
        gone.cancel()
        run.stop()
    return JSONResponse(replies.whole(*head, made, len(run.prompt), stats, thinking))


async def _collect(job: Job) -> str:
    return "".join([piece async for piece in job.pieces()])


async def stream(run: Run, head: Head) -> AsyncIterator[str]:
    svc, plan, body = run.service, run.plan, run.body
    stats: list[GenerationStats | None] = []
    thinking = 0
    try:
        for i in range(run.n):
            if i and run.released:
                break
            job = run.job if i == 0 else run.start(i)
            assert job is not None
            reply = ChatReply(plan) if plan is not None else None
            if head[0] == replies.CHAT:
                yield replies.sse(replies.chunk(*head, role=True, text="", index=i))
            cut = False  # the server stops: text made but not yet sent is not sent, the reply is cut
            async for piece in job.pieces():
                if svc.closing:
                    cut = True
                    break
                if reply is None:
                    yield replies.sse(replies.chunk(*head, text=piece, index=i, logprobs=run.logprobs()))
                    continue
                for part in reply.feed(piece):
                    yield replies.sse(piece_chunk(head, part, i, run.logprobs()))
            out = job.outcome
            if out.error is not None or cut or (out.cancelled and svc.closing):
                svc.gate.count_failure()
                yield replies.sse(svc.failure(out).body())
                yield replies.sse("[DONE]")
                return
            rest, found = reply.finish() if reply is not None else ([], [])
            legacy = plan is not None and plan.legacy
            for part in rest:
                yield replies.sse(piece_chunk(head, part, i, run.logprobs()))
            if found:
                yield replies.sse(replies.chunk(*head, calls=delta_calls(found, legacy), index=i))
            yield replies.sse(replies.chunk(*head, finish=finish_reason(found, legacy, out.finish_reason),
                                            stats=out.stats, index=i, logprobs=run.logprobs()))
            stats.append(out.stats)
            thinking += out.reasoning_tokens
        if body.include_usage:
            yield replies.sse(replies.usage_chunk(*head, len(run.prompt), stats, thinking))
        yield replies.sse("[DONE]")
    finally:  # also when the client has gone: stop the generation within one round
        run.stop()


async def serve(service: Service, request: Request, kind: str, body: ChatCompletionRequest | CompletionRequest,
                prompt: list[int], prompt_field: str, extras: dict[str, Any], plan: ChatPlan | None = None,
                middle: MiddleEnd | None = None) -> Response:
    """Run a request's choices once the engine is free: streamed, or whole when the last has ended."""
    params = service.params(body, len(prompt), prompt_field, extras)
    if not await service.wait_turn(request):
        return APIError(400, "the client disconnected", code="client_disconnected").response()
    if service.closing:
        service.gate.release()
        raise APIError(503, "the server is stopping", code="server_stopping")
    try:
        service.check_engine()
        service.engine.files.check()  # a file cut short under the engine would end the process on the first read
    except ModelFileChangedError as exc:
        service.gate.release()
        raise APIError(503, str(exc), code="model_file_changed") from exc
    except APIError:
        service.gate.release()
        raise
    run = Run(service, kind, body, prompt, params, plan, middle)
    request.state.run = run  # what an endpoint that re-tells the reply (/v1/messages) reads besides it
    run.start(0)  # the gate goes back if it cannot start
    files = service.engine.files.stamps  # with the build and scheme: whether a seed can repeat its reply
    head = (kind, run.rid, int(time.time()), service.model_id, fingerprint(files, params.sampling.scheme))
    if body.stream:
        # the background task also runs when the client leaves before the stream's first byte
        return StreamingResponse(stream(run, head), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                                 background=BackgroundTask(run.stop))
    return await whole(run, request, head)

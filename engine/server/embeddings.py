"""``POST /v1/embeddings``: one pooled vector per input from the target model (:mod:`engine.core.embeddings`).

Inputs are a string, a list of strings, a list of token ids or a list of them, as OpenAI takes them; each is
checked (not empty, within the token limit, ids in the vocabulary) before the engine is asked. The vectors are
made while the request holds the engine, as a generation does; ``encoding_format`` ``base64`` (what the openai
client asks for) is the float32 little-endian bytes of each vector.
"""

from __future__ import annotations

import base64
import threading
from typing import Any, Literal

import numpy as np
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, field_validator
from starlette.concurrency import run_in_threadpool

from engine import Engine, EngineError
from engine.core.embeddings import MAX_INPUTS, MAX_TOKENS, TASK, task

from .errors import APIError, parse_body
from .job import engine_failure
from .service import Service


class EmbeddingsRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    input: Any

    @field_validator("input")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        def ids(v: Any) -> bool:
            return isinstance(v, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in v)

        if isinstance(value, str) or ids(value):
            return value
        if isinstance(value, list) and (all(isinstance(v, str) for v in value) or all(ids(v) for v in value)):
            return value
        raise ValueError("input must be a string, a list of strings, a list of token ids or a list of token-id lists")
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None  # an end-user id for OpenAI's abuse monitoring; changes nothing


def _bad(message: str, param: str | None = None) -> APIError:
    """A 400 whose param is the field the message opens with."""
    return APIError(400, message, param=param or message.partition(":")[0], code="invalid_value")


async def _inputs(service: Service, body: EmbeddingsRequest) -> list[list[int]]:
    """Each input's tokens; a 400 naming the first one that cannot be embedded."""
    raw: list[Any] = [body.input] if isinstance(body.input, str) else list(body.input)
    if not raw:
        raise _bad("input: an empty list; give at least one string or token list")
    if raw and all(isinstance(t, int) for t in raw):
        raw = [raw]  # one input given as its token ids
    if len(raw) > MAX_INPUTS:
        raise _bad(f"input: at most {MAX_INPUTS} inputs in one request, got {len(raw)}")
    n_vocab = service.engine.n_vocab
    out: list[list[int]] = []
    for i, item in enumerate(raw):
        where = "input" if len(raw) == 1 else f"input[{i}]"
        if isinstance(item, str):
            if not item:
                raise _bad(f"{where}: an empty string has no embedding")
            await service.check_size([item], where)
            tokens = list(await service.ask(service.engine.tokenize, item))
        else:
            tokens = list(item)
            bad = [t for t in tokens if not 0 <= t < n_vocab]
            if bad:
                raise _bad(f"{where}: token id {bad[0]} is not in the model's vocabulary (0 to {n_vocab - 1})")
        if not tokens:
            raise _bad(f"{where}: has no tokens")
        if len(tokens) > MAX_TOKENS:
            raise _bad(f"{where}: {len(tokens)} tokens; an input may have at most {MAX_TOKENS}")
        out.append(tokens)
    return out


def _vectors(service: Service, inputs: list[list[int]]) -> list[list[float]]:
    """On a worker thread, while the request holds the engine."""
    engine, stop = service.engine, threading.Event()
    if isinstance(engine, Engine):
        return task(engine, inputs, stop, lambda _: None)
    return list(engine.run_task(TASK, (inputs,), stop, lambda _: None))


async def create(service: Service, request: Request, raw: bytes) -> Response:
    body = parse_body(raw, EmbeddingsRequest)
    service.check_model(body.model)
    inputs = await _inputs(service, body)
    if not await service.wait_turn(request):
        return APIError(400, "the client disconnected", code="client_disconnected").response()
    try:
        if service.closing:
            raise APIError(503, "the server is stopping", code="server_stopping")
        service.check_engine()
        vectors = await run_in_threadpool(_vectors, service, inputs)
    except EngineError as exc:  # the engine process stopped, or llama.cpp refused the context
        raise engine_failure(exc) from exc
    except ValueError as exc:
        raise _bad(str(exc), "input") from exc
    finally:
        service.gate.release()
    if body.dimensions is not None and vectors and body.dimensions != len(vectors[0]):
        raise _bad(f"dimensions: this model's embeddings have {len(vectors[0])} dimensions, got {body.dimensions}")
    data = [{"object": "embedding", "index": i,
             "embedding": base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode()
             if body.encoding_format == "base64" else v} for i, v in enumerate(vectors)]
    n = sum(len(t) for t in inputs)
    return JSONResponse({"object": "list", "data": data, "model": service.model_id,
                         "usage": {"prompt_tokens": n, "total_tokens": n}})

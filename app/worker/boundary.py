"""The worker boundary: the one place where a worker thread turns any exception into a readable message."""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType

from engine import EngineError

log = logging.getLogger(__name__)


class WorkerBoundary:
    """A context manager that reports an exception through ``fail`` instead of letting it reach Qt.

    An :class:`~engine.EngineError` is expected (a bad file, a full context…) and is reported as
    ``"<what>: <message>"``; anything else is a bug, so it is logged with its traceback and
    reported with its type. After the block, :attr:`failed` says whether it was reported::

        with WorkerBoundary("Could not load the pair", self.failed.emit) as job:
            engine = Engine(config)
        if job.failed:
            return
    """

    def __init__(self, what: str, fail: Callable[[str], object]) -> None:
        self.what = what
        self.fail = fail
        self.failed = False

    def __enter__(self) -> WorkerBoundary:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False
        if isinstance(exc, EngineError):
            message = f"{self.what}: {exc}"
            log.warning("%s", message)
        else:
            log.error("%s", self.what, exc_info=(type(exc), exc, tb))
            message = f"{self.what}: {type(exc).__name__}: {exc}"
        self.failed = True
        self.fail(message)
        return True

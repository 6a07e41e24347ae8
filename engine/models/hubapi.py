"""The Hub's API through huggingface_hub's ``HfApi``: one client per call, errors in plain words, rate limits.

``HfApi`` is built on every call with the endpoint and token read then (``HF_ENDPOINT``, ``HF_TOKEN``), as the
downloads do. huggingface_hub retries an HTTP 429 up to five times on its own; here a rate limit is waited out
once, for the Hub's ``Retry-After``, and a second 429 ends the call with a message. A response hook on
huggingface_hub's shared HTTP session turns a 429 into :class:`_Limited` while, and only while, a :func:`call` of
this thread runs, so the library's own retry loop never sees it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import httpx2
from huggingface_hub import HfApi, get_session
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from .hub_http import AuthError, DownloadError, NotFoundError, check_online, endpoint, transport_error

T = TypeVar("T")

RETRY_AFTER_MAX_S = 30.0  # a longer wait is the user's to choose: the message says how long
RETRY_AFTER_DEFAULT_S = 1.0  # a 429 without Retry-After: one short pause before the one retry
_guard = threading.local()


class RateLimitError(DownloadError):
    """The Hub answered HTTP 429 again after its Retry-After was waited out once."""


class BadAnswerError(DownloadError):
    """The Hub answered, but not with its API's JSON (an HTML page, cut-off or non-UTF-8 text, another shape)."""


# What huggingface_hub raises while it reads an answer of the wrong shape: JSON or UTF-8 that does not decode
# (ValueError), an object or a number where it iterates a list or indexes a mapping, a field that is missing.
MALFORMED = (ValueError, TypeError, KeyError, AttributeError, IndexError)


class _Limited(Exception):
    def __init__(self, retry_after: float | None) -> None:
        super().__init__("HTTP 429")
        self.retry_after = retry_after


def _retry_after(response: httpx2.Response) -> float | None:
    value = response.headers.get("Retry-After", "").strip()
    return float(value) if value.isdigit() else None


def _hook(response: httpx2.Response) -> None:
    if getattr(_guard, "on", False) and response.status_code == 429:
        raise _Limited(_retry_after(response))


def _install_hook() -> None:
    # The HTTP session is rebuilt after connection errors, so the hook is checked for on every call.
    hooks = get_session().event_hooks["response"]
    if _hook not in hooks:
        hooks.append(_hook)


def api() -> HfApi:
    """An ``HfApi`` on the endpoint and token in force now."""
    return HfApi(endpoint=endpoint(), token=os.environ.get("HF_TOKEN") or None)


def api_error(exc: HfHubHTTPError, repo: str | None) -> DownloadError:
    """A 401/403/404 (or other) answer of the Hub's API in words that say what to do."""
    status = exc.response.status_code if exc.response is not None else None
    where = f"{repo} on {endpoint()}" if repo else endpoint()
    if status == 404:
        return NotFoundError(f"no repository {where} (HTTP 404); check the name, e.g. with: "
                             "python -m engine models search NAME")
    if status in (401, 403):
        return AuthError(f"access to {where} was refused (HTTP {status}): the repository is private or gated; "
                         "accept its licence on its Hub page and set HF_TOKEN to a token that can read it")
    return DownloadError(f"the Hub answered HTTP {status} for {where}")


def call(fn: Callable[[HfApi], T], repo: str | None = None, *, sleep: Callable[[float], None] = time.sleep) -> T:
    """``fn(api())`` with the rate-limit rule above and the Hub's errors as :class:`DownloadError`.

    ``fn`` must finish its requests before it returns (turn huggingface_hub's lazy listings into lists).

    The Hub's name is looked up first (:func:`check_online`): offline, the call fails at once.

    Raises:
        OfflineError, RateLimitError, NotFoundError, AuthError, BadAnswerError, DownloadError.
    """
    check_online()
    for attempt in (1, 2):
        _install_hook()
        _guard.on = True
        try:
            return fn(api())
        except _Limited as exc:
            wait = RETRY_AFTER_DEFAULT_S if exc.retry_after is None else exc.retry_after
            if attempt == 2 or wait > RETRY_AFTER_MAX_S:
                again = f"in {wait:.0f} s" if exc.retry_after is not None else "in a minute"
                raise RateLimitError(f"the Hub is limiting requests (HTTP 429); try again {again}, or set "
                                     "HF_TOKEN: signed-in requests have a higher limit") from None
        except HfHubHTTPError as exc:
            raise api_error(exc, repo) from exc
        except httpx2.HTTPError as exc:
            raise transport_error(exc) from exc
        except OfflineModeIsEnabled as exc:
            raise DownloadError("the Hub cannot be reached: HF_HUB_OFFLINE is set") from exc
        except MALFORMED as exc:
            raise BadAnswerError(f"the Hub at {endpoint()} answered something that is not its API's JSON "
                                 f"({type(exc).__name__}); check HF_ENDPOINT, or try again later") from exc
        finally:
            _guard.on = False
        sleep(wait)
    raise AssertionError("unreachable")

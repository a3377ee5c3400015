"""Every error kit raises: one hierarchy, each carrying a hint and an exit code."""

from __future__ import annotations

import errno
import http
import os
import socket
import sys
import urllib.error
from typing import Any
from urllib.parse import urlsplit

EXIT_OK = 0
EXIT_FAILED = 1  # a verification or comparison failed; an internal error (a bug)
EXIT_BAD_INPUT = 2  # a recipe, report or argument is wrong
EXIT_ENVIRONMENT = 3  # the machine cannot do it: no GPU, server never healthy, network, disk
EXIT_DIFFERENT = 4  # a re-run or comparison: DIFFERENT (NOT COMPARABLE is EXIT_FAILED)
EXIT_INCONCLUSIVE = 5  # a re-run or comparison: INCONCLUSIVE (an INVALID side, a band too wide)

HUB = "https://huggingface.co"  # huggingface_hub's endpoint when HF_ENDPOINT is not set
DEBUG_HINT = "run with KIT_DEBUG=1 for the traceback, and report it"


class KitError(Exception):
    """Base of every error kit raises on purpose.

    Library code raises these and never prints or exits; the CLI turns them into ``error: ...``
    / ``hint: ...`` lines on stderr and the exit code, and :func:`to_kit_error` turns every other
    exception that reaches it into one of them first. A raise site gives the hint that fits its
    case; one that gives none gets its class's ``default_hint``, so that no error reaches a person
    without a ``hint:`` line (tests/unit/test_error_hints.py walks the classes and the raise
    sites). The tree, with exit codes::

        KitError                                      2
        ├── BadInputError                             2  a recipe, report, argument or URL
        │   ├── RecipeError                           2
        │   └── BadURLError (ValueError)              2
        ├── EnvironmentProblem                        3  the machine, the network, a server
        │   ├── ServerError                           3
        │   ├── NetworkError (ConnectionError)        3
        │   └── ServerAnswerError (OSError)           3
        ├── VerificationFailed                        1
        └── InternalError                             1  a bug: any other exception
    """

    exit_code = EXIT_BAD_INPUT
    # the hint of an error whose raise site gives none: true of every error of the class
    default_hint = "KIT_DEBUG=1 shows where kit raised it"

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint: str = hint or self.default_hint


class BadInputError(KitError):
    """Input that kit cannot use: a file, a field, an argument."""

    exit_code = EXIT_BAD_INPUT
    default_hint = (
        "correct the file, value or option named above (a command's --help says what it takes)"
    )


class RecipeError(BadInputError):
    """A recipe with one or more problems; each is ``file: field.path: message``."""

    default_hint = (
        "schemas/recipe.schema.json describes every field and the values it takes (the README's "
        "Recipes section: extends, --set)"
    )

    def __init__(self, problems: list[str], hint: str | None = None) -> None:
        super().__init__("\n".join(problems), hint)
        self.problems = problems


class BadURLError(BadInputError, ValueError):
    """A URL that cannot be requested (no ``http://``, not a URL at all)."""

    def __init__(self, url: str, reason: str, hint: str | None = None) -> None:
        what = f"{url!r}: {reason}" if url else reason
        super().__init__(f"not a URL kit can request: {what}", hint or _url_hint(url))
        self.url = url


class EnvironmentProblem(KitError):
    """The machine cannot run this: missing engine, no GPU, port in use, server died."""

    exit_code = EXIT_ENVIRONMENT
    default_hint = (
        "the machine, not the input, stopped it; `kit preflight RECIPE` checks what a run "
        "needs of this machine before any download or build"
    )


class ServerError(EnvironmentProblem):
    """The inference server never became healthy or died; carries its log tail."""

    default_hint = "the server's log says why; KIT_DEBUG=1 shows where kit gave up on it"

    def __init__(self, message: str, log_tail: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.log_tail = log_tail


class NetworkError(EnvironmentProblem, ConnectionError):
    """A server or the hub could not be reached, or stopped answering; carries the URL."""

    default_hint = "check the network, and that the server or hub it names is up"

    def __init__(self, message: str, url: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.url = url


class ServerAnswerError(EnvironmentProblem, OSError):
    """A server or the hub answered, but not what was asked for: an error status, or a body
    that is not the expected JSON; carries the URL, the status and the start of the body."""

    def __init__(
        self, url: str, status: int, body: str = "", expected: str = "", hint: str | None = None
    ) -> None:
        self.url, self.status, self.body = url, status, _excerpt(body)
        said = (f" with {expected}" if expected else "") + (f": {self.body}" if self.body else "")
        super().__init__(f"{url} answered HTTP {_status(status)}{said}", hint or _answer_hint(url))


class VerificationFailed(KitError):
    """A verification or comparison ran and found failures."""

    exit_code = EXIT_FAILED
    default_hint = "`kit report verify REPORT` prints every check of a report and its outcome"


class InternalError(KitError):
    """An exception kit did not expect: a bug. ``detail`` is ``Type: message``."""

    exit_code = EXIT_FAILED
    default_hint = DEBUG_HINT

    def __init__(self, exc: BaseException) -> None:
        self.detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        super().__init__(f"internal error: {self.detail}", DEBUG_HINT)


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwound like Ctrl-C so that servers are torn down and partial reports kept
    (kit.serve.install_sigterm_handler): sent by a time limit (``timeout``), a service manager
    or ``kill``, not typed by a user."""


def to_kit_error(exc: BaseException) -> KitError:
    """The error the CLI reports for ``exc`` (the original is its ``__cause__``):

    - a ``KitError``: itself;
    - from httpx, httpx2 (huggingface_hub's client) or urllib: a URL without ``http(s)://`` or
      malformed (``UnsupportedProtocol``, ``InvalidURL``): ``BadURLError``, exit 2; an error
      status (``HTTPStatusError``, ``HfHubHTTPError``, urllib's ``HTTPError``):
      ``ServerAnswerError``, 3; any other (refused, timed out, cut off): ``NetworkError``, 3;
    - ``ConnectionError``, ``TimeoutError``, ``socket.gaierror``: ``NetworkError``, 3;
    - any other ``OSError`` (a full disk, a permission, a missing file): ``EnvironmentProblem``,
      3, naming the path;
    - anything else: ``InternalError``, 1, a bug.

    A hint that names a server or the hub is picked by the URL (under ``HF_ENDPOINT``: the hub).
    """
    if isinstance(exc, KitError):
        return exc
    err = _http_error(exc) or _os_error(exc) or InternalError(exc)
    err.__cause__ = exc
    return err


def _http_error(exc: BaseException) -> KitError | None:
    """httpx's and httpx2's errors (by the modules loaded: an error of one that was never
    imported cannot occur), huggingface_hub's and urllib's."""
    hub_errors = sys.modules.get("huggingface_hub.errors")
    if hub_errors is not None and isinstance(exc, hub_errors.HfHubHTTPError):
        response = exc.response
        if response is not None:
            return ServerAnswerError(
                str(response.url), response.status_code, exc.server_message or _body(response)
            )
    if isinstance(exc, urllib.error.HTTPError):
        return ServerAnswerError(exc.url, exc.code, exc.reason)
    if isinstance(exc, urllib.error.URLError):
        return NetworkError(f"cannot connect: {exc.reason}", hint=_server_hint(""))
    for lib in (sys.modules.get("httpx"), sys.modules.get("httpx2")):
        if lib is None or not isinstance(exc, lib.HTTPError | lib.InvalidURL):
            continue
        if isinstance(exc, lib.InvalidURL):
            return BadURLError("", str(exc))
        url = _request_url(exc)
        if isinstance(exc, lib.HTTPStatusError):
            return ServerAnswerError(url, exc.response.status_code, _body(exc.response))
        if isinstance(exc, lib.UnsupportedProtocol):
            return BadURLError(url, str(exc))
        if isinstance(exc, lib.ConnectError | lib.ConnectTimeout):
            return NetworkError(f"cannot connect to {url}: {_said(exc)}", url, _server_hint(url))
        if isinstance(exc, lib.TimeoutException):
            return NetworkError(f"{url}: no answer in time ({_said(exc)})", url, _slow_hint(url))
        return NetworkError(f"{url}: the request failed ({_said(exc)})", url, _slow_hint(url))
    return None


def _os_error(exc: BaseException) -> KitError | None:
    if isinstance(exc, ConnectionError | TimeoutError | socket.gaierror):
        return NetworkError(f"the network failed: {_said(exc)}", hint=_server_hint(""))
    if not isinstance(exc, OSError):
        return None
    path = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
    what = exc.strerror or _said(exc)
    message = f"{path}: {what}" if path else what
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = "free space there, or write elsewhere (-o DIR for reports, KIT_HOME for kit's cache)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "check that path's permissions, or write elsewhere (-o DIR, KIT_HOME)"
    else:
        hint = None
    return EnvironmentProblem(message, hint)


def _request_url(exc: BaseException) -> str:
    """The URL of the request an httpx error names ("" when it names none)."""
    try:
        request = getattr(exc, "request", None)
    except RuntimeError:  # httpx: an error raised without a request
        return ""
    return str(request.url) if request is not None else ""


def _status(code: int) -> str:
    """``404 Not Found``; the bare number for a code outside the standard's."""
    try:
        return f"{code} {http.HTTPStatus(code).phrase}"
    except ValueError:
        return str(code)


def _body(response: Any) -> str:
    """A response's text, "" when it was streamed and not read."""
    try:
        return str(response.text)
    except Exception:  # httpx.ResponseNotRead
        return ""


def _said(exc: BaseException) -> str:
    """What the exception says, led by its type unless it is an ``[Errno N]`` text."""
    text = str(exc)
    if not text:
        return type(exc).__name__
    return text if text.startswith("[Errno") else f"{type(exc).__name__}: {text}"


def _excerpt(body: str, limit: int = 200) -> str:
    flat = " ".join(body.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _hub() -> str:
    return (os.environ.get("HF_ENDPOINT") or HUB).rstrip("/")


def _is_hub(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    hub = _hub()
    return bool(url) and (
        url == hub
        or url.startswith(hub + "/")
        or host in ("huggingface.co", "hf.co")
        or host.endswith(".hf.co")
    )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


def _server_hint(url: str) -> str:
    if _is_hub(url):
        return (
            f"the hub ({_hub()}) is unreachable: check the network, or point HF_ENDPOINT at a "
            "mirror; or pin the revisions in the recipe (model.revision: <commit sha>)"
        )
    if not url:
        return NetworkError.default_hint
    port = urlsplit(url).port or 8000
    return f"is a server running at {_origin(url)}? `kit serve RECIPE --port {port}` starts one"


def _slow_hint(url: str) -> str:
    if _is_hub(url):
        return _server_hint(url)
    return f"the server at {_origin(url)} stopped answering: is it overloaded, or did it die?"


def _answer_hint(url: str) -> str:
    if _is_hub(url):
        return "check repo_id and revision; set HF_TOKEN for gated models"
    return f"is {_origin(url)} an OpenAI-compatible server, and is that its base URL (no /v1)?"


def _url_hint(url: str) -> str:
    if os.environ.get("HF_ENDPOINT") and _hub().strip("/") in url:
        return "HF_ENDPOINT must be an http(s) URL"
    return "give an http(s) URL, such as http://127.0.0.1:8000"

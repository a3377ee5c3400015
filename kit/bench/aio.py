"""kit's one client: streamed chat requests over asyncio, for both protocols.

The load protocol keeps many streams in flight in one thread (:func:`stream_request` per
stream); the sequential protocol (the Club-3090 runs, the prefill probe) sends one at a time
through :class:`SequentialClient`, which drives the same coroutine on a private event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from kit.bench.stream import (
    BenchAborted,
    RequestRecord,
    RequestTag,
    StreamLimits,
    StreamState,
    utc_now_ms,
)

# how a connection is opened: asyncio.open_connection, or a test's scripted streams
Opener = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
Clock = Callable[[], float]


class Connection:
    """One keep-alive HTTP/1.1 connection to the server, opened on first use and again after
    the server closes it.

    A plain HTTP/1.1 client on asyncio streams, one connection per stream in flight: no HTTP
    library between the socket and the clock, so each event's arrival time is taken when its
    bytes are read, and the client's own cost stays small next to the server's. It speaks what
    an OpenAI-compatible server answers a streamed request with: a status line, headers, then a
    body chunked (``Transfer-Encoding: chunked``), sized (``Content-Length``) or ending at
    close, holding ``data:`` lines."""

    def __init__(self, url: str, opener: Opener | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"{url}: the load client speaks plain http:// only")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.base = parts.path.rstrip("/")
        self.opener: Opener = opener or asyncio.open_connection
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        # False once a response said the connection ends with it (closed before the next
        # request; dropping the writer early would close its socket mid-body)
        self.reusable = True

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if not self.reusable:
            await self.close()
        if self.reader is None or self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await self.opener(self.host, self.port)
            self.reusable = True
        return self.reader, self.writer

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
        self.reader = self.writer = None

    async def post_stream(
        self,
        path: str,
        body: bytes,
        first_s: float,
        read_s: Callable[[], float],
        clock: Clock = time.perf_counter,
    ) -> tuple[int, Any]:
        """Send a POST; return the status and an async iterator of (arrival, data line) over
        the body. The status line may take ``first_s``; each later read ``read_s()`` (asked
        before every read: the caller's wait may change once text flows)."""
        head = (
            f"POST {self.base}{path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        reused = self.writer is not None and self.reusable
        try:
            reader, writer = await self._open()
            writer.write(head + body)
            await writer.drain()
            status_line = await _status_line(reader, first_s)
        except (asyncio.IncompleteReadError, ConnectionError):
            if not reused:
                raise
            # the server closed the idle keep-alive connection: once more, on a new one
            await self.close()
            reader, writer = await self._open()
            writer.write(head + body)
            await writer.drain()
            status_line = await _status_line(reader, first_s)
        try:
            status = int(status_line.split(b" ", 2)[1])
        except (IndexError, ValueError):
            raise BenchAborted(f"not an HTTP response: {status_line[:80]!r}") from None
        headers: dict[str, str] = {}
        while True:
            line = await asyncio.wait_for(reader.readuntil(b"\r\n"), read_s())
            if line == b"\r\n":
                break
            key, _, value = line.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        framed = "chunked" in headers.get("transfer-encoding", "").lower() or (
            "content-length" in headers
        )
        connection = headers.get("connection", "").lower()
        keep = framed and (
            connection == "keep-alive"
            or (status_line.startswith(b"HTTP/1.1") and connection != "close")
        )
        if not keep:  # a body that ends at close, or a server that closes: a new one next time
            self.reusable = False
        return status, self._lines(reader, headers, read_s, clock)

    async def _lines(
        self,
        reader: asyncio.StreamReader,
        headers: dict[str, str],
        read_s: Callable[[], float],
        clock: Clock,
    ) -> Any:
        """(arrival, the ``data:`` payloads that read brought) for each read of the socket, up
        to the body's end. One read may bring many events: they share its arrival time."""
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        left = int(headers["content-length"]) if "content-length" in headers else None
        raw = b""  # chunked framing not yet decoded
        size = -1  # bytes of the current chunk still to come (-1: its size line is next)
        pending = b""  # body bytes of an incomplete line
        ended = False
        while not ended:
            want = 65536 if left is None else min(left, 65536)
            data = await asyncio.wait_for(reader.read(want), read_s()) if want else b""
            now = clock()
            if not data:
                ended = True
            elif chunked:
                raw += data
                body, pos = [], 0
                while True:
                    if size < 0:
                        eol = raw.find(b"\r\n", pos)
                        if eol < 0:
                            break
                        size = int(raw[pos:eol].split(b";", 1)[0], 16)
                        pos = eol + 2
                        if size == 0:  # the last chunk (kit's servers send no trailers)
                            ended = True
                            break
                    if len(raw) - pos < size + 2:
                        break
                    body.append(raw[pos : pos + size])
                    pos += size + 2
                    size = -1
                raw = raw[pos:]
                data = b"".join(body)
            else:
                if left is not None:
                    left -= len(data)
                    ended = left <= 0
            pending += data
            *lines, pending = pending.split(b"\n")
            if ended and pending.strip():
                lines.append(pending)
            found = [ln.strip()[5:].strip() for ln in lines if ln.strip().startswith(b"data:")]
            rest = b" ".join(ln.strip() for ln in lines if ln.strip())
            if ended and not found and rest:
                found = [rest]  # the last of a body that is not SSE: an error's text
            if found:
                yield now, found


async def _status_line(reader: asyncio.StreamReader, first_s: float) -> bytes:
    """The response's status line. The previous body on this connection ends ``0\r\n\r\n``
    and its decoder stops at the ``0\r\n``: when the last CRLF came in a later segment it is
    still in the buffer, and is skipped here (RFC 9112 lets a client ignore empty lines before
    a response)."""
    line = await asyncio.wait_for(reader.readuntil(b"\r\n"), first_s)
    while line == b"\r\n":
        line = await asyncio.wait_for(reader.readuntil(b"\r\n"), first_s)
    return line


def _timeout_error(state: StreamState, first_s: float | None, stall_s: float) -> str:
    """What a read that timed out means: with a first-token wait longer than the stall limit
    (the prefill probe), no first chunk within it, or a silence once text flowed."""
    if first_s is not None and first_s > stall_s:
        if state.chunks == 0:
            return f"no first token within {first_s:g} s (the prefill budget)"
        if state.ttft is not None:
            return f"stream stalled (no chunk for {stall_s:g} s once tokens flowed)"
    return "stream stalled (no data within the stall timeout)"


async def stream_request(
    conn: Connection,
    body: dict[str, Any],
    tag: RequestTag,
    limits: StreamLimits,
    *,
    t0: float | None = None,
    clock: Clock = time.perf_counter,
) -> RequestRecord:
    """One streamed chat request on ``conn``, judged by :class:`~kit.bench.stream.StreamState`
    with the sequential client's rules (TTFT to the first chunk carrying text, tokens from the
    final usage chunk, errors into the record, never raised): the same
    :class:`~kit.bench.stream.RequestRecord` for both protocols.

    Until the first chunk with text, a read may wait ``limits.first_token_s`` (default
    ``stall_s``; the status line, ``deadline_s``); after it, ``stall_s`` holds between reads.
    With ``t0`` (a load point's start, on ``clock``), the record gets ``sent_s``, the send time
    after it; a sequential record has none."""
    first_s, deadline_s, stall_s = limits.first_token_s, limits.deadline_s, limits.stall_s
    started = utc_now_ms()
    error: str | None = None
    payload = json.dumps(body).encode()
    state = StreamState(clock())
    wait = first_s if first_s is not None else stall_s

    def read_s() -> float:
        return wait if state.ttft is None else stall_s

    try:
        status, lines = await conn.post_stream(
            "/v1/chat/completions",
            payload,
            first_s if first_s is not None else deadline_s,
            read_s,
            clock,
        )
        if status != 200:
            detail = b""
            async for _, batch in lines:
                detail += b"".join(batch)
            raise BenchAborted(f"HTTP {status}: {detail.decode(errors='replace')[:300]}")
        done = False
        # read to the body's end, past [DONE]: the connection is then clean for the next one
        async for now, batch in lines:
            if done:
                continue
            if now - state.t_send > deadline_s:
                raise BenchAborted(f"request exceeded {deadline_s:.0f} s")
            for data in batch:
                if state.event(data, now):
                    done = True
                    break
        if not done:
            raise BenchAborted("stream ended without [DONE]")
    except BenchAborted as exc:
        error = str(exc)
        await conn.close()
    except TimeoutError:
        error = _timeout_error(state, first_s, stall_s)
        await conn.close()
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        await conn.close()
    return state.record(
        body,
        error,
        tag,
        started=started,
        usable_fraction=limits.usable_fraction,
        sent_s=round(state.t_send - t0, 6) if t0 is not None else None,
    )


class SequentialClient:
    """The sequential protocol's client: one stream at a time on one keep-alive connection,
    :func:`stream_request` driven by a private event loop. It reads the socket as the load
    client does, so both protocols cost the host the same, and little (experiments/
    load-client.py measures it against a minimal standard-library client)."""

    def __init__(
        self, url: str, opener: Opener | None = None, clock: Clock = time.perf_counter
    ) -> None:
        self.conn = Connection(url, opener)
        self.clock = clock
        self._loop = asyncio.new_event_loop()

    def stream(
        self,
        body: dict[str, Any],
        tag: RequestTag,
        limits: StreamLimits,
    ) -> RequestRecord:
        """Send one streamed request and time it per the protocol. ``limits.first_token_s``,
        when longer than ``stall_s``, is how long the first token may take (the prefill probe's
        budget); ``stall_s`` holds once text flows."""
        first_s = max(limits.first_token_s or 0.0, limits.stall_s)
        return self._loop.run_until_complete(
            stream_request(
                self.conn,
                body,
                tag,
                replace(limits, first_token_s=first_s),
                clock=self.clock,
            )
        )

    def close(self) -> None:
        """Close the connection and the loop; a request cut short (Ctrl-C) is cancelled."""
        if self._loop.is_closed():
            return
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        with contextlib.suppress(BaseException):
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.run_until_complete(self.conn.close())
        self._loop.close()

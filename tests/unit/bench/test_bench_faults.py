"""Faults that cannot be made on demand with a real engine: an error mid-stream, a stall.

A small loopback server speaks the OpenAI streaming protocol and misbehaves on request N;
the bench must keep every earlier run and mark the result incomplete with the reason.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kit.bench import Bencher
from kit.recipe import Bench, Prompt


def make_server(fail_at: int, mode: str) -> ThreadingHTTPServer:
    state = {"n": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = b""
            if self.path == "/v1/models":
                body = json.dumps({"data": [{"id": "m", "max_model_len": 4096}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            req = json.loads(self.rfile.read(length))
            state["n"] += 1
            if state["n"] == fail_at and mode == "500":
                self.send_response(500)
                self.send_header("Content-Length", "5")
                self.end_headers()
                self.wfile.write(b"boom!")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()

            def send(obj: object) -> None:
                text = obj if isinstance(obj, str) else json.dumps(obj)
                self.wfile.write(f"data: {text}\n\n".encode())
                self.wfile.flush()

            send({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]})
            if state["n"] == fail_at and mode == "error-chunk":
                send({"error": {"message": "engine dead", "code": 500}})
                return
            if state["n"] == fail_at and mode == "stall":
                time.sleep(3)
                return
            n = req["max_tokens"]
            send({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}})
            send("[DONE]")

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    fail_at, mode = request.param
    srv = make_server(fail_at, mode)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


BENCH = Bench(
    warmups=1,
    runs=2,
    stall_timeout_s=1.0,
    prompts=[Prompt(name="a", text="x", max_tokens=8), Prompt(name="b", text="y", max_tokens=8)],
)


@pytest.mark.parametrize(
    ("server", "reason"),
    [
        ((4, "500"), "b warmup #0: HTTP 500: boom!"),
        ((3, "error-chunk"), "a measured #1: server error in stream: "),
        ((6, "stall"), "b measured #1: stream stalled (no data within the stall timeout)"),
    ],
    indirect=["server"],
)
def test_fault_keeps_runs_and_marks_incomplete(server: str, reason: str) -> None:
    result = Bencher(server, BENCH, "m").run()
    assert result.complete is False
    assert result.incomplete_reason is not None and result.incomplete_reason.startswith(reason)
    ok = [r for r in result.records if r.error is None]
    failed = [r for r in result.records if r.error is not None]
    assert len(failed) == 1 and len(ok) == len(result.records) - 1
    # every successful run before the fault is kept with its figures
    assert all(r.completion_tokens == 8 for r in ok)
    summary_a = next(p for p in result.prompts if p.prompt == "a")
    assert summary_a.measured >= 1


@pytest.mark.parametrize("server", [(99, "none")], indirect=True)
def test_clean_run_is_complete(server: str) -> None:
    result = Bencher(server, BENCH, "m").run()
    assert result.complete and result.incomplete_reason is None
    assert [(r.prompt, r.phase) for r in result.records] == [
        ("a", "warmup"),
        ("a", "measured"),
        ("a", "measured"),
        ("b", "warmup"),
        ("b", "measured"),
        ("b", "measured"),
    ]
    assert [p.usable for p in result.prompts] == [2, 2]
    assert result.spec_decode is None  # the server exports no counters

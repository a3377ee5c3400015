"""Fixtures of the bench tests: loopback servers that misbehave on demand, a paced one
(tests/pacedserver.py), and any other test's server served on a thread."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pacedserver import Paced, make_paced


@pytest.fixture
def serve() -> Iterator[Callable[[ThreadingHTTPServer], str]]:
    """``serve(server)``: the server's URL while it serves on a thread; shut down after the
    test."""
    servers: list[ThreadingHTTPServer] = []

    def start(srv: ThreadingHTTPServer) -> str:
        servers.append(srv)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for srv in servers:
        srv.shutdown()


@pytest.fixture
def paced_server(
    serve: Callable[[ThreadingHTTPServer], str],
) -> Callable[[Paced], str]:
    """``paced_server(Paced(...))``: the URL of a paced fake server, shut down after the test."""
    return lambda cfg: serve(make_paced(cfg))


def faulty_server(fail_at: int, mode: str) -> ThreadingHTTPServer:
    """An OpenAI streaming server that misbehaves on request ``fail_at`` as ``mode`` says:
    "500" (an HTTP error), "error-chunk" (an error in the stream), "stall" (3 s of silence);
    any other mode never."""
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
def server(request: pytest.FixtureRequest, serve: Callable[[ThreadingHTTPServer], str]) -> str:
    """The URL of a faulty server; parametrize it indirectly with ``(fail_at, mode)``."""
    fail_at, mode = request.param
    return serve(faulty_server(fail_at, mode))

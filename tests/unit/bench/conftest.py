"""Fixtures of the bench tests: a paced fake server (tests/pacedserver.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer

import pytest
from pacedserver import Paced, make_paced


@pytest.fixture
def paced_server() -> Iterator[Callable[[Paced], str]]:
    """``paced_server(Paced(...))``: the URL of a paced fake server, shut down after the test."""
    servers: list[ThreadingHTTPServer] = []

    def start(cfg: Paced) -> str:
        srv = make_paced(cfg)
        servers.append(srv)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for srv in servers:
        srv.shutdown()

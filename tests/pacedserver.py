"""A paced fake server: streams tokens at a fixed rate and may hold one stream, then flood it
(the ``paced_server`` fixture of tests/unit/bench/conftest.py starts it).

It stands in for what a 2-core CPU host does to vLLM (a stream held to its end, then sent at
once), which cannot be made on demand. Each request streams ``max_tokens`` tokens, one chunk
every 1 / RATE s, with running usage. The request numbered ``hold`` (1 = the first POST) sends
nothing until its tokens would all have been generated, then sends them all within FLOOD_S.
With ``metrics`` it also serves vLLM's /metrics counters for what it did: decode time as the
engine would count it (the paced time), and the API server's time to first token, the paced
one (``witness_ttft="engine"``) or the delayed one the client saw (``"client"``).
``decode_scale`` multiplies the decode time /metrics reports (a server whose counters disagree
with every stream). ``ttft_s`` holds every stream that long before its first token (two servers
that differ only in their time to first token).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RATE = 100.0  # tokens/s
FLOOD_S = 0.02


@dataclass
class Paced:
    hold: int | None = None
    metrics: bool = False
    witness_ttft: str = "engine"
    decode_scale: float = 1.0
    ttft_s: float = 0.0
    counters: dict[str, float] = field(
        default_factory=lambda: {
            "vllm:request_success_total": 0.0,
            "vllm:generation_tokens_total": 0.0,
            "vllm:request_decode_time_seconds_sum": 0.0,
            "vllm:request_decode_time_seconds_count": 0.0,
            "vllm:time_to_first_token_seconds_sum": 0.0,
            "vllm:time_to_first_token_seconds_count": 0.0,
        }
    )
    posts: int = 0


def _exposition(counters: dict[str, float]) -> str:
    lines = []
    for name, value in counters.items():
        family = name.removesuffix("_total").removesuffix("_sum").removesuffix("_count")
        kind = "counter" if name.endswith("_total") else "histogram"
        lines += [f"# TYPE {family} {kind}", f'{name}{{model_name="m"}} {value}']
    return "\n".join(lines) + "\n"


def make_paced(cfg: Paced) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _reply(self, body: bytes, kind: str = "application/json") -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._reply(json.dumps({"data": [{"id": "m", "max_model_len": 4096}]}).encode())
            elif self.path == "/metrics" and cfg.metrics:
                with lock:
                    text = _exposition(cfg.counters)
                self._reply(text.encode(), "text/plain; version=0.0.4")
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def do_POST(self) -> None:
            arrived = time.perf_counter()
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/tokenize":  # a token a word, and two for the chat template
                words = sum(len(m["content"].split()) for m in req.get("messages", []))
                self._reply(json.dumps({"count": words + 2}).encode())
                return
            with lock:
                cfg.posts += 1
                held = cfg.posts == cfg.hold
            n = int(req["max_tokens"])
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            start = time.perf_counter()
            first: list[float] = []  # when the first chunk left

            def send(obj: object) -> None:
                text = obj if isinstance(obj, str) else json.dumps(obj)
                if not first:
                    first.append(time.perf_counter())
                self.wfile.write(f"data: {text}\n\n".encode())
                self.wfile.flush()

            def chunk(i: int) -> dict[str, object]:
                delta = {"content": f" w{i}"}
                return {
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": i + 1},
                }

            if held:
                time.sleep(n / RATE)
                for i in range(n):
                    send(chunk(i))
                    time.sleep(FLOOD_S / n)
            else:
                # on a schedule, not a sleep a token: a late wake-up (a busy host) is caught up
                # at the next token, so the pace holds whatever else the machine runs
                due = time.perf_counter() + cfg.ttft_s
                for i in range(n):
                    time.sleep(max(0.0, due - time.perf_counter()))
                    send(chunk(i))
                    due += 1 / RATE
            # the delay the client saw, as this server saw it: from the request's arrival to
            # its first chunk (not the planned hold: a busy host adds to it)
            client_ttft = (first[0] - arrived) if held else 0.0
            send({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n}})
            send("[DONE]")
            elapsed = time.perf_counter() - start
            with lock:
                c = cfg.counters
                c["vllm:request_success_total"] += 1
                c["vllm:generation_tokens_total"] += n
                c["vllm:request_decode_time_seconds_sum"] += (n - 1) / RATE * cfg.decode_scale
                c["vllm:request_decode_time_seconds_count"] += 1
                ttft = client_ttft if cfg.witness_ttft == "client" else 0.001
                c["vllm:time_to_first_token_seconds_sum"] += min(ttft, elapsed)
                c["vllm:time_to_first_token_seconds_count"] += 1

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)

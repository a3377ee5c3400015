"""Faults that cannot be made on demand with a real engine: an error mid-stream, a stall.

A small loopback server (the ``server`` fixture, tests/unit/bench/conftest.py) speaks the OpenAI
streaming protocol and misbehaves on request N; the bench must keep every earlier run and mark
the result incomplete with the reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kit.bench import Bencher
from kit.bench.runner import first_token_budget
from kit.recipe import Bench, Prompt
from kit.recipe.serving import Prefill

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


# ---------------------------------------------------------------------------------------------
# The prefill probe's first-token wait: the reference's 90K probe at 628 tok/s takes about 143 s
# to its first token, past the 120 s stall timeout. The fake engine runs time SPEEDUP times
# faster, and the bench's timeouts are scaled alike, so the ratios are the reference's.

SPEEDUP = 200
REFERENCE_RATE = 628  # prefill tok/s of the published rig at 90K
WORDS_PER_TOKEN = 1.0  # the fake tokenizer: a token per word, plus the chat template's 12


def prefill_engine(rate: float, stall_after_first: float = 0.0) -> ThreadingHTTPServer:
    """A streaming server whose time to first token is prompt tokens / ``rate``; after the first
    token of a prefill probe (over 1,000 prompt tokens) it pauses ``stall_after_first`` seconds
    once (0: never)."""

    def tokens_of(req: dict[str, object]) -> int:
        messages = req["messages"]
        assert isinstance(messages, list)
        return int(len(str(messages[0]["content"]).split()) / WORDS_PER_TOKEN) + 12

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _json(self, obj: object) -> None:
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._json({"data": [{"id": "m", "max_model_len": 131072}]})

        def do_POST(self) -> None:
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/tokenize":
                self._json({"count": tokens_of(req)})
                return
            prompt_tokens = tokens_of(req)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            time.sleep(prompt_tokens / rate)  # prefill: nothing is sent until the first token

            def send(obj: object) -> None:
                text = obj if isinstance(obj, str) else json.dumps(obj)
                self.wfile.write(f"data: {text}\n\n".encode())
                self.wfile.flush()

            n = req["max_tokens"]
            for i in range(n):
                send({"choices": [{"index": 0, "delta": {"content": "w "}, "finish_reason": None}]})
                if i == 0 and stall_after_first and prompt_tokens > 1000:
                    time.sleep(stall_after_first)
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n}
            send({"choices": [], "usage": usage})
            send("[DONE]")

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture
def engine(request: pytest.FixtureRequest, serve: Callable[[ThreadingHTTPServer], str]) -> str:
    return serve(prefill_engine(*request.param))


PROBE = Bench(
    warmups=0,
    runs=1,
    stall_timeout_s=120 / SPEEDUP,
    request_timeout_s=600 / SPEEDUP,
    prompts=[Prompt(name="a", text="x", max_tokens=4)],
    prefill=Prefill(depths=[90_000], runs=3, warmups=1, max_tokens=16),
)


@pytest.mark.parametrize("engine", [(REFERENCE_RATE * SPEEDUP,)], indirect=True)
def test_the_reference_90k_probe_completes_past_the_stall_timeout(engine: str) -> None:
    result = Bencher(engine, PROBE, "m", max_model_len=131072).run()
    assert result.complete, result.incomplete_reason
    probe = [r for r in result.records if r.prompt == "prefill-90000"]
    assert [r.phase for r in probe] == ["prefill_warmup", "prefill", "prefill", "prefill"]
    assert all(r.error is None and r.ttft_s is not None for r in probe)
    # every first token came later than the stall timeout allows a silence (143 s of 120 s)
    assert all(r.ttft_s > PROBE.stall_timeout_s for r in probe if r.ttft_s is not None)
    assert result.prefill[0].status == "measured"
    # the measured runs' budget came from the warm-up's own rate, with the margin
    warm = probe[0]
    assert warm.prompt_tokens is not None and warm.ttft_s is not None
    rate = warm.prompt_tokens / warm.ttft_s
    assert first_token_budget(PROBE, result.records, "prefill-90000", 90_000) == pytest.approx(
        min(
            3 * 90_000 / min(rate, *(r.prompt_tokens / r.ttft_s for r in probe[1:])),
            PROBE.request_timeout_s,
        )
    )


@pytest.mark.parametrize("engine", [(REFERENCE_RATE * SPEEDUP, 3 * 120 / SPEEDUP)], indirect=True)
def test_once_tokens_flow_the_stall_timeout_holds_between_chunks(engine: str) -> None:
    # the first token after the long prefill, then a silence of 3 stall timeouts: ended as a
    # stall, long before the probe's first-token budget (the whole request_timeout_s) ran out
    result = Bencher(engine, PROBE, "m", max_model_len=131072).run()
    assert not result.complete
    failed = [r for r in result.records if r.error is not None]
    assert [(r.prompt, r.phase) for r in failed] == [("prefill-90000", "prefill_warmup")]
    assert failed[0].error == "stream stalled (no chunk for 0.6 s once tokens flowed)"
    assert failed[0].wall_s is None and failed[0].ttft_s is not None
    assert result.prefill[0].status == "failed"
    assert result.incomplete_reason is not None
    assert "stream stalled (no chunk for 0.6 s" in result.incomplete_reason

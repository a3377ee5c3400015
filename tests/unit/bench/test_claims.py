"""The context ladder and the soak (kit.bench.claims) against a fake engine, for the faults a
real one cannot be made to show on demand: an out-of-memory error body at depth, a prefill
that outlasts its budget, an engine that dies, an empty reply, memory that grows. The real
server's run is tests/integration/test_claims.py."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kit.bench.claims import (
    ClaimClient,
    ContextLadder,
    MemoryProbe,
    MemoryReading,
    Soak,
    planned_depths,
    run_context,
    run_soak,
    settle_ladder,
    settle_soak,
)
from kit.bench.claims.memory import engine_memory, rss_mib
from kit.errors import RecipeError
from kit.recipe import Bench, load_recipe
from kit.recipe.serving import ContextSettings, SoakSettings
from kit.runtimes import Compose, External, Native

BENCH = Bench(stall_timeout_s=2.0, request_timeout_s=10.0)
OOM = (
    '{"object":"error","message":"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a '
    'total capacity of 23.56 GiB of which 1.02 GiB is free.","type":"InternalServerError",'
    '"param":null,"code":500}'
)
KEY = re.compile(r"The pass key is (\d+)\.")


@dataclass
class Engine:
    """How the fake engine misbehaves: an OOM error body past ``oom_over`` prompt tokens, a
    first token after ``stall_s`` past ``stall_over``, an empty reply at the POSTs numbered in
    ``empty_at``, death at the POST ``die_at``; it echoes the pass key it was given unless
    ``forget``."""

    oom_over: int | None = None
    stall_over: int | None = None
    stall_s: float = 0.0
    empty_at: set[int] = field(default_factory=set)
    die_at: int | None = None
    forget: bool = False
    posts: int = 0
    dead: bool = False
    counters: dict[str, float] = field(
        default_factory=lambda: {
            "vllm:prefix_cache_queries_total": 0.0,
            "vllm:prefix_cache_hits_total": 0.0,
        }
    )


def _tokens(req: dict[str, object]) -> int:
    """The fake tokenizer: a token per word of every message, plus 10 for the template."""
    messages = req["messages"]
    assert isinstance(messages, list)
    return sum(len(str(m["content"]).split()) for m in messages) + 10


def fake_engine(cfg: Engine) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _reply(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._reply(503 if cfg.dead else 200, b"")
            elif self.path == "/metrics":
                text = "".join(
                    f"# TYPE {k.removesuffix('_total')} counter\n{k} {v}\n"
                    for k, v in cfg.counters.items()
                )
                self._reply(200, text.encode(), "text/plain")
            else:
                self._reply(
                    200, json.dumps({"data": [{"id": "m", "max_model_len": 4096}]}).encode()
                )

        def do_POST(self) -> None:
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if cfg.dead:
                self.connection.close()
                return
            if self.path == "/tokenize":
                self._reply(200, json.dumps({"count": _tokens(req)}).encode())
                return
            with lock:
                cfg.posts += 1
                n_post = cfg.posts
            prompt = _tokens(req)
            if cfg.die_at == n_post:
                cfg.dead = True
                self.connection.close()
                return
            if cfg.oom_over is not None and prompt > cfg.oom_over:
                self._reply(500, OOM.encode())
                return
            cfg.counters["vllm:prefix_cache_queries_total"] += prompt
            cfg.counters["vllm:prefix_cache_hits_total"] += prompt // 2
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            if cfg.stall_over is not None and prompt > cfg.stall_over:
                time.sleep(cfg.stall_s)

            def send(obj: object) -> None:
                text = obj if isinstance(obj, str) else json.dumps(obj)
                self.wfile.write(f"data: {text}\n\n".encode())
                self.wfile.flush()

            n = int(req["max_tokens"])
            key = KEY.search(str(req["messages"][-1]["content"]))
            words = [key[1] if key and not cfg.forget else "w", *["w"] * (n - 1)]
            if n_post in cfg.empty_at:
                words, n = [], 0
            send({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
            for w in words:
                time.sleep(0.001)
                send({"choices": [{"index": 0, "delta": {"content": w + " "}}]})
            send({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": n}})
            send("[DONE]")

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture
def engine(serve: Callable[[ThreadingHTTPServer], str]) -> Callable[[Engine], str]:
    return lambda cfg: serve(fake_engine(cfg))


def _ladder(url: str, settings: ContextSettings, judged: bool = True) -> ContextLadder:
    with ClaimClient(url, BENCH, "m") as client:
        return run_context(client, settings, 4096, from_server=True, judged=judged)


# -- the context ladder ------------------------------------------------------------------------


def test_depths_are_capped_below_the_reply_and_taken_once() -> None:
    settings = ContextSettings(fractions=[0.25, 0.5, 1.0], max_tokens=16)
    assert planned_depths(settings, 2048) == [(512, 0.25), (1024, 0.5), (2032, 1.0)]
    given = ContextSettings(depths=[9000, 100, 5000], max_tokens=100)
    assert planned_depths(given, 4096) == [(100, None), (3996, None)]


def test_each_depth_is_sized_by_the_server_and_the_key_comes_back(
    engine: Callable[[Engine], str],
) -> None:
    url = engine(Engine())
    ladder = _ladder(url, ContextSettings(depths=[300, 1000, 4000], max_tokens=8))
    assert [r.status for r in ladder.rungs] == ["served"] * 3
    for rung in ladder.rungs:
        # sized on /tokenize to the depth or within a sentence under it (at most 4 words)
        assert rung.prompt_tokens is not None
        assert rung.depth - 4 <= rung.prompt_tokens <= rung.depth
        assert rung.recalled is True and rung.exchange is not None
        assert rung.exchange.text.split()[0] == rung.key
        assert rung.ttft_ms and rung.prefill_tps and rung.decode_tps
        assert rung.prefill_tps == pytest.approx(rung.prompt_tokens / (rung.ttft_ms / 1000))
    assert ladder.largest_depth_served == 4000 and ladder.recalled == 3
    assert len({r.salt for r in ladder.rungs}) == 3  # no prefix shared between depths


def test_a_forgotten_key_is_a_miss_and_synthetic_weights_are_not_judged(
    engine: Callable[[Engine], str],
) -> None:
    url = engine(Engine(forget=True))
    settings = ContextSettings(depths=[300, 600], max_tokens=4)
    missed = _ladder(url, settings)
    assert [r.recalled for r in missed.rungs] == [False, False] and missed.recalled == 0
    synthetic = _ladder(url, settings, judged=False)
    assert [r.recalled for r in synthetic.rungs] == [None, None] and synthetic.recalled is None
    assert synthetic.recall_note is not None and "synthetic" in synthetic.recall_note
    assert synthetic.largest_depth_served == 600  # the depth still counts


def test_an_out_of_memory_at_depth_is_a_result_with_the_engines_message(
    engine: Callable[[Engine], str],
) -> None:
    url = engine(Engine(oom_over=1500))
    ladder = _ladder(url, ContextSettings(depths=[500, 1000, 2000, 3000], max_tokens=4))
    assert [r.status for r in ladder.rungs] == ["served", "served", "failed", "failed"]
    failed = ladder.rungs[2]
    assert failed.exchange is not None and failed.exchange.error is not None
    assert failed.exchange.error.startswith("HTTP 500: ")
    assert "CUDA out of memory. Tried to allocate 2.00 GiB" in failed.exchange.error
    assert failed.ttft_ms is None and failed.decode_tps is None and failed.recalled is None
    assert (ladder.largest_depth_served, ladder.served, ladder.failed) == (1000, 2, 2)


def test_a_prefill_past_its_budget_is_a_timeout_kept_as_a_result(
    engine: Callable[[Engine], str],
) -> None:
    url = engine(Engine(stall_over=1000, stall_s=3.0))
    settings = ContextSettings(depths=[500, 2000], max_tokens=4, timeout_s=0.8)
    quick = Bench(stall_timeout_s=0.3, request_timeout_s=10.0)
    with ClaimClient(url, quick, "m") as client:
        ladder = run_context(client, settings, 4096, from_server=True, judged=True)
    top = ladder.rungs[1]
    assert top.status == "failed" and top.exchange is not None
    assert top.exchange.error == "no first token within 0.8 s (the prefill budget)"
    assert ladder.largest_depth_served == 500 and ladder.rungs[0].status == "served"


def test_an_engine_that_dies_leaves_the_deeper_depths_not_run(
    engine: Callable[[Engine], str],
) -> None:
    url = engine(Engine(die_at=2))
    ladder = _ladder(url, ContextSettings(depths=[300, 600, 900, 1200], max_tokens=4))
    assert [r.status for r in ladder.rungs] == ["served", "failed", "not run", "not run"]
    assert ladder.rungs[2].not_run == "the server stopped answering after depth 600"
    assert ladder.rungs[2].exchange is None
    assert ladder.largest_depth_served == 300


def test_settling_again_changes_nothing(engine: Callable[[Engine], str]) -> None:
    url = engine(Engine(oom_over=800))
    ladder = _ladder(url, ContextSettings(depths=[300, 1000], max_tokens=4))
    assert settle_ladder(ladder) == ladder


# -- the soak ----------------------------------------------------------------------------------


def _soak(url: str, settings: SoakSettings, memory: MemoryProbe | None = None) -> Soak:
    probe = memory or MemoryProbe(None, None, "not measured: a test")
    with ClaimClient(url, BENCH, "m") as client:
        return run_soak(client, settings, 4096, probe)


class Growing:
    """Memory that grows ``step`` MiB at every reading: a leak, as a soak must catch it."""

    def __init__(self, step: float) -> None:
        self.used = 1000.0
        self.step = step

    def __call__(self) -> list[MemoryReading]:
        self.used += self.step
        return [MemoryReading(device="GPU 0", used_mib=self.used)]


def test_a_clean_soak_passes_and_its_context_grows(engine: Callable[[Engine], str]) -> None:
    cfg = Engine()
    url = engine(cfg)
    # the fake engine's pace is the host's timer: its retention is near 100 % but not held to
    # the published 98 % here (a busy 2-core host gave 97.3 %); a slowing engine's is tested below
    settings = SoakSettings(
        sessions=2, turns=3, context_tokens=900, max_tokens=8, min_tps_retention_pct=50.0
    )
    soak = _soak(url, settings, MemoryProbe("nvml", Growing(0.0)))
    assert soak.target_tokens == 900
    assert [len(s.turns) for s in soak.sessions] == [3, 3]
    for session in soak.sessions:
        grown = [t.prompt_tokens for t in session.turns]
        # each turn carries the whole conversation: about a third of 900 tokens more each time
        assert grown[0] is not None and 250 < grown[0] < 320
        assert all(
            b is not None and a is not None and b > a + 250 for a, b in itertools.pairwise(grown)
        )
    assert (soak.empty_turns, soak.errors, soak.memory_growth_mib) == (0, 0, 0.0)
    assert soak.tps_retention_pct is not None and soak.prefix_cache_hit_rate is not None
    # the fake engine counts half of each prompt a hit
    assert 0.45 < soak.prefix_cache_hit_rate <= 0.5
    assert soak.passed is True and soak.failed_checks == []
    # the same turns held to a retention they cannot reach fail by that check alone
    strict = settings.model_copy(update={"min_tps_retention_pct": 1000.0})
    held = settle_soak(soak.model_copy(update={"settings": strict}))
    assert held.passed is False and len(held.failed_checks) == 1
    assert held.failed_checks[0].startswith("TPS retention ")
    assert held.failed_checks[0].endswith(", under 1000 %")


def test_an_empty_reply_and_a_leak_fail_the_soak(engine: Callable[[Engine], str]) -> None:
    url = engine(Engine(empty_at={4}))
    settings = SoakSettings(sessions=2, turns=2, context_tokens=400, max_tokens=4)
    soak = _soak(url, settings, MemoryProbe("nvml", Growing(150.0)))
    turn = soak.sessions[1].turns[1]
    assert turn.empty and not turn.error and turn.decode_tps is None
    assert turn.exchange is not None and turn.exchange.error == "no chunk carried text"
    assert (soak.empty_turns, soak.errors) == (1, 0)
    # before the first session 1150, after the last 1600
    assert soak.memory_growth_mib == 450.0
    assert soak.passed is False
    # (its TPS retention, over a few 4-token replies, is whatever the fake's timing gives)
    assert "memory grew 450.0 MiB, over 200 MiB" in soak.failed_checks
    assert "1 empty turn(s), over 0" in soak.failed_checks
    assert settle_soak(soak) == soak


def test_a_dead_engine_ends_the_soak_with_its_turns_as_errors(
    engine: Callable[[Engine], str],
) -> None:
    url = engine(Engine(die_at=3))
    settings = SoakSettings(sessions=2, turns=2, context_tokens=400, max_tokens=4)
    soak = _soak(url, settings)
    flags = [(t.error, t.not_run is not None) for s in soak.sessions for t in s.turns]
    assert flags == [(False, False), (False, False), (True, False), (True, True)]
    assert soak.errors == 2 and soak.passed is False
    assert soak.memory_source is None and soak.memory_note == "not measured: a test"
    assert soak.memory_growth_mib is None and soak.prefix_cache_hit_rate is not None


def test_memory_is_the_engines_own_and_not_measured_elsewhere(tmp_path: Path) -> None:
    assert External().memory_probe("cuda").source == "nvml"
    assert Native().memory_probe("cpu").source == "rss"
    compose = Compose().memory_probe("cpu")
    assert compose.read is None and compose.note is not None and "another container" in compose.note
    assert "not started by kit" in (External().memory_probe("cpu").note or "")
    # a child of this process stands for the engine kit started: its resident memory is read
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; x = bytearray(64 << 20); time.sleep(30)"]
    )
    try:
        time.sleep(0.5)
        readings = engine_memory(Native().engine_processes() or set())
        assert isinstance(readings, list) and [r.device for r in readings] == ["engine processes"]
        assert readings[0].used_mib > 64
        assert rss_mib({child.pid}) > 64
    finally:
        child.kill()
        child.wait()


def test_the_soak_settings_hold_together() -> None:
    assert SoakSettings().k == 5 and SoakSettings(turns=3).k == 3
    with pytest.raises(ValueError, match="retention_turns 7 exceeds the soak's 6 turns"):
        SoakSettings(sessions=2, turns=3, retention_turns=7)


def test_a_recipe_without_the_claims_leaves_them_out_of_its_hash(fixtures_dir: Path) -> None:
    recipe = fixtures_dir / "recipes" / "cpu-tiny.yaml"
    plain = load_recipe(recipe, ["bench.context=null", "bench.soak=null"])
    data = plain.recipe.to_json_dict()
    assert "context" not in data["bench"] and "soak" not in data["bench"]
    with pytest.raises(RecipeError) as bad:
        load_recipe(recipe, ["bench.soak.sessions=0"])
    assert any("bench.soak.sessions" in p for p in bad.value.problems)

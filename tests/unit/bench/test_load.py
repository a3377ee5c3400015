"""Load points: the recipe's load patterns, datasets and SLOs validated; the figures of a
point (kit.bench.load's definitions) computed from records; the datasets; and the asyncio
client against faults a real engine cannot make on demand (a failed request mid-point, a
stall, a body that ends at close), served by the loopback server of tests/unit/bench/conftest.py."""

from __future__ import annotations

import hashlib
import itertools
import json
import statistics
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from factories import load_record
from hypothesis import given
from hypothesis import strategies as st

from kit.bench import Bencher, RequestRecord
from kit.bench.load import (
    LoadPoint,
    file_requests,
    percentile,
    random_requests,
    summarize_point,
)
from kit.errors import BadInputError
from kit.recipe import Bench, Prompt, load_recipe
from kit.recipe.traffic import ConcurrencyLoad, FileDataset, RandomDataset, RateLoad, Slo

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

CPU = "recipes/cpu-tiny.yaml"


# --- the recipe -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["bench.load={pattern: concurrency, levels: [1, 0], requests: 4}"], "at least 1"),
        (["bench.load={pattern: concurrency, levels: [2, 2], requests: 4}"], "lists a level twice"),
        (["bench.load={pattern: rate, rates: [0], requests: 4}"], "above 0"),
        (["bench.load={pattern: burst, requests: 4}"], "bench.load"),
        (["bench.dataset={kind: prompts}"], "set bench.load too"),
        (
            ["bench.load={pattern: rate, rates: [1], requests: 2}", "bench.slo={}"],
            "at least one of ttft_ms",
        ),
        (
            [
                "bench.load={pattern: rate, rates: [1], requests: 2}",
                "bench.dataset={kind: file, path: p.jsonl, format: jsonl, sha256: abc}",
            ],
            "64 lower-case hex digits",
        ),
    ],
)
def test_bad_load_sections_name_the_field(
    fixtures_dir: Path, sets: list[str], message: str
) -> None:
    with pytest.raises(BadInputError) as err:
        load_recipe(fixtures_dir / CPU, sets)
    assert message in err.value.message
    assert "bench" in err.value.message


def test_a_recipe_without_a_load_pattern_dumps_as_before(fixtures_dir: Path) -> None:
    plain = load_recipe(fixtures_dir / CPU).recipe
    assert not {"load", "dataset", "slo"} & set(plain.to_json_dict()["bench"])
    loaded = load_recipe(
        fixtures_dir / CPU, ["bench.load={pattern: concurrency, levels: [1, 2], requests: 4}"]
    ).recipe
    assert loaded.to_json_dict()["bench"]["load"]["levels"] == [1, 2]
    assert loaded.sha256() != plain.sha256()


# --- the figures ------------------------------------------------------------------------------


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=60), st.sampled_from([50, 90, 95, 99]))
def test_percentiles_are_numpys_linear_ones(values: list[float], q: int) -> None:
    assert percentile(sorted(values), q) == pytest.approx(
        float(np.percentile(values, q)), rel=1e-9, abs=1e-9
    )


def test_a_points_figures_follow_vllm_bench_serves_definitions() -> None:
    records = [
        load_record(0.0, 0.1, 1.0, 10, [0.1, 0.2, 0.4]),  # ends at 1.0
        load_record(0.5, 0.3, 2.5, 21, [0.3, 0.5]),  # ends at 3.0: the point lasts 3 s
        load_record(0.2, 0.2, 0.5, 4, [0.2]).model_copy(update={"phase": "load_warmup"}),
    ]
    slo = Slo(ttft_ms=200, tpot_ms=150)
    p = summarize_point("concurrency-2", "concurrency", 2, records, slo)
    assert (p.requests, p.completed, p.duration_s) == (2, 2, 3.0)
    assert p.output_tps == pytest.approx(31 / 3) and p.total_tps == pytest.approx(51 / 3)
    assert p.request_throughput == pytest.approx(2 / 3)
    # TPOT = (E2E - TTFT) / (tokens - 1): 0.1 s and 0.11 s
    assert p.tpot_ms.p50 == pytest.approx(105.0)
    assert p.itl_ms.n == 3 and p.itl_ms.mean == pytest.approx(statistics.fmean([100, 200, 200]))
    assert p.e2e_ms.p99 == pytest.approx(1000 + (2500 - 1000) * 0.99)
    # the first meets TTFT <= 200 ms and TPOT <= 150 ms; the second's TTFT is 300 ms
    assert (p.good, p.goodput_rps) == (1, pytest.approx(1 / 3))
    assert summarize_point("concurrency-2", "concurrency", 2, records, None).good is None


def test_poisson_arrivals_are_seeded_and_constant_ones_even() -> None:
    poisson = RateLoad(pattern="rate", rates=[4], requests=4000, seed=7)
    gaps = poisson.arrival_gaps(4.0, 4000)
    assert gaps == poisson.arrival_gaps(4.0, 4000) and gaps[0] == 0
    assert statistics.fmean(gaps[1:]) == pytest.approx(0.25, rel=0.05)
    even = poisson.model_copy(update={"arrival": "constant"})
    assert even.arrival_gaps(4.0, 3) == [0.0, 0.25, 0.25]


# --- datasets ---------------------------------------------------------------------------------


def pinned(path: Path, fmt: str) -> FileDataset:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return FileDataset(kind="file", path=path.name, format=fmt, sha256=digest, max_tokens=32)  # type: ignore[arg-type]


def test_jsonl_and_sharegpt_files(tmp_path: Path) -> None:
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text('{"prompt": "one", "max_tokens": 5}\n\n{"prompt": "two"}\n')
    got = file_requests(pinned(jsonl, "jsonl"), tmp_path)
    assert [(p.text, p.max_tokens) for p in got] == [("one", 5), ("two", 32)]
    share = tmp_path / "s.json"
    turns = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]
    share.write_text(json.dumps([{"conversations": turns}]))
    assert [p.text for p in file_requests(pinned(share, "sharegpt"), tmp_path)] == ["hi"]


def test_a_changed_or_broken_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"prompt": "one"}\n')
    ds = pinned(path, "jsonl")
    path.write_text('{"prompt": "two"}\n')
    with pytest.raises(BadInputError) as err:
        file_requests(ds, tmp_path)
    assert err.value.message.startswith("bench.dataset.sha256: a.jsonl has sha256 ")
    path.write_text('{"text": "no prompt key"}\n')
    with pytest.raises(BadInputError) as err:
        file_requests(pinned(path, "jsonl"), tmp_path)
    assert err.value.message == 'bench.dataset: a.jsonl line 1: no "prompt" string'


def test_random_prompts_are_sized_by_the_servers_token_counts() -> None:
    ds = RandomDataset(kind="random", input_tokens=200, output_tokens=50, range_ratio=0.5, seed=1)

    def count(text: str) -> int:  # a tokenizer of 2 tokens a word plus a 7-token template
        return 7 + 2 * len(text.split())

    planned = random_requests(ds, 50, count)
    assert planned == random_requests(ds, 50, count)  # seeded
    sizes = [count(p.text) for p in planned]
    assert all(100 - 2 <= n <= 300 + 2 for n in sizes) and len(set(sizes)) > 10
    assert all(25 <= p.max_tokens <= 75 for p in planned)
    with pytest.raises(BadInputError, match="/tokenize"):
        random_requests(ds, 1, lambda _text: None)


# --- the asyncio client against faults ---------------------------------------------------------


LOAD = Bench(
    stall_timeout_s=1.0,
    prompts=[Prompt(name="a", text="x", max_tokens=8)],
    load={"pattern": "concurrency", "levels": [1, 2], "requests": 3, "warmup_requests": 1},  # type: ignore[arg-type]
)


@pytest.mark.parametrize("server", [(99, "none")], indirect=True)
def test_a_clean_load_run_over_close_delimited_bodies(server: str) -> None:
    result = Bencher(server, LOAD, "m").run()
    assert result.complete, result.incomplete_reason
    assert [p.label for p in result.load_points] == ["concurrency-1", "concurrency-2"]
    assert all(p.completed == 3 and p.output_tokens == 24 for p in result.load_points)
    phases = [(r.prompt, r.phase, r.index) for r in result.records]
    assert phases[:4] == [
        ("concurrency-1", "load_warmup", 0),
        ("concurrency-1", "load", 0),
        ("concurrency-1", "load", 1),
        ("concurrency-1", "load", 2),
    ]
    assert not result.prompts


@pytest.mark.parametrize(
    ("server", "error"),
    [
        ((3, "500"), "HTTP 500: boom!"),
        ((3, "error-chunk"), "server error in stream: "),
        ((3, "stall"), "stream stalled (no data within the stall timeout)"),
    ],
    indirect=["server"],
)
def test_a_failed_request_is_the_points_figure_and_the_run_goes_on(server: str, error: str) -> None:
    result = Bencher(server, LOAD, "m").run()
    assert not result.complete
    assert result.incomplete_reason is not None
    assert result.incomplete_reason.startswith("concurrency-1: 1 of 4 requests failed: " + error)
    first, second = result.load_points
    assert (first.requests, first.completed) == (3, 2)
    assert second.completed == 3  # the next point ran


# --- chunked framing, however the bytes are split ----------------------------------------------


def chunked(events: list[bytes]) -> bytes:
    out = b""
    for e in events:
        out += f"{len(e):x}\r\n".encode() + e + b"\r\n"
    return out + b"0\r\n\r\n"


@given(st.lists(st.integers(1, 97), min_size=0, max_size=30), st.integers(1, 40))
def test_chunked_sse_decodes_the_same_however_the_reads_split_it(cuts: list[int], n: int) -> None:
    import asyncio

    from kit.bench.aio import Connection

    events = [f'data: {{"i": {i}}}\n\n'.encode() for i in range(n)] + [b"data: [DONE]\n\n"]
    blob = chunked(events)
    pieces, pos = [], 0
    for cut in cuts:
        pieces.append(blob[pos : pos + cut])
        pos += cut
    pieces.append(blob[pos:])

    async def decode() -> list[bytes]:
        reader = asyncio.StreamReader()
        for piece in pieces:
            if piece:
                reader.feed_data(piece)
        # no EOF fed: the decoder must stop at the last chunk (else its read times out)
        got: list[bytes] = []
        lines = Connection("http://127.0.0.1:1")._lines(
            reader, {"transfer-encoding": "chunked"}, lambda: 5.0, time.perf_counter
        )
        async for _, batch in lines:
            got += batch
        return got

    assert asyncio.run(decode()) == [f'{{"i": {i}}}'.encode() for i in range(n)] + [b"[DONE]"]


def test_a_keep_alive_connection_survives_the_last_crlf_arriving_late() -> None:
    """The first response's final CRLF comes in a segment of its own, after the client has
    stopped at ``0\r\n``: the second request on the connection still reads its status line."""
    import asyncio

    from kit.bench.aio import Connection

    events = [b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n', b"data: [DONE]\n\n"]
    body = chunked(events)
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            await reader.readuntil(b"\r\n\r\n")
            length = 2  # the client's body: b"{}"
            await reader.readexactly(length)
            writer.write(head + body[:-2])
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(b"\r\n")
            await writer.drain()
        writer.close()

    async def two() -> list[int]:
        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        conn = Connection(f"http://127.0.0.1:{port}")
        statuses = []
        for _ in range(2):
            status, lines = await conn.post_stream("/v1/chat/completions", b"{}", 5.0, lambda: 5.0)
            statuses.append(status)
            async for _ in lines:
                pass
            await asyncio.sleep(0.1)  # the late CRLF is in the buffer now
        await conn.close()
        srv.close()
        return statuses

    assert asyncio.run(two()) == [200, 200]


# --- sweeps -----------------------------------------------------------------------------------


def test_a_sweep_plans_its_levels_up_to_its_max() -> None:
    from kit.recipe.traffic import SweepLoad

    sweep = SweepLoad(pattern="sweep", max_concurrency=12, requests=4)
    assert sweep.planned_levels() == [1, 2, 4, 8, 12]
    assert sweep.model_copy(update={"start": 3, "factor": 1.5}).planned_levels() == [3, 4, 6, 9, 12]
    with pytest.raises(ValueError, match="max_concurrency 2 is below start 4"):
        SweepLoad(pattern="sweep", start=4, max_concurrency=2, requests=4)


def test_a_sweep_stops_at_saturation_failed_slos_or_its_max() -> None:
    from kit.recipe.traffic import SweepLoad

    sweep = SweepLoad(pattern="sweep", max_concurrency=8, requests=2, min_gain_pct=10)
    base = summarize_point(
        "concurrency-1", "sweep", 1, [load_record(0.0, 0.1, 1.0, 10, [0.1])], None
    )

    def pt(level: int, tps: float, good: int | None = None) -> LoadPoint:
        return base.model_copy(
            update={
                "label": f"concurrency-{level}",
                "level": level,
                "requests": 2,
                "output_tps": tps,
                "good": good,
            }
        )

    assert sweep.stop_reason([pt(1, 100)], None) is None
    assert sweep.stop_reason([pt(1, 100), pt(2, 180)], None) is None
    assert sweep.stop_reason([pt(1, 100), pt(2, 180), pt(4, 190)], None) == (
        "saturated: output tok/s rose +5.6 % over concurrency-2, less than 10 %"
    )
    assert sweep.stop_reason([pt(1, 100), pt(8, 300)], None) == "reached max_concurrency 8"
    slo = Slo(ttft_ms=100)
    assert sweep.stop_reason([pt(1, 100, good=0)], slo) == (
        "SLOs failed: 0 % of requests met bench.slo, below 90 %"
    )


@pytest.mark.parametrize("server", [(99, "none")], indirect=True)
def test_requests_per_stream_scales_each_point(server: str) -> None:
    bench = LOAD.model_copy(
        update={
            "load": LOAD.load.model_copy(update={"requests_per_stream": 2, "levels": [1, 3]})  # type: ignore[union-attr]
        }
    )
    result = Bencher(server, bench, "m").run()
    assert result.complete, result.incomplete_reason
    assert [(p.label, p.requests) for p in result.load_points] == [
        ("concurrency-1", 2),
        ("concurrency-3", 6),
    ]


def test_a_point_agrees_with_vllm_within_two_percent_on_each_median() -> None:
    from kit.vllm_bench.points import compare_point

    point = summarize_point(
        "concurrency-2", "concurrency", 2, [load_record(0.0, 0.1, 1.0, 10, [0.1, 0.2, 0.3])], None
    )
    assert point.output_tps is not None and point.tpot_ms.p50 is not None
    theirs = {
        "output_throughput": point.output_tps * 1.01,
        "median_ttft_ms": point.ttft_ms.p50,
        "median_tpot_ms": point.tpot_ms.p50 * 0.99,
        "median_itl_ms": point.itl_ms.p50,
        "p99_ttft_ms": 1.0,  # p99s are shown, not judged
        "p99_tpot_ms": None,
    }
    figures, agree = compare_point(point, theirs)
    assert agree is True
    assert [f.figure for f in figures][:4] == ["output tok/s", "TTFT p50", "TPOT p50", "ITL p50"]
    _, off = compare_point(point, {**theirs, "median_itl_ms": (point.itl_ms.p50 or 0) * 1.05})
    assert off is False
    _, unknown = compare_point(point, {**theirs, "median_ttft_ms": None})
    assert unknown is None


def test_vllm_bench_gets_kits_own_requests_of_a_point_behind_fresh_salts(tmp_path: Path) -> None:
    from kit.bench.load.datasets import Planned
    from kit.recipe import VllmBenchSettings
    from kit.vllm_bench.job import VllmBenchJob
    from kit.vllm_bench.points import point_argv, point_lines

    planned = [Planned(f"prompt {n}", 10 + n) for n in range(5)]
    point = summarize_point(
        "concurrency-2", "concurrency", 2, [load_record(0.0, 0.1, 1.0, 10, [0.1, 0.2, 0.3])], None
    ).model_copy(update={"requests": 4})
    # the measured requests follow the two warm-ups, wrapping round the plan as kit's do
    rows = [json.loads(line) for line in point_lines(planned, point, 2, "s").splitlines()]
    assert [(r["prompt"], r["output_tokens"]) for r in rows] == [
        ("[s-0] prompt 2", 12),
        ("[s-1] prompt 3", 13),
        ("[s-2] prompt 4", 14),
        ("[s-3] prompt 0", 10),
    ]
    bench = Bench.model_validate(
        {
            "load": {"pattern": "concurrency", "levels": [2], "requests": 4},
            "dataset": {"kind": "random", "input_tokens": 8, "output_tokens": 4},
        }
    )
    job = VllmBenchJob(
        python="python", pythonpath=None, url="http://127.0.0.1:1/", model="m",
        tokenizer=tmp_path, bench=bench, settings=VllmBenchSettings(), out_dir=tmp_path,
    )  # fmt: skip
    argv = point_argv(job, point, tmp_path / "d.jsonl", warmups=1, result_file="r.json")
    pairs = dict(itertools.pairwise(argv))
    assert pairs["--dataset-name"] == "custom" and pairs["--custom-output-len"] == "-1"
    assert pairs["--max-concurrency"] == "2" and pairs["--request-rate"] == "inf"
    assert "--skip-chat-template" in argv and "--ignore-eos" in argv


@given(st.lists(st.integers(min_value=0, max_value=10**9), max_size=300))
def test_packed_chunk_times_read_back_as_the_same_floats(us: list[int]) -> None:
    from kit.bench.stream import pack_times, unpack_times

    times = sorted(round(u / 1_000_000, 6) for u in us)
    assert unpack_times(pack_times(times)) == times


def test_a_load_record_is_written_with_its_chunk_times_packed_and_read_back() -> None:
    from kit.bench.stream import COMPACT_TIMES

    times = [0.05 + 0.005 * n for n in range(128)]
    rec = load_record(1.0, 0.05, 0.7, 128, [round(t, 6) for t in times])
    data = json.loads(rec.model_dump_json())
    assert COMPACT_TIMES in data and "text_chunk_times_s" not in data
    assert data[COMPACT_TIMES].startswith("50000,5000,5000")
    assert RequestRecord.model_validate(data) == rec
    # a sequential record (no sent_s) is written as it always was
    seq = rec.model_copy(update={"sent_s": None})
    assert "text_chunk_times_s" in json.loads(seq.model_dump_json())
    with pytest.raises(ValueError, match=COMPACT_TIMES):
        RequestRecord.model_validate({**data, COMPACT_TIMES: "5,,7"})
    with pytest.raises(ValueError, match="both given"):
        RequestRecord.model_validate({**data, "text_chunk_times_s": times})


def test_a_sweeps_records_stay_within_the_readers_value_cap() -> None:
    from kit.signing.canonical import parse_json

    def read(text: str) -> Any:  # as a report payload is read: counted before it is parsed
        return parse_json(text.encode(), "payload", 64 << 20, 64)

    # the H200 sweep of experiments/results/h200-llama8b-bf16-sweep-2026-12-02: 2,568 records of 128
    # tokens; with a number per token it was over the cap, packed it is within
    rec = load_record(1.0, 0.05, 0.7, 128, [round(0.05 + 0.005 * n, 6) for n in range(128)])
    packed = json.dumps([json.loads(rec.model_dump_json())] * 2568)
    assert len(read(packed)) == 2568
    unpacked = json.dumps([rec.model_dump(mode="json") | {
        "text_chunk_times_s": rec.text_chunk_times_s} for _ in range(2568)])  # fmt: skip
    with pytest.raises(BadInputError, match=r"values.*over the limit"):
        read(unpacked)


def _recording_server(seen: list[str]) -> ThreadingHTTPServer:
    """A server streaming one chunk per request that keeps each request's message."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(req["messages"][0]["content"])
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            n = req["max_tokens"]
            for obj in (
                {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
                {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}},
            ):
                self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.mark.parametrize(
    "load",
    [
        {"pattern": "concurrency", "levels": [3], "requests": 7, "processes": 2},
        {"pattern": "rate", "rates": [200], "requests": 7, "processes": 3, "max_concurrency": 4},
    ],
)
def test_client_processes_send_each_request_of_a_point_once(
    load: dict[str, Any], serve: Callable[[ThreadingHTTPServer], str]
) -> None:
    from kit.bench.load.run import LoadTarget, run_point

    seen: list[str] = []
    bench = Bench(stall_timeout_s=5.0, prompts=[Prompt(name="a", text="x", max_tokens=4)],
                  load=load)  # type: ignore[arg-type]  # fmt: skip
    planned = Bencher("http://127.0.0.1:1", bench, "m").planned(1)
    url = serve(_recording_server(seen))
    level = (load.get("levels") or load["rates"])[0]
    target = LoadTarget(url, bench, "m", planned)
    records, cpu = run_point(target, level, "load", "s", time.perf_counter())
    assert [r.index for r in records] == list(range(7)) and all(r.error is None for r in records)
    assert [r.sent_s for r in records] == sorted(r.sent_s or 0.0 for r in records)
    # every request index sent once, by whichever process took it
    assert sorted(s.split("]")[0] for s in seen) == sorted(f"[s-{i}" for i in range(7))
    assert cpu > 0


def test_a_first_token_without_text_moves_kits_ttft_not_vllms() -> None:
    from kit.bench.stream import RequestTag, StreamState
    from kit.vllm_bench.points import compare_point

    def chunk(text: str | None, **delta: str) -> str:
        if text is not None:
            delta["content"] = text
        return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})

    usage = json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}})
    body = {"max_tokens": 3}

    def stream(sent_s: float | None) -> RequestRecord:
        s = StreamState(t_send=10.0)
        # the role chunk and a first token whose text is empty (half a UTF-8 sequence)
        for data, now in ((chunk("", role="assistant"), 10.040), (chunk(""), 10.041),
                          (chunk("ab"), 10.046), (chunk("c"), 10.051), (usage, 10.052),
                          ("[DONE]", 10.053)):  # fmt: skip
            s.event(data, now)
        return s.record(body, None, RequestTag("concurrency-2", "load", 0),
                        started="2026-12-01T00:00:00.000+00:00", usable_fraction=0.5,
                        sent_s=sent_s)  # fmt: skip

    rec = stream(0.0)
    assert rec.first_chunk_s == pytest.approx(0.040) and rec.ttft_s == pytest.approx(0.046)
    assert json.loads(rec.model_dump_json())["first_chunk_s"] == pytest.approx(0.040)
    sequential = stream(None)  # sequential records are written as they always were
    assert sequential.first_chunk_s is None
    assert "first_chunk_s" not in json.loads(sequential.model_dump_json())
    point = summarize_point("concurrency-2", "concurrency", 2, [rec], None)
    assert point.first_chunk_ms is not None and point.first_chunk_ms.p50 == pytest.approx(40.0)
    assert point.ttft_ms.p50 == pytest.approx(46.0)
    # vLLM's TTFT is compared with kit's first chunk
    figures, _ = compare_point(point, {"median_ttft_ms": 40.0, "p99_ttft_ms": 40.0})
    ttft = {f.figure: f for f in figures}
    assert ttft["TTFT p50"].delta_pct == pytest.approx(0.0)
    # a point from a report written before kit kept the first chunk: kit's own TTFT
    old = point.model_copy(update={"first_chunk_ms": None})
    assert {f.figure: f for f in compare_point(old, {"median_ttft_ms": 40.0})[0]}[
        "TTFT p50"
    ].kit == pytest.approx(46.0)


@pytest.mark.parametrize("server", [(99, "none")], indirect=True)
def test_warmups_per_stream_reach_each_points_batch(server: str) -> None:
    load = {"pattern": "concurrency", "levels": [1, 3], "requests": 3, "warmup_per_stream": 2}
    bench = LOAD.model_copy(update={"load": ConcurrencyLoad.model_validate(load)})
    result = Bencher(server, bench, "m").run()
    assert result.complete, result.incomplete_reason
    warm = [r for r in result.records if r.phase == "load_warmup"]
    assert [sum(1 for r in warm if r.prompt == p) for p in ("concurrency-1", "concurrency-3")] == [
        2,
        6,
    ]
    assert len(result.records) == 2 + 3 + 6 + 3


def test_a_point_warms_up_one_way() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="warmup_requests and warmup_per_stream both set"):
        ConcurrencyLoad.model_validate(
            {
                "pattern": "concurrency",
                "levels": [1],
                "requests": 1,
                "warmup_requests": 2,
                "warmup_per_stream": 1,
            }
        )
    with pytest.raises(ValidationError, match="warmup_per_stream"):  # no streams to count by
        RateLoad.model_validate({"pattern": "rate", "rates": [1], "requests": 1,
                                 "warmup_per_stream": 1})  # fmt: skip


def test_later_fields_at_their_default_leave_the_recipe_hash_alone() -> None:
    def recipe(load: str) -> Any:
        sets = [f"bench.load={{pattern: concurrency, levels: [1, 2], requests: 2{load}}}"]
        return load_recipe(str(FIXTURES / "recipes" / "cpu-tiny.yaml"), sets).recipe

    plain, same, other = recipe(""), recipe(", processes: 1"), recipe(", warmup_per_stream: 1")
    data = plain.to_json_dict()
    assert "processes" not in data["bench"]["load"]
    assert "warmup_per_stream" not in data["bench"]["load"]
    assert same.sha256() == plain.sha256()
    assert other.sha256() != plain.sha256()
    assert other.to_json_dict()["bench"]["load"]["warmup_per_stream"] == 1

"""Does the sequential client change what it measures? kit's SequentialClient against the httpx
client it replaced, interleaved on one real vLLM CPU server.

    .venv/bin/python experiments/client-ab.py [--rounds 6] [--runs 5] [--old REV]
        [-o experiments/results/client-ab-HOST.json]        (KIT_HOME as for make)

Serves the cpu-tiny recipe (built and cached as `make reproduce` does). Each round sends the
narrative prompt ``--runs`` times with each client, one stream at a time, the order of the two
arms alternating from round to round (AB, BA, ...). The old client is
``kit/bench/stream.py`` at ``--old`` (default 340b0e1, the last commit with the httpx client),
read from git and loaded as a module. Per request: the client's decode tok/s and the engine's
own (generation tokens over vLLM's request_decode_time, from /metrics around the request alone),
so a client that times differently shows against the server's account of the same request.
Prints and writes per-arm medians and the per-round ratios.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kit import engine as engine_mod  # noqa: E402
from kit.bench import (  # noqa: E402
    RequestTag,
    SequentialClient,
    StreamLimits,
    model_info,
    request_body,
)
from kit.bench.server import scrape_metrics  # noqa: E402
from kit.build import build  # noqa: E402
from kit.metrics import request_witness  # noqa: E402
from kit.recipe import load_recipe  # noqa: E402
from kit.serve import NativeRuntime  # noqa: E402


def old_client(rev: str, tmp: Path) -> Any:
    """kit/bench/stream.py at ``rev``, loaded as a module of its own."""
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:kit/bench/stream.py"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    path = tmp / "old_stream.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("old_stream", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_stream"] = mod  # pydantic resolves the record's annotations there
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--old", default="340b0e1")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    loaded = load_recipe(ROOT / "recipes" / "cpu-tiny.yaml", ["bench.prefill=null"])
    bench = loaded.recipe.bench
    prompt = bench.prompts[0]
    built = build(loaded)
    eng = engine_mod.resolve(loaded.recipe.server.engine, loaded.recipe.server.patches)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        old = old_client(args.old, Path(tmp))
        with NativeRuntime(eng).start(
            loaded.recipe, built.served_dir, built.draft_dir, Path(tmp) / "server.log"
        ) as server:
            url = server.url
            name, _ = model_info(url)
            body = request_body(bench, name, prompt.text, prompt.max_tokens)
            limits = {"usable_fraction": bench.usable_fraction, "deadline_s": 600.0}
            new = SequentialClient(url)
            timeout = httpx.Timeout(connect=10.0, read=bench.stall_timeout_s, write=30, pool=10)
            metrics = httpx.Client(timeout=10)
            with httpx.Client(timeout=timeout) as hx:

                def send_new(i: int) -> Any:
                    return new.stream(
                        body,
                        RequestTag("p", "measured", i),
                        StreamLimits(stall_s=bench.stall_timeout_s, **limits),
                    )

                def send_old(i: int) -> Any:
                    return old.stream_request(
                        hx, url, body, prompt="p", phase="measured", index=i, **limits
                    )

                arms = {"sequential": send_new, "httpx-340b0e1": send_old}
                for fn in arms.values():  # warm both: imports, connections, the server
                    for i in range(bench.warmups):
                        fn(i)
                for rnd in range(args.rounds):
                    order = list(arms) if rnd % 2 == 0 else list(reversed(arms))
                    for arm in order:
                        for i in range(args.runs):
                            before = scrape_metrics(metrics, url)
                            rec = arms[arm](i)
                            after = scrape_metrics(metrics, url)
                            w = request_witness(before, after)
                            engine_tps = (
                                w.generation_tokens / w.decode_s
                                if w and w.single and w.decode_s and w.generation_tokens
                                else None
                            )
                            rows.append({
                                "round": rnd, "arm": arm, "index": i, "error": rec.error,
                                "decode_tps": rec.decode_tps, "ttft_s": rec.ttft_s,
                                "engine_decode_tps": engine_tps,
                            })  # fmt: skip
            new.close()
            metrics.close()
    summary: dict[str, Any] = {}
    for arm in ("sequential", "httpx-340b0e1"):
        mine = [r for r in rows if r["arm"] == arm and r["decode_tps"]]
        summary[arm] = {
            "requests": len(mine),
            "median_decode_tps": round(statistics.median(r["decode_tps"] for r in mine), 1),
            "median_engine_decode_tps": round(
                statistics.median(r["engine_decode_tps"] for r in mine if r["engine_decode_tps"]),
                1,
            ),
            "cv_pct": round(
                statistics.stdev(r["decode_tps"] for r in mine)
                / statistics.fmean(r["decode_tps"] for r in mine)
                * 100,
                2,
            ),
        }
    ratios = []
    for rnd in range(args.rounds):
        med = {
            arm: statistics.median(
                r["decode_tps"] for r in rows if r["round"] == rnd and r["arm"] == arm
            )
            for arm in summary
        }
        ratios.append(med["sequential"] / med["httpx-340b0e1"])
    summary["ratio_sequential_to_httpx_per_round"] = [round(x, 4) for x in ratios]
    summary["median_ratio"] = round(statistics.median(ratios), 4)
    print(json.dumps(summary, indent=2))
    if args.output:
        out = {"rounds": args.rounds, "runs": args.runs, "old": args.old, "summary": summary,
               "rows": rows}  # fmt: skip
        args.output.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""Numbers at the limits (issue 44): a validly signed report whose records carry 1.8e305, 1e308,
-1e300 or the smallest subnormal (5e-324) in a numeric field gets a checklist from `kit report
verify`, a table from `kit report show` and a verdict from `kit report compare`, never an
internal error; verify names each value that is no plausible measurement (kit.bench.plausible).

Each value goes into every numeric field of the records, one field a record (a run among good
ones, as the property test of test_verify.py first found it), in three signed reports: the
sequential protocol's floats (measured runs with the server's, the host-speed and the
scheduler's witness, and prefill runs), its integers (which the schema refuses as floats), and
a load point's records.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from clirun import kit
from factories import build_report
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kit import signing
from kit.bench import summarize_prompt
from kit.bench.plausible import CHUNK_TIMES, RANGES
from kit.figures import KINDS, Relative, kind
from kit.metrics import RequestWitness
from kit.probe.hostspeed import HostSpeed
from kit.probe.schedstat import CpuAccount
from kit.recipe import Prompt, recipe_sha256
from kit.recipe.protocol import non_canonical_reasons
from kit.report import Report
from kit.report.assemble import energy_of
from kit.report.deltas import figure_delta
from kit.report.figures import Figure
from kit.report.files import encode_report, upgraded
from kit.report.html.figure import UNDRAWN
from kit.report.validity import verdict

VALUES = [1.8e305, 1e308, -1e300, 5e-324]
SWEEP = Path("results") / "h200-llama8b-bf16-sweep-2026-12-03" / "report.json"
RUNS = 12  # measured runs a prompt: room for nine fields each, three runs left clean
# a record's fields as dotted paths ("[0]": the first item)
SEQUENTIAL = [
    "ttft_s", "wall_s", "decode_tps", "wall_tps", "text_chunk_times_s[0]",
    *(f"{part}.{f}" for part in ("server", "host_speed", "cpu") for f in RANGES[part]),
]  # fmt: skip
PREFILL = ["ttft_s", "wall_s", "decode_tps", "wall_tps", "text_chunk_times_s[0]"]
INTEGERS = ["index", "max_tokens", "prompt_tokens", "completion_tokens", "chunks"]
LOAD = ["ttft_s", "wall_s", "decode_tps", "wall_tps", "sent_s", "first_chunk_s"]


def payload_of(report: Report) -> dict[str, Any]:
    envelope = json.loads(encode_report(report))
    data: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return data


def witnessed(report: Report) -> Report:
    """The report with the server's, the host-speed and the scheduler's witness on every
    measured run (plausible, consistent readings), its summaries and verdict recomputed."""
    assert report.bench is not None
    records = []
    for r in report.bench.records:
        if r.phase == "measured" and r.ttft_s and r.wall_s:
            wall_us = r.wall_s * 1e6
            r = r.model_copy(
                update={
                    "server": RequestWitness(
                        requests=1.0,
                        generation_tokens=float(r.completion_tokens or 0),
                        ttft_s=r.ttft_s * 0.9,
                        decode_s=r.wall_s - r.ttft_s,
                        e2e_s=r.wall_s,
                    ),
                    "host_speed": HostSpeed(
                        python_ops_s=1.0e7,
                        kernel_ops_s=2.0e4,
                        kernel="numpy-matmul-f32-128",
                        cpus=[0],
                    ),
                    "cpu": CpuAccount(
                        engine_run_us=wall_us * 0.9,
                        engine_wait_us=wall_us * 0.01,
                        worker_run_us=wall_us * 0.8,
                        worker_wait_us=wall_us * 0.005,
                        client_run_us=wall_us * 0.1,
                        client_wait_us=wall_us * 0.001,
                    ),
                }
            )
        records.append(r)
    prompts = [
        summarize_prompt(
            Prompt(name=p.prompt, text="-", max_tokens=p.max_tokens), records
        ).model_copy(update={"spec_decode": p.spec_decode, "server": p.server})
        for p in report.bench.prompts
    ]
    bench = report.bench.model_copy(update={"records": records, "prompts": prompts})
    report = report.model_copy(update={"bench": bench})
    fresh = verdict(report, report.host, report.gpu_sampling, rules=report.validity.rules)
    return report.model_copy(update={"validity": fresh})


def load_payload(fixtures_dir: Path) -> dict[str, Any]:
    """The recorded sweep cut to its first two points (the recipe's levels, its hash, the energy
    and the verdict to match): a load report that verifies, small enough to check often."""
    envelope = json.loads((fixtures_dir / SWEEP).read_bytes())
    data: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    keep = ("concurrency-1", "concurrency-2")
    bench = data["bench"]
    bench["records"] = [r for r in bench["records"] if r["prompt"] in keep]
    bench["load_points"] = [pt for pt in bench["load_points"] if pt["label"] in keep]
    data["recipe"]["bench"]["load"]["levels"] = [1, 2]
    data["recipe_sha256"] = recipe_sha256(data["recipe"])
    data["non_canonical"] = non_canonical_reasons(data["recipe"])
    data["canonical"] = not data["non_canonical"]
    report = Report.model_validate(upgraded(data))
    energy = energy_of(report.gpu_sampling, report.bench)
    report = report.model_copy(update={"energy_per_token_j": energy})
    fresh = verdict(report, report.host, report.gpu_sampling, rules=report.validity.rules)
    return payload_of(report.model_copy(update={"validity": fresh}))


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    pair = signing.generate_keypair(tmp_path_factory.mktemp("keys"))
    return signing.load_private_key(pair.private_key), pair.public_key


@pytest.fixture(scope="module")
def bases(fixtures_dir: Path) -> dict[str, dict[str, Any]]:
    """Each kind of report as a payload: sequential (measured runs witnessed) and load."""
    report = build_report(fixtures_dir, overrides=(f"bench.runs={RUNS}",))
    return {"sequential": payload_of(witnessed(report)), "load": load_payload(fixtures_dir)}


def placed(
    base: dict[str, Any], value: float, fields: dict[str, list[str]]
) -> tuple[dict[str, Any], dict[int, str]]:
    """The payload with ``value`` in each of ``fields`` (by phase), one a record, the fields of
    a phase dealt to its prompts in turn; and which record got which field."""
    payload = json.loads(json.dumps(base))
    records = payload["bench"]["records"]
    where: dict[int, str] = {}
    for phase, names in fields.items():
        free = [i for i, r in enumerate(records) if r["phase"] == phase]
        prompts = sorted({records[i]["prompt"] for i in free})
        queues = {p: [i for i in free if records[i]["prompt"] == p] for p in prompts}
        for n, name in enumerate(names):
            i = queues[prompts[n % len(prompts)]].pop(0)
            target, leaf = records[i], name
            if "." in name:
                part, leaf = name.split(".")
                target = target[part]
            if leaf.endswith("[0]"):
                target[leaf[:-3]][0] = value
            else:
                target[leaf] = value
            where[i] = name
    return payload, where


def no_internal_error(res: Result) -> None:
    assert "internal error" not in res.output, res.output
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception


def limits(name: str) -> tuple[float, float, str]:
    part, _, leaf = name.rpartition(".")
    return CHUNK_TIMES if leaf.endswith("[0]") else RANGES[part][leaf]


CASES = {
    "sequential": {"measured": SEQUENTIAL, "prefill": PREFILL},
    "integers": {"measured": INTEGERS},
    "load": {"load": LOAD},
}


@pytest.mark.parametrize("value", VALUES, ids=repr)
@pytest.mark.parametrize("case", CASES)
def test_a_signed_report_with_any_number_gets_a_checklist_and_a_verdict(
    case: str, value: float, bases: dict[str, dict[str, Any]], key: tuple[Any, Path], tmp_path: Path
) -> None:
    base = bases["load" if case == "load" else "sequential"]
    private, public = key
    original, changed = tmp_path / "a.json", tmp_path / "b.json"
    original.write_bytes(signing.sign_report(base, private))
    payload, where = placed(base, value, CASES[case])
    changed.write_bytes(signing.sign_report(payload, private))

    res = kit("report", "verify", changed, "--key", public, "--json")
    no_internal_error(res)
    assert res.exit_code == 1, res.output
    items = {item["name"]: item for item in json.loads(res.stdout)["items"]}
    assert items["signature"]["ok"] is True
    if case == "integers":  # a float where the schema wants an integer
        assert items["schema"]["ok"] is False
        for i, name in where.items():
            assert any(
                p.startswith(f"bench.records.{i}.{name}:") for p in items["schema"]["problems"]
            )
    else:  # named as it is, where it is outside its range (the list stops after 12 lines)
        assert items["schema"]["ok"] is True and items["records"]["ok"] is False
        outside = {i: n for i, n in where.items() if not limits(n)[0] <= value <= limits(n)[1]}
        named = [p for p in items["records"]["problems"] if "not a plausible measurement" in p]
        assert bool(named) == bool(outside)
        for problem in named:
            i = int(problem.split()[1])
            assert f": {outside[i]} {value!r} is not a plausible measurement (" in problem
        if outside:
            assert items["summaries"]["detail"].endswith("left out: not a plausible measurement)")

    res = kit("report", "show", changed, "--key", public)
    no_internal_error(res)
    if case == "integers":
        assert res.exit_code == 2 and res.stderr.startswith("error: "), res.output
    else:
        assert res.exit_code == 0, res.output

    res = kit("report", "compare", original, changed, "--key", public)
    no_internal_error(res)
    if case == "integers":
        assert res.exit_code == 2 and res.stderr.startswith("error: "), res.output
    else:  # REPRODUCED, DIFFERENT or INCONCLUSIVE, as the runs left say
        assert res.exit_code in (0, 4, 5), res.output
        assert "verdict: " in res.stdout


def test_the_draw_that_crashed_verify_is_named_and_left_out(
    fixtures_dir: Path, key: tuple[Any, Path], tmp_path: Path
) -> None:
    """The property test's find, by the CLI: a prefill run's TTFT of 1.797693134862316e+305 s,
    which `kit report verify` met with `error: internal error: AttributeError`."""
    private, public = key
    payload = payload_of(build_report(fixtures_dir))
    record = payload["bench"]["records"][18]
    assert (record["prompt"], record["phase"], record["index"]) == ("prefill-512", "prefill", 0)
    record["ttft_s"] = 1.797693134862316e305
    path = tmp_path / "report.json"
    path.write_bytes(signing.sign_report(payload, private))

    res = kit("report", "verify", path, "--key", public)
    no_internal_error(res)
    assert res.exit_code == 1
    lines = [line.strip() for line in res.stdout.splitlines()]
    assert (
        "- record 18 (prefill-512 prefill #0): ttft_s 1.797693134862316e+305 is not a plausible "
        "measurement (1e-06 to 1e+06 s)"
    ) in lines
    summaries = next(line for line in lines if line.startswith("[FAIL] summaries"))
    assert summaries.endswith("(record 18 left out: not a plausible measurement)")
    assert "- prefill 512.ttft_ms.n: stored 11, recomputed 10" in lines  # the run left out
    assert lines[-1] == "FAILED: 2 of 9 items (summaries, records)"

    res = kit("report", "show", path, "--key", public)
    no_internal_error(res)
    assert res.exit_code == 0 and "prefill" in res.stdout

    original = tmp_path / "original.json"
    original.write_bytes(signing.sign_report(payload_of(build_report(fixtures_dir)), private))
    res = kit("report", "compare", original, path, "--key", public)
    no_internal_error(res)
    assert res.exit_code in (0, 4, 5) and "verdict: " in res.stdout
    assert (
        "warning: B has 1 record(s) that are not a plausible measurement, left out of its "
        "figures: record 18 (prefill-512 prefill #0) (kit report verify names their values)"
    ) in res.stdout.splitlines()


FINITE = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@example(a=95.0, b=1.8e305, ha=1.0, hb=1.0, key="decode_tps")
@example(a=5e-324, b=95.0, ha=1.0, hb=None, key="decode_tps")  # a percentage of next to nothing
@example(a=-1e300, b=1e308, ha=None, hb=None, key="decode_tps")  # a difference beyond a double
@example(a=95.0, b=95.0, ha=1e308, hb=1e308, key="ttft_ms")  # squares beyond a double
@example(a=0.0, b=95.0, ha=None, hb=None, key="decode_tps")  # no percentage of 0
@example(a=1e308, b=-1e308, ha=1e308, hb=1e308, key="accepted_per_draft")  # se² beyond a double
@example(a=-1e308, b=1e308, ha=None, hb=None, key="peak_vram_mib")  # a tolerance
@given(
    a=FINITE,
    b=FINITE,
    ha=FINITE | st.none(),
    hb=FINITE | st.none(),
    key=st.sampled_from([k.key for k in KINDS]),
)
def test_any_two_figures_get_a_finite_delta_and_a_status(
    a: float, b: float, ha: float | None, hb: float | None, key: str
) -> None:
    """Every kind of figure of the table (kit.figures), any two finite values and intervals
    (standard errors for a counter, the first value as a threshold's limit)."""
    k = kind(key)
    m = figure_delta(
        Figure(k, "x", a, ha, se=ha, limit=a),
        Figure(k, "x", b, hb, se=hb, limit=a),
    )
    assert all(v is None or math.isfinite(v) for v in (m.delta, m.delta_pct, m.band_pct))
    assert m.status is not None  # within, outside or inconclusive: never unjudged
    if isinstance(k.rule, Relative) and (m.delta_pct is None or m.band_pct is None):
        assert m.status == "inconclusive"


def test_the_page_draws_what_it_can_and_says_which_chart_it_cannot(
    bases: dict[str, dict[str, Any]], key: tuple[Any, Path], tmp_path: Path
) -> None:
    """`kit report html`: a stored mean of 1e308 tok/s, whose axis matplotlib cannot lay out,
    and a load point's TPOT of 5e-324 ms (an interactivity of 1000 / 5e-324 = inf)."""
    pytest.importorskip("matplotlib", reason="kit's html extra: pip install 'kit[html]'")
    private, public = key
    sequential = json.loads(json.dumps(bases["sequential"]))
    sequential["bench"]["prompts"][0]["decode_tps"]["mean"] = 1e308
    load = json.loads(json.dumps(bases["load"]))
    load["bench"]["load_points"][0]["tpot_ms"]["p50"] = 5e-324
    for name, payload in (("sequential", sequential), ("load", load)):
        path, page = tmp_path / f"{name}.json", tmp_path / f"{name}.html"
        path.write_bytes(signing.sign_report(payload, private))
        res = kit("report", "html", path, "--key", public, "-o", page)
        no_internal_error(res)
        assert res.exit_code == 0, res.output
        drawn = page.read_text(encoding="utf-8")
        assert drawn.count(UNDRAWN) == (name == "sequential")  # the decode chart, only
        assert "<svg " in drawn  # the others

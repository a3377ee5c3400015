"""``kit bench --fidelity``: does kit, while it measures, slow the server it measures?

Rounds of arms in turn on one prompt (``kit``, ``kit-no-sampler``, ``independent``, ``kit-cli``),
each request's decode tok/s and the server's own per window, against the goals
(``GOAL_MEAN_PCT``, ``GOAL_DIP_PCT``). docs/load.md says how.
"""

from __future__ import annotations

import json
import logging
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
from pydantic import Field

from kit.base import KitModel
from kit.bench import model_info
from kit.bench.runner import Bencher, Watch
from kit.bench.server import scrape_metrics
from kit.bench.stream import request_body, utc_now_ms
from kit.metrics import ServerWindow, decode_tps, server_window
from kit.probe import GpuSampler, HostLoadSampler
from kit.recipe import Bench, LoadedRecipe, Recipe
from kit.report.assemble import new_run_id
from kit.report.files import read_report

log = logging.getLogger(__name__)

Arm = Literal["kit", "kit-no-sampler", "independent", "kit-cli"]
ARMS: tuple[Arm, ...] = ("kit", "kit-no-sampler", "independent", "kit-cli")
GOAL_MEAN_PCT = 0.3
GOAL_DIP_PCT = 2.0
INDEPENDENT = Path(__file__).with_name("bench") / "independent.py"


class ArmRun(KitModel):
    """One arm's window in one round."""

    round: int = Field(description="Round, from 0.")
    arm: Arm = Field(description="Which client measured.")
    decode_tps: list[float] = Field(description="Each request's decode tok/s, that client's.")
    no_decode: int = Field(
        0,
        description="Requests with no decode time (all their text in one chunk, as a held "
        "stream on a starved host delivers it), left out of decode_tps.",
    )
    server: ServerWindow | None = Field(description="The server's own figures, same window.")
    warmup_decode_tps: list[float] = Field(
        default_factory=list,
        description="kit-cli: its warm-ups' decode tok/s (run first, not measured, not counted).",
    )


class ArmSummary(KitModel):
    arm: Arm = Field(description="Which client.")
    mean_decode_tps: float | None = Field(description="Mean over every request of the arm.")
    vs_independent_pct: float | None = Field(
        description="Mean against the independent arm's mean, in percent."
    )
    worst_dip_pct: float | None = Field(
        description="The arm's slowest request against the independent arm's median, percent."
    )
    server_decode_tps: float | None = Field(description="Mean of the server's own, per window.")
    server_vs_independent_pct: float | None = Field(
        description="The server's own figure in this arm's windows against in the independent "
        "arm's, in percent: the server itself ran slower when this is negative."
    )


class Fidelity(KitModel):
    """The interleave, and whether kit met the goals."""

    target: str = Field(description="The server.")
    served_model: str = Field(description="Model name in the requests.")
    prompt: str = Field(description="The recipe's prompt used.")
    max_tokens: int = Field(description="max_tokens sent.")
    runs: int = Field(description="Requests per arm and round.")
    rounds: int = Field(description="Rounds of the arms.")
    arms: list[Arm] = Field(default_factory=lambda: list(ARMS[:3]), description="In turn.")
    sample_interval_s: float = Field(description="The GPU sampler's interval in the kit arm.")
    started_at: str = Field(description="UTC start.")
    finished_at: str = Field(description="UTC end.")
    windows: list[ArmRun] = Field(description="Every arm's window, in the order run.")
    summary: list[ArmSummary] = Field(description="Per arm.")
    goal_mean_pct: float = Field(description="Most kit may slow the server on average, percent.")
    goal_dip_pct: float = Field(description="Most one request of kit's may dip, percent.")
    goals_met: bool | None = Field(description="Both goals met by the kit arm (None: unknown).")
    complete: bool = Field(
        True, description="False in the file written while it runs: the windows so far."
    )
    errors: list[str] = Field(
        default_factory=list, description="Arms' windows that failed after the first round."
    )


def _pct(x: float | None, ref: float | None) -> float | None:
    return (x - ref) / ref * 100 if x is not None and ref else None


def _kit_arm(url: str, bench: Bench, model: str, sampler: bool, interval_s: float) -> ArmRun:
    if sampler:
        with GpuSampler(interval_s=interval_s) as gpu, HostLoadSampler() as load:
            result = Bencher(url, bench, model, watch=Watch(hooks=(gpu.mark, load.mark))).run()
    else:
        result = Bencher(url, bench, model).run()
    if not result.complete:
        raise RuntimeError(f"kit's bench did not complete: {result.incomplete_reason}")
    runs = [r for r in result.records if r.phase == "measured"]
    measured = [r.decode_tps for r in runs if r.decode_tps]
    server = result.prompts[0].server if result.prompts else None
    arm: Arm = "kit" if sampler else "kit-no-sampler"
    return ArmRun(
        round=0, arm=arm, decode_tps=measured, no_decode=len(runs) - len(measured), server=server
    )


def _independent_arm(url: str, body: dict, runs: int, client: httpx.Client) -> ArmRun:  # type: ignore[type-arg]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(body, fh)
    before = scrape_metrics(client, url)
    proc = subprocess.run(
        [sys.executable, "-I", str(INDEPENDENT), url, fh.name, str(runs)],
        capture_output=True,
        text=True,
        check=False,
    )
    after = scrape_metrics(client, url)
    Path(fh.name).unlink(missing_ok=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the independent client failed: {proc.stderr[-500:]}")
    rates, rows = [], 0
    for line in proc.stdout.splitlines():
        rows += 1
        row = json.loads(line)
        if row["error"]:
            raise RuntimeError(f"the independent client: {row['error']}")
        rate = decode_tps(row["completion_tokens"] or 0, row["wall_s"], row["ttft_s"])
        if rate:
            rates.append(rate)
    server = server_window(before, after) if before and after else None
    return ArmRun(
        round=0, arm="independent", decode_tps=rates, no_decode=rows - len(rates), server=server
    )


def _cli_arm(url: str, recipe: Recipe) -> ArmRun:
    """``kit bench --target`` in its own process on ``recipe`` (written out resolved),
    unsigned, into a scratch folder."""
    with tempfile.TemporaryDirectory(prefix="kit-fidelity-") as tmp:
        path = Path(tmp) / "recipe.yaml"  # JSON is YAML
        path.write_text(recipe.model_dump_json(exclude_none=True))
        argv = [sys.executable, "-m", "kit.cli", "bench", "--target", url, str(path)]
        proc = subprocess.run(
            [*argv, "--no-sign", "-o", tmp], capture_output=True, text=True, check=False
        )
        reports = sorted(Path(tmp).glob("*/report.json"))
        if proc.returncode != 0 or not reports:
            raise RuntimeError(f"kit bench --target failed: {proc.stderr[-500:]}")
        report, _ = read_report(reports[0], allow_unsigned=True)
    result = report.bench
    if result is None or not result.complete:
        raise RuntimeError("kit bench --target did not complete")
    runs = [r for r in result.records if r.phase == "measured"]
    measured = [r.decode_tps for r in runs if r.decode_tps]
    warm = [r.decode_tps for r in result.records if r.phase == "warmup" and r.decode_tps]
    server = result.prompts[0].server if result.prompts else None
    return ArmRun(
        round=0,
        arm="kit-cli",
        decode_tps=measured,
        no_decode=len(runs) - len(measured),
        server=server,
        warmup_decode_tps=warm,
    )


def summarize(windows: list[ArmRun]) -> list[ArmSummary]:
    def of(arm: Arm) -> list[ArmRun]:
        return [w for w in windows if w.arm == arm]

    ind = [v for w in of("independent") for v in w.decode_tps]
    ind_mean = statistics.fmean(ind) if ind else None
    ind_median = statistics.median(ind) if ind else None
    ind_server = [
        w.server.decode_tps for w in of("independent") if w.server and w.server.decode_tps
    ]
    ind_server_mean = statistics.fmean(ind_server) if ind_server else None
    out = []
    for arm in [a for a in ARMS if of(a)]:
        values = [v for w in of(arm) for v in w.decode_tps]
        mean = statistics.fmean(values) if values else None
        srv = [w.server.decode_tps for w in of(arm) if w.server and w.server.decode_tps]
        srv_mean = statistics.fmean(srv) if srv else None
        out.append(
            ArmSummary(
                arm=arm,
                mean_decode_tps=mean,
                vs_independent_pct=_pct(mean, ind_mean),
                worst_dip_pct=_pct(min(values), ind_median) if values else None,
                server_decode_tps=srv_mean,
                server_vs_independent_pct=_pct(srv_mean, ind_server_mean),
            )
        )
    return out


@dataclass(frozen=True)
class FidelityJob:
    """A fidelity run: the server at ``url`` serving ``model``, the bench whose first prompt,
    warm-ups and runs it sends, ``rounds`` of the arms, the GPU sampler's interval; with
    ``recipe`` (whose bench this is) also the ``kit-cli`` arm; ``out_file`` is rewritten after
    every window (``complete`` false until the last), so an interrupted run keeps its windows."""

    url: str
    bench: Bench
    model: str
    rounds: int
    interval_s: float = 0.5
    recipe: Recipe | None = None
    out_file: Path | None = None


def fidelity(job: FidelityJob) -> Fidelity:
    """The interleave (the module's docstring) of ``job``."""
    url, bench, model, rounds = job.url.rstrip("/"), job.bench, job.model, job.rounds
    interval_s, recipe, out_file = job.interval_s, job.recipe, job.out_file
    prompt = bench.prompts[0]
    # one prompt, sequential: what only a load pattern takes goes with it, and so do the probes
    # after a bench (the CLI arm times the bench alone); the result is validated again (a copy
    # is not), so the CLI arm's recipe cannot be refused mid-run
    one = Bench.model_validate(
        bench.model_copy(
            update={"prompts": [prompt], "prefill": None, "load": None}
            | {"dataset": None, "slo": None, "context": None, "soak": None, "quality": None}
        ).model_dump()
    )
    warm = one.model_copy(update={"runs": max(one.warmups, 1), "warmups": 0})
    measured = one.model_copy(update={"warmups": 0})
    body = request_body(measured, model, prompt.text, prompt.max_tokens)
    started = utc_now_ms()
    Bencher(url, warm, model).run()  # warm the server once
    arms = list(ARMS) if recipe is not None else list(ARMS[:3])
    # the CLI's own process is cold: it runs the recipe's warm-ups, as a user's run does
    cli_recipe = recipe.model_copy(update={"bench": one}) if recipe is not None else None
    windows: list[ArmRun] = []
    errors: list[str] = []

    def result(complete: bool) -> Fidelity:
        summary = summarize(windows)
        kit = next((s for s in summary if s.arm == "kit"), None)
        met = None
        if kit and kit.server_vs_independent_pct is not None and kit.worst_dip_pct is not None:
            met = (
                kit.server_vs_independent_pct >= -GOAL_MEAN_PCT
                and kit.worst_dip_pct >= -GOAL_DIP_PCT
            )
        return Fidelity(
            target=url,
            served_model=model,
            prompt=prompt.name,
            max_tokens=prompt.max_tokens,
            runs=measured.runs,
            rounds=rounds,
            arms=arms,
            sample_interval_s=interval_s,
            started_at=started,
            finished_at=utc_now_ms(),
            windows=windows,
            summary=summary,
            goal_mean_pct=GOAL_MEAN_PCT,
            goal_dip_pct=GOAL_DIP_PCT,
            goals_met=met,
            complete=complete,
            errors=errors,
        )

    with httpx.Client(timeout=30) as client:
        for rnd in range(rounds):
            for arm in arms:
                if arm == "independent":
                    run = _independent_arm(url, body, measured.runs, client)
                elif arm == "kit-cli":
                    assert cli_recipe is not None
                    try:
                        run = _cli_arm(url, cli_recipe)
                    except RuntimeError as exc:
                        if rnd == 0:  # not a passing fault: the whole CLI does not run
                            raise
                        errors.append(f"round {rnd} kit-cli: {exc}")
                        log.warning("fidelity: the kit-cli arm failed: %s", exc)
                        continue
                else:
                    run = _kit_arm(url, measured, model, arm == "kit", interval_s)
                windows.append(run.model_copy(update={"round": rnd}))
                log.info(
                    "fidelity: round %d %s: %s tok/s%s",
                    rnd,
                    arm,
                    ", ".join(f"{v:.1f}" for v in run.decode_tps),
                    f" (server {run.server.decode_tps:.1f})"
                    if run.server and run.server.decode_tps
                    else "",
                )
                if out_file is not None:
                    out_file.write_text(result(False).model_dump_json(indent=2) + "\n")
    final = result(True)
    if out_file is not None:
        out_file.write_text(final.model_dump_json(indent=2) + "\n")
    return final


def fidelity_table(f: Fidelity) -> str:
    def n(v: float | None, d: int = 1, sign: bool = False) -> str:
        return "-" if v is None else f"{v:{'+' if sign else ''}.{d}f}"

    head = (
        f"  {'arm':<15} {'decode tok/s':>12} {'vs independent':>15} {'worst dip':>10} "
        f"{'server tok/s':>12} {'server vs ind.':>15}"
    )
    lines = [
        f"kit bench --fidelity: {f.rounds} rounds x {f.runs} requests of {f.prompt!r} per arm "
        f"against {f.target}",
        head,
        "  " + "-" * (len(head) - 2),
    ]
    for s in f.summary:
        vs = n(s.vs_independent_pct, 2, True) + " %"
        dip = n(s.worst_dip_pct, 2, True) + " %"
        srv = n(s.server_vs_independent_pct, 2, True) + " %"
        lines.append(
            f"  {s.arm:<15} {n(s.mean_decode_tps):>12} {vs:>15} {dip:>10} "
            f"{n(s.server_decode_tps):>12} {srv:>15}"
        )
    goal = {True: "met", False: "NOT met", None: "unknown (no server counters)"}[f.goals_met]
    lines.append(
        f"  goals (kit slows the server by at most {f.goal_mean_pct:g} % on average, no request "
        f"dips more than {f.goal_dip_pct:g} %): {goal}"
    )
    return "\n".join(lines)


def bench_fidelity(
    url: str, loaded: LoadedRecipe, rounds: int, out_dir: Path
) -> tuple[Fidelity, Path]:
    """``kit bench --fidelity``: :func:`fidelity` of the recipe against the server at ``url``,
    written to ``out_dir/fidelity-<recipe>-<run id>.json`` as it goes; returns it and its path."""
    served, _ = model_info(url)
    out = out_dir / f"fidelity-{loaded.recipe.name}-{new_run_id()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    log.info("kit bench --fidelity: writing %s as it goes", out)
    job = FidelityJob(url, loaded.recipe.bench, served, rounds, recipe=loaded.recipe, out_file=out)
    return fidelity(job), out

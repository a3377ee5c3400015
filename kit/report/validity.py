"""The validity verdict every report carries: is this run fit to quote, and if not, why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kit.bench.held import BURST_S, burst
from kit.probe import Finding, GpuSampling, HostProbe, host_load_findings, probe_findings
from kit.quality import quality_findings
from kit.report.causes import decode_findings, synthetic_findings
from kit.report.jit import place_jit
from kit.report.verdict import Validity

if TYPE_CHECKING:
    from kit.bench import RequestRecord
    from kit.enginelog import EngineChoices
    from kit.report.schema import Report

RULES = 3  # the verdict rules new reports are judged by
CV_LIMIT_PCT = 5.0
# kit's load client at this share of one core (its busiest process) may be what set a point's
# pace: its event loop is then late to read what arrived, and to send what is due
CLIENT_BUSY_PCT = 90.0


def _finding(code: str, severity: str, message: str) -> Finding:
    return Finding.model_validate({"code": code, "severity": severity, "message": message})


def _jit_findings(choices: EngineChoices, records: list[RequestRecord]) -> list[Finding]:
    """A compile inside a measured request stalled it; one in a warm-up or the quality probe
    touched no figure. A compile kit cannot place (no time recorded: reports written before
    2026-12-07, servers kit did not start) counts, as it always did."""
    placed = place_jit(choices, records)
    inside = [f"{p.event.kernel} at {p.event.logged_at} in {p.request}" for p in placed.inside]
    names = inside + placed.unplaced
    if not names:
        return []
    where = "inside the request named" if inside else "the server log has the time"
    return [
        _finding(
            "engine-jit-while-serving",
            "warning",
            f"the engine compiled {', '.join(names)} while serving (its log: 'JIT compilation "
            "during inference'): the requests in flight when it first met that shape stalled, "
            "and a point or run then reads slower than the server is (warm up at each point's "
            f"concurrency; {where})",
        )
    ]


def _bench_findings(report: Report, rules: int) -> list[Finding]:
    found: list[Finding] = []
    bench = report.bench
    if bench is None:
        return found
    if rules >= 2:
        found += decode_findings(report, rules)
    errors = [r for r in bench.records if r.error]
    if errors:
        found.append(
            _finding(
                "request-errors",
                "error",
                f"{len(errors)} request(s) failed, first: {errors[0].error}",
            )
        )
    for p in bench.prompts:
        name = p.prompt
        if p.usable < p.measured:
            found.append(
                _finding(
                    "runs-ended-early",
                    "error",
                    f"{name}: {p.measured - p.usable} of {p.measured} measured runs ended "
                    "before the usable share of max_tokens",
                )
            )
        if p.usable == 0:
            found.append(_finding("no-usable-runs", "error", f"{name}: no usable measured run"))
        cv = p.decode_tps.cv_pct if p.decode_tps is not None else None
        if rules < 2 and cv is not None and cv > CV_LIMIT_PCT:
            found.append(
                _finding(
                    "decode-cv-high",
                    "error",
                    f"{name}: decode TPS CV {cv:.1f}% is above {CV_LIMIT_PCT:.0f}%",
                )
            )
    # rules 2: a sequential run delivered in a burst is a held stream (kit.bench.held)
    phases = ("measured", "load") if rules < 2 else ("load",)
    bursts = [r for r in bench.records if r.phase in phases and burst(r)]
    if bursts:
        measured = sum(1 for r in bench.records if r.phase in ("measured", "load"))
        found.append(
            _finding(
                "burst-delivery",
                "error",
                f"{len(bursts)} of {measured} measured requests arrived in one burst (nine in ten "
                f"of their text chunks within {BURST_S * 1000:g} ms of the last, first: "
                f"{bursts[0].prompt} #{bursts[0].index}): their decode figures time the delivery, "
                "not the generation (a starved client or server process)",
            )
        )
    busy = [
        p
        for p in bench.load_points
        if p.client_cpu_pct is not None and p.client_cpu_pct >= CLIENT_BUSY_PCT
    ]
    if busy:
        worst = max(busy, key=lambda p: p.client_cpu_pct or 0.0)
        found.append(
            _finding(
                "client-saturated",
                "error",
                f"{', '.join(p.label for p in busy)}: kit's load client used "
                f"{worst.client_cpu_pct:.0f} % of a core at {worst.label} ({CLIENT_BUSY_PCT:g} % "
                "or more): the client, not the server, may have set the pace, and its "
                "timestamps lag the bytes (raise bench.load.processes)",
            )
        )
    choices = report.server.engine_choices if report.server else None
    if choices is not None and choices.jit_kernels:
        found.extend(_jit_findings(choices, bench.records))
    speculative = report.recipe.get("speculative") or {}
    if speculative.get("method", "none") != "none":
        spec = bench.spec_decode
        if spec is None or not spec.drafts:
            found.append(
                _finding(
                    "acceptance-missing",
                    "error",
                    "speculative decoding is on but no acceptance figures were "
                    "measured (no spec-decode counters moved)",
                )
            )
    return found + synthetic_findings(report)


def verdict(
    report: Report,
    host: HostProbe | None = None,
    sampling: GpuSampling | None = None,
    rules: int = RULES,
) -> Validity:
    """Compute the verdict from a report and, when present, host evidence, by ``rules``.

    Reasons are ordered: errors first (they make the run invalid), then warnings, each group in
    the order the checks run. The same function runs when the report is written and when
    ``kit report verify`` recomputes it, under the rules the report was written with
    (``Validity.rules``): a report keeps the verdict it was signed with.

    - rules 1: decode CV over every usable run, bursts named, no cause sought.
    - rules 2 (:mod:`kit.report.causes`): held streams named and left out of the headline, the CV
      taken over the headline's runs, every decode error with the causes kit can see (or what it
      checked), a drift across runs, and host contention.
    - rules 3: as rules 2, and a high CV also names the runs off the median and the hypervisor's
      steal (a cause when 1 % or more, else among what was checked).

    Under any rules, a synthetic-acceptance run whose counters miss the target is an error
    (``synthetic-acceptance-missed``, :func:`kit.report.causes.synthetic_findings`).
    Under any rules, a quality probe (``report.quality``) is judged by its recipe's thresholds:
    ``quality-garbage`` (error) near chance, ``quality-degraded`` (warning) past them
    (:func:`kit.quality.quality_findings`).
    """
    found: list[Finding] = []
    if report.status != "complete":
        found.append(
            _finding("incomplete", "error", f"the run is incomplete: {report.incomplete_reason}")
        )
    found += _bench_findings(report, rules)
    found += quality_findings(report.quality)
    if host is not None:
        found.extend(probe_findings(host, sampling))
    if report.host_load is not None:
        quiet = host_load_findings(report.host_load)
        found.extend(quiet)
        causes = [f.message for f in quiet]
        if causes and rules < 2:  # rules 2 name the causes in kit.report.causes
            # a noisy figure names what was seen on the host while it was measured
            found = [
                _finding(f.code, f.severity, f"{f.message}; {'; '.join(causes)}")
                if f.code == "decode-cv-high"
                else f
                for f in found
            ]
    if not report.canonical:
        found.append(
            _finding(
                "not-canonical",
                "warning",
                "the protocol departs from the reference: " + "; ".join(report.non_canonical),
            )
        )
    errors_first = sorted(found, key=lambda f: 0 if f.severity == "error" else 1)
    return Validity(
        valid=not any(f.severity == "error" for f in found), reasons=errors_first, rules=rules
    )

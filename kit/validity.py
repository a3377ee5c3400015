"""The validity verdict every report carries: is this run fit to quote, and if not, why.

Reasons are ordered: errors first (they make the run invalid), then warnings, each group in
the order the checks run. The same function runs when the report is written and when
``kit report verify`` recomputes it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kit.probe import Finding, GpuSampling, HostLoad, HostProbe, host_load_findings, probe_findings

CV_LIMIT_PCT = 5.0


class Validity(BaseModel):
    """Whether the run is valid, with every reason found."""

    model_config = ConfigDict(extra="forbid")

    valid: bool = Field(description="No error-level reason was found.")
    reasons: list[Finding] = Field(description="Ordered reasons: errors, then warnings.")


def _finding(code: str, severity: str, message: str) -> Finding:
    return Finding.model_validate({"code": code, "severity": severity, "message": message})


def verdict(
    report: dict[str, Any], host: HostProbe | None = None, sampling: GpuSampling | None = None
) -> Validity:
    """Compute the verdict from a report's data (as JSON) and, when present, host evidence."""
    found: list[Finding] = []
    if report.get("status") != "complete":
        found.append(
            _finding(
                "incomplete", "error", f"the run is incomplete: {report.get('incomplete_reason')}"
            )
        )
    bench = report.get("bench") or {}
    records = bench.get("records") or []
    errors = [r for r in records if r.get("error")]
    if errors:
        found.append(
            _finding(
                "request-errors",
                "error",
                f"{len(errors)} request(s) failed, first: {errors[0]['error']}",
            )
        )
    for p in bench.get("prompts") or []:
        name = p["prompt"]
        if p["usable"] < p["measured"]:
            found.append(
                _finding(
                    "runs-ended-early",
                    "error",
                    f"{name}: {p['measured'] - p['usable']} of {p['measured']} measured runs ended "
                    "before the usable share of max_tokens",
                )
            )
        if p["usable"] == 0:
            found.append(_finding("no-usable-runs", "error", f"{name}: no usable measured run"))
        cv = (p.get("decode_tps") or {}).get("cv_pct")
        if cv is not None and cv > CV_LIMIT_PCT:
            found.append(
                _finding(
                    "decode-cv-high",
                    "error",
                    f"{name}: decode TPS CV {cv:.1f}% is above {CV_LIMIT_PCT:.0f}%",
                )
            )
    recipe = report.get("recipe") or {}
    spec_on = (recipe.get("speculative") or {}).get("method", "none") != "none"
    if spec_on and bench:
        spec = bench.get("spec_decode")
        if not spec or not spec.get("drafts"):
            found.append(
                _finding(
                    "acceptance-missing",
                    "error",
                    "speculative decoding is on but no acceptance figures were "
                    "measured (no spec-decode counters moved)",
                )
            )
    if host is not None:
        found.extend(probe_findings(host, sampling))
    load = report.get("host_load")
    if load:
        quiet = host_load_findings(HostLoad.model_validate(load))
        found.extend(quiet)
        causes = [f.message for f in quiet]
        if causes:
            # a noisy figure names what was seen on the host while it was measured
            found = [
                _finding(f.code, f.severity, f"{f.message}; {'; '.join(causes)}")
                if f.code == "decode-cv-high"
                else f
                for f in found
            ]
    if not report.get("canonical", True):
        found.append(
            _finding(
                "not-canonical",
                "warning",
                "the protocol departs from the reference: "
                + "; ".join(report.get("non_canonical") or []),
            )
        )
    errors_first = sorted(found, key=lambda f: 0 if f.severity == "error" else 1)
    return Validity(valid=not any(f.severity == "error" for f in found), reasons=errors_first)

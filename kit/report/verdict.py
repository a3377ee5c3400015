"""The verdicts a report records: whether the run is fit to quote (:mod:`kit.report.validity`
judges) and, for a re-run, whether it reproduced the original (:mod:`kit.report.reproduction`
judges)."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from kit.base import FrozenModel, KitModel
from kit.errors import EXIT_DIFFERENT, EXIT_FAILED, EXIT_INCONCLUSIVE, EXIT_OK
from kit.noise import Direction, Status
from kit.probe import Finding


class Validity(KitModel):
    """Whether the run is valid, with every reason found."""

    valid: bool = Field(description="No error-level reason was found.")
    reasons: list[Finding] = Field(description="Ordered reasons: errors, then warnings.")
    rules: int = Field(
        description="The verdict rules it was judged by (kit.report.validity): 1, the first; "
        "2, held streams, causes, drift and contention; 3, as 2 and a high CV names the runs "
        "off the median and the hypervisor's steal."
    )


Verdict = Literal["REPRODUCED", "DIFFERENT", "INCONCLUSIVE", "NOT COMPARABLE"]


class FigureCheck(FrozenModel):
    """One judged figure of the original against the re-run."""

    metric: str = Field(description="e.g. 'narrative decode TPS', 'prefill 10000 tok/s'.")
    unit: str = Field(description="tok/s.")
    original: float | None = Field(
        description="The original's headline (a median; a mean in verdicts before headlines)."
    )
    new: float | None = Field(description="The re-run's headline (None: not measured).")
    delta_pct: float | None = Field(description="(new - original) / original, in percent.")
    band_pct: float | None = Field(
        description="The band, in percent of the original (its kind's rule, kit.figures); None "
        "for a threshold figure (kept to a limit, no band)."
    )
    band_from: Literal[
        "runs", "intervals", "floor", "standard errors", "tolerance", "threshold", "exact"
    ] = Field(
        description="Which bound set the band: the two intervals (before headlines: the runs' "
        "spread), the floor, the counters' standard errors, a stated tolerance, the recipe's "
        "threshold, or an exact step."
    )
    key: str | None = Field(
        None, description="Its row of the figure table (kit.figures); None before 2026-12-07."
    )
    within: bool = Field(description="|delta| <= band (False when the re-run lacks it).")
    status: Status | None = Field(
        None,
        description="within, outside, or inconclusive (a side INVALID or incomplete, or the "
        "band wider than its maximum); None in verdicts written before it.",
    )
    direction: Direction | None = Field(None, description="The re-run against the original.")
    better: bool | None = Field(
        None, description="Outside the band and an improvement (faster); None otherwise."
    )

    def band_text(self) -> str:
        """'band ±3.0 % from the floor', 'kept to the recipe's threshold'."""
        if self.band_pct is None:
            return "kept to the recipe's threshold" if self.band_from == "threshold" else "no band"
        return f"band ±{num(self.band_pct, '.1f')} % from the {self.band_from}"


class CheckpointMatch(FrozenModel):
    """Whether the re-run served the original's quantized checkpoint: the two content digests
    (kit.quantize's ``identity``), the files that differ and what may explain it."""

    same: bool = Field(description="The two checkpoints have the same digest.")
    original: str = Field(description="sha256 over the original's checkpoint files.")
    new: str = Field(description="sha256 over the re-run's checkpoint files.")
    files: list[str] = Field(
        default_factory=list,
        description="Each file that differs or is on one side only: path and both sha256s.",
    )
    why: list[str] = Field(
        default_factory=list,
        description="What kit records that differs and may explain it (quantization inputs, "
        "device, library versions, CPU, its vector flags, threads, GPU); empty when the same.",
    )

    def detail(self) -> str:
        """'sha256 X vs Y; files differ: ...; may explain it: ...' (the same: 'the same, ...')."""
        if self.same:
            return f"the same, sha256 {self.original[:12]}"
        text = f"sha256 {self.original[:12]} vs {self.new[:12]}"
        if self.files:
            text += f"; files differ: {', '.join(self.files)}"
        return text + (
            f"; may explain it: {', '.join(self.why)}"
            if self.why
            else "; nothing kit records differs (inputs, device, library versions, CPU, threads)"
        )


class Reproduction(FrozenModel):
    """A re-run of a report, judged against it."""

    original_run_id: str = Field(description="Run id of the report re-run.")
    original_sha256: str | None = Field(
        description="sha256 of the original report file's bytes (None: compared, not re-run)."
    )
    original_recipe: str = Field(description="Recipe name of the original.")
    variation: bool = Field(
        description="--set changed the recipe: a variation of the original, not a reproduction."
    )
    overrides: list[str] = Field(description="The --set overrides of a variation.")
    verdict: Verdict = Field(description="REPRODUCED, DIFFERENT, INCONCLUSIVE or NOT COMPARABLE.")
    summary: str = Field(description="The verdict in one line.")
    figures: list[FigureCheck] = Field(description="Every headline figure, with its band.")
    differing: list[str] = Field(description="The figures outside their band, and by how much.")
    causes: list[str] = Field(description="What kit sees that may explain a difference.")
    not_comparable: list[str] = Field(description="Why the runs cannot be compared.")
    inconclusive: list[str] = Field(
        default_factory=list, description="Why figures could not be judged (INVALID sides, bands)."
    )
    checkpoint: CheckpointMatch | None = Field(
        None,
        description="Whether the re-run served the original's quantized checkpoint. Absent when "
        "a side has no quantization manifest, and in verdicts written before kit compared them.",
    )
    notes: list[str] = Field(
        default_factory=list,
        description="What a reader should know beside the verdict, judged by nothing: where the "
        "original's recipe has published reference figures, the roofline bound on the "
        "reference's rig and the fraction of it each implies (a model, not a measurement). "
        "Absent when empty.",
    )

    @model_serializer(mode="wrap")
    def _checkpoint_only_when_compared(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if data.get("checkpoint") is None:
            data.pop("checkpoint", None)  # no quantization manifest on a side
        if not data.get("notes"):
            data.pop("notes", None)
        return data

    def text(self) -> str:
        lines = [f"verdict: {self.summary}"]
        for f in self.figures:
            if f.new is None or f.original is None:
                lines.append(f"  {f.metric}: {num(f.original)} {f.unit}, not measured again")
                continue
            status = f.status or ("within" if f.within else "outside")
            mark = status.upper() if status != "within" else status
            if f.delta_pct is None and f.band_from in ("standard errors", "tolerance", "exact"):
                # the original's 0 (no draft accepted): its rule judges in the figure's own unit
                lines.append(
                    f"  {f.metric}: {num(f.original)} -> {num(f.new)} {f.unit} (no percentage "
                    f"of the original; judged by its {f.band_from} in {f.unit}: {mark})"
                )
                continue
            if f.delta_pct is None:  # the original's 0, or numbers beyond a double
                lines.append(
                    f"  {f.metric}: {num(f.original)} -> {num(f.new)} {f.unit} (no percentage of "
                    "the original: INCONCLUSIVE)"
                )
                continue
            way = f", {f.direction}" if f.direction and f.direction != "same" else ""
            if f.better is not None:
                way += ": better" if f.better else ": worse"
            lines.append(
                f"  {f.metric}: {num(f.original)} -> {num(f.new)} {f.unit} "
                f"({num(f.delta_pct, '+.1f')} %{way}; {f.band_text()}: {mark})"
            )
        cp = self.checkpoint
        if cp is not None and not any(c.startswith("checkpoint: ") for c in self.causes):
            lines.append(f"  checkpoint: {cp.detail()}")
        lines += [f"  not comparable: {n}" for n in self.not_comparable]
        lines += [f"  inconclusive: {n}" for n in self.inconclusive]
        lines += [f"  likely cause: {c}" for c in self.causes]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


FailOn = str  # different, worse, never, or figure keys of kit.figures, comma-separated


class Judged(Protocol):
    """Another verdict with the same exit codes (kit.report.points): its word, and whether a
    figure is worse or missing."""

    @property
    def verdict(self) -> Verdict: ...
    @property
    def worse(self) -> bool: ...


class Judgeable(Protocol):
    """A run whose figures a verdict judges (a Report): valid or not, complete or not."""

    @property
    def validity(self) -> Validity: ...
    @property
    def status(self) -> str: ...
    @property
    def incomplete_reason(self) -> str | None: ...


def unjudgeable(run: Judgeable, who: str, *, complete: bool = True) -> list[str]:
    """Why none of ``run``'s figures can be judged (``who``: "the re-run", "this run"): it is
    INVALID (its error codes), or, when ``complete`` is asked for, incomplete."""
    out = []
    if not run.validity.valid:
        codes = dict.fromkeys(f.code for f in run.validity.reasons if f.severity == "error")
        out.append(f"{who} is INVALID ({', '.join(codes)})")
    if complete and run.status != "complete":
        out.append(f"{who} is incomplete: {run.incomplete_reason}")
    return out


def verdict_exit(r: Reproduction | Judged, fail_on: FailOn = "different") -> int:
    """The exit code of a verdict: 0 REPRODUCED, 1 NOT COMPARABLE, 4 DIFFERENT, 5
    INCONCLUSIVE. ``fail_on`` relaxes DIFFERENT: ``worse`` exits 4 only when a figure is worse
    (slower) or missing, ``never`` not at all, and a comma-separated list of figure keys
    (``decode_tps,ttft_ms``: kit.figures) only when one of those figures is outside or
    missing."""
    if r.verdict == "NOT COMPARABLE":
        return EXIT_FAILED
    if r.verdict == "INCONCLUSIVE":
        return EXIT_INCONCLUSIVE
    if r.verdict == "REPRODUCED" or fail_on == "never":
        return EXIT_OK
    if fail_on == "different":
        return EXIT_DIFFERENT
    if isinstance(r, Reproduction):
        off = [
            f
            for f in r.figures
            if f.status != "within" and (f.new is None or f.status == "outside")
        ]
        if fail_on == "worse":
            worse = any(f.new is None or f.better is False for f in off)
        else:
            keys = {k.strip() for k in fail_on.split(",") if k.strip()}
            worse = any(f.key in keys for f in off)
    else:
        worse = r.worse
    return EXIT_DIFFERENT if worse else EXIT_OK


HUGE = 1e15  # beyond any figure or percentage kit measures


def num(value: float | None, spec: str = ",.1f") -> str:
    """A figure or a percentage in ``spec``; one of HUGE or more, which no measurement is, in
    three significant digits (1.8e+305, not three hundred)."""
    if value is None:
        return "?"
    if abs(value) < HUGE:
        return f"{value:{spec}}"
    return f"{value:+.3g}" if spec.startswith("+") else f"{value:.3g}"

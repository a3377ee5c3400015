"""The reproduction verdict as a report records it (:mod:`kit.report.reproduction` judges)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.base import FrozenModel

Verdict = Literal["REPRODUCED", "DIFFERENT", "NOT COMPARABLE"]


class FigureCheck(FrozenModel):
    """One headline figure of the original against the re-run."""

    metric: str = Field(description="e.g. 'narrative decode TPS', 'prefill 10000 tok/s'.")
    unit: str = Field(description="tok/s.")
    original: float | None = Field(description="The original report's mean.")
    new: float | None = Field(description="The re-run's mean (None: not measured).")
    delta_pct: float | None = Field(description="(new - original) / original, in percent.")
    band_pct: float = Field(description="The noise band, in percent of the original.")
    band_from: Literal["runs", "floor"] = Field(
        description="Which bound set the band: the runs' spread, or the floor."
    )
    within: bool = Field(description="|delta| <= band (False when the re-run lacks it).")


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
    verdict: Verdict = Field(description="REPRODUCED, DIFFERENT or NOT COMPARABLE.")
    summary: str = Field(description="The verdict in one line.")
    figures: list[FigureCheck] = Field(description="Every headline figure, with its band.")
    differing: list[str] = Field(description="The figures outside their band, and by how much.")
    causes: list[str] = Field(description="What kit sees that may explain a difference.")
    not_comparable: list[str] = Field(description="Why the runs cannot be compared.")

    def text(self) -> str:
        lines = [f"verdict: {self.summary}"]
        for f in self.figures:
            if f.new is None or f.delta_pct is None or f.original is None:
                lines.append(f"  {f.metric}: {num(f.original)} {f.unit}, not measured again")
                continue
            mark = "within" if f.within else "OUTSIDE"
            lines.append(
                f"  {f.metric}: {num(f.original)} -> {num(f.new)} {f.unit} "
                f"({f.delta_pct:+.1f} %, band ±{f.band_pct:.1f} % from the {f.band_from}: {mark})"
            )
        lines += [f"  not comparable: {n}" for n in self.not_comparable]
        lines += [f"  likely cause: {c}" for c in self.causes]
        return "\n".join(lines)


def num(value: float | None) -> str:
    return "?" if value is None else f"{value:,.1f}"

"""Fixtures of the report tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kit.bench.summary import decode_headline
from kit.report import Report


@pytest.fixture
def scaled() -> Callable[[Report, str, float], Report]:
    """``scaled(report, prompt, factor)``: a re-run whose prompt decoded ``factor`` times as
    fast (its measured records scaled, its stored headline computed again from them)."""

    def scaled(report: Report, prompt: str, factor: float) -> Report:
        """The report with one prompt's measured runs decoding ``factor`` times as fast (a slower
        or faster re-run); its stored headline computed again from the scaled records."""
        assert report.bench is not None
        records = [
            r.model_copy(update={"decode_tps": r.decode_tps * factor})
            if r.prompt == prompt and r.phase == "measured" and r.decode_tps is not None
            else r
            for r in report.bench.records
        ]
        prompts = [
            p.model_copy(update={"headline": decode_headline(p.prompt, records)})
            for p in report.bench.prompts
        ]
        bench = report.bench.model_copy(update={"records": records, "prompts": prompts})
        return report.model_copy(update={"bench": bench})

    return scaled

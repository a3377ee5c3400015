"""The quality probe (``bench.quality``): kit's evaluation text scored teacher-forced through
the served engine, against the unquantized model's scores (the reference); docs/quality.md.
Records and summary: :mod:`kit.quality.schema`; figures (perplexity, top-1 agreement, a KL
estimate): :mod:`kit.quality.measures`; the reference: :mod:`kit.quality.reference`; the
request to the server: :mod:`kit.quality.probe`; the verdicts' use: :mod:`kit.quality.judge`.
"""

from kit.quality.judge import alike, quality_diff, quality_findings
from kit.quality.measures import summarize
from kit.quality.probe import ProbeJob, run_probe
from kit.quality.reference import build_reference, find_reference, window
from kit.quality.schema import (
    VERSION,
    QualityProbe,
    QualitySummary,
    ReferenceProvenance,
    ReferenceScores,
    TokenScores,
)
from kit.quality.text import evaluation_text, text_sha256

__all__ = [
    "VERSION",
    "ProbeJob",
    "QualityProbe",
    "QualitySummary",
    "ReferenceProvenance",
    "ReferenceScores",
    "TokenScores",
    "alike",
    "build_reference",
    "evaluation_text",
    "find_reference",
    "quality_diff",
    "quality_findings",
    "run_probe",
    "summarize",
    "text_sha256",
    "window",
]

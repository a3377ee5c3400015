"""Transitional: kit.report.compare is the home. Removed once every caller imports from there."""

from kit.report.compare import compare_reports
from kit.report.reference import compare_with_reference

__all__ = ["compare_reports", "compare_with_reference"]

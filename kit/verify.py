"""Transitional: kit.report.verify is the home. Removed once every caller imports from there."""

from kit.report.files import read_report as read_report_file
from kit.report.verify import CheckItem, Checklist, verify_report

__all__ = ["CheckItem", "Checklist", "read_report_file", "verify_report"]

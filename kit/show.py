"""Transitional: kit.report.show is the home. Removed once every caller imports from there."""

from kit.report.describe import rig
from kit.report.show import MARKDOWN_COLUMNS, markdown_header, markdown_row, show_table

__all__ = ["MARKDOWN_COLUMNS", "markdown_header", "markdown_row", "rig", "show_table"]

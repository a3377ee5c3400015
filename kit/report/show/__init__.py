"""Reports for people: the terminal summary after a run, ``kit report show`` (a table, or a row
of a Club-3090-style Markdown table), the peers beside kit side by side, and the text of
comparisons. One module each: :mod:`~kit.report.show.table`, :mod:`~kit.report.show.summary`,
:mod:`~kit.report.show.markdown`, :mod:`~kit.report.show.peers`,
:mod:`~kit.report.show.compare`; :mod:`~kit.report.show.trust` labels them.
"""

from __future__ import annotations

from kit.report.show.compare import comparison_text
from kit.report.show.markdown import MARKDOWN_COLUMNS, markdown_header, markdown_row
from kit.report.show.peers import SideBySideRow, peer_lines, side_by_side_rows
from kit.report.show.summary import summary_table
from kit.report.show.table import show_table

# A run whose signature was not checked because its key is neither given nor trusted
# (--allow-untrusted) is labelled UNTRUSTED, and an unsigned one (--allow-unsigned) UNSIGNED
# (trust_label), on every line that shows one of its figures: each line of its table, its
# Markdown row, and compare's A:/B: lines, metric rows and verdict lines.
from kit.report.show.trust import (
    UNSIGNED,
    UNTRUSTED,
    UNVERIFIED,
    side_labels,
    sides_label,
    signer_text,
    trust_label,
)

__all__ = [
    "MARKDOWN_COLUMNS",
    "UNSIGNED",
    "UNTRUSTED",
    "UNVERIFIED",
    "SideBySideRow",
    "comparison_text",
    "markdown_header",
    "markdown_row",
    "peer_lines",
    "show_table",
    "side_by_side_rows",
    "side_labels",
    "sides_label",
    "signer_text",
    "summary_table",
    "trust_label",
]

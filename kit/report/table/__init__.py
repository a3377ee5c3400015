"""``kit report table``: a results table (Club-3090's BENCHMARKS.md) from verified reports only.

A report is listed only when every item of its checklist passed; the others are refused
(:class:`Refused`). The HTML page is :mod:`kit.report.html.table`.
"""

# build_table verifies every report in full (kit.report.verify.verify_report) against the
# public key in a key directory whose fingerprint is the envelope's keyid. An unsigned report,
# one signed by a key that is not in the directory, and one that fails any item is refused:
# build_table keeps them apart, and the caller either fails (exit 1, VerificationFailed from
# require_verified) or lists them in a separate "Unverified" section. A file that is not a
# report envelope at all raises BadInputError (exit 2) naming it; a refused file's figures are
# each led by its label (UNSIGNED, UNTRUSTED, UNVERIFIED).
from kit.report.table.build import (
    build_table,
    keys_store,
    load_keys,
    require_verified,
    short_key,
)

# Cells come from kit.report.describe where it has them (rig, engine, model); the rest are read
# from the report: power cap per card, interconnect, custom all-reduce (the server flags), KV
# dtype, max context, peak VRAM per card from the GPU sampling, spec-decode acceptance length,
# date and key.
from kit.report.table.cells import row
from kit.report.table.markdown import (
    UNVERIFIED_HEAD,
    UNVERIFIED_TAIL,
    markdown,
    unverified_cells,
)

# The verified rows fall into sections by kind (Table.sections), each with its own columns, the
# verdict first: valid single-stream decode (tok/s per prompt, prefill tok/s per depth), valid
# load-sweep peaks (output tok/s over all streams, the level, tok/s per stream there), and
# INVALID runs of either kind, never ranked among the valid ones. In each, rows group by
# model × rig × engine.
from kit.report.table.model import (
    DECODE_NOTE,
    FIGURES,
    INVALID_COLUMNS,
    INVALID_NOTE,
    LABELLED,
    SINGLE_COLUMNS,
    SWEEP_COLUMNS,
    SWEEP_NOTE,
    Refused,
    Row,
    Section,
    Table,
)

__all__ = [
    "DECODE_NOTE",
    "FIGURES",
    "INVALID_COLUMNS",
    "INVALID_NOTE",
    "LABELLED",
    "SINGLE_COLUMNS",
    "SWEEP_COLUMNS",
    "SWEEP_NOTE",
    "UNVERIFIED_HEAD",
    "UNVERIFIED_TAIL",
    "Refused",
    "Row",
    "Section",
    "Table",
    "build_table",
    "keys_store",
    "load_keys",
    "markdown",
    "require_verified",
    "row",
    "short_key",
    "unverified_cells",
]

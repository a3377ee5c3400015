"""Other tools' result files in (``kit import``): one module per tool, each with
``detect(path, data)`` and ``read(path)``; the reader is picked by the file's content, never
its name. :func:`import_file` reads a file and writes it as a recipe whose reference is the
file's figures (:mod:`kit.importers.to_recipe`). docs/import.md says what each reader takes.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from kit.base import FrozenModel
from kit.errors import BadInputError
from kit.figures import POINT_KINDS
from kit.importers import (
    aiperf,
    aiperf_sweep,
    guidellm,
    guidellm_legacy,
    llmperf,
    mlperf,
    sglang,
    vllm_bench,
)
from kit.importers.club3090 import LOG_READER as CLUB3090_LOG
from kit.importers.club3090 import ROWS_READER as CLUB3090_ROWS
from kit.importers.parse import ImportOptions, Parsed, Reader, parse_file
from kit.importers.pins import open_pins
from kit.importers.schema import Imported, ImportedPoint, OpenPin
from kit.importers.to_recipe import recipe_text, write_recipe

# in the order they are asked; a file two would take is a bug (tests/unit/importers)
READERS: tuple[Reader, ...] = (
    vllm_bench.READER,
    sglang.READER,
    guidellm.READER,
    guidellm_legacy.READER,
    aiperf.READER,
    aiperf_sweep.READER,
    llmperf.READER,
    mlperf.READER,
    CLUB3090_LOG,
    CLUB3090_ROWS,
)

__all__ = [
    "READERS",
    "ImportOptions",
    "Imported",
    "ImportedPoint",
    "ImportedRecipe",
    "OpenPin",
    "Reader",
    "detect",
    "import_file",
    "read_file",
]


def _expected() -> str:
    return "; ".join(r.reads for r in READERS)


def detect(path: Path) -> Reader:
    """The reader whose ``detect`` takes the file (by its content)."""
    parsed: Parsed = parse_file(path)
    for reader in READERS:
        if reader.detect(path, parsed):
            return reader
    if parsed.json_error is not None:
        raise BadInputError(
            f"{path}: not valid JSON ({parsed.json_error}): a truncated or hand-edited file?",
            hint=f"kit imports: {_expected()}",
        )
    if not parsed.text.strip():
        raise BadInputError(f"{path}: empty", hint=f"kit imports: {_expected()}")
    raise BadInputError(
        f"{path}: not a result file kit can import (no reader recognises its content)",
        hint=f"kit imports: {_expected()}",
    )


def _usable(path: Path, imported: Imported) -> None:
    """Refuse a file with nothing to reproduce: every request failed, or no figure at all."""
    points = imported.points
    if not points:
        if imported.prompts or imported.prefill_tps:
            return
        raise BadInputError(f"{path}: no measured point in the file")
    counted = [p.figures for p in points if p.figures.completed is not None]
    if counted and len(counted) == len(points) and not any(f.completed for f in counted):
        failed = sum(f.failed or 0 for f in counted)
        sent = sum(f.requests or 0 for f in counted) or failed
        raise BadInputError(
            f"{path}: all {sent} requests failed: nothing to reproduce",
            hint="import a run whose requests completed",
        )
    # the fields a published point can hold a figure of the table in (kit.figures)
    figures = {k.figure for k in POINT_KINDS}
    if not any(getattr(p.figures, f, None) is not None for p in points for f in figures):
        raise BadInputError(f"{path}: no throughput or latency figure: nothing to compare with")


def read_file(path: str | Path, *, row: str | None = None) -> Imported:
    """Read a result file of another tool: :class:`Imported`, with its tool's definitions and
    its open pins, or a BadInputError naming the file and what was expected. ``row`` picks a
    row of a Club-3090 BENCHMARKS.md (its line, or words of its Rig and Date cells)."""
    p = Path(path)
    reader = detect(p)
    if row is not None and not reader.rows:
        raise BadInputError(
            f"{p}: --row picks a row of a Club-3090 BENCHMARKS.md; this file is {reader.tool} "
            "output, one result",
            hint="leave --row out",
        )
    try:
        imported = reader.read(p, ImportOptions(row=row))
    except BadInputError as exc:
        if str(p) in exc.message or p.name in exc.message:
            raise
        raise BadInputError(f"{p}: {exc.message}", hint=exc.hint) from exc
    except (ValidationError, KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadInputError(
            f"{p}: looks like {reader.tool} output but cannot be read: {first}",
            hint=f"expected {reader.reads}, as the tool wrote it",
        ) from exc
    _usable(p, imported)
    # what every reader's result has of its tool, and what the file leaves open, in one place
    done = imported.model_copy(update={"definitions": dict(reader.definitions)})
    return done.model_copy(update={"open_pins": open_pins(done)})


class ImportedRecipe(FrozenModel):
    """A file read and written as a recipe."""

    imported: Imported
    recipe: str  # the recipe's YAML
    path: Path | None  # where it was written (None: not written)


def import_file(
    path: str | Path,
    *,
    base: str | Path,
    out: str | Path | None = None,
    row: str | None = None,
) -> ImportedRecipe:
    """Read ``path`` and write its recipe at ``out`` (validated first: nothing is written when
    it does not validate); ``out`` None returns the complete recipe, written nowhere. ``row``
    picks a row of a Club-3090 BENCHMARKS.md."""
    if not Path(base).is_file():
        raise BadInputError(f"{base}: no such base recipe", hint="name one with --base")
    imported = read_file(path, row=row)
    if out is None:
        return ImportedRecipe(
            imported=imported, recipe=recipe_text(imported, Path(base), None), path=None
        )
    target = Path(out)
    text = write_recipe(imported, Path(base), target)
    return ImportedRecipe(imported=imported, recipe=text, path=target)

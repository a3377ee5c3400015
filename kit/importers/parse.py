"""Reading a foreign result file once (JSON, JSONL or text) and taking typed values out of it,
each bad value a :class:`~kit.errors.BadInputError` that names the file and the key."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.errors import BadInputError
from kit.importers.schema import Imported, ImportedLoad, Stats
from kit.paths import FileTooLarge, NotRegularFile, read_regular
from kit.recipe.figures import Definition, LatencyFigures, PointFigure
from kit.recipe.patterns import load_class

MAX_BYTES = 256 * 1024 * 1024  # a guidellm report with every request record stays far below


@dataclass(frozen=True)
class Parsed:
    """A file's text and what it parses as: one JSON document, or JSON lines, or neither."""

    path: Path
    text: str
    json: Any = None  # the document (None: not JSON)
    lines: list[Any] | None = None  # JSON lines, when the text is several documents
    constants: tuple[str, ...] = ()  # non-standard JSON read anyway (Infinity, NaN)
    json_error: str | None = None  # why it is not JSON, when it looks like JSON

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def documents(self) -> list[Any]:
        """The JSON document, or each JSON line."""
        if self.lines is not None:
            return self.lines
        return [] if self.json is None else [self.json]


def parse_file(path: Path) -> Parsed:
    """Read ``path`` (a regular file, UTF-8, at most :data:`MAX_BYTES`) and parse it."""
    try:
        raw, _ = read_regular(path, MAX_BYTES)
    except FileNotFoundError:
        raise BadInputError(f"{path}: no such file") from None
    except NotRegularFile as exc:
        raise BadInputError(f"{path}: not a plain file ({exc})") from None
    except FileTooLarge:
        raise BadInputError(f"{path}: larger than {MAX_BYTES >> 20} MiB") from None
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    met: list[str] = []

    def constant(name: str) -> float:
        met.append(name)
        return float(name)

    stripped = text.strip()
    try:
        doc = json.loads(stripped, parse_constant=constant)
        return Parsed(path, text, json=doc, constants=tuple(dict.fromkeys(met)))
    except ValueError as exc:
        error = str(exc)
    rows = [line for line in stripped.splitlines() if line.strip()]
    if len(rows) > 1:
        try:
            lines = [json.loads(line, parse_constant=constant) for line in rows]
            return Parsed(path, text, lines=lines, constants=tuple(dict.fromkeys(met)))
        except ValueError:
            pass
    looks = stripped[:1] in ("{", "[")
    return Parsed(path, text, json_error=error if looks else None)


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


class Fields:
    """A JSON object of a file, read key by key: a missing key (or null) is None, a value of the
    wrong type an error naming the file and the key's path."""

    def __init__(self, data: Mapping[str, Any], file: str, at: str = "") -> None:
        self.data = data
        self.file = file
        self.at = at

    def _where(self, key: str) -> str:
        return f"{self.file}: {self.at}{key}"

    def has(self, *keys: str) -> bool:
        return all(k in self.data for k in keys)

    def raw(self, key: str) -> Any:
        return self.data.get(key)

    def num(self, key: str) -> float | None:
        """A number; numeric text ("550", "inf") too, as some tools write them."""
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            raise BadInputError(f"{self._where(key)}: expected a number, not {_shown(value)}")
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise BadInputError(f"{self._where(key)}: expected a number, not {_shown(value)}")

    def finite(self, key: str) -> float | None:
        """A finite number (NaN and infinities: None)."""
        value = self.num(key)
        return value if value is not None and math.isfinite(value) else None

    def count(self, key: str) -> int | None:
        """A whole number of things (2.0 is 2)."""
        value = self.num(key)
        if value is None:
            return None
        if not math.isfinite(value) or value != int(value) or value < 0:
            raise BadInputError(f"{self._where(key)}: expected a count, not {_shown(value)}")
        return int(value)

    def text(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return str(value)
        raise BadInputError(f"{self._where(key)}: expected text, not {_shown(value)}")

    def sub(self, key: str) -> Fields | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise BadInputError(f"{self._where(key)}: expected an object, not {_shown(value)}")
        return Fields(value, self.file, f"{self.at}{key}.")

    def items(self, key: str) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise BadInputError(f"{self._where(key)}: expected a list, not {_shown(value)}")
        return value

    def numbers(self, key: str) -> list[float]:
        """A list of numbers (each one checked)."""
        out = []
        for i, value in enumerate(self.items(key)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BadInputError(
                    f"{self._where(key)}[{i}]: expected a number, not {_shown(value)}"
                )
            out.append(float(value))
        return out


def latency(
    mean: float | None,
    median: float | None = None,
    p90: float | None = None,
    p99: float | None = None,
    *,
    scale: float = 1.0,
) -> LatencyFigures | None:
    """A latency in ms from the tool's values (times ``scale``: 1000 from s, 1e-6 from ns);
    None when the tool gave none of them."""
    values = [mean, median, p90, p99]
    if all(v is None for v in values):
        return None
    m, med, q90, q99 = (None if v is None else v * scale for v in values)
    return LatencyFigures(mean=m, median=med, p90=q90, p99=q99)


def percentile(sorted_values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of sorted values, linear between the nearest ranks."""
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def stats(values: Iterable[float]) -> Stats | None:
    """A summary of per-request values (None when there are none)."""
    vals = sorted(values)
    if not vals:
        return None
    return Stats(
        n=len(vals),
        mean=statistics.fmean(vals),
        median=percentile(vals, 50),
        p90=percentile(vals, 90),
        p99=percentile(vals, 99),
        min=vals[0],
        max=vals[-1],
    )


HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def hub_id(name: str | None) -> str | None:
    """``name`` when it reads as a hub repository id (``org/model``), else None (a local path,
    a served name, a provider's name)."""
    return name if name is not None and HUB_ID.match(name) and ".." not in name else None


def shown_name(value: str) -> str:
    """A path as a recipe may carry it: its last part (a file name, never a directory of the
    machine that ran it)."""
    return value.rstrip("/").rsplit("/", 1)[-1] or value


def shown_model(name: str | None) -> str:
    """A model name as a recipe may show it: a local path by its last part only."""
    if name is None:
        return "model not stated"
    return f"{shown_name(name)} (a local path)" if name.startswith(("/", "~")) else name


@dataclass(frozen=True)
class ImportOptions:
    """What the caller picks in a file that holds several results: ``row``, a row of a
    Club-3090 BENCHMARKS.md (its line number, or words of its Rig and Date cells)."""

    row: str | None = None


NO_OPTIONS = ImportOptions()


@dataclass(frozen=True)
class Reader:
    """One tool's reader: its name, what it reads (for the error on an unknown file), its
    two functions, how the tool defines its figures against kit's, and whether it picks one
    of several results (``--row``)."""

    tool: str
    reads: str
    detect: Callable[[Path, Parsed], bool]
    read: Callable[[Path, ImportOptions], Imported]
    definitions: Mapping[PointFigure, Definition]
    rows: bool = False


def point_label(load: ImportedLoad | None, index: int) -> str:
    """The label kit's own point at this load carries (``concurrency-2``, ``rate-4``), or
    ``point-N`` (1-based) when the load is not stated."""
    if load is None:
        return f"point-{index + 1}"
    cls = load_class(load.pattern)
    return cls.label(load.level) if cls is not None else f"point-{index + 1}"


def mean_of(total: float | None, count: int | None) -> float | None:
    """``total / count``, None when either is unknown or the count is 0."""
    return total / count if total is not None and count else None


def failure_warning(
    label: str, sent: int | None, failed: int | None, codes: Mapping[str, int] | None = None
) -> str | None:
    """A warning for a point where some (not all) requests failed: how many, the status codes
    where the file gives them, and that the figures are the survivors'."""
    if not failed or not sent or failed >= sent:
        return None
    shown = ", ".join(f"{code} x{n}" for code, n in codes.items()) if codes else "not stated"
    return (
        f"{label}{failed} of {sent} requests failed (status codes: {shown}): the figures come "
        f"from the {sent - failed} that completed"
    )


CHUNKY = 1.5  # ITL this many times TPOT: chunks carry several tokens


def chunk_warning(
    label: str, itl_ms: float | None, tpot_ms: float | None, per_gap: float | None = None
) -> str | None:
    """A warning where the ITL is per chunk of several tokens (ITL well above TPOT, or the
    per-request gaps fewer than the tokens: speculative decoding or multi-step scheduling
    streams several tokens at once)."""
    chunky = per_gap is not None and per_gap > CHUNKY
    if not chunky and (not itl_ms or not tpot_ms or itl_ms < CHUNKY * tpot_ms):
        return None
    said = []
    if itl_ms and tpot_ms:
        said.append(f"mean ITL {itl_ms:.3g} ms against TPOT {tpot_ms:.3g} ms")
    if per_gap is not None:
        said.append(f"the per-request gaps hold {per_gap:.1f} tokens each")
    elif itl_ms and tpot_ms:
        said.append(f"about {itl_ms / tpot_ms:.1f} tokens a chunk")
    return (
        f"{label}ITL is per chunk, not per token: {', '.join(said)} (speculative decoding or "
        "multi-step scheduling streams several at once); compare it only with a run whose "
        "chunks carry as many"
    )


def per_position_counts(rates: list[float], drafts: int, accepted: int) -> list[int] | None:
    """Accepted tokens at each drafted position from per-position rates (accepted / drafts),
    where they give exact counts (summing to ``accepted``); None where they do not."""
    if not rates or drafts <= 0:
        return None
    counts = [round(r * drafts) for r in rates]
    exact = all(abs(r * drafts - c) < 0.01 for r, c in zip(rates, counts, strict=True))
    return counts if exact and sum(counts) == accepted else None

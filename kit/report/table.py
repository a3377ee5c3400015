"""``kit report table``: a results table (Club-3090's BENCHMARKS.md) from verified reports only.

Every report is verified in full (:func:`kit.report.verify.verify_report`) against the public
key in a key directory whose fingerprint is the envelope's keyid; it is listed only when every
item of its checklist passed. An unsigned report, one signed by a key that is not in the
directory, and one that fails any item is refused (:class:`Refused`): ``build_table`` keeps
them apart, and the caller either fails (exit 1, ``VerificationFailed`` from
:func:`require_verified`) or lists them in a separate "Unverified" section. A file that is not
a report envelope at all raises ``BadInputError`` (exit 2) naming it.

Rows group by model × rig × engine. Cells come from :mod:`kit.report.describe` where it has
them (rig, engine, model); the rest are read from the report: power cap per card, interconnect,
custom all-reduce (the server flags), KV dtype, max context, decode tok/s per prompt (a
load-sweep report shows its peak output tok/s and level instead), prefill tok/s per depth, peak
VRAM per card from the GPU sampling, spec-decode acceptance length, verdict, date and key.
The HTML page is :mod:`kit.report.html.table`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import Field

from kit.base import FrozenModel
from kit.errors import BadInputError, VerificationFailed
from kit.probe import Unavailable
from kit.report.describe import engine_text, headline_text, model_text, rig
from kit.report.files import read_report, validate_payload
from kit.report.limits import within_caps
from kit.report.schema import Report
from kit.report.verify import verify_report
from kit.signing import MAX_BYTES, Envelope, fingerprint, load_payload, load_public_key
from kit.signing.canonical import read_limited
from kit.signing.envelope import open_envelope

COLUMNS = (
    "rig",
    "power cap",
    "interconnect",
    "custom all-reduce",
    "KV dtype",
    "max context",
    "narrative decode TPS",
    "code decode TPS",
    "prefill tok/s",
    "peak VRAM",
    "acceptance",
    "verdict",
    "date",
    "key",
)
SWEEP_NOTE = (
    "Decode TPS is the mean over the usable measured runs of each prompt (CV in brackets). A "
    "load-sweep report has no per-prompt runs: it shows its peak output tok/s over all streams "
    "and the level it was reached at instead, marked (load sweep)."
)


class Row(FrozenModel):
    """One report in the table's words; every cell is text, with the figures behind it."""

    source: str = Field(description="The report file as given.")
    run_id: str = Field(description="The report's run id.")
    model: str = Field(description="Model, quantization, KV dtype (describe.model_text).")
    engine: str = Field(description="Engine and patches (describe.engine_text).")
    rig: str = Field(description="Card count × model, PCIe generation and lanes per card.")
    gpus: list[str] = Field(description="Each GPU's model name, sorted (empty: a CPU run).")
    cells: dict[str, str] = Field(description="Each column of COLUMNS, as text.")
    decode_tps: float | None = Field(
        description="The row's decode figure for sorting: narrative decode TPS, else code."
    )
    sweep_peak_tps: float | None = Field(description="A load sweep's peak output tok/s.")
    peak_vram_mib: int | None = Field(description="The highest peak VRAM of any card, MiB.")

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.model, self.rig, self.engine)


class Refused(FrozenModel):
    """A report left out of the main rows, and why."""

    source: str = Field(description="The report file as given.")
    reasons: list[str] = Field(description="Each verify item that did not pass, or the key.")
    row: Row | None = Field(description="Its figures, unchecked; None when unreadable.")


class Table(FrozenModel):
    """The verified rows, in group order, and the refused reports."""

    keys_dir: str = Field(description="The key directory given.")
    keys: int = Field(description="Public keys found in it.")
    rows: list[Row] = Field(description="Verified reports, sorted by model, rig, engine, date.")
    refused: list[Refused] = Field(description="Reports that did not verify, in input order.")

    def groups(self) -> list[tuple[tuple[str, str, str], list[Row]]]:
        out: dict[tuple[str, str, str], list[Row]] = {}
        for r in self.rows:
            out.setdefault(r.group, []).append(r)
        return list(out.items())


# ---------------------------------------------------------------------------------------------
# reading


def load_keys(directory: Path) -> dict[str, tuple[str, Ed25519PublicKey]]:
    """Every ``*.pub`` of ``directory`` by fingerprint, with its file stem."""
    if not directory.is_dir():
        raise BadInputError(
            f"{directory}: not a directory", hint="--keys DIR names a folder of *.pub files"
        )
    keys: dict[str, tuple[str, Ed25519PublicKey]] = {}
    for pub in sorted(directory.glob("*.pub")):
        key = load_public_key(pub)
        keys[fingerprint(key)] = (pub.stem, key)
    if not keys:
        raise BadInputError(
            f"{directory}: no public key (*.pub) in it",
            hint="put the signers' .pub files there (kit keys generate writes one)",
        )
    return keys


def _unchecked(env: Envelope, source: str, key: str) -> Row | None:
    try:
        data = within_caps(load_payload(env))
    except BadInputError:
        return None
    report, _ = validate_payload(env.payload, data, source)
    return None if report is None else row(report, source, key)


def build_table(paths: Sequence[Path], keys_dir: Path) -> Table:
    """Verify every report against the keys in ``keys_dir`` and build the table."""
    keys = load_keys(keys_dir)
    rows: list[Row] = []
    refused: list[Refused] = []
    for path in paths:
        data = read_limited(path, MAX_BYTES, "report file")
        try:
            env = open_envelope(data)
        except BadInputError as e:
            raise BadInputError(f"{path}: {e.message}", hint=e.hint) from None
        keyid = env.signatures[0].keyid if env.signatures else None
        entry = keys.get(keyid) if keyid else None
        if keyid is None:
            reasons = ["unsigned: nothing shows who wrote it or that it is unaltered"]
        elif entry is None:
            reasons = [f"signed by key {keyid}, which is not among the keys in {keys_dir}"]
        else:
            checklist = verify_report(data, entry[1])
            # the failed items (those skipped after one add nothing), else any not checked
            failed = [i for i in checklist.items if i.ok is False]
            unchecked = [i for i in checklist.items if i.ok is None]
            reasons = [f"{i.name}: {i.detail}" for i in failed or unchecked]
        if reasons:
            tag = f"{short_key(keyid)} (not verified)" if keyid else "unsigned"
            refused.append(
                Refused(source=str(path), reasons=reasons, row=_unchecked(env, str(path), tag))
            )
            continue
        if entry is None:  # unreachable: no reasons only after a full verify with its key
            continue
        report, _ = read_report(data, entry[1])
        rows.append(row(report, str(path), f"{entry[0]} ({short_key(keyid)})"))
    rows.sort(key=lambda r: (*r.group, r.cells["date"], r.source))
    return Table(keys_dir=str(keys_dir), keys=len(keys), rows=rows, refused=refused)


def require_verified(table: Table) -> None:
    """``VerificationFailed`` (exit 1) naming every refused file and why, if any."""
    if not table.refused:
        return
    lines = [f"{len(table.refused)} report(s) did not verify against the keys in {table.keys_dir}:"]
    for r in table.refused:
        lines += [f"{r.source}: {reason}" for reason in r.reasons]
    raise VerificationFailed(
        "\n".join(lines),
        hint="remove them, add their signer's .pub to --keys, or pass --include-unverified "
        "to list them in a separate Unverified section",
    )


def short_key(keyid: str | None) -> str:
    return "-" if keyid is None else keyid.removeprefix("sha256:")[:12]


# ---------------------------------------------------------------------------------------------
# cells


def _known(value: object) -> bool:
    return value is not None and not isinstance(value, Unavailable)


def _server(report: Report) -> dict[str, Any]:
    server = report.recipe.get("server")
    return server if isinstance(server, dict) else {}


def _interconnect(report: Report, gpu_count: int, described: str | None) -> str:
    if gpu_count < 2:
        return f"none ({gpu_count} GPU{'s' * (gpu_count != 1)})"
    link = "none"
    if described == "NVLink":
        link = "NVLink"
    elif described is not None and "P2P OK" in described:
        link = "P2P engaged"
    tp = _server(report).get("tensor_parallel_size", 1)
    return (
        f"{link} (unused: TP {tp})" if isinstance(tp, int) and tp < 2 and link != "none" else link
    )


def _all_reduce(report: Report) -> str:
    server = _server(report)
    flags = [str(a) for a in server.get("extra_args") or []]
    flags += report.server.argv if report.server is not None else []
    if "--disable-custom-all-reduce" in flags:
        return "off (--disable-custom-all-reduce)"
    tp = server.get("tensor_parallel_size", 1)
    if isinstance(tp, int) and tp < 2:
        return f"n/a (TP {tp})"
    return "on (engine default)"


def _decode(report: Report, prompt: str) -> tuple[str, float | None]:
    return headline_text(report, prompt)


def _sweep_peak(report: Report) -> tuple[str, float | None]:
    points = (
        [p for p in report.bench.load_points if p.output_tps is not None] if report.bench else []
    )
    if not points:
        return "-", None
    best = max(points, key=lambda p: p.output_tps or 0.0)
    tps = best.output_tps or 0.0
    return f"{tps:.1f} peak at {best.label} (load sweep)", tps


def _depth(depth: int) -> str:
    return f"{depth // 1000}k" if depth >= 1000 and depth % 1000 == 0 else str(depth)


def _prefill(report: Report) -> str:
    parts = [
        f"{p.prefill_tps.mean:,.0f} @{_depth(p.depth)}"
        for p in (report.bench.prefill if report.bench else [])
        if p.status == "measured" and p.prefill_tps is not None and p.prefill_tps.mean is not None
    ]
    return " / ".join(parts) or "-"


def _peaks(report: Report) -> list[int]:
    s = report.gpu_sampling
    if s is None:
        return []
    return [g.vram.peak_mib for g in s.summaries if isinstance(g.vram.peak_mib, int)]


def _acceptance(report: Report) -> str:
    spec = report.recipe.get("speculative") or {}
    sd = report.bench.spec_decode if report.bench else None
    if sd is not None and sd.acceptance_length is not None:
        rate = f" ({sd.acceptance_rate * 100:.1f}%)" if sd.acceptance_rate is not None else ""
        return f"{sd.acceptance_length:.2f}{rate}"
    if isinstance(spec, dict) and spec.get("method", "none") != "none":
        return "not measured"
    return "-"


def _verdict(report: Report) -> str:
    v = report.validity
    if v.valid:
        return "valid"
    codes = dict.fromkeys(f.code for f in v.reasons if f.severity == "error")
    return f"INVALID ({', '.join(codes)})"


def row(report: Report, source: str, key: str) -> Row:
    """The report's row; ``key`` is the signing key as the table names it."""
    r = rig(report.host)
    gpus = (
        sorted(g.name if isinstance(g.name, str) else "unknown GPU" for g in report.host.gpus)
        if report.host
        else []
    )
    rig_cell = ", ".join(p for p in (r.gpus, r.pcie) if p) if r else "unknown (no host probe)"
    server = _server(report)
    narrative, narrative_tps = _decode(report, "narrative")
    code, code_tps = _decode(report, "code")
    sweep, sweep_tps = "-", None
    if narrative_tps is None and code_tps is None:
        sweep, sweep_tps = _sweep_peak(report)
        narrative, code = sweep, "- (load sweep)" if sweep_tps is not None else "-"
    peaks = _peaks(report)
    ctx = server.get("max_model_len")
    cells = {
        "rig": rig_cell,
        "power cap": (r.power or "-") if r else "-",
        "interconnect": _interconnect(report, r.gpu_count, r.interconnect) if r else "-",
        "custom all-reduce": _all_reduce(report),
        "KV dtype": str(server.get("kv_cache_dtype", "auto")),
        "max context": f"{ctx:,}" if isinstance(ctx, int) else "-",
        "narrative decode TPS": narrative,
        "code decode TPS": code,
        "prefill tok/s": _prefill(report),
        "peak VRAM": "/".join(f"{p:,}" for p in peaks) + " MiB" if peaks else "-",
        "acceptance": _acceptance(report),
        "verdict": _verdict(report),
        "date": report.created_at[:10],
        "key": key,
    }
    return Row(
        source=source,
        run_id=report.run_id,
        model=model_text(report),
        engine=engine_text(report),
        rig=rig_cell,
        gpus=gpus,
        cells=cells,
        decode_tps=narrative_tps if narrative_tps is not None else code_tps,
        sweep_peak_tps=sweep_tps,
        peak_vram_mib=max(peaks) if peaks else None,
    )


# ---------------------------------------------------------------------------------------------
# Markdown


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = [
        "| " + " | ".join(_md(h) for h in head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    out += ["| " + " | ".join(_md(c) for c in cells) + " |" for cells in rows]
    return out


def markdown(table: Table) -> str:
    """BENCHMARKS.md: a heading per model × rig × engine, its runs under it; then Unverified."""
    lines = [
        "# Benchmarks",
        "",
        f"{len(table.rows)} report(s), each verified item by item (`kit report verify`) and "
        f"signed by one of the {table.keys} key(s) in `{table.keys_dir}`. {SWEEP_NOTE}",
    ]
    for (model, rig_cell, engine), rows in table.groups():
        lines += ["", f"## {model} · {rig_cell} · {engine}", ""]
        lines += _md_table(
            (*COLUMNS, "run"), [[*(r.cells[c] for c in COLUMNS), r.run_id] for r in rows]
        )
    if table.refused:
        lines += [
            "",
            "## Unverified",
            "",
            "These reports did not pass every verify item against the keys above: their "
            "figures are as the files claim them, unchecked, and belong in no comparison.",
            "",
        ]
        head = ("file", "why refused", "model", "engine", *COLUMNS)
        body = []
        for f in table.refused:
            cells = [f.row.cells[c] for c in COLUMNS] if f.row else ["-"] * len(COLUMNS)
            model, engine = (f.row.model, f.row.engine) if f.row else ("-", "-")
            body.append([f.source, "; ".join(f.reasons), model, engine, *cells])
        lines += _md_table(head, body)
    return "\n".join(lines) + "\n"

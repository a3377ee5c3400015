"""``kit report table --html``: the results table as one self-contained page
(:func:`table_page`), sortable and filterable by a small inline script.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from kit.report.html.layout import CSS
from kit.report.show import UNSIGNED, UNTRUSTED, UNVERIFIED
from kit.report.table import (
    INVALID_COLUMNS,
    UNVERIFIED_HEAD,
    UNVERIFIED_TAIL,
    Row,
    Section,
    Table,
    unverified_cells,
)

WIDE_CSS = """
main.wide{max-width:none;padding:1em 1.2em 3em}
.scroll{overflow-x:auto;border:1px solid #e3e3e3;border-radius:6px;background:#fff}
table.runs{margin:0;font-size:.86em;min-width:100%}
table.runs th,table.runs td{padding:.35em .5em;overflow-wrap:break-word}
table.runs td.nw{white-space:nowrap}
table.runs td.wrap{min-width:11em;max-width:18em}table.runs td.rig{min-width:10em}
table.runs td[data-sort]{min-width:6.5em}table.runs td.pf{min-width:10.5em}
table.runs td.mono{font-size:.85em;min-width:8em}
table.runs thead th{position:sticky;top:0;background:#f1f3f5;border-bottom:2px solid #ccd;
 cursor:pointer;user-select:none}
table.runs thead th:hover{background:#e4e8ee}
table.runs thead th[aria-sort=ascending]::after{content:" \\25B2";color:#357}
table.runs thead th[aria-sort=descending]::after{content:" \\25BC";color:#357}
table.runs tbody tr.g1{background:#f7f9fc}
table.runs tbody tr:hover{background:#fff6d8}
td.invalid{color:#a11;font-weight:600}td.valid{color:#14532d}
td.untrusted{background:#fff4d6;color:#6b4a00;font-weight:600}
.tools{display:flex;flex-wrap:wrap;gap:1em 2em;align-items:flex-start;margin:1em 0}
.tools label{font-weight:600;display:block;margin-bottom:.3em}
.tools input[type=search]{font:inherit;padding:.3em .5em;width:20em}
.tools textarea{font:12px ui-monospace,monospace;width:26em;height:4.5em}
.tools button{font:inherit;padding:.2em .8em;margin:.3em .4em 0 0}
#rig-status{margin:.4em 0 0;max-width:40em}
"""

# The page's script, inline (no request, no library): it sorts a table by a clicked header
# (within that table only, so an INVALID run never ranks among valid ones), filters rows by
# text, and filters by rig: `kit probe --json` output, from a file or pasted, keeps the rows
# whose GPUs (model and count) are the probe's and sorts each table by its figure (decode TPS,
# or a sweep's peak), best first. Each row carries what the script needs as data attributes
# (_tr, _cell): data-gpus (the GPU models, sorted, joined by |), data-rank (the figure), and,
# per numeric cell, data-sort.
SCRIPT = r"""
(function () {
  "use strict";
  var tables = Array.prototype.slice.call(document.querySelectorAll("table.runs"));
  if (!tables.length) { return; }
  var filter = document.getElementById("filter");
  var shown = document.getElementById("shown");
  var rigStatus = document.getElementById("rig-status");
  var rigGpus = null;
  var all = [];

  function number(v) { return v === null || v === "" ? null : parseFloat(v); }
  function sortable(table) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var sorted = {col: -1, dir: 1};
    function value(row, col) {
      if (col < 0) { return number(row.getAttribute("data-rank")); }
      var cell = row.cells[col];
      var v = cell.getAttribute("data-sort");
      if (v === null) { return cell.textContent.trim().toLowerCase(); }
      return number(v);
    }
    function sortBy(col, dir) {
      rows.sort(function (a, b) {
        var x = value(a, col), y = value(b, col);
        if (x === null || y === null) { return (x === null) - (y === null); }
        return x < y ? -dir : x > y ? dir : 0;
      });
      rows.forEach(function (r) { body.appendChild(r); });
      heads.forEach(function (h, i) {
        if (i === col) { h.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending"); }
        else { h.removeAttribute("aria-sort"); }
      });
      sorted = {col: col, dir: dir};
    }
    heads.forEach(function (h, i) {
      h.addEventListener("click", function () {
        var numeric = h.dataset.numeric === "1";
        var dir = sorted.col === i ? -sorted.dir : (numeric ? -1 : 1);
        sortBy(i, dir);
      });
    });
    all = all.concat(rows);
    return {sortBy: sortBy, rows: rows};
  }
  var sorters = tables.map(sortable);

  function apply() {
    var q = filter.value.trim().toLowerCase();
    var n = 0;
    all.forEach(function (r) {
      var ok = (!q || r.textContent.toLowerCase().indexOf(q) >= 0) &&
        (rigGpus === null || r.getAttribute("data-gpus") === rigGpus);
      r.hidden = !ok;
      if (ok) { n += 1; }
    });
    shown.textContent = n + " of " + all.length + " runs shown";
  }
  filter.addEventListener("input", apply);

  function useProbe(text) {
    var probe;
    try { probe = JSON.parse(text); } catch (e) {
      rigStatus.textContent = "That is not JSON: paste the output of kit probe --json.";
      return;
    }
    var gpus = probe && Array.isArray(probe.gpus) ? probe.gpus : null;
    if (gpus === null) {
      rigStatus.textContent = "No \"gpus\" list in it: paste the output of kit probe --json.";
      return;
    }
    var names = gpus.map(function (g) {
      return g && typeof g.name === "string" ? g.name : "unknown GPU";
    }).sort();
    rigGpus = names.join("|");
    var counts = {};
    names.forEach(function (n) { counts[n] = (counts[n] || 0) + 1; });
    var label = Object.keys(counts).map(function (n) { return counts[n] + "\u00d7 " + n; })
      .join(" + ") || "no GPU";
    sorters.forEach(function (s) { s.sortBy(-1, -1); });
    apply();
    var n = all.filter(function (r) { return !r.hidden; }).length;
    rigStatus.textContent = "Your rig: " + label + ". " + (n ? n + " run(s) on the same GPUs, " +
      "best first in each section (decode TPS; a sweep's peak)." :
      "No run here was made on the same GPUs.");
  }
  document.getElementById("probe-file").addEventListener("change", function (ev) {
    var file = ev.target.files && ev.target.files[0];
    if (!file) { return; }
    var reader = new FileReader();
    reader.onload = function () { useProbe(String(reader.result)); };
    reader.readAsText(file);
  });
  document.getElementById("probe-apply").addEventListener("click", function () {
    useProbe(document.getElementById("probe-text").value);
  });
  document.getElementById("probe-clear").addEventListener("click", function () {
    rigGpus = null;
    document.getElementById("probe-file").value = "";
    rigStatus.textContent = "";
    apply();
  });
  apply();
})();
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
NUMERIC = {
    "max context",
    "narrative decode TPS",
    "code decode TPS",
    "prefill tok/s",
    "peak output tok/s",
    "reached at",
    "tok/s per stream there",
    "peak VRAM",
}
LABELS = (UNSIGNED, UNTRUSTED, UNVERIFIED)
TABLE_IDS = {"single-stream": "runs", "load-sweep": "sweeps", "invalid": "invalid-runs"}


def head(title: str, extra_css: str = "", script: bool = False) -> str:
    """The document head and the start of the body, in the report page's style."""
    csp = CSP if script else CSP.replace(" script-src 'unsafe-inline';", "")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f"<title>{escape(title)}</title><style>{CSS}{extra_css}</style></head><body>"
    )


def _number(text: str) -> str:
    """The first number in a cell, for sorting ('' when none)."""
    digits = ""
    for ch in text.replace(",", ""):
        if ch.isdigit() or (ch == "." and digits):
            digits += ch
        elif digits:
            break
    return digits


def _labelled(text: str) -> bool:
    return text.startswith(tuple(f"{label} " for label in LABELS)) or text in LABELS


def _cell(column: str, text: str, vram: int | None = None) -> str:
    cls = ""
    if _labelled(text):
        cls = ' class="untrusted"'
    elif column == "verdict":
        cls = ' class="invalid"' if text.startswith("INVALID") else ' class="valid"'
    elif column == "run":
        cls = ' class="mono run"'
    elif column in ("key", "file"):
        cls = ' class="mono"'
    elif column == "rig":
        cls = ' class="rig"'
    elif column in ("max context", "peak VRAM", "date", "reached at"):
        cls = ' class="nw"'
    elif column == "prefill tok/s":
        cls = ' class="pf"'
    elif column in ("model / quant", "engine", "why refused"):
        cls = ' class="wrap"'
    sort = ""
    if column in NUMERIC:
        value = str(vram) if column == "peak VRAM" and vram is not None else _number(text)
        sort = f' data-sort="{value}"'
    return f"<td{cls}{sort}>{escape(text)}</td>"


def _tr(r: Row, group: int, names: Sequence[str], texts: Sequence[str], rank: bool) -> str:
    cells = "".join(
        _cell(name, text, r.peak_vram_mib) for name, text in zip(names, texts, strict=True)
    )
    value = r.rank if rank else None
    figure = "" if value is None else f"{value:.6f}"
    return (
        f'<tr class="g{group % 2}" data-gpus="{escape("|".join(r.gpus))}" '
        f'data-rank="{figure}">{cells}</tr>'
    )


def _names(columns: Sequence[str]) -> tuple[str, ...]:
    """A section's header: the verdict, model and engine, its other columns, the run."""
    return (columns[0], "model / quant", "engine", *columns[1:], "run")


def _header(names: Sequence[str]) -> str:
    cells = [
        f'<th scope="col" data-numeric="{int(name in NUMERIC)}" title="click to sort">'
        f"{escape(name)}</th>"
        for name in names
    ]
    return "<thead><tr>" + "".join(cells) + "</tr></thead>"


def _section(section: Section) -> str:
    names = _names(section.columns)
    rows = [
        _tr(
            r,
            group,
            names,
            [r.cells[section.columns[0]], r.model, r.engine]
            + [r.cells[c] for c in section.columns[1:]]
            + [r.run_id],
            rank=True,
        )
        for group, (_, members) in enumerate(section.groups())
        for r in members
    ]
    tid = TABLE_IDS[section.sid]
    return (
        f'<section id="{section.sid}"><h2>{escape(section.title)} ({len(section.rows)})</h2>'
        f'<p class="muted">{escape(section.note)}</p>'
        f'<div class="scroll"><table class="runs" id="{tid}">{_header(names)}'
        f"<tbody>\n{chr(10).join(rows)}\n</tbody></table></div></section>"
    )


def _unverified(table: Table) -> str:
    names = (*UNVERIFIED_HEAD, *INVALID_COLUMNS[1:], *UNVERIFIED_TAIL)
    rows = [
        _tr(f.row, 0, names, unverified_cells(f), rank=False)
        for f in table.refused
        if f.row is not None
    ]
    parts = [
        '<section id="unverified"><h2>Unverified</h2>',
        '<div class="banner bad">These reports did not pass every verify item against the '
        "keys above: their figures are as the files claim them, unchecked, each led by why: "
        "UNSIGNED, UNTRUSTED (signed by a key not among them) or UNVERIFIED (an item "
        "failed).</div>",
    ]
    if rows:
        parts.append(
            '<div class="scroll"><table class="runs" id="unverified-runs">'
            + _header(names)
            + f"<tbody>\n{chr(10).join(rows)}\n</tbody></table></div>"
        )
    parts += [
        f"<p><b>{escape(f.label)}</b> <code>{escape(f.source)}</code>: "
        f"{escape('; '.join(f.reasons))} (unreadable)</p>"
        for f in table.refused
        if f.row is None
    ]
    parts.append("</section>")
    return "\n".join(parts)


TOOLS = """
<div class="tools">
<div><label for="filter">Filter rows</label>
<input type="search" id="filter" placeholder="text in any cell, e.g. NVLink or 2026-12">
<p class="muted" id="shown"></p></div>
<div><label for="probe-file">Best for my rig</label>
<input type="file" id="probe-file" accept=".json,application/json">
<span class="muted">kit probe --json &gt; probe.json, then choose it; or paste it:</span><br>
<textarea id="probe-text" aria-label="kit probe --json output"
 placeholder='{"gpus": [{"name": "NVIDIA H200", ...}], ...}'></textarea><br>
<button type="button" id="probe-apply">Use pasted probe</button>
<button type="button" id="probe-clear">Show every rig</button>
<p id="rig-status" role="status"></p></div>
</div>
"""


def table_page(table: Table) -> str:
    """The page: a sortable table per section (single-stream decode, load-sweep peaks, INVALID
    runs), then the unverified files apart.

    One table per section of :meth:`kit.report.table.Table.sections` (valid single-stream
    decode ``#runs``, valid load-sweep peaks ``#sweeps``, INVALID runs ``#invalid-runs``), each
    with its own columns, the verdict first, then the unverified files apart
    (``#unverified-runs``), every figure of theirs led by its label (UNSIGNED, UNTRUSTED,
    UNVERIFIED). The page's CSS is the report page's (:data:`kit.report.html.layout.CSS`) plus
    a few rules for wide tables (``WIDE_CSS``)."""
    sections = table.sections()
    title = "kit report table: verified benchmark runs"
    parts = [
        head(title, WIDE_CSS, script=True),
        '<main class="wide">',
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">{len(table.rows)} report(s), each verified item by item (kit report '
        f"verify) and signed by one of the {table.keys} key(s) in "
        f"<code>{escape(table.keys_dir)}</code>, in sections by kind: "
        + escape(", ".join(f"{s.title} ({len(s.rows)})" for s in sections))
        + ". Each section is its own table, the verdict first; rows are grouped by model × rig "
        "× engine (shaded in turn); click a header to sort that table. Best for my rig sorts "
        "each table by its figure (decode TPS, or a sweep's peak), best first.</p>",
        TOOLS,
        *(_section(s) for s in sections),
    ]
    if table.refused:
        parts.append(_unverified(table))
    parts += [f"<script>{SCRIPT}</script>", "</main></body></html>\n"]
    return "\n".join(parts)


def write_table_page(table: Table, out: Path) -> Path:
    """Write the page to ``out`` (its folder created) and return the path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table_page(table), encoding="utf-8")
    return out

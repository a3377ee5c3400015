"""guidellm 0.2-0.3's benchmarks report, JSON or YAML: no ``metadata``; each benchmark carries
its ``args`` (profile, strategy, max_number / max_duration), ``run_stats``, ``worker`` (the
backend's target and model) and ``request_loader`` (the data); one point per benchmark. Its
figures are laid out as guidellm 0.4's (:mod:`kit.importers.guidellm`)."""

from __future__ import annotations

import re
from pathlib import Path

from kit.importers.guidellm import (
    DEFINITIONS,
    document,
    legacy,
    point,
    request_body,
    workload_of,
)
from kit.importers.parse import (
    NO_OPTIONS,
    Fields,
    ImportOptions,
    Parsed,
    Reader,
    hub_id,
    parse_file,
    shown_name,
)
from kit.importers.schema import Imported, Workload


def detect(path: Path, data: Parsed) -> bool:
    """A report of guidellm 0.2-0.3's layout (:func:`kit.importers.guidellm.legacy`)."""
    return legacy(document(data))


_SYNTHETIC = re.compile(r"^prompt_tokens=(\d+),\s*output_tokens=(\d+)$")


def _read(path: Path, doc: Fields, form: str) -> Imported:
    """A guidellm 0.2-0.3 report: each benchmark its own args, worker and request loader."""
    benches = [
        Fields(b, path.name, f"benchmarks[{i}].")
        for i, b in enumerate(doc.items("benchmarks"))
        if isinstance(b, dict)
    ]
    warnings: list[str] = []
    notes: list[str] = []
    points = [point(b, i, None, warnings) for i, b in enumerate(benches)]
    first = benches[0]
    worker = first.sub("worker")
    loader = first.sub("request_loader")
    model = worker.text("backend_model") if worker else None
    data = loader.text("data") if loader else None
    synthetic = _SYNTHETIC.match(data or "")
    args = first.sub("args")
    profile = args.sub("profile") if args else None
    if profile is not None and profile.text("type_") == "sweep":
        notes.append(
            f"profile: a sweep of {profile.count('completed_strategies')} strategies; the file "
            f"holds {len(benches)} benchmark(s)"
        )
    if synthetic:
        workload = Workload(
            dataset=f"synthetic ({data})",
            random=True,
            input_tokens=int(synthetic.group(1)),
            output_tokens=int(synthetic.group(2)),
            range_ratio=0.0,
            lengths_from="request_loader.data",
            backend_url=worker.text("backend_target") if worker else None,
        )
    else:
        workload = workload_of(
            shown_name(data) if data else None,
            request_body(benches),
            points,
            worker.text("backend_target") if worker else None,
            None,
        )
    return Imported(
        file=path.name,
        tool="guidellm",
        layout=f"benchmarks report, guidellm 0.2-0.3 layout ({form})",
        model=model,
        hub_repo=hub_id(model),
        workload=workload,
        points=points,
        warnings=warnings,
        notes=notes,
    )


def read(path: Path, options: ImportOptions = NO_OPTIONS) -> Imported:
    """Read a guidellm 0.2-0.3 report."""
    parsed = parse_file(path)
    doc = Fields(document(parsed), path.name)
    return _read(path, doc, "JSON" if parsed.json is not None else "YAML")


READER = Reader(
    tool="guidellm 0.2-0.3",
    reads="guidellm 0.2-0.3 benchmarks report (JSON or YAML)",
    detect=detect,
    read=read,
    definitions=DEFINITIONS,
)

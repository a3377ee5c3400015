"""Engine patches: ordered unified diffs applied to an installed engine, fail-loud.

A series lives in ``patches/<engine>-<version>/`` (:mod:`.series`). Diffs are applied in pure
Python (:mod:`.diff`): exact context at the stated lines, no offset, no fuzz. :mod:`.installed`
checks, applies and verifies a series on an engine's site-packages.
"""

from __future__ import annotations

from kit.patches.diff import (
    FileDiff,
    FileMismatch,
    Hunk,
    HunkMismatch,
    apply_diff,
    apply_file,
    parse_patch,
)
from kit.patches.installed import (
    ManifestFile,
    ManifestPatch,
    PatchManifest,
    PatchState,
    apply,
    check,
    find_site_packages,
    installed_version,
    record_fingerprints,
    status,
    verify,
)
from kit.patches.series import (
    SERIES_FILE,
    Patch,
    PatchMeta,
    PatchSeries,
    SeriesMeta,
    dump_series,
    find_series,
    load_series,
    read_meta,
    search_roots,
    series_named,
)

__all__ = [
    "SERIES_FILE",
    "FileDiff",
    "FileMismatch",
    "Hunk",
    "HunkMismatch",
    "ManifestFile",
    "ManifestPatch",
    "Patch",
    "PatchManifest",
    "PatchMeta",
    "PatchSeries",
    "PatchState",
    "SeriesMeta",
    "apply",
    "apply_diff",
    "apply_file",
    "check",
    "dump_series",
    "find_series",
    "find_site_packages",
    "installed_version",
    "load_series",
    "parse_patch",
    "read_meta",
    "record_fingerprints",
    "search_roots",
    "series_named",
    "status",
    "verify",
]

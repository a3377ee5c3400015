"""Re-running a shared report: ``kit reproduce REPORT.json``. Steps 1-3 (read the report, take
its recipe, check its patches) are :func:`prepare_rerun`'s; step 4, the verdict on the re-run
against the original, is :meth:`Rerun.attach`'s.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from kit.errors import EnvironmentProblem
from kit.patches import series_named
from kit.recipe import LoadedRecipe, load_embedded
from kit.report.assemble import UNKNOWN_COMMIT
from kit.report.files import read_report
from kit.report.reproduction import judge
from kit.report.schema import Report
from kit.signing import SignatureCheck, TrustStore, load_public_key

log = logging.getLogger(__name__)


def is_report_file(path: str | Path) -> bool:
    """Whether the argument names a report rather than a recipe (a JSON file)."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        return True
    try:
        with p.open("rb") as fh:
            return fh.read(1) == b"{"
    except OSError:
        return False


@dataclass(frozen=True)
class Rerun:
    """A re-run of a shared report: the original, the sha256 of its file's bytes, and the
    ``--set`` overrides that make the run a variation."""

    original: Report
    original_sha256: str
    overrides: tuple[str, ...] = ()

    def attach(self, new: Report) -> Report:
        """Step 4: the new report with the verdict on it against the original, and a note
        naming it. After the run, before its report is written (:func:`kit.run.run_and_report`),
        the verdict (:mod:`kit.report.reproduction`) goes into the new report; it names the
        original by run id and by the sha256 of the file's bytes."""
        verdict = judge(
            self.original, new, original_sha256=self.original_sha256, overrides=self.overrides
        )
        kind = "a variation of" if self.overrides else "a re-run of"
        note = (
            f"{kind} report {self.original.run_id} (sha256 {self.original_sha256[:12]}): "
            f"{verdict.summary}"
        )
        return new.model_copy(update={"reproduction": verdict, "notes": [*new.notes, note]})


def read_shared(
    path: Path,
    public_key: Ed25519PublicKey | None,
    *,
    allow_untrusted: bool = False,
    allow_unsigned: bool = False,
) -> tuple[Report, SignatureCheck, str]:
    """The shared report, checked; its signature check; the sha256 of its bytes."""
    data = path.read_bytes()
    report, check = read_report(
        path,
        public_key,
        trust=None if public_key is not None else TrustStore.default(),
        allow_untrusted=allow_untrusted,
        allow_unsigned=allow_unsigned,
        key_option="--report-key",  # kit reproduce's --key is the key that signs the re-run
    )
    return report, check, hashlib.sha256(data).hexdigest()


def recipe_of(report: Report, path: Path, overrides: list[str] | tuple[str, ...]) -> LoadedRecipe:
    """The report's embedded recipe, as the re-run's (named after the report's recipe file,
    beside the report)."""
    name = report.recipe_file or f"{report.recipe_name}.yaml"
    return load_embedded(report.recipe, f"{path}: recipe", path.parent / name, overrides)


def check_series(report: Report, loaded: LoadedRecipe) -> None:
    """The report's patch series against this checkout's; raises EnvironmentProblem when a
    patch differs, is missing, or is extra."""
    name = loaded.recipe.server.patches
    shipped = report.patches
    if name is None:
        return
    if shipped is None:
        log.warning(
            "reproduce: the report records no patch manifest for series %s; the checkout's is used",
            name,
        )
        return
    series = series_named(name)
    here = {p.meta.file: p.sha256 for p in series.patches}
    there = {p.file: p.sha256 for p in shipped.patches}
    problems = []
    for file in dict.fromkeys([*there, *here]):
        if file not in here:
            problems.append(f"{file}: in the report's series, not in this checkout's")
        elif file not in there:
            problems.append(f"{file}: in this checkout's series, not in the report's")
        elif here[file] != there[file]:
            problems.append(
                f"{file}: sha256 {there[file][:12]} in the report, {here[file][:12]} here"
            )
    if shipped.series != series.name:
        problems.insert(0, f"series {shipped.series} in the report, {series.name} here")
    if problems:
        raise EnvironmentProblem(
            f"the report's patch series is not this checkout's ({name}):\n"
            + "\n".join(f"  {p}" for p in problems),
            hint=f"{checkout_hint(report, name)}\nor re-run the recipe itself (kit reproduce "
            "RECIPE.yaml) to measure this checkout's patches",
        )


def checkout_hint(report: Report, series: str) -> str:
    """How to get the kit that wrote ``report``: the commit it records, or why it names none."""
    source = report.kit_source
    if source is None:
        return (
            f"the report predates kit recording its commit (kit {report.kit_version}): check "
            f"out the kit commit whose patches/{series} holds the patches above (git log -- "
            f"patches/{series}), then run kit reproduce again"
        )
    if source.commit == UNKNOWN_COMMIT:
        return (
            f"the kit that wrote the report (kit {report.kit_version}) did not run from a git "
            f"checkout, so the report names no commit: check out the one whose patches/{series} "
            f"holds the patches above (git log -- patches/{series}), then run kit reproduce again"
        )
    dirty = (
        " (the report's kit had uncommitted changes: the commit is the nearest there is)"
        if source.dirty
        else ""
    )
    return (
        f"git checkout {source.commit}, the kit that wrote the report{dirty}, then run kit "
        "reproduce again"
    )


def prepare_rerun(
    path: Path,
    overrides: list[str] | tuple[str, ...],
    *,
    report_key: Path | None = None,
    allow_untrusted: bool = False,
    allow_unsigned: bool = False,
) -> tuple[Rerun, LoadedRecipe]:
    """Steps 1-3 for the report at ``path``: the re-run (the report, the sha256 of its file)
    and the recipe to run; raises before any work on a report that cannot be re-run here.

    1. The report is read as every reader reads it (:func:`kit.report.files.read_report`): a
       bad signature or a tampered file stops here (exit 1); so does a signer that is neither
       given (``--report-key``) nor trusted, unless ``--allow-untrusted``.
    2. Its embedded recipe, with the pins it ran with (hub revisions, image digest, engine
       version), is the recipe of the re-run; ``--set`` still applies and makes the run a
       *variation*.
    3. Its patch series must be this checkout's, patch for patch and byte for byte: a re-run
       on other patches would measure something else (exit 3, naming the patches that differ,
       and the commit of kit that wrote the report to check out: its ``kit_source``)."""
    pub = load_public_key(report_key) if report_key else None
    original, check, digest = read_shared(
        path, pub, allow_untrusted=allow_untrusted, allow_unsigned=allow_unsigned
    )
    if check.untrusted or not check.signed:
        state = "UNTRUSTED" if check.signed else "UNSIGNED"
        log.warning("reproduce: %s is %s: %s", path, state, check.reason)
    loaded = recipe_of(original, path, overrides)
    check_series(original, loaded)
    kind = "a variation" if overrides else "a re-run"
    log.info(
        "reproduce: %s of %s (%s, %s)", kind, original.run_id, original.recipe_name, digest[:12]
    )
    return Rerun(original, digest, tuple(overrides)), loaded

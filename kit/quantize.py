"""Quantize stage: AutoRound weight-only quantization, cached by what determines its output
(:func:`cache_key`). The manifest records the checkpoint's digest (``identity``, with each
file's sha256) and where AutoRound ran (``built_on``): what the reproduction verdict compares
(docs/checkpoint.md).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from kit.base import KitModel
from kit.errors import BadInputError, EnvironmentProblem
from kit.model import FileHash, ModelManifest, generated_texts, hash_tree, identity_of
from kit.paths import display_path, kit_home
from kit.probe import parse_cpuinfo
from kit.recipe import (
    AutoRoundQuantization,
    FileCalibration,
    GeneratedCalibration,
    HubCalibration,
    InlineCalibration,
    LoadedRecipe,
    SyntheticModel,
)

log = logging.getLogger(__name__)

MANIFEST = "kit-quant-manifest.json"


class QuantHost(KitModel):
    """Where AutoRound ran: what besides its inputs may make its output differ."""

    cpu: str | None = Field(description="CPU model from /proc/cpuinfo (None: not read).")
    isa: list[str] | None = Field(
        description="The CPU's vector flags, as the host probe keeps them (kit.probe); None where "
        "/proc/cpuinfo lists none."
    )
    threads: int = Field(description="torch's intra-op threads in AutoRound's process.")
    accelerator: str | None = Field(
        description="The GPU AutoRound tuned on, as torch names it; None on the CPU."
    )


def quant_host(cpuinfo: str, threads: int, accelerator: str | None) -> QuantHost:
    """Where AutoRound ran, from the text of /proc/cpuinfo ('' where there is none)."""
    cpu = parse_cpuinfo(cpuinfo)
    return QuantHost(cpu=cpu["model"], isa=cpu["isa"], threads=threads, accelerator=accelerator)


class QuantManifest(BaseModel):
    """What the quantize stage produced, and from what."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field(description="Quantization method.")
    key: str = Field(description="Cache key: sha256 of the inputs below.")
    inputs: dict[str, Any] = Field(description="Model identity, parameters, calibration hash.")
    versions: dict[str, str] = Field(description="auto-round, torch, transformers versions.")
    device: str = Field(description="Where AutoRound ran.")
    duration_s: float = Field(description="Wall time of the quantization itself.")
    files: list[FileHash] = Field(description="Output files with sha256.")
    identity: str = Field(description="sha256 over the output file hashes.")
    directory: str = Field(description="Output model directory (KIT_HOME-relative).")
    quantization_config: dict[str, Any] = Field(description="The checkpoint's quant config.")
    cached: bool = Field(False, description="Reused from an earlier run (no work done).")
    built_on: QuantHost | None = Field(
        None,
        description="Where AutoRound ran: CPU, its vector flags, torch's threads, the GPU. Absent "
        "in reports (and cached checkpoints) written before kit recorded it.",
    )

    @model_serializer(mode="wrap")
    def _built_on_only_when_known(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if data.get("built_on") is None:
            data.pop("built_on", None)  # written as kit wrote it before recording it
        return data

    @property
    def seed(self) -> int | None:
        """AutoRound's seed, as kit passed it."""
        value = self.inputs.get("parameters", {}).get("seed")
        return value if isinstance(value, int) else None

    @property
    def iters(self) -> int | None:
        """AutoRound's tuning iterations per block (0: round-to-nearest), as kit passed them."""
        value = self.inputs.get("parameters", {}).get("iters")
        return value if isinstance(value, int) else None


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def calibration_texts(q: AutoRoundQuantization, loaded: LoadedRecipe) -> tuple[Any, str]:
    """The dataset argument for AutoRound and a hash identifying its content."""
    cal = q.calibration
    if isinstance(cal, HubCalibration):
        return cal.dataset, "hub:" + cal.dataset
    if isinstance(cal, FileCalibration):
        path = loaded.resolve_path(cal.path)
        try:
            lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        except OSError as exc:
            raise BadInputError(
                f"{loaded.path.name}: quantization.calibration.path: {cal.path}: {exc.strerror}"
            ) from None
        if not lines:
            raise BadInputError(
                f"{loaded.path.name}: quantization.calibration.path: {cal.path}: file is empty"
            )
        texts = lines
    elif isinstance(cal, InlineCalibration):
        texts = list(cal.texts)
    else:
        assert isinstance(cal, GeneratedCalibration)
        seed = loaded.recipe.model.seed if isinstance(loaded.recipe.model, SyntheticModel) else 0
        texts = generated_texts(cal.samples, seed + 7919, min_words=48, max_words=96)
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()
    return texts, "sha256:" + digest


def cache_key(
    model: ModelManifest, q: AutoRoundQuantization, calibration_id: str
) -> tuple[str, dict[str, Any]]:
    """The cache key and what it hashes: the model's content identity, the recipe's
    quantization parameters (with the calibration data's own hash) and the auto-round version.
    A second run with the same inputs reuses the output and says so."""
    params = q.model_dump(mode="json")
    params.pop("calibration")
    params.pop("placement")  # where it tunes, not what it makes
    inputs = {
        "model_identity": model.identity,
        "parameters": params,
        "calibration": calibration_id,
        "auto_round": _version("auto-round"),
    }
    blob = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest(), inputs


def quantize(
    loaded: LoadedRecipe, model_path: Path, model: ModelManifest
) -> tuple[Path, QuantManifest | None]:
    """Quantize the model as the recipe says; ``(model_path, None)`` when it says none.
    AutoRound runs in a child interpreter (``python -m kit.quantize JOB RESULT``) because it
    starts worker processes and holds a lot of memory; its output goes to the stage log beside
    the cache entry (``-v``: the terminal too)."""
    q = loaded.recipe.quantization
    if not isinstance(q, AutoRoundQuantization):
        return model_path, None
    if _version("auto-round") == "not installed":
        raise EnvironmentProblem(
            "auto-round is not installed in kit's environment", hint="pip install 'kit[build]'"
        )
    dataset, calibration_id = calibration_texts(q, loaded)
    key, inputs = cache_key(model, q, calibration_id)
    root = kit_home() / "quantized" / key[:24]
    cached = _cache_hit(root, key)
    if cached is not None:
        return root / "model", cached
    if root.exists():
        shutil.rmtree(root)
    work = root.with_name(root.name + f".partial-{os.getpid()}")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    job = {
        "model": str(model_path),
        "out": str(work / "raw"),
        "dataset": dataset,
        "params": q.model_dump(mode="json"),
    }
    job_path = work / "job.json"
    job_path.write_text(json.dumps(job))
    log.info(
        "quantize: AutoRound W%d g%d %s, %d iters, %d samples x %d tokens",
        q.bits,
        q.group_size,
        "sym" if q.sym else "asym",
        q.iters,
        q.nsamples,
        q.seqlen,
    )
    log_path = root.with_name(root.name + ".log")
    log.info("quantize: AutoRound's messages -> %s (-v shows them here)", display_path(log_path))
    t0 = time.monotonic()
    result_path = work / "result.json"
    argv = [sys.executable, "-m", "kit.quantize", str(job_path), str(result_path)]
    returncode = run_logged(argv, log_path)
    duration = time.monotonic() - t0
    if returncode != 0 or not result_path.is_file():
        raise EnvironmentProblem(
            f"AutoRound failed (exit {returncode}); partial output kept in {work}",
            hint=f"its messages: {log_path}",
        )
    result = json.loads(result_path.read_text())
    os.replace(Path(result["folder"]), work / "model")
    shutil.rmtree(work / "raw", ignore_errors=True)
    manifest = _manifest(work / "model", root, key, inputs, result, duration)
    (work / MANIFEST).write_text(manifest.model_dump_json(indent=2))
    job_path.unlink()
    result_path.unlink()
    try:
        os.replace(work, root)
    except OSError:
        if not (root / MANIFEST).exists():
            raise
        # another process (a second sweep cell on this host) finished the same entry first:
        # keep its result, which other runs may already be serving from
        shutil.rmtree(work, ignore_errors=True)
        manifest = QuantManifest.model_validate_json((root / MANIFEST).read_text())
        log.info("quantize: %s was built meanwhile by another run: using it", display_path(root))
        return root / "model", manifest
    log.info("quantize: done in %.1f s -> %s", duration, display_path(root / "model"))
    return root / "model", manifest


def _cache_hit(root: Path, key: str) -> QuantManifest | None:
    """The cached manifest under ``root`` when it is for ``key`` and its files are all there."""
    manifest_path = root / MANIFEST
    if not manifest_path.exists():
        return None
    try:
        cached = QuantManifest.model_validate_json(manifest_path.read_text())
    except ValueError:
        return None
    if cached.key != key:
        return None
    out = root / "model"
    if all(
        (out / f.path).is_file() and (out / f.path).stat().st_size == f.size for f in cached.files
    ):
        log.info("quantize: cache hit %s, no work done", display_path(root))
        return cached.model_copy(update={"cached": True})
    log.warning("quantize: cached output at %s is incomplete; redoing", root)
    return None


def _manifest(
    out: Path, root: Path, key: str, inputs: dict[str, Any], result: dict[str, Any], duration: float
) -> QuantManifest:
    """What AutoRound made in ``out`` (to be moved to ``root``), with what went in and where."""
    files = hash_tree(out)
    config = json.loads((out / "config.json").read_text())
    return QuantManifest(
        method="autoround",
        key=key,
        inputs=inputs,
        versions={
            "auto_round": _version("auto-round"),
            "torch": _version("torch"),
            "transformers": _version("transformers"),
        },
        device=result["device"],
        duration_s=round(duration, 3),
        files=files,
        identity=identity_of(files),
        directory=display_path(root / "model"),
        quantization_config=config.get("quantization_config", {}),
        built_on=QuantHost.model_validate(result["built_on"]) if "built_on" in result else None,
    )


def run_logged(argv: list[str], log_path: Path) -> int:
    """Run a chatty child (AutoRound, torch, transformers) with its stdout and stderr in
    ``log_path``, echoed to the terminal too when kit logs at DEBUG (``-v``); its exit status."""
    echo = log.isEnabledFor(logging.DEBUG)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        with proc.stdout:
            for line in proc.stdout:
                out.write(line)
                if echo:
                    sys.stderr.buffer.write(line)
                    sys.stderr.flush()
        return proc.wait()


def placement_kwargs(placement: dict[str, Any] | None, device: str) -> dict[str, Any]:
    """AutoRound's placement arguments for the recipe's ``quantization.placement`` (none: one
    card, block inputs on it, no torch.compile, finished blocks on disk)."""
    p = placement or {}
    cards = p.get("device_map", 0)
    if device == "cpu":
        device_map: Any = "cpu"
    elif isinstance(cards, list):
        device_map = ",".join(str(c) for c in cards)  # AutoRound takes "0,1"
    else:
        device_map = cards
    return {
        "device_map": device_map,
        "low_gpu_mem_usage": bool(p.get("low_gpu_mem_usage", False)),
        "enable_torch_compile": bool(p.get("enable_torch_compile", False)),
        "low_cpu_mem_usage": bool(p.get("low_cpu_mem_usage", True)),
    }


def _built_on(torch: Any, placement: dict[str, Any] | None, device: str) -> QuantHost:
    """Where this process runs AutoRound: the CPU, torch's threads, the cards it tunes on."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    accelerator = None
    if device.startswith("cuda"):
        cards = (placement or {}).get("device_map", 0)
        if cards == "auto":
            cards = list(range(torch.cuda.device_count()))
        ids = cards if isinstance(cards, list) else [cards]
        names = Counter(str(torch.cuda.get_device_name(i)) for i in ids)
        accelerator = " + ".join(f"{n}× {name}" for name, n in names.items())
    return quant_host(cpuinfo, int(torch.get_num_threads()), accelerator)


def _run_job(job_path: str, result_path: str) -> None:
    """Child-process entry: run AutoRound on one job and write where its output is, as JSON,
    to ``result_path`` (stdout and stderr are AutoRound's, for the stage log)."""
    # lazy: heavy, and in the build extra
    import torch  # noqa: PLC0415
    from auto_round import AutoRound  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    job = json.loads(Path(job_path).read_text())
    p = job["params"]
    device = p["device"]
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(job["model"], torch_dtype="auto")
    tokenizer = AutoTokenizer.from_pretrained(job["model"])
    kwargs: dict[str, Any] = dict(
        bits=p["bits"],
        group_size=p["group_size"],
        sym=p["sym"],
        iters=p["iters"],
        nsamples=p["nsamples"],
        seqlen=p["seqlen"],
        batch_size=p["batch_size"],
        dataset=job["dataset"],
        seed=p["seed"],
        **placement_kwargs(p.get("placement"), device),
    )
    if p["disable_opt_rtn"]:
        kwargs["disable_opt_rtn"] = True
    ar = AutoRound(model, tokenizer, **kwargs)
    returned = ar.quantize_and_save(job["out"], format=p["format"])
    # auto-round returns (model, folders) in some versions and a folder in others: find the
    # written checkpoint on disk rather than trusting the return shape
    candidates = [
        Path(x)
        for x in (returned if isinstance(returned, (list, tuple)) else [returned])
        if isinstance(x, (str, Path))
    ]
    candidates += sorted(c.parent for c in Path(job["out"]).rglob("config.json"))
    folder = next((c for c in candidates if (c / "config.json").is_file()), None)
    if folder is None:
        raise SystemExit(f"AutoRound wrote no config.json under {job['out']}")
    # tokenizer files travel with the quantized checkpoint
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "chat_template.jinja",
        "generation_config.json",
    ):
        src = Path(job["model"]) / name
        if src.exists() and not (folder / name).exists():
            shutil.copy2(src, folder / name)
    host = _built_on(torch, p.get("placement"), device)
    result = {"folder": str(folder), "device": device, "built_on": host.model_dump(mode="json")}
    Path(result_path).write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    _run_job(sys.argv[1], sys.argv[2])

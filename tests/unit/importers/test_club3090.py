"""Club-3090's own formats, read with their real values: bench.sh logs (the 2026-05 layout of
per-prompt blocks and vLLM's SpecDecoding lines, the newer CONFIG FINGERPRINT / CAPTURE layout
with a prefill probe, the Windows bench.ps1 port) and BENCHMARKS.md rows; then a run judged
against an imported log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kit.cli import main
from kit.errors import BadInputError
from kit.importers import ImportedRecipe, import_file, read_file
from kit.recipe import Recipe
from kit.recipe.protocol import PromptFigures
from kit.report.files import read_report
from kit.report.reference import compare_with_reference

Imports = Callable[..., tuple[ImportedRecipe, Recipe]]  # the `imports` fixture


@pytest.fixture
def club(foreign: Path) -> Path:
    return foreign / "club3090"


def test_dflash_log(club: Path, imports: Imports) -> None:
    """v0.20 dual-dflash: two cards, 5 measured runs a prompt, vLLM's last 3 SpecDecoding
    lines (5 positions)."""
    done, recipe = imports(club / "v0.20-dual-dflash-bench.txt")
    imp = done.imported
    assert (imp.tool, imp.layout) == (
        "club3090 bench.sh",
        "bench.sh stdout (NARRATIVE / CODE blocks)",
    )
    assert imp.engine == "vLLM (its SpecDecoding log lines; version not stated)"
    assert imp.prompts["narrative"] == PromptFigures(
        decode_tps=77.88,
        decode_std=1.78,
        decode_cv_pct=2.3,
        wall_tps=77.12,
        wall_std=1.72,
        ttft_ms=127.0,
        ttft_std=13.0,
        runs=5,
    )
    code = imp.prompts["code"]
    assert (code.decode_tps, code.wall_tps, code.ttft_ms, code.decode_cv_pct) == (
        129.53,
        125.97,
        143.0,
        4.3,
    )
    assert imp.protocol is not None
    assert (imp.protocol.warmups, imp.protocol.runs) == (3, 5)
    assert imp.protocol.max_tokens == {"narrative": 1000, "code": 800}
    assert imp.protocol.chars == {"narrative": 65, "code": 78}  # the canonical prompts' lengths
    # the three intervals summed: 958 + 944 + 971 accepted of 3 x 1460 drafted, 292 drafts each
    spec = imp.speculative
    assert spec is not None and spec.drafting and spec.method is None
    assert spec.num_speculative_tokens == 5
    assert spec.acceptance is not None
    assert (spec.acceptance.accepted, spec.acceptance.drafted, spec.acceptance.drafts) == (
        2873,
        4380,
        876,
    )
    # per line, rate x 292 drafts rounds to counts that sum to the line's Accepted
    assert spec.acceptance.accepted_per_position == [776, 677, 560, 467, 393]
    assert sum(spec.acceptance.accepted_per_position) == 2873
    assert spec.acceptance_length == 4.33  # the last line's, vLLM's 1 + accepted / drafts
    assert imp.warnings[0].startswith(
        "acceptance: the log's 3 SpecDecoding metrics line(s) cover only the last 3 vLLM "
        "logging interval(s) of the run (05-01 19:24:24 to 05-01 19:24:44), not the whole run"
    )
    assert imp.rig_detail is not None
    assert (imp.rig_detail.cards, imp.rig_detail.memory_mib) == (2, 24576)
    assert imp.peak_vram_mib is None  # GPU state is after the run, not a peak
    assert "GPU state after the run (not a peak): GPU0 21720 MiB, GPU1 21720 MiB" in imp.notes
    pins = {p.field: p.reason for p in imp.open_pins}
    assert pins["speculative.method"] == (
        "the file shows drafting (5 tokens a step) but not the method"
    )
    assert (
        pins["rig"] == "the card, power caps, PCIe links, the interconnect (NVLink, P2P) not stated"
    )
    # the recipe: the canonical protocol, the log's figures as the reference
    bench = recipe.bench
    assert (bench.warmups, bench.runs, bench.ignore_eos) == (3, 5, False)
    assert [(p.name, p.max_tokens) for p in bench.prompts] == [("narrative", 1000), ("code", 800)]
    ref = recipe.reference
    assert ref is not None and ref.points == {}
    assert ref.prompts["code"].decode_tps == 129.53
    assert ref.acceptance is not None and ref.acceptance.accepted == 2873
    assert ref.open_pins["speculative.method"] == pins["speculative.method"]
    # cpu-tiny's dflash stands in for the unnamed method, with the log's 5 tokens a step
    assert (recipe.speculative.method, recipe.speculative.num_speculative_tokens) == ("dflash", 5)
    assert "#   - speculative: the base recipe's dflash stands in (the file shows" in done.recipe


def test_three_run_log_on_one_card(club: Path) -> None:
    """default-48k: 3 measured runs, MTP's 3 positions, GPU1 idle (4 MiB) is not the server's."""
    imp = read_file(club / "v0.20-default-48k-bench.txt")
    assert imp.protocol is not None and imp.protocol.runs == 3
    assert imp.prompts["narrative"].runs == 3
    assert imp.prompts["narrative"].decode_tps == 49.20
    assert imp.rig_detail is not None and imp.rig_detail.cards == 1
    assert "GPU state: GPU1 (4 MiB) idle after the run, not counted as the server's" in imp.notes
    spec = imp.speculative
    assert spec is not None and spec.num_speculative_tokens == 3
    assert spec.acceptance is not None and spec.acceptance.drafted == 1716


def test_capture_log(club: Path, imports: Imports) -> None:
    """The newer layout (a redacted real llama.cpp run): CONFIG FINGERPRINT, a 10K prefill
    probe (90K skipped, beyond the served context), CAPTURE PCIe and VRAM."""
    done, recipe = imports(club / "live-offload-run.log")
    imp = done.imported
    assert imp.layout == "bench.sh stdout with CONFIG FINGERPRINT / CAPTURE blocks"
    assert imp.model == "deepseek-v4-flash"  # the served name
    assert imp.engine is None  # the log does not name it
    assert imp.max_context_tokens == 65536  # served ctx
    assert imp.prefill_tps == {10000: 127.50}
    assert imp.protocol is not None and imp.protocol.prefill_depths == [10000, 90000]
    assert (imp.protocol.prefill_runs, imp.protocol.prefill_warmups) == (3, 1)
    assert imp.vram_growth_mib == 1036.0  # post 45360 - idle 44324, both cards
    assert imp.peak_vram_mib is None  # 45360 is the two cards' sum
    assert imp.rig_detail is not None and imp.rig_detail.pcie == ["gen4 x16", "gen4 x16"]
    assert imp.speculative is None  # "no drafter output": off, or not logged
    assert (
        "prefill depth 90000: 90000 tokens exceeds the served context (HTTP Error 400: Bad "
        "Request): skipped, no figure"
    ) in imp.warnings
    assert "the server offloaded weights to the CPU (DETECTED via argv -ot)" in imp.warnings
    ref = recipe.reference
    assert ref is not None
    assert (ref.prefill_tps, ref.vram_growth_mib, ref.max_context_tokens) == (
        {10000: 127.5},
        1036.0,
        65536,
    )
    assert recipe.bench.prefill is not None and recipe.bench.prefill.depths == [10000, 90000]
    assert ref.open_pins["speculative"] == "not stated: the file shows neither drafting nor none"


def test_windows_port_log(club: Path) -> None:
    imp = read_file(club / "windows-native-bench-full.log")
    assert (imp.tool, imp.layout) == (
        "club3090 bench.sh (bench.ps1)",
        "bench.ps1 stdout (the Windows port)",
    )
    assert imp.prompts["narrative"].wall_tps == 70.79
    assert imp.prompts["code"].decode_tps == 71.89
    assert imp.prompts["code"].ttft_ms == 207.0
    assert imp.rig_detail is None


def test_row_by_line(club: Path, imports: Imports) -> None:
    """Line 121: a wall pair with decode in brackets, the rig cell's parts, DFlash N=5."""
    done, recipe = imports(club / "BENCHMARKS.md", row="121")
    imp = done.imported
    assert imp.layout == "BENCHMARKS.md row (line 121)"
    assert (imp.date, imp.model, imp.engine) == (
        "2026-05-07",
        "Qwen3.6-27B",
        "vLLM (the table's heading)",
    )
    assert imp.prompts["narrative"] == PromptFigures(wall_tps=126.53, decode_tps=127.98)
    assert imp.prompts["code"] == PromptFigures(wall_tps=200.11, decode_tps=204.80)
    d = imp.rig_detail
    assert d is not None
    assert (d.cards, d.card, d.memory_mib, d.power_cap_w, d.pcie) == (
        1,
        "RTX 5090",
        32768,
        [575.0],
        ["x8"],
    )
    spec = imp.speculative
    assert spec is not None and (spec.kit_method, spec.num_speculative_tokens) == ("dflash", 5)
    assert "Peak VRAM: '31.5 GB' (not an exact MiB figure per card: kept as text)" in imp.notes
    pins = {p.field: p.reason for p in imp.open_pins}
    assert pins["speculative.draft"] == "dflash: no draft is named"
    assert "bench.prompts" not in pins  # the file quotes the canonical prompts
    assert recipe.name == "imported-benchmarks-line-121"
    assert recipe.reference is not None and recipe.reference.date == "2026-05-07"


def test_row_by_words_with_decode_headline(club: Path) -> None:
    """ "(decode, n=3, CV a% / b%; wall x / y)": the pair is decode, with its runs and CV."""
    lines = (club / "BENCHMARKS.md").read_text().splitlines()
    (line,) = [i + 1 for i, r in enumerate(lines) if "**50.27 / 58.92**" in r]
    imp = read_file(club / "BENCHMARKS.md", row=str(line))
    narrative = imp.prompts["narrative"]
    assert (narrative.decode_tps, narrative.wall_tps, narrative.runs, narrative.decode_cv_pct) == (
        50.27,
        49.69,
        3,
        0.6,
    )
    assert imp.quantization == "Unsloth Q4_K_M MTP (unsloth/Qwen3.6-27B-MTP-GGUF)"
    assert imp.engine == "llama.cpp (the table's heading)"


def test_row_that_states_no_drafting(club: Path) -> None:
    imp = read_file(club / "BENCHMARKS.md", row="114")
    assert imp.speculative is not None and imp.speculative.drafting is False
    assert imp.prompts["narrative"].wall_tps == 32.0
    assert "Narr / Code TPS '~32 / ~33': approximate (~) figures" in imp.warnings
    assert imp.rig_detail is not None and imp.rig_detail.power_cap_w == [350.0]


def test_rows_need_a_row(club: Path) -> None:
    res = CliRunner().invoke(main, ["import", str(club / "BENCHMARKS.md")])
    assert res.exit_code == 2
    assert res.stderr == (
        "error: BENCHMARKS.md: a Club-3090 BENCHMARKS.md with 155 result rows: kit "
        "imports one\nhint: name one with --row LINE (its line number, 114-611) or --row "
        "'WORDS' (words of its Rig and Date cells, e.g. --row '@noonghunna 2026-05-03')\n"
    )


@pytest.mark.parametrize(
    ("row", "first"),
    [
        (
            "2026-05-03",
            "error: BENCHMARKS.md: 3 result rows match '2026-05-03': line 114: @noonghunna (1× "
            "3090, x16, 350 W) | 2026-05-03; line 215: @whamp (4× 3090 PCIe x4/x16/x8/x16, 300 "
            "W cap, no NVLink) | 2026-05-03; line 217: @whamp (4× 3090 PCIe x4/x16/x8/x16, 300 W "
            "cap) | 2026-05-03",
        ),
        ("@nobody", "error: BENCHMARKS.md: no result row's Rig and Date match '@nobody'"),
        ("3", "error: BENCHMARKS.md: line 3 is not a result row"),
        (
            "118",
            "error: BENCHMARKS.md: line 118: Narr / Code TPS is 'TBD': not a narrative / code "
            "pair of figures, so kit reads none from it",
        ),
        (
            "396",
            "error: BENCHMARKS.md: line 396: Narr / Code TPS is '52.39 code / 40.02 narr "
            "decode': not a narrative / code pair of figures, so kit reads none from it",
        ),
    ],
)
def test_row_refusals_are_true(
    club: Path, row: str, first: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(club)
    res = CliRunner().invoke(main, ["import", "BENCHMARKS.md", "--row", row])
    assert res.exit_code == 2
    assert res.stderr.splitlines()[0] == first


def test_row_option_on_another_file_is_refused(foreign: Path) -> None:
    path = foreign / "vllm" / "bench-serve-v0.25.1-opt125m-c2-cpu.json"
    res = CliRunner().invoke(main, ["import", str(path), "--row", "3"])
    assert res.exit_code == 2
    assert res.stderr == (
        f"error: {path}: --row picks a row of a Club-3090 BENCHMARKS.md; this file is vllm "
        "bench serve / sweep output, one result\nhint: leave --row out\n"
    )


def test_every_row_with_figures_is_read(club: Path) -> None:
    """Each of the file's 155 rows: read, or refused naming the row's cell."""
    from kit.importers.club3090.rows import rows

    refused = []
    for row in rows((club / "BENCHMARKS.md").read_text()):
        try:
            imp = read_file(club / "BENCHMARKS.md", row=str(row.line))
        except BadInputError as exc:
            assert "Narr / Code TPS is" in exc.message, (row.line, exc.message)
            refused.append(row.line)
            continue
        assert any(p.wall_tps or p.decode_tps for p in imp.prompts.values())
    assert len(refused) == 19  # "TBD", "—", "boot OOM", a single figure, ...


def test_a_run_is_judged_against_an_imported_log(
    club: Path, fixtures_dir: Path, tmp_path: Path
) -> None:
    """kit report compare REPORT --reference RECIPE on an imported log: decode, wall, TTFT,
    prefill and acceptance each have the log's figure on the reference side."""
    base = fixtures_dir / "recipes" / "cpu-tiny.yaml"
    report = read_report(fixtures_dir / "reports" / "cpu-tiny-a.json", allow_unsigned=True)[0]
    dflash = tmp_path / "dflash.yaml"
    import_file(club / "v0.20-dual-dflash-bench.txt", base=base, out=dflash)
    result = compare_with_reference(report, dflash, force=True)  # its protocol is the canonical
    a = {m.metric: m.a for m in result.metrics}
    assert a["narrative decode TPS"] == 77.88
    assert a["narrative wall TPS"] == 77.12
    assert a["code TTFT"] == 143.0
    assert a["acceptance length"] == pytest.approx(1 + 2873 / 876)
    assert a["acceptance rate"] == pytest.approx(2873 / 4380 * 100)
    # each judged by the rule of its kind, against this run's interval plus the log's rounding
    judged = {m.metric: m for m in result.metrics}
    for name in ("narrative decode TPS", "narrative wall TPS", "code TTFT", "acceptance length"):
        m = judged[name]
        assert m.headline and m.status in ("within", "outside") and m.band_pct is not None, name
    assert result.verdict is not None and result.verdict.verdict == "DIFFERENT"  # a CPU run
    offload = tmp_path / "offload.yaml"
    import_file(club / "live-offload-run.log", base=base, out=offload)
    offloaded = {m.metric: m for m in compare_with_reference(report, offload, force=True).metrics}
    assert offloaded["prefill 10000"].a == 127.5
    # this run's prefill depths are 512 and 1536: not measured at 10000
    assert offloaded["prefill 10000"].note == "not measured by this run"
    res = CliRunner().invoke(
        main,
        [
            "report",
            "compare",
            str(fixtures_dir / "reports" / "cpu-tiny-a.json"),
            "--reference",
            str(dflash),
            "--force",
            "--allow-unsigned",
        ],
    )
    assert "narrative decode TPS" in res.output, res.output


def test_imported_row_yaml_carries_the_rig(club: Path, fixtures_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "row.yaml"
    import_file(
        club / "BENCHMARKS.md", base=fixtures_dir / "recipes" / "cpu-tiny.yaml", out=out, row="121"
    )
    data = yaml.safe_load(out.read_text())
    assert data["reference"]["rig_detail"] == {
        "cards": 1,
        "card": "RTX 5090",
        "memory_mib": 32768,
        "power_cap_w": [575.0],
        "pcie": ["x8"],
    }
    assert (
        "#   - rig: 1 card(s) of 32 GiB in the file, not written (the base recipe serves on"
        in out.read_text()
    )


@pytest.mark.parametrize(
    ("line", "parts"),
    [
        # "no power cap — 600/575 W": the defaults are not a cap
        (165, (2, "5090", None, [], ["x8"], "no NVLink")),
        (215, (4, "3090", None, [300.0], ["x4", "x16", "x8", "x16"], "no NVLink")),
        # a mixed rig (2x RTX 3080 + 1x RTX 5090): no one card, count or memory to pin
        (233, (None, None, None, [200.0], ["x4", "x8", "x8"], "no NVLink")),
        # "X299 i9-10920X": a board and a CPU, not lanes or cards
        (508, (2, "3090", None, [350.0], ["x16"], "NVLink")),
    ],
)
def test_rig_cells(club: Path, line: int, parts: tuple[object, ...]) -> None:
    imp = read_file(club / "BENCHMARKS.md", row=str(line))
    d = imp.rig_detail
    assert d is not None
    assert (d.cards, d.card, d.memory_mib, d.power_cap_w, d.pcie, d.interconnect) == parts

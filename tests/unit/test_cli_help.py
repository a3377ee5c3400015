"""Every command's and group's help ends with its examples (issue 34): an epilog after Options
(and a group's Commands), never in the text above them; each `kit ...` line names a command
that exists and only options that command has."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from kit.cli import main


def tree(cmd: click.Command = main, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every command and group under ``cmd``, ``()`` for kit itself."""
    yield path
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from tree(sub, (*path, name))


PATHS = list(tree())


def command(path: tuple[str, ...]) -> click.Command:
    cmd: click.Command = main
    for name in path:
        assert isinstance(cmd, click.Group)
        cmd = cmd.commands[name]
    return cmd


def printed(cmd: click.Command) -> list[str]:
    """The lines of an epilog's examples, as printed (a continued command on two lines)."""
    assert cmd.epilog, "no epilog"
    lines = cmd.epilog.splitlines()
    assert lines[0] == "\b" and lines[1] in ("Example:", "Examples:"), lines[:2]
    return [line.strip() for line in lines[2:]]


def examples_of(cmd: click.Command) -> list[str]:
    """The examples of an epilog, one string each (a `\\`-continued line joined)."""
    return "\n".join(printed(cmd)).replace("\\\n", " ").splitlines()


def kit_words(example: str) -> list[str] | None:
    """The arguments of kit in an example line (after `sudo` and `VAR=value`, up to a `>`,
    `|` or `&&`), None for a line that runs another program."""
    words = shlex.split(example)
    while words and (words[0] == "sudo" or re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0])):
        words.pop(0)
    if not words or words[0] != "kit":
        return None
    cut = [i for i, w in enumerate(words) if w in (">", "|", "&&")]
    return words[1 : cut[0] if cut else None]


def resolve(words: list[str]) -> tuple[str, ...]:
    """The command path the words name; each option given on the way must exist on the command
    it is given to."""
    cmd: click.Command = main
    path: tuple[str, ...] = ()
    for word in words:
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
            known |= {"-h", "--help"}
            assert name in known, f"kit {' '.join(path)} has no option {name}"
        elif isinstance(cmd, click.Group) and word in cmd.commands:
            cmd, path = cmd.commands[word], (*path, word)
    assert not isinstance(cmd, click.Group), f"kit {' '.join(path)} names a group, no command"
    return path


def help_of(path: tuple[str, ...]) -> str:
    res = CliRunner().invoke(main, [*path, "--help"])
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(("kit", *p)))
def test_examples_come_last_and_run_what_exists(path: tuple[str, ...]) -> None:
    cmd = command(path)
    assert "Example" not in (cmd.help or ""), "examples in the help text, above Options"
    runs = [resolve(words) for e in examples_of(cmd) if (words := kit_words(e)) is not None]
    assert runs, "no `kit ...` example"
    # at least one example runs the command itself (a group's: one of its commands)
    assert any(run[: len(path)] == path for run in runs), runs
    text = help_of(path)
    options = text.index("\nOptions:\n")
    assert "Example" not in text[:options]
    after = text[options:]
    lines = printed(cmd)  # as written, after Options (and a group's Commands), at the end
    for line in lines:
        assert f"  {line}\n" in after, line
    assert after.rstrip().endswith(lines[-1])


def test_the_walk_reaches_every_command() -> None:
    """The tree above is kit's: its groups and a leaf of each, as `kit --help` lists them."""
    top = {path[0] for path in PATHS if path}
    assert top == set(main.commands)
    assert ("report", "compare") in PATHS and ("keys", "untrust") in PATHS
    assert len(PATHS) == 1 + len(main.commands) + sum(
        len(c.commands) for c in main.commands.values() if isinstance(c, click.Group)
    )


@pytest.mark.parametrize(
    ("example", "problem"),
    [
        ("kit report verify r.json --kyes k/", "kit report verify has no option --kyes"),
        ("kit keys", "kit keys names a group, no command"),
    ],
)
def test_resolve_catches_a_wrong_example(example: str, problem: str) -> None:
    words = kit_words(example)
    assert words is not None
    with pytest.raises(AssertionError, match=problem):
        resolve(words)


def test_kit_words_skips_the_shell_around_kit() -> None:
    assert kit_words("sudo kit image bootstrap --cuda") == ["image", "bootstrap", "--cuda"]
    assert kit_words("HF_ENDPOINT=http://h:1 kit lock r.yaml") == ["lock", "r.yaml"]
    assert kit_words("kit probe --json > host.json") == ["probe", "--json"]
    assert kit_words('ray start --resources "$(kit fleet resources)"') is None

"""Issue 34's newcomer path, command by command, in one fresh KIT_HOME and config dir (no signing
key, no trusted key), with no hub and no server. At each step: the documented exit code
(kit/errors.py, the README's table), no traceback, errors as `error:`/`hint:` lines, and a hint
that names a command or an option is run and gets further. Each behaviour has its own tests
(test_error_boundary.py, test_hints.py, test_preflight_states.py, report/test_trust_labels.py,
report/test_keys_dir.py); this is the sequence a stranger meets, in one place."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kit import pipeline, serve
from kit.cli import main
from kit.errors import EnvironmentProblem
from kit.report.table import LABELLED

SEED = "recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml"
STOP = "stopped where the run would start (test)"
# where a re-run goes once its signature is accepted: the patch series check (the fixture's
# series is an older checkout's), else the run itself; both exit 3
LATER = (f"error: {STOP}", "error: the report's patch series is not this checkout's")
# the README's exit codes of a comparison's verdict (--fail-on different)
VERDICT_EXIT = {"REPRODUCED": 0, "NOT COMPARABLE": 1, "DIFFERENT": 4, "INCONCLUSIVE": 5}


@dataclass(frozen=True)
class Walk:
    fixtures: Path  # tests/fixtures/
    home: Path  # the working directory, KIT_HOME and the config dir below it
    hub: str  # HF_ENDPOINT, where nothing listens
    pins: list[str]  # --set pins of the seed's revisions


def refused_url() -> str:
    """A local URL nothing listens on: a port the OS just handed out, closed again."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def kit(code: int | None, *args: object) -> Result:
    """``kit ARGS``, which must exit ``code`` (None: the caller checks it) with no traceback and
    no exception escaping."""
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    assert res.exc_info is None or res.exc_info[0] is SystemExit, res.exc_info
    assert code is None or res.exit_code == code, f"kit {shlex.join(map(str, args))}:\n{res.output}"
    return res


def said(stderr: str) -> list[str]:
    """The lines that end stderr from its first `error:` on (log lines may come before): each
    an `error:` or a `hint:` line."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("error: ")), None)
    assert start is not None, f"no error: line in\n{stderr}"
    assert all(line.startswith(("error: ", "hint: ")) for line in lines[start:]), stderr
    return lines[start:]


def stop(*args: Any, **kwargs: Any) -> Any:
    raise EnvironmentProblem(STOP)


@pytest.fixture
def walk(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed_pins: list[str]
) -> Walk:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "kit-home"))
    monkeypatch.setenv("KIT_CONFIG_DIR", str(tmp_path / "config"))
    for name in ("KIT_DEBUG", "KIT_SIGNING_KEY", "KIT_ENGINE_PYTHON", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    hub = refused_url()
    monkeypatch.setenv("HF_ENDPOINT", hub)
    # `kit reproduce` stops where a native run would start: building a model is no unit test's
    monkeypatch.setattr(pipeline, "reproduce", stop)
    monkeypatch.setattr(serve, "install_sigterm_handler", lambda: None)  # keep pytest's
    return Walk(fixtures_dir, tmp_path, hub, seed_pins)


def test_the_newcomer_walk(walk: Walk) -> None:
    bench_without_a_server(walk)
    lock_without_a_hub(walk)
    preflight_says_what_it_did_not_check(walk)
    a_misspelt_set(walk)
    a_second_key(walk)
    rerun_an_untrusted_report(walk)
    read_an_untrusted_report(walk)
    a_table_of_several_signers(walk)
    pages_beside_their_reports(walk)


def bench_without_a_server(w: Walk) -> None:
    recipe, out = w.fixtures / "recipes" / "cpu-tiny.yaml", w.home / "reports"
    error, hint = said(kit(2, "bench", "--target", "notaurl", recipe, "-o", out).stderr)
    assert error.startswith("error: --target notaurl: ")
    assert re.search(r"such as --target http://127\.0\.0\.1:\d+$", hint)
    assert not out.exists()  # refused before any work
    # the form the hint shows, on a port where nothing listens, in a real process: exit 3
    url = refused_url()
    run = subprocess.run(
        [sys.executable, "-m", "kit.cli", "bench", "--target", url, str(recipe), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    error, hint = said(run.stderr)
    assert error.startswith(f"error: cannot connect to {url}/v1/models: ")
    port = url.rsplit(":", 1)[1]
    assert f"`kit serve RECIPE --port {port}`" in hint
    assert "--port" in kit(0, "serve", "--help").stdout  # the command it names takes that
    assert len(list(out.glob("*/report.json"))) == 1  # the partial report, kept


def lock_without_a_hub(w: Walk) -> None:
    seed = w.home / "seed.yaml"
    seed.write_bytes((w.fixtures / SEED).read_bytes())
    hints = said(kit(2, "preflight", seed, "--rig", "2x24").stderr)
    (lock,) = [h for h in hints if h.startswith("hint: kit lock ")]
    command = shlex.split(lock.removeprefix("hint: ").split(" pins ")[0])
    assert command == ["kit", "lock", "./seed.yaml"]
    # the hint, run, and its alternative: the hub is down, exit 3 naming it; no lock written
    for args in (command[1:], ["reproduce", "./seed.yaml", "--resolve", "--no-sign"]):
        error, hint = said(kit(3, *args).stderr)
        assert error.startswith(f"error: cannot connect to {w.hub}/api/models/"), error
        assert hint.startswith(f"hint: the hub ({w.hub}) is unreachable: ")
    assert not (w.home / "seed.lock.yaml").exists()


def preflight_says_what_it_did_not_check(w: Walk) -> None:
    pins = [a for pin in w.pins for a in ("--set", pin)]
    res = kit(0, "preflight", "./seed.yaml", *pins, "--rig", "2x24")  # not checked fails nothing
    assert res.stderr == ""
    lines = res.stdout.splitlines()
    rows = [re.split(r"  +", line, maxsplit=2) for line in lines if not line.startswith("hint:")]
    *items, (count,) = rows
    states = {name: state for state, name, _ in items}
    for size in ("gpu memory", "autoround memory", "disk"):  # never ok unsized
        assert states[size] == "not checked", res.stdout
    skipped = [name for name, state in states.items() if state == "not checked"]
    assert count.startswith(f"{len(skipped)} checks not made ({', '.join(skipped)})")
    # the hint: once, on its own line, naming the command to run again
    assert [line for line in lines if line.startswith("hint:")] == [
        "hint: check the network and HF_ENDPOINT (HF_TOKEN for a gated repository), then run "
        "kit preflight ./seed.yaml again"
    ]


def a_misspelt_set(w: Walk) -> None:
    recipe = w.fixtures / "recipes" / "cpu-tiny.yaml"
    res = kit(2, "reproduce", recipe, "--set", "benchh.runs=3", "--no-sign")
    assert said(res.stderr) == [
        "error: --set benchh.runs=3: benchh: unknown key (did you mean 'bench'?)"
    ]
    # the suggestion, followed: the recipe loads and the run would start
    res = kit(3, "reproduce", recipe, "--set", "bench.runs=3", "--no-sign")
    assert said(res.stderr) == [f"error: {STOP}"]


def a_second_key(w: Walk) -> None:
    first = json.loads(kit(0, "keys", "generate").stdout)
    error, hint = said(kit(2, "keys", "generate").stderr)
    assert error == f"error: {first['private_key']} already exists"
    assert "`kit keys generate --force`" in hint
    again = json.loads(kit(0, "keys", "generate", "--force").stdout)
    assert again["fingerprint"] != first["fingerprint"]
    trusted = [e["fingerprint"] for e in json.loads(kit(0, "keys", "list").stdout)]
    assert again["fingerprint"] in trusted


def rerun_an_untrusted_report(w: Walk) -> None:
    report, pub = w.fixtures / "reports/cpu-tiny-a.signed.json", w.fixtures / "reports/signer.pub"
    out = ["-o", w.home / "reruns", "--no-sign"]
    error, hint = said(kit(1, "reproduce", report, *out).stderr)
    found = re.search(r"signed by an untrusted key (sha256:[0-9a-f]{64}); trust it with", error)
    assert found, error
    assert "--report-key PUB" in hint
    # the hint, followed: the signature verifies and the re-run goes on to its next step
    res = kit(3, "reproduce", report, "--report-key", pub, *out)
    assert said(res.stderr)[0].startswith(LATER), res.stderr
    # the error's own advice: trusted, it goes on without the option
    kit(0, "keys", "trust", pub)
    assert said(kit(3, "reproduce", report, *out).stderr)[0].startswith(LATER)
    # untrusted again by a fingerprint prefix, as `kit keys untrust --help` shows
    gone = json.loads(kit(0, "keys", "untrust", found.group(1)[:15] + "...").stdout)
    assert gone["fingerprint"] == found.group(1)
    kit(1, "reproduce", report, *out)


def read_an_untrusted_report(w: Walk) -> None:
    report, other = (
        w.fixtures / "reports/cpu-tiny-a.signed.json",
        w.fixtures / "reports/h200x2.json",
    )
    _, hint = said(kit(1, "report", "show", report).stderr)
    assert "--allow-untrusted" in hint
    shown = kit(0, "report", "show", report, "--allow-untrusted").stdout
    assert all(line.startswith("UNTRUSTED  ") for line in shown.splitlines() if line)
    # a comparison whose runs differ: refused, and the hint's --force shows every figure labelled
    args = ["report", "compare", report, other, "--allow-untrusted", "--allow-unsigned"]
    assert "--force" in said(kit(1, *args).stderr)[-1]
    res = kit(None, *args, "--force")
    text = res.stdout.splitlines()
    verdict = next(line for line in text if line.startswith("verdict: "))
    assert res.exit_code == next(v for k, v in VERDICT_EXIT.items() if f": {k}" in verdict)
    start = next(i for i, line in enumerate(text) if line.startswith("-----")) + 1
    rows = text[start : text.index("", start)]
    assert rows and all(line.endswith("  UNTRUSTED (A), UNSIGNED (B)") for line in rows)
    # the results table: refused, then listed apart with --include-unverified, every figure
    # labelled
    keys = w.fixtures / "examples/keys"
    table = ["report", "table", report, "--keys", keys]
    assert "--include-unverified" in said(kit(1, *table).stderr)[-1]
    md = kit(0, *table, "--include-unverified").stdout
    head, _, row = [line for line in md.split("\n## Unverified\n")[1].splitlines() if "|" in line]
    cells = dict(zip(cells_of(head), cells_of(row), strict=True))
    figures = [cell for name, cell in cells.items() if name in LABELLED and cell != "-"]
    assert figures and all(cell.startswith("UNTRUSTED ") for cell in figures)


def cells_of(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def a_table_of_several_signers(w: Walk) -> None:
    reports = w.fixtures / "examples/reports"
    two = [reports / "h200x2-tp2.report.json", reports / "h200-tp1-rerun.report.json"]
    # one --key cannot check reports by two signers: refused before anything is printed
    key = w.fixtures / "examples/keys/example.pub"
    res = kit(1, "report", "show", "--markdown", "--header", *two, "--key", key)
    assert res.stdout == "" and said(res.stderr)
    res = kit(0, "report", "show", "--markdown", "--header", *two, "--keys", key.parent)
    assert len(res.stdout.splitlines()) == 2 + len(two)  # header, rule, a row per report
    assert "UNTRUSTED" not in res.stdout


def pages_beside_their_reports(w: Walk) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("kit's html extra: pip install 'kit[html]'")
    folder = w.home / "downloads"
    folder.mkdir()
    names = ["run-a.json", "run-b.report.json"]
    for name in names:
        shutil.copy(w.fixtures / "reports/cpu-tiny-a.signed.json", folder / name)
    pages = [
        Path(kit(0, "report", "html", folder / n, "--allow-untrusted").stdout.strip())
        for n in names
    ]
    assert pages == [folder / "run-a.html", folder / "run-b.report.html"]
    for page in pages:  # each its own, labelled
        assert "<title>UNTRUSTED: kit report: " in page.read_text()

"""Issue 34's newcomer path, command by command, in one fresh KIT_HOME and config dir (no signing
key, no trusted key), with no hub and no server. At each step: the documented exit code
(kit/errors.py, the README's table), no traceback, errors as `error:`/`hint:` lines, and a hint
that names a command or an option is run and gets further. Each behaviour has its own tests
(test_error_boundary.py, test_hints.py, test_error_hints.py, test_preflight_states.py,
report/test_trust_labels.py, report/test_keys_dir.py, signing/test_key_files.py); this is the
sequence a stranger meets, in one place."""

from __future__ import annotations

import importlib.util
import json
import os
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
from clirun import kit

from kit import pipeline, serve
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
    env: pytest.MonkeyPatch
    served: list[tuple[Path, int | None]]  # what `kit serve` was asked: recipe, port


def refused_url() -> str:
    """A local URL nothing listens on: a port the OS just handed out, closed again."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


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


def backticked(hint: str, start: str) -> list[str]:
    """The command a hint shows in backticks, the one that starts with ``start``, as argv."""
    (command,) = [c for c in re.findall(r"`([^`]+)`", hint) if c.startswith(start)]
    return shlex.split(command)


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
    # `kit reproduce` and `kit serve` stop where a native run or server would start: building a
    # model is no unit test's
    served: list[tuple[Path, int | None]] = []

    def serve_stop(loaded: Any, log_path: Path, **kwargs: Any) -> Any:
        served.append((loaded.path, kwargs.get("port")))
        stop()

    monkeypatch.setattr(pipeline, "reproduce", stop)
    monkeypatch.setattr(pipeline, "serve", serve_stop)
    monkeypatch.setattr(serve, "install_sigterm_handler", lambda: None)  # keep pytest's
    return Walk(fixtures_dir, tmp_path, hub, seed_pins, monkeypatch, served)


def test_the_newcomer_walk(walk: Walk) -> None:
    bench_without_a_server(walk)
    usage_mistakes(walk)
    lock_without_a_hub(walk)
    lock_without_docker(walk)
    preflight_says_what_it_did_not_check(walk)
    a_misspelt_set(walk)
    recipe_rules(walk)
    a_second_key(walk)
    rerun_an_untrusted_report(walk)
    read_an_untrusted_report(walk)
    key_files(walk)
    a_table_of_several_signers(walk)
    pages_beside_their_reports(walk)


def bench_without_a_server(w: Walk) -> None:
    recipe, out = w.fixtures / "recipes" / "cpu-tiny.yaml", w.home / "reports"
    error, hint = said(kit("bench", "--target", "notaurl", recipe, "-o", out, code=2).stderr)
    assert error.startswith("error: --target notaurl: ")
    assert re.search(r"such as --target http://127\.0\.0\.1:\d+$", hint)
    # a port no server can have is named as such, with the same hint
    target = "http://127.0.0.1:99999"
    assert said(kit("bench", "--target", target, recipe, "-o", out, code=2).stderr) == [
        f"error: --target {target}: port 99999 is out of range (1-65535)",
        hint,
    ]
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
    port = int(url.rsplit(":", 1)[1])
    # the hint names the recipe the bench was given, and run, serves it on that port
    command = backticked(hint, "kit serve ")
    assert command == ["kit", "serve", str(recipe), "--port", str(port)]
    assert said(kit(*command[1:], code=3).stderr)[0] == f"error: {STOP}"
    assert w.served == [(recipe, port)]
    assert len(list(out.glob("*/report.json"))) == 1  # the partial report, kept


def usage_mistakes(w: Walk) -> None:
    """click's own errors, as kit's: a run's folder where its report goes, then an unsigned
    report; each hint followed."""
    (run,) = (w.home / "reports").iterdir()
    error, hint, usage = said(kit("report", "show", run, code=2).stderr)
    assert error == f"error: kit report show: PATHS: file '{run}' is a directory"
    assert hint == "hint: name a file there, not the folder (a run's folder holds report.json)"
    assert usage.startswith("hint: Usage: kit report show [OPTIONS] PATHS...")
    _, hint = said(kit("report", "show", run / "report.json", code=1).stderr)
    assert hint == "hint: pass --allow-unsigned to read it anyway"
    shown = kit("report", "show", run / "report.json", "--allow-unsigned", code=0).stdout
    assert shown.startswith("UNSIGNED  ")
    # a misspelt option: the options click guesses (the first is the one just run), the usage
    report = run / "report.json"
    error, guess, usage = said(kit("report", "show", report, "--allow-unsinged", code=2).stderr)
    assert error == "error: kit report show: no such option '--allow-unsinged'"
    assert guess == "hint: did you mean --allow-unsigned or --allow-untrusted?"
    assert usage.startswith("hint: Usage: kit report show [OPTIONS] PATHS...")


def lock_without_a_hub(w: Walk) -> None:
    seed = w.home / "seed.yaml"
    seed.write_bytes((w.fixtures / SEED).read_bytes())
    hints = said(kit("preflight", seed, "--rig", "2x24", code=2).stderr)
    (lock,) = [h for h in hints if h.startswith("hint: kit lock ")]
    command = shlex.split(lock.removeprefix("hint: ").split(" pins ")[0])
    assert command == ["kit", "lock", "./seed.yaml"]
    # the hint, run, and its alternative: the hub is down, exit 3 naming it; no lock written
    for args in (command[1:], ["reproduce", "./seed.yaml", "--resolve", "--no-sign"]):
        error, hint = said(kit(*args, code=3).stderr)
        assert error.startswith(f"error: cannot connect to {w.hub}/api/models/"), error
        assert hint.startswith(f"hint: the hub ({w.hub}) is unreachable: ")
    assert not (w.home / "seed.lock.yaml").exists()


def lock_without_docker(w: Walk) -> None:
    """The seed with its revisions pinned leaves only the base image open: without a docker
    CLI its hint says --no-image, which, run, says there is nothing else to resolve and writes
    no lock; so does the image pinned by digest in the recipe, its other advice."""
    text = (w.fixtures / SEED).read_text()
    for pin in w.pins:  # the model's revision: null, then the draft's
        text = text.replace("revision: null", f"revision: {pin.split('=', 1)[1]}", 1)
    (w.home / "pinned.yaml").write_text(text)
    lock = w.home / "pinned.lock.yaml"
    with w.env.context() as env:
        env.setenv("PATH", str(w.home / "no-docker"))
        error, hint = said(kit("lock", "./pinned.yaml", code=3).stderr)
        assert (
            error == "error: vllm/vllm-openai:v0.28.0: no docker CLI to resolve the image's digest"
        )
        command = backticked(hint, "kit lock ")
        assert command == ["kit", "lock", "./pinned.yaml", "--no-image"]
        res = kit(*command[1:], code=0)
    assert res.stdout == ""
    assert res.stderr == (
        "nothing to resolve: every other pin of ./pinned.yaml is exact, and --no-image leaves "
        "vllm/vllm-openai:v0.28.0 open; no lock written\n"
    )
    assert not lock.exists()
    # what the hint said before: kit lock has no --set, and says so as kit does
    error, usage = said(kit("lock", "./pinned.yaml", "--set", "x=y", code=2).stderr)
    assert error == "error: kit lock: no such option '--set'"
    assert usage.startswith("hint: Usage: kit lock [OPTIONS] PATH ")
    # its other advice: the image pinned by digest in the recipe
    assert "(server.engine.image: NAME:TAG@sha256:...)" in hint
    digest = "vllm/vllm-openai:v0.28.0@sha256:" + "0" * 64
    (w.home / "pinned.yaml").write_text(text.replace("vllm/vllm-openai:v0.28.0", digest))
    res = kit("lock", "./pinned.yaml", code=0)
    assert (
        res.stderr == "nothing to resolve: every pin of ./pinned.yaml is exact; no lock written\n"
    )
    assert not lock.exists()


def preflight_says_what_it_did_not_check(w: Walk) -> None:
    pins = [a for pin in w.pins for a in ("--set", pin)]
    res = kit(
        "preflight", "./seed.yaml", *pins, "--rig", "2x24", code=0
    )  # not checked fails nothing
    assert res.stderr == ""
    lines = res.stdout.splitlines()
    rows = [re.split(r"  +", line, maxsplit=2) for line in lines if not line.startswith("hint:")]
    *items, (count,) = rows
    states = {name: state for state, name, _ in items}
    for size in ("gpu memory", "autoround memory", "disk"):  # never ok unsized
        assert states[size] == "not checked", res.stdout
    skipped = [name for name, state in states.items() if state == "not checked"]
    assert count.startswith(f"{len(skipped)} checks not made ({', '.join(skipped)})")
    # a made-up revision the hub cannot confirm is not checked either, nor the calibration set
    for pin in ("pin model", "pin speculative.draft", "pin calibration"):
        assert states[pin] == "not checked", res.stdout
    # each hint: once, on its own line; the hub's names the command to run again
    assert [line for line in lines if line.startswith("hint:")] == [
        "hint: check the network and HF_ENDPOINT (HF_TOKEN for a gated repository), then run "
        "kit preflight ./seed.yaml again",
        "hint: a calibration set kit pins by its content: quantization.calibration with source: "
        "file (a text file beside the recipe) or source: inline",
    ]


SCHEMA_HINT = (
    "hint: schemas/recipe.schema.json describes every field and the values it takes (the "
    "README's Recipes section: extends, --set)"
)


def a_misspelt_set(w: Walk) -> None:
    recipe = w.fixtures / "recipes" / "cpu-tiny.yaml"
    res = kit("reproduce", recipe, "--set", "benchh.runs=3", "--no-sign", code=2)
    assert said(res.stderr) == [
        "error: --set benchh.runs=3: benchh: unknown key (did you mean 'bench'?)",
        SCHEMA_HINT,
    ]
    # the suggestion, followed: the recipe loads and the run would start
    res = kit("reproduce", recipe, "--set", "bench.runs=3", "--no-sign", code=3)
    assert said(res.stderr)[0] == f"error: {STOP}"


def recipe_rules(w: Walk) -> None:
    """AWQ at 3 bits, refused with what to set instead; a misspelt required key, with the
    key it means. Each advice followed: the run would start."""
    recipe = w.fixtures / "recipes" / "cpu-tiny.yaml"
    awq = ["--set", "quantization.format=auto_awq", "--no-sign"]
    res = kit("reproduce", recipe, *awq, "--set", "quantization.bits=3", code=2)
    assert said(res.stderr) == [
        "error: --set quantization.bits=3: quantization.bits 3: format auto_awq takes 4 (vLLM's "
        "AWQ kernels are 4-bit): set bits 4, or format auto_gptq (2, 3, 4 or 8 bits)",
        SCHEMA_HINT,
    ]
    for fix in ("quantization.bits=4", "quantization.format=auto_gptq"):
        res = kit("reproduce", recipe, *awq, "--set", "quantization.bits=3", "--set", fix, code=3)
        assert said(res.stderr)[0] == f"error: {STOP}"
    text = recipe.read_text()
    typo = text.replace("model:\n  source: synthetic", "model:\n  osurce: synthetic", 1)
    (w.home / "typo.yaml").write_text(typo)
    error, _ = said(kit("reproduce", "./typo.yaml", "--no-sign", code=2).stderr)
    line = text.splitlines().index("model:") + 1
    assert error == (
        f"error: ./typo.yaml:{line}:1: model: needs source; 'osurce' is not a key "
        "(did you mean 'source'?)"
    )
    (w.home / "typo.yaml").write_text(typo.replace("osurce:", "source:"))
    assert said(kit("reproduce", "./typo.yaml", "--no-sign", code=3).stderr)[0] == f"error: {STOP}"


def a_second_key(w: Walk) -> None:
    first = json.loads(kit("keys", "generate", code=0).stdout)
    error, hint = said(kit("keys", "generate", code=2).stderr)
    assert error == f"error: {first['private_key']} already exists"
    assert "`kit keys generate --force`" in hint
    again = json.loads(kit("keys", "generate", "--force", code=0).stdout)
    assert again["fingerprint"] != first["fingerprint"]
    trusted = [e["fingerprint"] for e in json.loads(kit("keys", "list", code=0).stdout)]
    assert again["fingerprint"] in trusted


def rerun_an_untrusted_report(w: Walk) -> None:
    report, pub = w.fixtures / "reports/cpu-tiny-a.signed.json", w.fixtures / "reports/signer.pub"
    out = ["-o", w.home / "reruns", "--no-sign"]
    error, hint = said(kit("reproduce", report, *out, code=1).stderr)
    found = re.search(r"signed by an untrusted key (sha256:[0-9a-f]{64}); trust it with", error)
    assert found, error
    assert "--report-key PUB" in hint
    # the hint, followed: the signature verifies and the re-run goes on to its next step
    res = kit("reproduce", report, "--report-key", pub, *out, code=3)
    assert said(res.stderr)[0].startswith(LATER), res.stderr
    # the error's own advice: trusted, it goes on without the option
    kit("keys", "trust", pub, code=0)
    assert said(kit("reproduce", report, *out, code=3).stderr)[0].startswith(LATER)
    # untrusted again by a fingerprint prefix, as `kit keys untrust --help` shows
    gone = json.loads(kit("keys", "untrust", found.group(1)[:15] + "...", code=0).stdout)
    assert gone["fingerprint"] == found.group(1)
    kit("reproduce", report, *out, code=1)


def read_an_untrusted_report(w: Walk) -> None:
    report, other = (
        w.fixtures / "reports/cpu-tiny-a.signed.json",
        w.fixtures / "reports/h200x2.json",
    )
    _, hint = said(kit("report", "show", report, code=1).stderr)
    assert "--allow-untrusted" in hint
    shown = kit("report", "show", report, "--allow-untrusted", code=0).stdout
    assert all(line.startswith("UNTRUSTED  ") for line in shown.splitlines() if line)
    # a comparison whose runs differ: refused, and the hint's --force shows every figure labelled
    args = ["report", "compare", report, other, "--allow-untrusted", "--allow-unsigned"]
    assert "--force" in said(kit(*args, code=1).stderr)[-1]
    res = kit(*args, "--force", code=None)
    text = res.stdout.splitlines()
    verdict = next(line for line in text if line.startswith("verdict: "))
    assert res.exit_code == next(v for k, v in VERDICT_EXIT.items() if f": {k}" in verdict)
    start = next(i for i, line in enumerate(text) if line.startswith("-----")) + 1
    rows = text[start : text.index("", start)]
    assert rows and all(line.endswith("  UNTRUSTED (A), UNSIGNED (B)") for line in rows)
    # a script that reads the verdict from --json sees that neither side was verified
    data = json.loads(kit(*args, "--force", "--json", code=None).stdout)
    assert data["verdict"]["verdict"] in VERDICT_EXIT
    assert data["trust"]["verified"] is False
    a, b = data["trust"]["a"], data["trust"]["b"]
    assert (a["state"], a["trusted"], a["allowed_by"]) == ("untrusted", False, "--allow-untrusted")
    assert a["keyid"] == found_keyid(report) and a["signature_ok"] is None
    assert (b["state"], b["trusted"], b["allowed_by"]) == ("unsigned", False, "--allow-unsigned")
    # the results table: refused, then listed apart with --include-unverified, every figure
    # labelled
    keys = w.fixtures / "examples/keys"
    table = ["report", "table", report, "--keys", keys]
    assert "--include-unverified" in said(kit(*table, code=1).stderr)[-1]
    md = kit(*table, "--include-unverified", code=0).stdout
    head, _, row = [line for line in md.split("\n## Unverified\n")[1].splitlines() if "|" in line]
    cells = dict(zip(cells_of(head), cells_of(row), strict=True))
    figures = [cell for name, cell in cells.items() if name in LABELLED and cell != "-"]
    assert figures and all(cell.startswith("UNTRUSTED ") for cell in figures)


def found_keyid(report: Path) -> str:
    return str(json.loads(report.read_text())["signatures"][0]["keyid"])


def key_files(w: Walk) -> None:
    """Key files that are more or less than one key, and a report that is not there: each
    refused naming the file, with a hint; the key files' hints, followed, verify the report."""
    report, pub = w.fixtures / "reports/cpu-tiny-a.signed.json", w.fixtures / "reports/signer.pub"
    pem = pub.read_bytes()
    other = (w.fixtures / "examples/keys/example.pub").read_bytes()
    for name, data, problem in (
        (
            "trailing.pub",
            pem + b"# alice, lab rig 2\n",
            "bytes after the PEM block of the public key",
        ),
        ("two.pub", pem + other, "2 PEM blocks; a public key file holds one key"),
    ):
        key = w.home / name
        key.write_bytes(data)
        error, hint = said(kit("report", "show", report, "--key", key, code=2).stderr)
        assert error == f"error: {key}: {problem}"
        assert "-----BEGIN" in hint and "-----END" in hint
        # the hint, followed: the lines from the first -----BEGIN to its -----END
        begin, end = data.index(b"-----BEGIN"), data.index(b"-----END")
        key.write_bytes(data[begin : data.index(b"\n", end) + 1])
        assert kit("report", "show", report, "--key", key, code=0).stdout.startswith("recipe ")
    fifo = w.home / "key.fifo"
    os.mkfifo(fifo)
    assert said(kit("report", "show", report, "--key", fifo, code=2).stderr) == [
        f"error: {fifo}: cannot read the public key: not a regular file (a FIFO)",
        "hint: kit reads a public key from a regular file only: save it to one, then name that",
    ]
    missing = w.home / "reports" / "report.json"
    assert said(kit("report", "show", missing, code=2).stderr) == [
        f"error: {missing}: cannot read the report file: No such file or directory",
        "hint: check the path: a run writes its report as report.json in its run folder (under "
        "reports/, or -o DIR)",
    ]


def cells_of(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def a_table_of_several_signers(w: Walk) -> None:
    reports = w.fixtures / "examples/reports"
    two = [reports / "h200x2-tp2.report.json", reports / "h200-tp1-rerun.report.json"]
    # one --key cannot check reports by two signers: refused before anything is printed
    key = w.fixtures / "examples/keys/example.pub"
    res = kit("report", "show", "--markdown", "--header", *two, "--key", key, code=1)
    assert res.stdout == "" and said(res.stderr)
    # their folder given to --key: the hint names --keys, which, followed, reads both
    res = kit("report", "show", "--markdown", "--header", *two, "--key", key.parent, code=2)
    assert said(res.stderr)[1] == (
        "hint: --key takes one public key file; --keys DIR takes a folder of them"
    )
    res = kit("report", "show", "--markdown", "--header", *two, "--keys", key.parent, code=0)
    assert len(res.stdout.splitlines()) == 2 + len(two)  # header, rule, a row per report
    assert "UNTRUSTED" not in res.stdout
    # compared with --json: both sides verified, by the key each names
    args = ["report", "compare", *two, "--keys", key.parent, "--force", "--json"]
    trust = json.loads(kit(*args, code=None).stdout)["trust"]
    assert trust["verified"] is True
    for side, report in zip(("a", "b"), two, strict=True):
        assert trust[side]["state"] == "verified" and trust[side]["signature_ok"] is True
        assert trust[side]["keyid"] == found_keyid(report) and trust[side]["allowed_by"] is None


def pages_beside_their_reports(w: Walk) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("kit's html extra: pip install 'kit[html]'")
    folder = w.home / "downloads"
    folder.mkdir()
    names = ["run-a.json", "run-b.report.json"]
    for name in names:
        shutil.copy(w.fixtures / "reports/cpu-tiny-a.signed.json", folder / name)
    pages = [
        Path(kit("report", "html", folder / n, "--allow-untrusted", code=0).stdout.strip())
        for n in names
    ]
    assert pages == [folder / "run-a.html", folder / "run-b.report.html"]
    for page in pages:  # each its own, labelled
        assert "<title>UNTRUSTED: kit report: " in page.read_text()

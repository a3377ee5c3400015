"""Hints that name a command or an option: each test gets the hint, then runs what it names and
checks that the command gets further (the option exists, and the error it answered is gone)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kit import pipeline, serve, signing
from kit.cli import main
from kit.errors import KitError

SIGNED = "reports/cpu-tiny-a.signed.json"
SIGNER = "reports/signer.pub"
STOP = "stopped where the run would start (test)"
# the steps after the signature: the patch series check (the fixture's series is an older
# checkout's), else the run itself
LATER = (f"error: {STOP}", "error: the report's patch series is not this checkout's")


def lines(res: Result) -> list[str]:
    assert "Traceback" not in res.output
    return [line for line in res.stderr.splitlines() if line.startswith(("error:", "hint:"))]


@pytest.fixture()
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh config dir: no trusted keys, no signing key."""
    monkeypatch.setenv("KIT_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


@pytest.fixture()
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kit reproduce` stops where the native run would start, saying so."""

    def stop(*args: Any, **kwargs: Any) -> Any:
        raise KitError(STOP)

    monkeypatch.setattr(pipeline, "reproduce", stop)
    monkeypatch.setattr(serve, "install_sigterm_handler", lambda: None)  # keep pytest's


def test_reproduce_untrusted_names_report_key(
    config: Path, fixtures_dir: Path, tmp_path: Path, no_run: None
) -> None:
    report, pub = str(fixtures_dir / SIGNED), str(fixtures_dir / SIGNER)
    out = ["-o", str(tmp_path / "out"), "--no-sign"]
    fp = signing.fingerprint(signing.load_public_key(Path(pub)))
    res = CliRunner().invoke(main, ["reproduce", report, *out])
    assert res.exit_code == 1, res.output
    assert lines(res) == [
        f"error: {report}: signed by an untrusted key {fp}; trust it with `kit keys trust`",
        "hint: or pass --report-key PUB (its signer's public key), or --allow-untrusted to read "
        "it anyway",
    ]
    # the hint, followed: the signature verifies and the re-run goes on to its next step
    res = CliRunner().invoke(main, ["reproduce", report, "--report-key", pub, *out])
    assert lines(res)[0].startswith(LATER), res.output
    # the error's own advice, followed: trusted, it goes on without the option
    assert CliRunner().invoke(main, ["keys", "trust", pub]).exit_code == 0
    res = CliRunner().invoke(main, ["reproduce", report, *out])
    assert lines(res)[0].startswith(LATER), res.output


def test_keys_generate_twice_names_force(config: Path, tmp_path: Path) -> None:
    args = ["keys", "generate", "--dir", str(tmp_path / "keys"), "--no-trust"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2
    assert lines(res) == [
        f"error: {tmp_path / 'keys' / 'kit.key'} already exists",
        "hint: add --force to replace it (`kit keys generate --force`); reports signed with the "
        "old key then verify only against the old public key",
    ]
    again = CliRunner().invoke(main, [*args, "--force"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["fingerprint"] != json.loads(first.stdout)["fingerprint"]


def _pub(path: Path, key: Ed25519PrivateKey) -> Path:
    path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return path


def test_keys_untrust_takes_a_fingerprint_prefix(config: Path, tmp_path: Path) -> None:
    """As its help's example shows (`kit keys untrust sha256:3f2a...`): a unique prefix, with or
    without the dots; one that two keys share is refused, naming both."""
    by_prefix: dict[str, Ed25519PrivateKey] = {}
    while True:  # two keys whose fingerprints share 4 hex digits (a few hundred, by birthdays)
        key = Ed25519PrivateKey.generate()
        prefix = signing.fingerprint(key.public_key())[:11]
        if prefix in by_prefix:
            break
        by_prefix[prefix] = key
    a, b = _pub(tmp_path / "a.pub", by_prefix[prefix]), _pub(tmp_path / "b.pub", key)
    runner = CliRunner()
    for pub in (a, b):
        assert runner.invoke(main, ["keys", "trust", str(pub)]).exit_code == 0
    fp_a = signing.fingerprint(by_prefix[prefix].public_key())
    fp_b = signing.fingerprint(key.public_key())
    res = runner.invoke(main, ["keys", "untrust", prefix + "..."])
    assert res.exit_code == 2
    assert lines(res) == [
        f"error: {prefix} is the start of 2 trusted keys' fingerprints: a ({fp_a}), b ({fp_b})",
        "hint: give more of the fingerprint, or the key's name",
    ]
    # the hint, followed: a longer prefix picks one
    longer = fp_a[: next(i for i in range(11, 71) if fp_a[i] != fp_b[i]) + 1]
    res = runner.invoke(main, ["keys", "untrust", longer + "..."])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["name"] == "a"
    res = runner.invoke(main, ["keys", "untrust", fp_b[:11]])
    assert res.exit_code == 0 and json.loads(res.stdout)["name"] == "b"
    assert json.loads(runner.invoke(main, ["keys", "list"]).stdout) == []


def test_a_misspelt_set_is_blamed_and_its_suggestion_runs(fixtures_dir: Path) -> None:
    recipe = str(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    res = CliRunner().invoke(main, ["recipe", "validate", recipe, "--set", "benchh.runs=3"])
    assert res.exit_code == 2
    assert res.stderr == "--set benchh.runs=3: benchh: unknown key (did you mean 'bench'?)\n"
    res = CliRunner().invoke(main, ["recipe", "validate", recipe, "--set", "bench.runs=3"])
    assert res.exit_code == 0, res.output


def test_a_bad_target_hint_gets_past_the_option(fixtures_dir: Path, tmp_path: Path) -> None:
    recipe = str(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    args = ["bench", recipe, "-o", str(tmp_path), "--no-sign", "--target"]
    res = CliRunner().invoke(main, [*args, "127.0.0.1:8000"])
    assert lines(res)[1] == (
        "hint: --target takes a server's base URL, such as --target http://127.0.0.1:8000"
    )
    # the form it names is accepted: what stops it now is the (absent) server, exit 3
    res = CliRunner().invoke(main, [*args, "http://127.0.0.1:1"])
    assert res.exit_code == 3
    assert lines(res)[0].startswith("error: cannot connect to http://127.0.0.1:1/v1/models: ")

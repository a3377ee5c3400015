"""Keyed redaction: host names and GPU UUIDs become HMAC stand-ins under a per-install secret,
and the container variable is reduced to a known runtime name."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.errors import BadInputError
from kit.probe import host_probe_from_dump, probe_to_json, redact_value, redaction_secret
from kit.probe.redaction import CONTAINER_RUNTIMES, SECRET_FILE, runtime_name

HOST = "gpu-box-01"


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cfg"
    monkeypatch.setenv("KIT_CONFIG_DIR", str(directory))
    return directory


@pytest.fixture
def dump(fixtures_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (fixtures_dir / "probe" / "h200x2-nvml-dump.json").read_text()
    )
    data["host"]["hostname"] = HOST
    return data


def unsalted(value: str) -> str:
    return "redacted:" + hashlib.sha256(value.encode()).hexdigest()[:16]


def test_secret_is_made_once_private_and_reused(config_dir: Path) -> None:
    first = redaction_secret()
    path = config_dir / SECRET_FILE
    assert len(first) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert redaction_secret() == first
    assert [p.name for p in config_dir.iterdir()] == [SECRET_FILE]  # no partial file left


def test_stand_in_is_keyed_stable_and_keeps_its_shape(config_dir: Path) -> None:
    value = redact_value(HOST)
    assert value != unsalted(HOST)
    assert value == redact_value(HOST) == redact_value(HOST, redaction_secret())
    assert value.startswith("redacted:") and len(value) == len("redacted:") + 16
    int(value.removeprefix("redacted:"), 16)
    assert redact_value(HOST, b"\x01" * 32) != value


def test_another_install_gives_other_stand_ins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dump: dict[str, Any]
) -> None:
    probes = []
    for name in ("one", "two"):
        monkeypatch.setenv("KIT_CONFIG_DIR", str(tmp_path / name))
        probes.append(host_probe_from_dump(dump))
    one, two = probes
    assert one.hostname != two.hostname
    assert one.gpus[0].uuid != two.gpus[0].uuid
    for probe in probes:
        text = probe_to_json(probe)
        assert HOST not in text and unsalted(HOST) not in text
    monkeypatch.setenv("KIT_CONFIG_DIR", str(tmp_path / "one"))
    assert host_probe_from_dump(dump) == one  # the same install: the same stand-ins


def test_an_explicit_secret_wins(config_dir: Path, dump: dict[str, Any]) -> None:
    secret = b"\x07" * 32
    probe = host_probe_from_dump(dump, secret=secret)
    assert probe.hostname == redact_value(HOST, secret)
    assert not (config_dir / SECRET_FILE).exists()
    assert host_probe_from_dump(dump, redact=False).hostname == HOST


def test_a_damaged_secret_is_refused_with_a_hint(config_dir: Path) -> None:
    config_dir.mkdir()
    (config_dir / SECRET_FILE).write_text("not hex\n")
    with pytest.raises(BadInputError, match="not a kit redaction secret") as err:
        redaction_secret()
    assert err.value.hint and err.value.hint.startswith(f"remove {config_dir / SECRET_FILE}")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_config_dir_falls_back_to_a_process_secret(config_dir: Path) -> None:
    config_dir.mkdir(mode=0o500)
    try:
        secret = redaction_secret()
        assert len(secret) == 32 and redaction_secret() == secret
        assert not (config_dir / SECRET_FILE).exists()
    finally:
        config_dir.chmod(0o700)


def test_a_config_dir_under_a_file_falls_back_to_a_process_secret(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    secret = redaction_secret(blocker / "kit")
    assert len(secret) == 32 and redaction_secret(blocker / "kit") == secret


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=40))
def test_container_variable_is_a_known_name_or_other(value: str) -> None:
    name = runtime_name(value)
    assert name in CONTAINER_RUNTIMES or name == "other"
    assert name == "other" or name == value.strip().lower()


@pytest.mark.parametrize(
    ("value", "runtime"),
    [
        ("docker", "docker"),
        ("Podman\n", "podman"),
        ("wsl", "wsl"),
        ("systemd-nspawn", "systemd-nspawn"),
        ("/home/alice/secret-project", "other"),
        ("alice's box", "other"),
    ],
)
def test_container_variable_in_the_probe(
    config_dir: Path, dump: dict[str, Any], value: str, runtime: str
) -> None:
    dump["host"]["container"] = {"env": {"container": value}}
    container = host_probe_from_dump(dump).container
    assert container.detected and container.runtime == runtime
    assert container.evidence == [f"env container={runtime}"]


def test_a_container_given_the_hosts_secret_file_names_the_host_alike(
    config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kit.probe import redaction

    host_file = redaction.secret_file()  # what compose mounts as the kit_redaction_key secret
    assert host_file == (config_dir / SECRET_FILE).resolve()
    on_host = redact_value(HOST)
    # the container: another (empty, read-only) config dir, the secret as a mounted file
    container_config = tmp_path / "container-home"
    container_config.mkdir(mode=0o500)
    monkeypatch.setenv("KIT_CONFIG_DIR", str(container_config))
    monkeypatch.setenv(redaction.ENV_SECRET, str(host_file))
    assert redact_value(HOST) == on_host
    assert list(container_config.iterdir()) == []  # nothing made in the container
    # an unsigned-style render mounts /dev/null: the container's own config dir is used
    monkeypatch.setenv(redaction.ENV_SECRET, redaction.NO_SECRET)
    monkeypatch.setenv("KIT_CONFIG_DIR", str(config_dir))
    assert redact_value(HOST) == on_host


def test_a_container_given_the_hosts_facts_reports_the_host(
    config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    from kit.probe import dump as dump_mod

    on_host = dump_mod.host_facts_for_containers()  # what kit compose env renders
    given = json.loads(on_host)
    assert given["hostname"] == redact_value(socket.gethostname())  # no host name in the file
    monkeypatch.setenv(dump_mod.HOST_FACTS_ENV, on_host)
    monkeypatch.setattr(dump_mod.socket, "gethostname", lambda: "container-id-1234")
    facts = dump_mod.collect_host_facts()
    assert facts["facts_from"] == dump_mod.FACTS_FROM_HOST
    assert facts["hostname"] == given["hostname"]
    probe = host_probe_from_dump(dump_mod.collect_nvml_dump())
    assert probe.facts_from == "the host (kit compose env)"
    assert probe.hostname == given["hostname"]  # the native run's stand-in, not re-keyed
    # a value that is not a stand-in is not taken: the container's own facts, said so
    monkeypatch.setenv(dump_mod.HOST_FACTS_ENV, json.dumps({"hostname": "plain-name"}))
    assert dump_mod.collect_host_facts()["facts_from"] == "this machine"

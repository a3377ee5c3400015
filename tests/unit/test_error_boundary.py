"""The CLI's one error boundary (kit.errors.to_kit_error, called by kit.console.report_error):
every exception that reaches it becomes `error:`/`hint:` lines and the documented exit code,
never a traceback unless KIT_DEBUG=1. The faults are real where they can be: a refused port,
a server answering a 404 or HTML, a hub endpoint nobody listens on; a full disk and a bug are
injected."""

from __future__ import annotations

import errno
import http.server
import os
import socket
import subprocess
import sys
import threading
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from click.testing import CliRunner, Result
from hubserver import HUB_TINY_RECIPE, serving_hub
from huggingface_hub.errors import RepositoryNotFoundError

from kit.cli import main
from kit.errors import (
    BadURLError,
    EnvironmentProblem,
    InternalError,
    KitError,
    NetworkError,
    ServerAnswerError,
    to_kit_error,
)
from kit.recipe import load as recipe_load
from kit.report.files import REPORT_FILE, read_report

REFUSED = f"[Errno {errno.ECONNREFUSED}] {os.strerror(errno.ECONNREFUSED)}"
FULL = os.strerror(errno.ENOSPC)
DEBUG_HINT = "hint: run with KIT_DEBUG=1 for the traceback, and report it"
HUB_HINT = (
    "hint: the hub ({}) is unreachable: check the network, or point HF_ENDPOINT at a mirror; "
    "or pin the revisions in the recipe (model.revision: <commit sha>)"
)


def refused_url() -> str:
    """A local URL nothing listens on: a port the OS just handed out, closed again."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def said(res: Result) -> list[str]:
    """The `error:` and `hint:` lines of a run, after checking that no traceback came out."""
    assert "Traceback" not in res.output
    return [line for line in res.stderr.splitlines() if line.startswith(("error:", "hint:"))]


@pytest.fixture(autouse=True)
def _quiet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KIT_DEBUG", "HF_ENDPOINT", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def recipe(fixtures_dir: Path) -> str:
    return str(fixtures_dir / "recipes" / "cpu-tiny.yaml")


@pytest.fixture()
def unpinned(fixtures_dir: Path, tmp_path: Path) -> Path:
    """The seed recipe, whose hub revisions are left open, copied where a lock may be written."""
    path = tmp_path / "seed.yaml"
    path.write_bytes(
        (fixtures_dir / "recipes" / "club3090-qwen3.8-27b-2x3090-dflash2.yaml").read_bytes()
    )
    return path


def serve(status: int, content_type: str, body: bytes) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def not_found() -> Iterator[str]:
    yield from serve(404, "application/json", b'{"detail":"Not Found"}')


@pytest.fixture()
def web_page() -> Iterator[str]:
    yield from serve(200, "text/html", b"<html><body>It works!\n</body></html>")


# ---------------------------------------------------------------------------------------------
# kit bench --target: a server that is not there, not a URL, not an OpenAI server


def test_bench_against_a_refused_port(recipe: str, tmp_path: Path) -> None:
    url = refused_url()
    res = CliRunner().invoke(main, ["bench", "--target", url, recipe, "-o", str(tmp_path)])
    assert res.exit_code == 3, res.output
    assert said(res) == [
        f"error: cannot connect to {url}/v1/models: {REFUSED}",
        f"hint: is a server running at {url}? `kit serve {recipe} --port {url.rsplit(':', 1)[1]}` "
        "starts one",
    ]
    # the partial report is written before the boundary, with the same words
    (path,) = tmp_path.glob(f"*/{REPORT_FILE}")
    report = read_report(path, allow_unsigned=True)[0]
    assert report.incomplete_reason == f"cannot connect to {url}/v1/models: {REFUSED}"


def test_a_refused_port_in_a_real_process(recipe: str, tmp_path: Path) -> None:
    url = refused_url()
    env = {**os.environ, "KIT_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "kit.cli", "bench", "--target", url, recipe, "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 3
    assert "Traceback" not in run.stderr + run.stdout
    assert f"error: cannot connect to {url}/v1/models: {REFUSED}\n" in run.stderr


@pytest.mark.parametrize("target", ["notaurl", "ftp://127.0.0.1:21", "http://", "http://[::1"])
def test_bench_with_a_bad_url_names_the_option(recipe: str, tmp_path: Path, target: str) -> None:
    res = CliRunner().invoke(main, ["bench", "--target", target, recipe, "-o", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert said(res) == [
        f"error: --target {target}: not an http(s) URL with a host",
        "hint: --target takes a server's base URL, such as --target http://127.0.0.1:8000",
    ]
    assert not list(tmp_path.iterdir())  # refused before any work


@pytest.mark.parametrize("fidelity", [[], ["--fidelity", "1"]], ids=["report", "fidelity"])
def test_bench_against_a_404(
    recipe: str, tmp_path: Path, not_found: str, fidelity: list[str]
) -> None:
    args = ["bench", "--target", not_found, recipe, "-o", str(tmp_path), *fidelity]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 3, res.output
    assert said(res) == [
        f'error: {not_found}/v1/models answered HTTP 404 Not Found: {{"detail":"Not Found"}}',
        f"hint: is {not_found} an OpenAI-compatible server, and is that its base URL (no /v1)?",
    ]


def test_bench_against_a_web_page(recipe: str, tmp_path: Path, web_page: str) -> None:
    res = CliRunner().invoke(
        main, ["bench", "--target", web_page + "/", recipe, "-o", str(tmp_path)]
    )
    assert res.exit_code == 3, res.output
    assert said(res) == [
        f"error: {web_page}/v1/models answered HTTP 200 OK with no OpenAI model list: "
        "<html><body>It works! </body></html>",
        f"hint: is {web_page} an OpenAI-compatible server, and is that its base URL (no /v1)?",
    ]


# ---------------------------------------------------------------------------------------------
# the hub: down, or HF_ENDPOINT not a URL


@pytest.mark.parametrize(
    "command", [["lock"], ["reproduce", "--resolve", "--no-sign"]], ids=["lock", "reproduce"]
)
def test_a_hub_that_is_down(
    unpinned: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    hub = refused_url()
    monkeypatch.setenv("HF_ENDPOINT", hub)
    res = CliRunner().invoke(main, [*command, str(unpinned)])
    assert res.exit_code == 3, res.output
    assert said(res) == [
        f"error: cannot connect to {hub}/api/models/Qwen/Qwen3.8-27B: {REFUSED}",
        HUB_HINT.format(hub),
    ]
    assert not unpinned.with_name("seed.lock.yaml").exists()


def test_a_hub_endpoint_that_is_not_a_url(unpinned: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "hub.example")
    res = CliRunner().invoke(main, ["lock", str(unpinned)])
    assert res.exit_code == 2, res.output
    (error, hint) = said(res)
    assert error.startswith("error: not a URL kit can request: '")
    assert error.endswith(
        "hub.example/api/models/Qwen/Qwen3.8-27B': "
        "Request URL is missing an 'http://' or 'https://' protocol."
    )
    assert hint == "hint: HF_ENDPOINT must be an http(s) URL"


# ---------------------------------------------------------------------------------------------
# a full disk, and a bug


@pytest.fixture()
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writing any kit temporary file (``*.tmp``, then renamed: reports, locks) fails as on a
    full file system."""
    write_text, write_bytes = Path.write_text, Path.write_bytes

    def check(path: Path) -> None:
        if path.suffix == ".tmp":
            raise OSError(errno.ENOSPC, FULL, str(path))

    def text(self: Path, data: str, *args: object, **kwargs: object) -> int:
        check(self)
        return write_text(self, data, *args, **kwargs)

    def data(self: Path, data: bytes) -> int:
        check(self)
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_text", text)
    monkeypatch.setattr(Path, "write_bytes", data)


def test_a_full_disk(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, full_disk: None
) -> None:
    """`kit lock` of a recipe with open revisions, resolved by a local hub stand-in: the lock
    cannot be written."""
    (tmp_path / "cpu-tiny.yaml").write_bytes(
        (fixtures_dir / "recipes" / "cpu-tiny.yaml").read_bytes()
    )
    recipe = tmp_path / "hub-tiny.yaml"
    recipe.write_text(HUB_TINY_RECIPE)
    repos = {}
    for repo in ("kit-test/tiny", "kit-test/tiny-draft"):
        (tmp_path / repo).mkdir(parents=True)
        (tmp_path / repo / "config.json").write_text("{}")
        repos[repo] = tmp_path / repo
    with serving_hub(repos) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        res = CliRunner().invoke(main, ["lock", str(recipe)])
    assert res.exit_code == 3, res.output
    assert said(res) == [
        f"error: {tmp_path / 'hub-tiny.lock.tmp'}: {FULL}",
        "hint: free space there, or write elsewhere (-o DIR for reports, KIT_HOME for kit's cache)",
    ]


def test_a_full_disk_under_a_failed_run_keeps_the_runs_error(
    recipe: str, tmp_path: Path, full_disk: None
) -> None:
    url = refused_url()
    res = CliRunner().invoke(main, ["bench", "--target", url, recipe, "-o", str(tmp_path)])
    assert res.exit_code == 3, res.output
    assert said(res)[0] == f"error: cannot connect to {url}/v1/models: {REFUSED}"
    (run_dir,) = tmp_path.iterdir()
    assert f"partial report not written: {run_dir / 'report.tmp'}: {FULL}\n" in res.stderr


def _bug(*args: object, **kwargs: object) -> list[str]:
    raise ZeroDivisionError("injected")


def test_a_bug_is_an_internal_error(recipe: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recipe_load, "series_problems", _bug)
    res = CliRunner().invoke(main, ["recipe", "validate", recipe])
    assert res.exit_code == 1, res.output
    assert said(res) == ["error: internal error: ZeroDivisionError: injected", DEBUG_HINT]


def test_kit_debug_keeps_the_traceback(
    recipe: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIT_DEBUG", "1")
    with monkeypatch.context() as m:
        m.setattr(recipe_load, "series_problems", _bug)
        res = CliRunner().invoke(main, ["recipe", "validate", recipe])
    assert res.exit_code == 1
    assert res.stderr.startswith("Traceback (most recent call last):")
    assert "ZeroDivisionError: injected\n" in res.stderr
    assert res.stderr.endswith(
        f"error: internal error: ZeroDivisionError: injected\n{DEBUG_HINT}\n"
    )
    url = refused_url()
    res = CliRunner().invoke(main, ["bench", "--target", url, recipe, "-o", str(tmp_path)])
    assert res.exit_code == 3
    assert "Traceback (most recent call last):" in res.stderr
    assert f"httpx.ConnectError: {REFUSED}\n" in res.stderr
    assert f"error: cannot connect to {url}/v1/models: {REFUSED}\n" in res.stderr


# ---------------------------------------------------------------------------------------------
# click's own usage errors, through the same boundary: exit 2, `error:` and `hint:` lines


def usage(command: str, *args: str) -> str:
    return (
        f"hint: Usage: kit {command} [OPTIONS] {' '.join(args)} (`kit {command} --help` says more)"
    )


def test_a_missing_option(recipe: str) -> None:
    res = CliRunner().invoke(main, ["bench", recipe])
    assert res.exit_code == 2
    assert said(res) == ["error: kit bench: missing option --target", usage("bench", "[PATH]")]
    assert "Error:" not in res.output and "Try 'kit" not in res.output


def test_a_missing_argument() -> None:
    res = CliRunner().invoke(main, ["report", "verify"])
    assert res.exit_code == 2
    assert said(res) == [
        "error: kit report verify: missing argument PATH",
        usage("report verify", "PATH"),
    ]


def test_an_unknown_option_and_command() -> None:
    res = CliRunner().invoke(main, ["report", "show", "--kyes", "k", "r.json"])
    assert res.exit_code == 2
    assert said(res) == [
        "error: kit report show: no such option '--kyes'",
        "hint: did you mean --keys or --key?",
        usage("report show", "PATHS..."),
    ]
    res = CliRunner().invoke(main, ["reprodce"])
    assert res.exit_code == 2
    assert said(res) == [
        "error: kit: no such command 'reprodce'",
        "hint: did you mean reproduce or probe?",
        "hint: Usage: kit [OPTIONS] COMMAND [ARGS]... (`kit --help` says more)",
    ]
    res = CliRunner().invoke(main, ["--bogus"])  # before any command: the top-level group's
    assert res.exit_code == 2
    assert said(res)[0] == "error: kit: no such option '--bogus'"


def test_an_option_without_its_value() -> None:
    res = CliRunner().invoke(main, ["report", "show", "r.json", "--keys"])
    assert res.exit_code == 2
    assert said(res) == [
        "error: kit report show: option '--keys' requires an argument",
        usage("report show", "PATHS..."),
    ]


def test_a_folder_given_as_a_report_or_a_key(fixtures_dir: Path, tmp_path: Path) -> None:
    report = str(fixtures_dir / "reports" / "cpu-tiny-a.signed.json")
    res = CliRunner().invoke(main, ["report", "show", str(tmp_path)])
    assert res.exit_code == 2
    assert said(res) == [
        f"error: kit report show: PATHS: file '{tmp_path}' is a directory",
        "hint: name a file there, not the folder (a run's folder holds report.json)",
        usage("report show", "PATHS..."),
    ]
    res = CliRunner().invoke(main, ["report", "show", report, "--key", str(tmp_path)])
    assert res.exit_code == 2
    assert said(res) == [
        f"error: kit report show: --key: file '{tmp_path}' is a directory",
        "hint: --key takes one public key file; --keys DIR takes a folder of them",
        usage("report show", "PATHS..."),
    ]
    # that hint, followed: --keys with the folder of the signer's key reads it
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "signer.pub").write_bytes((fixtures_dir / "reports" / "signer.pub").read_bytes())
    res = CliRunner().invoke(main, ["report", "show", report, "--keys", str(keys)])
    assert res.exit_code == 0, res.output


def test_an_unreadable_file(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """click asks os.access, which says yes to root whatever the mode: the answer a user who
    cannot read the file gets is injected."""
    secret = tmp_path / "secret.pub"
    secret.write_bytes(b"")
    access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: p != str(secret) and access(p, mode))
    report = str(fixtures_dir / "reports" / "cpu-tiny-a.signed.json")
    res = CliRunner().invoke(main, ["report", "verify", report, "--key", str(secret)])
    assert res.exit_code == 2
    assert said(res) == [
        f"error: kit report verify: --key: file '{secret}' is not readable",
        "hint: check the file's permissions (ls -l), or read it as its owner",
        usage("report verify", "PATH"),
    ]


def test_a_group_alone_still_prints_its_help() -> None:
    res = CliRunner().invoke(main, ["report"])
    assert res.exit_code == 2
    assert res.output.startswith("Usage: kit report [OPTIONS] COMMAND [ARGS]...")
    assert "error:" not in res.output


def test_a_missing_report_and_a_fifo_as_the_key(fixtures_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    res = CliRunner().invoke(main, ["report", "show", str(missing)])
    assert res.exit_code == 2
    assert said(res) == [
        f"error: {missing}: cannot read the report file: No such file or directory",
        "hint: check the path: a run writes its report as report.json in its run folder (under "
        "reports/, or -o DIR)",
    ]
    fifo = tmp_path / "key.pub"
    os.mkfifo(fifo)
    report = str(fixtures_dir / "reports" / "cpu-tiny-a.signed.json")
    res = CliRunner().invoke(main, ["report", "show", report, "--key", str(fifo)])
    assert res.exit_code == 2
    assert said(res) == [
        f"error: {fifo}: cannot read the public key: not a regular file (a FIFO)",
        "hint: kit reads a public key from a regular file only: save it to one, then name that",
    ]


@pytest.mark.parametrize(
    ("port", "said_of_it"),
    [
        ("99999", "port 99999 is out of range (1-65535)"),
        ("0", "port 0 is out of range (1-65535)"),
        ("80a", "the port '80a' is not a number"),
    ],
)
def test_a_target_port_out_of_range(
    recipe: str, tmp_path: Path, port: str, said_of_it: str
) -> None:
    target = f"http://127.0.0.1:{port}"
    res = CliRunner().invoke(main, ["bench", "--target", target, recipe, "-o", str(tmp_path)])
    assert res.exit_code == 2
    assert said(res) == [
        f"error: --target {target}: {said_of_it}",
        "hint: --target takes a server's base URL, such as --target http://127.0.0.1:8000",
    ]


# ---------------------------------------------------------------------------------------------
# the table itself (kit.errors.to_kit_error)


HUB_REQUEST = httpx2.Request("GET", "https://huggingface.co/api/models/x/y")


def _request(lib: Any, url: str = "http://127.0.0.1:8000/v1/models") -> Any:
    return lib.Request("GET", url)


@pytest.mark.parametrize(
    ("exc", "kind", "code", "message"),
    [
        (
            httpx.ConnectError("[Errno 111] refused", request=_request(httpx)),
            NetworkError,
            3,
            "cannot connect to http://127.0.0.1:8000/v1/models: [Errno 111] refused",
        ),
        (
            httpx2.ConnectError("[Errno 111] refused", request=_request(httpx2)),
            NetworkError,
            3,
            "cannot connect to http://127.0.0.1:8000/v1/models: [Errno 111] refused",
        ),
        (
            httpx.ReadTimeout("timed out", request=_request(httpx)),
            NetworkError,
            3,
            "http://127.0.0.1:8000/v1/models: no answer in time (ReadTimeout: timed out)",
        ),
        (
            httpx.RemoteProtocolError("closed", request=_request(httpx)),
            NetworkError,
            3,
            "http://127.0.0.1:8000/v1/models: the request failed (RemoteProtocolError: closed)",
        ),
        (
            httpx.HTTPStatusError(
                "500",
                request=_request(httpx),
                response=httpx.Response(500, text="boom"),
            ),
            ServerAnswerError,
            3,
            "http://127.0.0.1:8000/v1/models answered HTTP 500 Internal Server Error: boom",
        ),
        (
            httpx.UnsupportedProtocol("no protocol", request=_request(httpx, "x/v1")),
            BadURLError,
            2,
            "not a URL kit can request: 'x/v1': no protocol",
        ),
        (httpx.InvalidURL("bad port"), BadURLError, 2, "not a URL kit can request: bad port"),
        (
            RepositoryNotFoundError(
                "404 Client Error",
                response=httpx2.Response(404, text="Repository Not Found", request=HUB_REQUEST),
            ),
            ServerAnswerError,
            3,
            "https://huggingface.co/api/models/x/y answered HTTP 404 Not Found: "
            "Repository Not Found",
        ),
        (
            urllib.error.URLError(ConnectionRefusedError(111, "refused")),
            NetworkError,
            3,
            "cannot connect: [Errno 111] refused",
        ),
        (
            urllib.error.HTTPError("http://h/x", 503, "Service Unavailable", {}, None),
            ServerAnswerError,
            3,
            "http://h/x answered HTTP 503 Service Unavailable: Service Unavailable",
        ),
        (
            ConnectionResetError(104, "reset"),
            NetworkError,
            3,
            "the network failed: [Errno 104] reset",
        ),
        (
            socket.gaierror(-2, "Name or service not known"),
            NetworkError,
            3,
            "the network failed: [Errno -2] Name or service not known",
        ),
        (
            OSError(errno.ENOSPC, FULL, "/r/report.tmp"),
            EnvironmentProblem,
            3,
            f"/r/report.tmp: {FULL}",
        ),
        (
            PermissionError(errno.EACCES, "Permission denied", "/r"),
            EnvironmentProblem,
            3,
            "/r: Permission denied",
        ),
        (ValueError("x"), InternalError, 1, "internal error: ValueError: x"),
        (KeyError("k"), InternalError, 1, "internal error: KeyError: 'k'"),
        (RuntimeError(), InternalError, 1, "internal error: RuntimeError"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None,
)
def test_to_kit_error(exc: BaseException, kind: type[KitError], code: int, message: str) -> None:
    err = to_kit_error(exc)
    assert (type(err), err.exit_code, err.message) == (kind, code, message)
    assert err.__cause__ is exc and err.hint


def test_kit_errors_pass_through_and_subclass_what_callers_catch() -> None:
    err = KitError("x")
    assert to_kit_error(err) is err
    assert isinstance(NetworkError("x"), ConnectionError)
    assert isinstance(ServerAnswerError("http://h/v1/models", 404), OSError)
    assert isinstance(BadURLError("x", "no"), ValueError)

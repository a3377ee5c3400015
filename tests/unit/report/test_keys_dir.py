"""`--keys DIR` on kit report show, verify, compare and html (issue 34): each report is checked
against the key in DIR whose fingerprint its signature names, so reports by several signers read
in one command; and show checks every signature before it prints anything, so a report it
refuses leaves no header without rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import kit

from kit.signing import fingerprint, load_public_key

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KEYS = FIXTURES / "examples" / "keys"
REPORTS = FIXTURES / "examples" / "reports"
# signed by two different keys of KEYS: example.pub and h200-2026-12.pub
TP2 = REPORTS / "h200x2-tp2.report.json"
RERUN = REPORTS / "h200-tp1-rerun.report.json"
RESOLVE = REPORTS / "h200-tp1-resolve.report.json"
STRANGER = FIXTURES / "reports" / "cpu-tiny-a.signed.json"  # signer.pub, not in KEYS


def keyid(path: Path) -> str:
    keyid: str = json.loads(path.read_bytes())["signatures"][0]["keyid"]
    return keyid


def test_the_two_reports_have_different_signers_both_in_keys() -> None:
    fps = {fingerprint(load_public_key(p)): p.stem for p in KEYS.glob("*.pub")}
    assert fps[keyid(TP2)] == "example" and fps[keyid(RERUN)] == "h200-2026-12"
    assert keyid(STRANGER) not in fps


def test_show_markdown_header_reads_reports_of_several_signers() -> None:
    result = kit("report", "show", "--markdown", "--header", TP2, RERUN, "--keys", KEYS)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 4  # header, rule, a row per report
    assert "UNTRUSTED" not in result.stdout
    table = kit("report", "show", TP2, RERUN, "--keys", KEYS)
    assert table.exit_code == 0, table.output
    for path in (TP2, RERUN):
        assert f"signer    {keyid(path)} (signature verified)" in table.stdout


def test_show_refuses_before_printing_anything() -> None:
    # one --key verifies the first report and not the second: nothing at all is printed
    result = kit(
        "report", "show", "--markdown", "--header", TP2, RERUN, "--key", KEYS / "example.pub"
    )
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {RERUN}: signed by {keyid(RERUN)}, not by the given")
    # with --keys, a report whose signer is not in DIR is refused the same way
    refused = kit("report", "show", "--markdown", "--header", TP2, STRANGER, "--keys", KEYS)
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr.startswith(
        f"error: {STRANGER}: signed by an untrusted key {keyid(STRANGER)}"
    )
    allowed = kit(
        "report", "show", "--markdown", TP2, STRANGER, "--keys", KEYS, "--allow-untrusted"
    )
    assert allowed.exit_code == 0, allowed.output
    first, second = allowed.stdout.splitlines()
    assert "UNTRUSTED" not in first
    assert second.startswith(f"| UNTRUSTED (signed by {keyid(STRANGER)}): ")


def test_verify_with_keys_picks_the_signer_by_fingerprint() -> None:
    for path, name in ((TP2, "example"), (RERUN, "h200-2026-12")):
        result = kit("report", "verify", path, "--keys", KEYS)
        assert result.exit_code == 0, result.output
        assert f"valid signature by {keyid(path)} (trusted as '{name}')" in result.stdout
    stranger = kit("report", "verify", STRANGER, "--keys", KEYS)
    assert stranger.exit_code == 1
    assert f"signature  signed by an untrusted key {keyid(STRANGER)}" in stranger.stdout


def test_compare_with_keys_reads_each_side_with_its_own_key() -> None:
    result = kit("report", "compare", RESOLVE, RERUN, "--keys", KEYS)
    assert result.exit_code == 0, result.output
    assert "UNTRUSTED" not in result.stdout
    # two signers, one command: the sides need not share a key
    mixed = kit("report", "compare", TP2, RERUN, "--keys", KEYS, "--force", "--fail-on", "never")
    assert mixed.exit_code in (0, 5), mixed.output
    assert "UNTRUSTED" not in mixed.stdout


def test_html_with_keys(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="kit's html extra: pip install 'kit[html]'")
    out = tmp_path / "page.html"
    result = kit("report", "html", TP2, "--keys", KEYS, "-o", out)
    assert result.exit_code == 0, result.output
    assert "signature VALID" in out.read_text()


@pytest.mark.parametrize("command", ["show", "verify", "compare", "html"])
def test_key_and_keys_together_are_bad_input(command: str) -> None:
    paths = (TP2, TP2) if command == "compare" else (TP2,)
    result = kit("report", command, *paths, "--key", KEYS / "example.pub", "--keys", KEYS)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: --key and --keys both given",
        "hint: --key PUB checks every report against one key; --keys DIR matches each report "
        "to the key in DIR whose fingerprint its signature names",
    ]


def test_keys_dir_without_keys_is_bad_input(tmp_path: Path) -> None:
    result = kit("report", "show", TP2, "--keys", tmp_path)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == f"error: {tmp_path}: no public key (*.pub) in it"


def test_a_key_that_signed_another_report_points_to_keys_and_that_works() -> None:
    """One --key over reports of two signers fails on the other's report; the hint names the
    key the signature wants and --keys DIR, and following it reads both."""
    wrong = kit("report", "show", TP2, RERUN, "--key", KEYS / "example.pub")
    assert wrong.exit_code == 1, wrong.output
    hint = next(line for line in wrong.stderr.splitlines() if line.startswith("hint:"))
    assert keyid(RERUN)[:19] in hint and "--keys DIR" in hint
    followed = kit("report", "show", TP2, RERUN, "--keys", KEYS)
    assert followed.exit_code == 0, followed.output

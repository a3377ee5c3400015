"""kit.signing.trust and the CLI around it: the trust store (add, list, remove, authenticate
by the key itself), `kit keys trust/list/untrust`, the policy of `kit report verify/show/compare`
without --key, and DSSE interoperability with securesystemslib in both directions."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from kit import signing
from kit.cli import main
from kit.errors import BadInputError
from kit.signing import TrustStore

REPORT = {"schema_version": 1, "notes": ["hello"], "figures": [1.5, 2, None]}


def write_pub(path: Path, key: Ed25519PublicKey) -> Path:
    path.write_bytes(
        key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return path


@pytest.fixture
def store(tmp_path: Path) -> TrustStore:
    return TrustStore(directory=tmp_path / "config" / "trusted")


@pytest.fixture
def alice(tmp_path: Path) -> tuple[Ed25519PrivateKey, Path]:
    key = Ed25519PrivateKey.generate()
    return key, write_pub(tmp_path / "alice.pub", key.public_key())


@pytest.fixture
def reports(fixtures_dir: Path) -> Path:
    return fixtures_dir / "reports"


# ---------------------------------------------------------------------------------------------
# the store


def test_add_list_remove(store: TrustStore, alice: tuple[Ed25519PrivateKey, Path]) -> None:
    key, pub = alice
    fp = signing.fingerprint(key.public_key())
    assert store.trusted() == []  # no directory yet: an empty store
    entry = store.add(pub)
    assert (entry.name, entry.fingerprint, entry.path) == (
        "alice",
        fp,
        store.directory / "alice.pub",
    )
    assert store.directory.stat().st_mode & 0o777 == 0o700
    assert store.add(pub, "other-name") == entry  # already trusted: unchanged
    assert store.trusted() == [entry]
    bob = write_pub(pub.parent / "bob.pub", Ed25519PrivateKey.generate().public_key())
    assert [e.name for e in [store.add(bob, "bob-lab"), *store.trusted()]] == [
        "bob-lab",
        "alice",
        "bob-lab",
    ]
    assert store.remove(fp) == entry
    assert [e.name for e in store.trusted()] == ["bob-lab"]
    assert store.remove("bob-lab").name == "bob-lab"
    assert store.trusted() == []


def test_store_errors(store: TrustStore, alice: tuple[Ed25519PrivateKey, Path]) -> None:
    key, pub = alice
    store.add(pub)
    other = write_pub(pub.parent / "x.pub", Ed25519PrivateKey.generate().public_key())
    with pytest.raises(BadInputError) as e:
        store.add(other, "alice")
    assert e.value.message.startswith("the name 'alice' is already trusted for another key sha256:")
    with pytest.raises(BadInputError, match=r"key name '\.\./evil' is not a plain file name"):
        store.add(other, "../evil")
    with pytest.raises(BadInputError) as e:
        store.remove("nobody")
    assert e.value.message == "no trusted key named 'nobody'"
    assert e.value.hint == "`kit keys list` shows the trusted keys by name and fingerprint"
    with pytest.raises(BadInputError, match="no trusted key named 'sha256:0000"):
        store.remove("sha256:" + "0" * 64)
    private = pub.parent / "alice.key"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(BadInputError, match="not a readable public key"):
        store.add(private)


def test_a_broken_entry_is_named_and_can_be_removed(store: TrustStore) -> None:
    store.directory.mkdir(parents=True)
    (store.directory / "junk.pub").write_text("not a key")
    with pytest.raises(BadInputError) as e:
        store.trusted()
    assert e.value.message.startswith("trust store: ")
    assert e.value.hint == "remove it with `kit keys untrust junk`"
    assert store.remove("junk").fingerprint == "unreadable"
    assert store.trusted() == []


def test_verify_authenticates_by_the_key_not_the_keyid(
    store: TrustStore, alice: tuple[Ed25519PrivateKey, Path]
) -> None:
    key, pub = alice
    store.add(pub)
    fp = signing.fingerprint(key.public_key())
    good = signing.open_envelope(signing.sign_report(REPORT, key))
    check = store.verify(good)
    assert (check.valid, check.signer, check.untrusted) == (True, "alice", False)
    assert check.reason == f"valid signature by {fp} (trusted as 'alice')"
    # an attacker's signature filed under alice's keyid: alice's key does not verify it
    mallory = Ed25519PrivateKey.generate()
    forged = json.loads(signing.sign_report({**REPORT, "figures": [3.0]}, mallory))
    forged["signatures"][0]["keyid"] = fp
    check = store.verify(signing.open_envelope(signing.canonical_bytes(forged)))
    assert (check.valid, check.signer) == (False, None)
    assert check.reason == "the signature does not match the payload: the report was altered"
    # mallory's own keyid is not trusted: not checked, untrusted
    check = store.verify(signing.open_envelope(signing.sign_report(REPORT, mallory)))
    assert (check.valid, check.untrusted) == (None, True)
    unsigned = store.verify(signing.open_envelope(signing.unsigned_report(REPORT)))
    assert (unsigned.signed, unsigned.valid, unsigned.untrusted) == (False, False, False)


@pytest.fixture(scope="module")
def trusted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ed25519PrivateKey, TrustStore]:
    directory = tmp_path_factory.mktemp("trust")
    key = Ed25519PrivateKey.generate()
    store = TrustStore(directory=directory / "trusted")
    store.add(write_pub(directory / "k.pub", key.public_key()))
    return key, store


@settings(max_examples=60, deadline=None)
@given(sig=st.binary(min_size=64, max_size=64))
def test_no_signature_under_a_trusted_keyid_verifies_but_the_real_one(
    trusted: tuple[Ed25519PrivateKey, TrustStore], sig: bytes
) -> None:
    key, store = trusted
    data = json.loads(signing.sign_report(REPORT, key))
    real = base64.b64decode(data["signatures"][0]["sig"])
    data["signatures"][0]["sig"] = base64.b64encode(sig).decode()
    check = store.verify(signing.open_envelope(signing.canonical_bytes(data)))
    assert check.valid is (sig == real) and not check.untrusted


# ---------------------------------------------------------------------------------------------
# the CLI


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KIT_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


def test_cli_trust_list_untrust(config: Path, reports: Path) -> None:
    runner = CliRunner()
    pub = reports / "signer.pub"
    fp = signing.fingerprint(signing.load_public_key(pub))
    res = runner.invoke(main, ["keys", "trust", str(pub), "--name", "lab-rig"])
    assert res.exit_code == 0, res.output
    entry = {"name": "lab-rig", "fingerprint": fp, "path": str(config / "trusted" / "lab-rig.pub")}
    assert json.loads(res.stdout) == entry
    listed = runner.invoke(main, ["keys", "list"])
    assert listed.exit_code == 0 and json.loads(listed.stdout) == [entry]
    gone = runner.invoke(main, ["keys", "untrust", fp])
    assert gone.exit_code == 0 and json.loads(gone.stdout) == entry
    again = runner.invoke(main, ["keys", "untrust", "lab-rig"])
    assert again.exit_code == 2
    assert again.stderr == (
        "error: no trusted key named 'lab-rig'\n"
        "hint: `kit keys list` shows the trusted keys by name and fingerprint\n"
    )
    assert json.loads(runner.invoke(main, ["keys", "list"]).stdout) == []
    for command in ("trust", "list", "untrust"):
        help_text = runner.invoke(main, ["keys", command, "--help"]).stdout
        assert ":\n    kit keys " in help_text.split("\nOptions:\n")[1]  # test_cli_help.py


def test_cli_generate_trusts_its_own_key(config: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    made = runner.invoke(main, ["keys", "generate", "--dir", str(tmp_path / "keys")])
    assert made.exit_code == 0, made.output
    pair = json.loads(made.stdout)
    assert pair["trusted_as"] == "kit"
    listed = json.loads(runner.invoke(main, ["keys", "list"]).stdout)
    assert [(e["name"], e["fingerprint"]) for e in listed] == [("kit", pair["fingerprint"])]
    # a report it signs verifies without --key
    private = signing.load_private_key(Path(pair["private_key"]))
    report = tmp_path / "r.json"
    report.write_bytes(signing.sign_report(REPORT, private))
    env = signing.open_envelope_file(report)
    assert TrustStore.default().verify(env).valid
    # a new pair under the same name: trusted beside the old one, under a longer name
    again = runner.invoke(main, ["keys", "generate", "--dir", str(tmp_path / "keys"), "--force"])
    second = json.loads(again.stdout)
    assert second["trusted_as"] == "kit-" + second["fingerprint"].removeprefix("sha256:")[:12]
    assert len(json.loads(runner.invoke(main, ["keys", "list"]).stdout)) == 2
    opted_out = runner.invoke(
        main, ["keys", "generate", "--dir", str(tmp_path / "other"), "--no-trust"]
    )
    assert "trusted_as" not in json.loads(opted_out.stdout)
    assert len(json.loads(runner.invoke(main, ["keys", "list"]).stdout)) == 2


def test_cli_verify_without_key_uses_the_trust_store(config: Path, reports: Path) -> None:
    runner = CliRunner()
    signed = str(reports / "cpu-tiny-a.signed.json")
    fp = signing.fingerprint(signing.load_public_key(reports / "signer.pub"))
    res = runner.invoke(main, ["report", "verify", signed])
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert lines[2] == (
        f"  [FAIL] signature  signed by an untrusted key {fp}; trust it with `kit keys trust`"
    )
    assert all(line.endswith("skipped: the signature failed") for line in lines[3:10])
    assert lines[-1] == "FAILED: 1 of 9 items (signature)"
    allowed = runner.invoke(main, ["report", "verify", signed, "--allow-untrusted"])
    assert allowed.exit_code == 0
    assert "  [--]   signature  UNTRUSTED: signed by " in allowed.stdout
    assert allowed.stdout.splitlines()[-1] == "passed: 8 ok, 1 not checked"
    assert runner.invoke(main, ["keys", "trust", str(reports / "signer.pub")]).exit_code == 0
    trusted = runner.invoke(main, ["report", "verify", signed])
    assert trusted.exit_code == 0
    assert f"  [ok]   signature  valid signature by {fp} (trusted as 'signer')" in trusted.stdout


def test_cli_show_refuses_untrusted_and_unsigned_unless_allowed(
    config: Path, reports: Path
) -> None:
    runner = CliRunner()
    signed, unsigned = str(reports / "cpu-tiny-a.signed.json"), str(reports / "cpu-tiny-a.json")
    fp = signing.fingerprint(signing.load_public_key(reports / "signer.pub"))
    res = runner.invoke(main, ["report", "show", signed])
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr == (
        f"error: {signed}: signed by an untrusted key {fp}; trust it with `kit keys trust`\n"
        "hint: or pass --key PUB (its signer's public key), or --allow-untrusted to read it "
        "anyway\n"
    )
    res = runner.invoke(main, ["report", "show", unsigned])
    assert res.exit_code == 1
    assert res.stderr == (
        f"error: {unsigned}: the report is unsigned: nothing shows who wrote it or that it is "
        "unaltered\nhint: pass --allow-unsigned to read it anyway\n"
    )
    table = runner.invoke(main, ["report", "show", signed, "--allow-untrusted"])
    assert table.exit_code == 0
    assert all(line.startswith("UNTRUSTED  ") for line in table.stdout.splitlines() if line)
    row = runner.invoke(main, ["report", "show", "--markdown", signed, "--allow-untrusted"])
    assert row.exit_code == 0 and row.stdout.startswith(f"| UNTRUSTED (signed by {fp}): ")
    keyed = runner.invoke(main, ["report", "show", signed, "--key", str(reports / "signer.pub")])
    assert keyed.exit_code == 0 and "UNTRUSTED" not in keyed.stdout
    plain = runner.invoke(main, ["report", "show", unsigned, "--allow-unsigned"])
    assert plain.exit_code == 0 and "UNTRUSTED" not in plain.stdout


def test_cli_compare_checks_both_signatures(config: Path, reports: Path) -> None:
    runner = CliRunner()
    a, b = str(reports / "cpu-tiny-a.signed.json"), str(reports / "cpu-tiny-b.json")
    res = runner.invoke(main, ["report", "compare", a, b])
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.startswith(f"error: {a}: signed by an untrusted key sha256:")
    res = runner.invoke(main, ["report", "compare", a, b, "--allow-untrusted"])
    assert res.exit_code == 1
    assert res.stderr.startswith(f"error: {b}: the report is unsigned")
    res = runner.invoke(main, ["report", "compare", a, b, "--allow-untrusted", "--allow-unsigned"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith("A: UNTRUSTED ") and lines[1].startswith("B: UNSIGNED ")
    rows = [line for line in lines if "(tok/s)" in line]
    assert rows and all(line.endswith("  UNTRUSTED (A), UNSIGNED (B)") for line in rows)
    res = runner.invoke(
        main, ["report", "compare", a, b, "--allow-untrusted", "--allow-unsigned", "--json"]
    )
    assert json.loads(res.stdout)["a"].startswith("UNTRUSTED ")
    assert json.loads(res.stdout)["b"].startswith("UNSIGNED ")


# ---------------------------------------------------------------------------------------------
# DSSE interoperability with securesystemslib


def test_dsse_interop_with_securesystemslib_both_ways() -> None:
    dsse = pytest.importorskip("securesystemslib.dsse")
    sslib_signer = pytest.importorskip("securesystemslib.signer")
    key = Ed25519PrivateKey.generate()
    fp = signing.fingerprint(key.public_key())
    sslib_key = sslib_signer.SSlibKey.from_crypto(key.public_key(), keyid=fp)

    # kit signs, securesystemslib verifies
    data = signing.sign_report(REPORT, key)
    theirs = dsse.Envelope.from_dict(json.loads(data))
    assert theirs.payload_type == signing.REPORT_MEDIA_TYPE
    assert set(theirs.verify([sslib_key], 1)) == {fp}

    # securesystemslib signs kit's payloadType and payload, kit verifies
    payload = signing.canonical_bytes(REPORT)
    env = dsse.Envelope(payload=payload, payload_type=signing.REPORT_MEDIA_TYPE, signatures={})
    env.sign(sslib_signer.CryptoSigner(key, sslib_key))
    file_bytes = signing.canonical_bytes(env.to_dict())
    report, check = signing.read_payload(file_bytes, key.public_key())
    assert report == REPORT and check.valid is True and check.keyid == fp

    # the same envelope in URL-safe base64, as DSSE allows: kit and securesystemslib agree
    urlsafe = env.to_dict()
    for part in (urlsafe, urlsafe["signatures"][0]):
        field = "payload" if part is urlsafe else "sig"
        part[field] = base64.urlsafe_b64encode(base64.b64decode(part[field])).decode()
    assert signing.read_payload(signing.canonical_bytes(urlsafe), key.public_key())[1].valid

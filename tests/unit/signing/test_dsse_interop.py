"""DSSE as other tools write and read it (issue 34 item 8): the signature covers the PAE of the
payload, not the envelope's JSON, so a pretty-printed, re-serialised, co-signed or keyid-less
envelope verifies, with ``--threshold`` distinct keys; an edited payload never does. Both ways
with securesystemslib and openssl, and OpenSSH public keys beside PEM."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from clirun import kit
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kit import signing
from kit.cli import main
from kit.errors import BadInputError, VerificationFailed
from kit.report.attest import IN_TOTO_MEDIA_TYPE, PREDICATE_TYPE, read_attestation

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "reports"
SIGNED = FIXTURES / "cpu-tiny-a.signed.json"  # a full report, signed by signer.pub
PAYLOAD = signing.open_envelope(SIGNED.read_bytes()).payload
REPORT = {"schema_version": 1, "notes": "héllo", "n": [1, 2.5, None]}


def co_signed(payload: bytes, *keys: Ed25519PrivateKey, keyid: bool = True) -> dict[str, Any]:
    """An envelope around ``payload`` signed by every key, as DSSE co-signers write it."""
    message = signing.pae(signing.REPORT_MEDIA_TYPE, payload)
    signatures = [
        {"keyid": signing.fingerprint(k.public_key()), "sig": b64(k.sign(message))}
        if keyid
        else {"sig": b64(k.sign(message))}
        for k in keys
    ]
    return {
        "payloadType": signing.REPORT_MEDIA_TYPE,
        "payload": b64(payload),
        "signatures": signatures,
    }


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_keys(directory: Path, *keys: Ed25519PrivateKey) -> Path:
    directory.mkdir()
    for i, key in enumerate(keys):
        (directory / f"k{i}.pub").write_bytes(signing.public_key_bytes(key.public_key()))
    return directory


def signature_item(result: Result) -> dict[str, Any]:
    items = json.loads(result.stdout)["items"]
    item: dict[str, Any] = next(i for i in items if i["name"] == "signature")
    return item


# ---------------------------------------------------------------------------------------------
# formatting, keyid, co-signatures


def test_a_pretty_printed_envelope_verifies() -> None:
    key = Ed25519PrivateKey.generate()
    pretty = json.dumps(json.loads(signing.sign_report(REPORT, key)), indent=2).encode()
    report, check = signing.read_payload(pretty, key.public_key())
    assert report == REPORT and check.valid is True


def test_a_signature_without_keyid_verifies() -> None:
    key = Ed25519PrivateKey.generate()
    data = json.dumps(co_signed(signing.canonical_bytes(REPORT), key, keyid=False)).encode()
    report, check = signing.read_payload(data, key.public_key())
    assert report == REPORT and check.keyids == (signing.fingerprint(key.public_key()),)
    # without a key it is untrusted, not failed: nothing names the signer
    assert signing.verify_envelope(signing.open_envelope(data), None).reason == (
        "signed by an untrusted key an unnamed key (no keyid); trust it with `kit keys trust`"
    )


def test_co_signed_with_threshold(tmp_path: Path) -> None:
    a, b, c = (Ed25519PrivateKey.generate() for _ in range(3))
    env = signing.open_envelope(
        json.dumps(co_signed(signing.canonical_bytes(REPORT), a, b)).encode()
    )
    store = signing.TrustStore(directory=write_keys(tmp_path / "keys", a, b, c))
    fps = tuple(signing.fingerprint(k.public_key()) for k in (a, b))
    for threshold in (1, 2):
        check = store.model_copy(update={"threshold": threshold}).verify(env)
        assert check.valid is True and check.keyids == fps and check.signers == ("k0", "k1")
    check = store.model_copy(update={"threshold": 3}).verify(env)
    assert check.valid is False
    assert check.reason.startswith("2 of the 3 signatures by distinct keys required verified")
    # the same signature twice is one key, not two
    twice = co_signed(signing.canonical_bytes(REPORT), a)
    twice["signatures"] *= 2
    check = store.model_copy(update={"threshold": 2}).verify(
        signing.open_envelope(json.dumps(twice).encode())
    )
    assert check.valid is False and check.keyids == fps[:1]


def test_a_co_signature_by_an_unknown_key_is_ignored() -> None:
    key, stranger = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    data = json.dumps(co_signed(signing.canonical_bytes(REPORT), stranger, key)).encode()
    report, check = signing.read_payload(data, key.public_key())
    assert report == REPORT and check.valid is True


def test_an_edited_payload_still_fails(tmp_path: Path) -> None:
    a, b = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    env = co_signed(signing.canonical_bytes(REPORT), a, b)
    edited = signing.canonical_bytes({**REPORT, "notes": "hello"})
    for keyid in (True, False):
        tampered = {**co_signed(signing.canonical_bytes(REPORT), a, b, keyid=keyid)}
        tampered["payload"] = b64(edited)
        with pytest.raises(VerificationFailed, match="the report was altered"):
            signing.read_payload(json.dumps(tampered, indent=1).encode(), a.public_key())
    store = signing.TrustStore(directory=write_keys(tmp_path / "keys", a, b))
    env["payload"] = b64(edited)
    check = store.verify(signing.open_envelope(json.dumps(env).encode()))
    assert check.valid is False and check.reason.endswith("the report was altered")
    # and a payload edited into a non-canonical form is caught without any key
    env["payload"] = b64(json.dumps(REPORT, indent=1).encode())
    with pytest.raises(BadInputError, match="not in canonical form"):
        signing.load_payload(signing.open_envelope(json.dumps(env).encode()))


def test_verify_cli_threshold(tmp_path: Path) -> None:
    a, b, c = (Ed25519PrivateKey.generate() for _ in range(3))
    keys = write_keys(tmp_path / "keys", a, b, c)
    report = tmp_path / "co-signed.json"
    report.write_text(json.dumps(co_signed(PAYLOAD, a, b), indent=2))
    for threshold in (1, 2):
        result = kit("report", "verify", report, "--keys", keys, "--threshold", threshold, "--json")
        assert result.exit_code == 0, result.output
        item = signature_item(result)
        assert item["ok"] is True and item["detail"].startswith("valid signatures by sha256:")
        assert "(trusted as 'k0')" in item["detail"] and "(trusted as 'k1')" in item["detail"]
    result = kit("report", "verify", report, "--keys", keys, "--threshold", 3, "--json")
    assert result.exit_code == 1
    assert signature_item(result)["detail"].startswith(
        "2 of the 3 signatures by distinct keys required verified (by sha256:"
    )
    result = kit("report", "verify", report, "--key", keys / "k0.pub", "--threshold", 2)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --threshold 2 with --key: one key makes one signature")


# ---------------------------------------------------------------------------------------------
# securesystemslib, both ways


def test_securesystemslib_verifies_kit_with_the_documented_keyid() -> None:
    dsse = pytest.importorskip("securesystemslib.dsse")
    sslib_signer = pytest.importorskip("securesystemslib.signer")
    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    keyid = "sha256:" + hashlib.sha256(raw).hexdigest()  # the rule docs/signing.md gives
    assert keyid == signing.fingerprint(key.public_key())
    sslib_key = sslib_signer.SSlibKey.from_crypto(key.public_key(), keyid=keyid)
    envelope = dsse.Envelope.from_dict(json.loads(signing.sign_report(REPORT, key)))
    assert set(envelope.verify([sslib_key], 1)) == {keyid}
    assert json.loads(envelope.pae()[-len(signing.canonical_bytes(REPORT)) :]) == REPORT


def test_kit_verifies_securesystemslib_envelopes() -> None:
    dsse = pytest.importorskip("securesystemslib.dsse")
    sslib_signer = pytest.importorskip("securesystemslib.signer")
    a, b = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    payload = signing.canonical_bytes(REPORT)
    env = dsse.Envelope(payload=payload, payload_type=signing.REPORT_MEDIA_TYPE, signatures={})
    # securesystemslib's own keyids (not kit's), co-signed, written as it writes JSON
    for key in (a, b):
        env.sign(
            sslib_signer.CryptoSigner(key, sslib_signer.SSlibKey.from_crypto(key.public_key()))
        )
    data = json.dumps(env.to_dict(), indent=2).encode()
    for key in (a, b):
        report, check = signing.read_payload(data, key.public_key())
        assert report == REPORT and check.keyids == (signing.fingerprint(key.public_key()),)
    candidates = [
        signing.Candidate(k.public_key(), signing.fingerprint(k.public_key())) for k in (a, b)
    ]
    opened = signing.open_envelope(data)
    assert signing.check_signatures(opened, candidates, threshold=2).valid is True
    assert signing.check_signatures(opened, candidates, threshold=3).valid is False


# ---------------------------------------------------------------------------------------------
# openssl and OpenSSH


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl")
def test_openssl_verifies_the_pae(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    (tmp_path / "kit.pub").write_bytes(signing.public_key_bytes(key.public_key()))
    env = json.loads(signing.sign_report(REPORT, key))
    payload = base64.b64decode(env["payload"])
    (tmp_path / "pae.bin").write_bytes(signing.pae(env["payloadType"], payload))
    (tmp_path / "sig.bin").write_bytes(base64.b64decode(env["signatures"][0]["sig"]))
    args = ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", "kit.pub", "-rawin"]
    args += ["-in", "pae.bin", "-sigfile", "sig.bin"]
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "Signature Verified Successfully" in done.stdout


def test_openssh_public_keys_round_trip(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    pem = tmp_path / "a.pub"
    pem.write_bytes(signing.public_key_bytes(key.public_key()))
    result = kit("keys", "export", pem)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ssh-ed25519 AAAA") and result.stdout.count("\n") == 1
    ssh = tmp_path / "a.ssh.pub"
    ssh.write_text(result.stdout)
    assert signing.fingerprint(signing.load_public_key(ssh)) == signing.fingerprint(
        key.public_key()
    )
    assert kit("keys", "export", ssh, "--format", "pem").stdout == pem.read_text()
    if shutil.which("ssh-keygen"):
        done = subprocess.run(["ssh-keygen", "-l", "-f", ssh], capture_output=True, text=True)
        assert done.returncode == 0 and "(ED25519)" in done.stdout, done.stderr
    # an OpenSSH key verifies a report with --key, and can be trusted
    report = tmp_path / "r.json"
    report.write_bytes(signing.sign_payload(PAYLOAD, key))
    result = kit("report", "verify", report, "--key", ssh, "--json")
    assert result.exit_code == 0, result.output
    config = tmp_path / "config"
    trusted = CliRunner(env={"KIT_CONFIG_DIR": str(config)}).invoke(
        main, ["keys", "trust", str(ssh)]
    )
    assert trusted.exit_code == 0, trusted.output
    assert json.loads(trusted.stdout)["fingerprint"] == signing.fingerprint(key.public_key())


def test_an_ssh_key_of_another_type_is_refused(tmp_path: Path) -> None:
    rsa = tmp_path / "rsa.pub"
    rsa.write_text("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7 x\n")
    with pytest.raises(BadInputError, match=r"not a readable public key|not an Ed25519 key"):
        signing.load_public_key(rsa)


# ---------------------------------------------------------------------------------------------
# in-toto attestation


def test_report_attest_writes_a_signed_in_toto_statement(tmp_path: Path) -> None:
    pair = signing.generate_keypair(tmp_path / "k")
    out = tmp_path / "report.intoto.json"
    result = kit(
        "report", "attest", SIGNED, "-o", out, "--signing-key", pair.private_key,
        "--keys", FIXTURES.parent / "reports",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    statement, check = read_attestation(out.read_bytes(), signing.load_public_key(pair.public_key))
    assert check.valid is True
    assert json.loads(out.read_bytes())["payloadType"] == IN_TOTO_MEDIA_TYPE
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == PREDICATE_TYPE
    digest = hashlib.sha256(SIGNED.read_bytes()).hexdigest()
    assert statement["subject"] == [{"name": SIGNED.name, "digest": {"sha256": digest}}]
    signer = signing.fingerprint(signing.load_public_key(FIXTURES / "signer.pub"))
    assert statement["predicate"]["report_signers"] == [signer]
    # securesystemslib reads it as the in-toto envelope it is
    dsse = pytest.importorskip("securesystemslib.dsse")
    sslib_signer = pytest.importorskip("securesystemslib.signer")
    sslib_key = sslib_signer.SSlibKey.from_crypto(
        signing.load_public_key(pair.public_key), keyid=pair.fingerprint
    )
    assert dsse.Envelope.from_dict(json.loads(out.read_bytes())).verify([sslib_key], 1)

"""kit.signing: keys, canonical bytes, DSSE envelopes, and reading files from strangers.

Real keys and real bytes throughout; hypothesis drives the tampering and the garbage.
"""

from __future__ import annotations

import base64
import json
import math
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PrivateKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kit import paths, signing
from kit.errors import BadInputError, VerificationFailed

REPORT: dict[str, Any] = {
    "schema_version": 1,
    "kit_version": "0.1.0",
    "recipe": {
        "name": "qwen3-8b-w4a16",
        "sha256": "ab" * 32,
        "model": {"source": "hub", "repo_id": "Qwen/Qwen3-8B", "revision": "c0ffee" * 6 + "abcd"},
        "serve": {"engine": "vllm", "args": ["--max-model-len", "4096"], "tp": 1},
    },
    "host": {"gpu": "NVIDIA H200", "driver": "570.86.15", "cuda": "12.8", "gpus": 1},
    "results": [
        {
            "concurrency": c,
            "ttft_ms": {"p50": 23.4 * c, "p99": 41.25 * c},
            "tpot_ms": {"p50": 7.125, "p99": 9.5e-1},
            "throughput_tok_s": 1234.5 / c,
            "errors": 0,
        }
        for c in (1, 4, 16)
    ],
    "notes": 'héllo ✓ "quoted" \\ back\nslash \u2028 \U0001f600',
    "flags": [True, False, None],
    "tiny": 5e-324,
    "empty": {"list": [], "obj": {}},
}


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ed25519PrivateKey, Ed25519PublicKey]:
    pair = signing.generate_keypair(tmp_path_factory.mktemp("keys"))
    return signing.load_private_key(pair.private_key), signing.load_public_key(pair.public_key)


@pytest.fixture(scope="module")
def signed(keys: tuple[Ed25519PrivateKey, Ed25519PublicKey]) -> bytes:
    return signing.sign_report(REPORT, keys[0])


def detected(data: bytes, public_key: Ed25519PublicKey) -> bool:
    """True when reading ``data`` fails cleanly; any other exception propagates."""
    try:
        env = signing.open_envelope(data)
    except BadInputError:
        return True
    if signing.verify_envelope(env, public_key).valid is not True:
        return True
    try:
        signing.load_payload(env)
    except BadInputError:
        return True
    return False


def refused_or_same(data: bytes, original: bytes, public_key: Ed25519PublicKey) -> bool:
    """True when an edit of ``original`` is refused, or leaves what was signed (payloadType and
    payload) as it was and verified: DSSE lets the envelope's JSON be reformatted and its keyid
    be changed or dropped, never the signed bytes."""
    if detected(data, public_key):
        return True
    env, before = signing.open_envelope(data), signing.open_envelope(original)
    return (env.payload_type, env.payload) == (before.payload_type, before.payload)


def reencode(data: bytes, payload: bytes) -> bytes:
    """The same envelope (signature included) around other payload bytes."""
    env = json.loads(data)
    env["payload"] = base64.b64encode(payload).decode()
    return signing.canonical_bytes(env)


def unsigned_envelope(payload: bytes, fields: dict[str, Any] | None = None) -> bytes:
    """An unsigned envelope around any payload bytes, with fields replaced or added."""
    env = {"payloadType": signing.REPORT_MEDIA_TYPE, "payload": "", "signatures": []}
    env["payload"] = base64.b64encode(payload).decode()
    env.update(fields or {})
    return signing.canonical_bytes(env)


# ---------------------------------------------------------------------------------------------
# keys


def test_round_trip(tmp_path: Path) -> None:
    pair = signing.generate_keypair(tmp_path, name="bench")
    assert pair.private_key == tmp_path / "bench.key"
    assert stat.S_IMODE(pair.private_key.stat().st_mode) == 0o600
    assert pair.public_key.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert pair.fingerprint.startswith("sha256:") and len(pair.fingerprint) == 7 + 64
    assert int(pair.fingerprint[7:], 16) >= 0 and pair.fingerprint == pair.fingerprint.lower()

    private, public = (
        signing.load_private_key(pair.private_key),
        signing.load_public_key(pair.public_key),
    )
    assert signing.fingerprint(public) == pair.fingerprint
    data = signing.sign_report(REPORT, private)
    env = signing.open_envelope(data)
    check = signing.verify_envelope(env, public)
    assert check == signing.SignatureCheck(
        signed=True,
        keyid=pair.fingerprint,
        key_matches=True,
        valid=True,
        reason=f"valid signature by {pair.fingerprint}",
        keyids=(pair.fingerprint,),
    )
    assert signing.load_payload(env) == REPORT
    assert signing.read_payload(data, public) == (REPORT, check)
    assert data == signing.sign_report(dict(reversed(REPORT.items())), private)  # deterministic


def test_keypair_refuses_to_overwrite(tmp_path: Path) -> None:
    first = signing.generate_keypair(tmp_path)
    with pytest.raises(BadInputError, match="already exists") as err:
        signing.generate_keypair(tmp_path)
    assert err.value.hint and "--force" in err.value.hint  # the CLI flag (test_hints runs it)
    assert signing.load_public_key(first.public_key)  # untouched
    second = signing.generate_keypair(tmp_path, force=True)
    assert second.fingerprint != first.fingerprint
    assert stat.S_IMODE(second.private_key.stat().st_mode) == 0o600


def test_keypair_refuses_a_path_as_name(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="plain file name"):
        signing.generate_keypair(tmp_path, name="../evil")


def test_default_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(paths.ENV_CONFIG_DIR, raising=False)
    monkeypatch.delenv(paths.ENV_SIGNING_KEY, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert paths.default_private_key_path() == tmp_path / "home/.config/kit/kit.key"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert paths.default_config_dir() == tmp_path / "xdg/kit"
    monkeypatch.setenv(paths.ENV_CONFIG_DIR, str(tmp_path / "cfg"))
    pair = signing.generate_keypair()
    assert pair.private_key == tmp_path / "cfg/kit.key" == paths.default_private_key_path()
    monkeypatch.setenv(paths.ENV_SIGNING_KEY, str(tmp_path / "secret/key"))
    assert paths.default_private_key_path() == tmp_path / "secret/key"


def test_bad_key_files(tmp_path: Path) -> None:
    pair = signing.generate_keypair(tmp_path)
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x00\xff not a key")
    ed448 = tmp_path / "ed448.key"
    ed448.write_bytes(
        Ed448PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pw"),
        )
    )
    huge = tmp_path / "huge"
    with open(huge, "wb") as f:
        f.truncate(1 << 30)  # sparse: only the first bytes are ever read

    for path, pattern in [
        (tmp_path / "missing", "cannot read"),
        (tmp_path, "cannot read"),
        (garbage, "not a readable private key"),
        (pair.public_key, "not a readable private key"),
        (encrypted, "encrypted"),
        (ed448, "not an Ed25519 key"),
        (huge, "over the"),
    ]:
        with pytest.raises(BadInputError, match=pattern):
            signing.load_private_key(path)
    with pytest.raises(BadInputError) as err:
        signing.load_private_key(pair.public_key)
    assert err.value.hint == "this is a public key; pass the private key file"
    with pytest.raises(BadInputError) as err:
        signing.load_public_key(pair.private_key)
    assert err.value.hint and "pass the .pub file" in err.value.hint
    with pytest.raises(BadInputError, match="not an Ed25519 key"):
        ed448_pub = tmp_path / "ed448.pub"
        key = serialization.load_pem_private_key(ed448.read_bytes(), None)
        ed448_pub.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        signing.load_public_key(ed448_pub)


@fuzz(300)
@given(data=st.binary(max_size=300), armour=st.booleans())
def test_garbage_key_files(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, armour: bool
) -> None:
    path = tmp_path_factory.mktemp("k", numbered=True) / "key"
    if armour:
        body = base64.encodebytes(data)
        data = b"-----BEGIN PRIVATE KEY-----\n" + body + b"-----END PRIVATE KEY-----\n"
    path.write_bytes(data)
    with pytest.raises(BadInputError):
        signing.load_private_key(path)
    with pytest.raises(BadInputError):
        signing.load_public_key(path)


def test_private_key_never_in_signed_bytes(tmp_path: Path) -> None:
    private = signing.load_private_key(signing.generate_keypair(tmp_path).private_key)
    seed = private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pem_body = b"".join(pem.splitlines()[1:-1])
    for data in (signing.sign_report(REPORT, private), signing.sign_report({}, private)):
        env = json.loads(data)
        decoded = base64.b64decode(env["payload"]) + base64.b64decode(env["signatures"][0]["sig"])
        for secret in (seed, seed.hex().encode(), base64.b64encode(seed).rstrip(b"="), pem_body):
            assert secret not in data
            assert secret not in decoded


# ---------------------------------------------------------------------------------------------
# canonical bytes


def test_canonical_key_order_and_form() -> None:
    a = {"b": [1, 2.0, {"y": 1, "x": 2}], "a": "é", "\u20ac": 1, "\U0001f600": 2, "\r": 3}
    b = dict(reversed(a.items()))
    b["b"] = [1, 2.0, {"x": 2, "y": 1}]
    assert signing.canonical_bytes(a) == signing.canonical_bytes(b)
    # RFC 8785: UTF-16 key order, no whitespace, shortest numbers, UTF-8 text.
    expected = '{"\\r":3,"a":"é","b":[1,2,{"x":2,"y":1}],"€":1,"😀":2}'
    assert signing.canonical_bytes(a) == expected.encode()


def test_canonical_big_ints_become_strings() -> None:
    edge = 2**53 - 1
    data = signing.canonical_bytes({"ok": edge, "neg": -edge, "big": edge + 1, "nbig": -(2**64)})
    assert json.loads(data) == {
        "ok": edge,
        "neg": -edge,
        "big": str(edge + 1),
        "nbig": str(-(2**64)),
    }


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_canonical_rejects_nan_and_inf_with_path(bad: float) -> None:
    with pytest.raises(BadInputError, match=r"^\$\.results\[1\]\.ttft_ms: .* not a JSON number"):
        signing.canonical_bytes({"results": [{}, {"ttft_ms": bad}]})
    with pytest.raises(BadInputError, match=r'\$\["odd key"\]'):
        signing.canonical_bytes({"odd key": bad})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({1: "x"}, r"\$: key 1 is not a string"),
        ({"a": {1, 2}}, r"\$\.a: a set is not a JSON value"),
        ({"a": b"x"}, r"\$\.a: a bytes is not a JSON value"),
        ({"a": ["\ud800"]}, r"\$\.a\[0\]: text with a lone surrogate"),
        ({"\udfff": 1}, "lone surrogate"),
    ],
)
def test_canonical_rejects_non_json(value: Any, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        signing.canonical_bytes(value)


def test_canonical_rejects_deep_objects_before_recursing() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(BadInputError, match="nested deeper than 64 levels"):
        signing.canonical_bytes(deep)
    with pytest.raises(BadInputError, match="nested deeper"):
        signing.sign_report({"deep": deep}, Ed25519PrivateKey.generate())


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)


@fuzz(250)
@given(report=st.dictionaries(st.text(max_size=10), json_values, max_size=6))
def test_any_report_survives_a_round_trip(report: dict[str, Any]) -> None:
    payload, check = signing.read_payload(signing.unsigned_report(report))
    assert not check.signed and check.valid is False
    assert signing.canonical_bytes(payload) == signing.canonical_bytes(report)


# ---------------------------------------------------------------------------------------------
# tampering


def test_wrong_key(signed: bytes) -> None:
    other = Ed25519PrivateKey.generate().public_key()
    check = signing.verify_envelope(signing.open_envelope(signed), other)
    assert (check.signed, check.key_matches, check.valid) == (True, False, False)
    assert (
        check.reason.startswith("signed by sha256:") and signing.fingerprint(other) in check.reason
    )
    with pytest.raises(VerificationFailed, match="not by the given key"):
        signing.read_payload(signed, other)


def test_no_key_means_untrusted(signed: bytes, keys: tuple[Any, Ed25519PublicKey]) -> None:
    payload, check = signing.read_payload(signed)
    assert payload == REPORT
    assert check.signed and check.valid is None and check.key_matches is None
    assert check.untrusted and check.signer is None
    assert check.keyid == signing.fingerprint(keys[1])
    assert check.reason == (
        f"signed by an untrusted key {check.keyid}; trust it with `kit keys trust`"
    )


def test_stripped_signature_reads_as_unsigned(
    signed: bytes, keys: tuple[Any, Ed25519PublicKey]
) -> None:
    env = json.loads(signed)
    env["signatures"] = []
    stripped = signing.canonical_bytes(env)
    assert stripped == signing.unsigned_report(REPORT)
    check = signing.verify_envelope(signing.open_envelope(stripped), keys[1])
    assert check == signing.SignatureCheck(
        signed=False, keyid=None, key_matches=None, valid=False, reason="the report is unsigned"
    )
    assert signing.verify_envelope(signing.open_envelope(stripped), None).valid is False
    with pytest.raises(VerificationFailed, match="unsigned"):
        signing.read_payload(stripped, keys[1])


def test_swapped_payload_type(signed: bytes, keys: tuple[Any, Ed25519PublicKey]) -> None:
    env = json.loads(signed)
    env["payloadType"] = "application/vnd.in-toto+json"
    with pytest.raises(BadInputError, match=r"payloadType is 'application/vnd\.in-toto\+json'"):
        signing.open_envelope(signing.canonical_bytes(env))
    # Even a well-formed envelope of another type, signed over its own PAE, does not verify
    # as a report: the type is bound into the signature.
    payload = base64.b64decode(env["payload"])
    sig = keys[0].sign(signing.pae("application/vnd.in-toto+json", payload))
    forged = signing.Envelope(
        payload_type=signing.REPORT_MEDIA_TYPE,
        payload=payload,
        signatures=(signing.Signature(keyid=signing.fingerprint(keys[1]), sig=sig),),
    )
    assert signing.verify_envelope(forged, keys[1]).valid is False


def test_pae_matches_the_dsse_spec() -> None:
    assert signing.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert signing.pae("t", b"") == b"DSSEv1 1 t 0 "


def test_every_byte_of_the_file_is_covered(
    signed: bytes, keys: tuple[Any, Ed25519PublicKey]
) -> None:
    assert not detected(signed, keys[1])
    for i in range(len(signed)):
        for mask in (0x01, 0x20, 0x80):
            tampered = signed[:i] + bytes([signed[i] ^ mask]) + signed[i + 1 :]
            assert refused_or_same(tampered, signed, keys[1]), (i, mask)


@fuzz(2000)
@given(st.data())
def test_any_single_byte_change_in_the_file_is_detected(
    signed: bytes, keys: tuple[Any, Ed25519PublicKey], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(signed) - 1), label="position")
    new = data.draw(st.integers(0, 255).filter(lambda b: b != signed[i]), label="byte")
    # DSSE verifiers accept URL-safe base64 too: the payload's only '+' (or '/') written as '-'
    # (or '_') is the same envelope in the other alphabet, not an edit
    assume((signed[i], new) not in {(ord("+"), ord("-")), (ord("/"), ord("_"))})
    assert refused_or_same(signed[:i] + bytes([new]) + signed[i + 1 :], signed, keys[1])


@fuzz(2000)
@given(st.data())
def test_any_single_byte_change_in_the_payload_is_detected(
    signed: bytes, keys: tuple[Any, Ed25519PublicKey], data: st.DataObject
) -> None:
    payload = base64.b64decode(json.loads(signed)["payload"])
    i = data.draw(st.integers(0, len(payload) - 1), label="position")
    new = data.draw(st.integers(0, 255).filter(lambda b: b != payload[i]), label="byte")
    tampered = reencode(signed, payload[:i] + bytes([new]) + payload[i + 1 :])
    assert detected(tampered, keys[1])
    with pytest.raises((BadInputError, VerificationFailed)):
        signing.read_payload(tampered, keys[1])


def test_every_payload_byte_is_covered(signed: bytes, keys: tuple[Any, Ed25519PublicKey]) -> None:
    payload = base64.b64decode(json.loads(signed)["payload"])
    for i in range(len(payload)):
        tampered = payload[:i] + bytes([payload[i] ^ 0x01]) + payload[i + 1 :]
        assert detected(reencode(signed, tampered), keys[1]), i


@pytest.mark.parametrize(
    "edited",
    [
        b'{"a":1 }',  # whitespace
        b'{"b":1,"a":2}',  # key order
        b'{"a":1.0}',  # number form
        b'{"a":"\\u0041"}',  # needless escape
        b'{"a":1,"a":1}',  # duplicate key
        b'{"a":-0}',
    ],
)
def test_non_canonical_payload_is_caught_without_a_key(edited: bytes) -> None:
    env = signing.open_envelope(unsigned_envelope(edited))
    with pytest.raises(BadInputError, match=r"not in canonical form|duplicate key"):
        signing.load_payload(env)


def test_reformatted_envelope_verifies(signed: bytes, keys: tuple[Any, Ed25519PublicKey]) -> None:
    # DSSE signs the PAE of the payload, not the envelope's JSON: any formatting of it reads
    raw = json.loads(signed)
    for data in (
        json.dumps(raw, indent=1).encode(),
        signed + b"\n",
        json.dumps(dict(reversed(raw.items())), separators=(", ", ": ")).encode(),
    ):
        report, check = signing.read_payload(data, keys[1])
        assert report == REPORT and check.valid is True


def test_base64_must_be_canonical(signed: bytes, keys: tuple[Any, Ed25519PublicKey]) -> None:
    env = json.loads(signed)
    sig = env["signatures"][0]["sig"]
    assert sig.endswith("==")  # 64 bytes: the last character carries 4 unused bits
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    sibling = alphabet[alphabet.index(sig[-3]) ^ 0x01]
    env["signatures"][0]["sig"] = sig[:-3] + sibling + "=="
    assert base64.b64decode(env["signatures"][0]["sig"]) == base64.b64decode(sig)
    with pytest.raises(BadInputError, match=r"sig is not canonical base64 \(standard or URL"):
        signing.open_envelope(signing.canonical_bytes(env))


def test_url_safe_base64_is_accepted_as_dsse_requires(
    signed: bytes, keys: tuple[Any, Ed25519PublicKey]
) -> None:
    env = json.loads(signed)
    payload = base64.b64decode(env["payload"])
    sig = base64.b64decode(env["signatures"][0]["sig"])
    env["payload"] = base64.urlsafe_b64encode(payload).decode()
    for raw in (sig, *(bytes([i]) + sig[1:] for i in range(256))):
        if set(base64.urlsafe_b64encode(raw).decode()) & set("-_"):
            break  # a signature whose URL-safe form differs from the standard one
    assert set(base64.urlsafe_b64encode(raw).decode()) & set("-_")
    env["signatures"][0]["sig"] = base64.urlsafe_b64encode(raw).decode()
    opened = signing.open_envelope(signing.canonical_bytes(env))
    assert opened.payload == payload and opened.signatures[0].sig == raw
    if raw == sig:
        assert signing.verify_envelope(opened, keys[1]).valid is True


@pytest.mark.parametrize(
    "value",
    [
        "-+8=",  # the two alphabets mixed
        "_/8=",
        "-_9=",  # URL-safe with unused bits set (canonical: "-_8=")
        "-_8",  # padding dropped
        "-_8=\n",
    ],
)
def test_url_safe_base64_must_be_canonical_too(value: str) -> None:
    assert base64.urlsafe_b64decode("-_8=") == b"\xfb\xff"
    env = json.loads(unsigned_envelope(b"{}"))
    env["payload"] = value
    with pytest.raises(BadInputError, match="payload is not canonical base64"):
        signing.open_envelope(signing.canonical_bytes(env))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"extra": 1}, "not a kit report envelope"),
        ({"payload": 5}, "payload is not canonical base64"),
        ({"payload": "e30"}, "payload is not canonical base64"),
        ({"payload": "e30=\n"}, "payload is not canonical base64"),
        ({"payload": "ééé="}, "payload is not canonical base64"),
        ({"signatures": {}}, "signatures must be a list"),
        ({"signatures": [1]}, "a signature must have sig"),
        ({"signatures": [{"keyid": "x"}]}, "a signature must have sig"),
        ({"signatures": [{"sig": "AAAA", "cert": ""}]}, "a signature must have sig"),
        ({"signatures": [{"keyid": "a b", "sig": "AAAA"}]}, "keyid 'a b' is not"),
        ({"signatures": [{"keyid": 5, "sig": "AAAA"}]}, "keyid 5 is not"),
        ({"signatures": [{"keyid": "sha256:" + "0" * 64, "sig": ""}]}, "sig is 0 bytes"),
        ({"signatures": [{"sig": "A" * 86 + "=="}] * 17}, "at most 16 signatures"),
    ],
)
def test_envelope_shape_is_strict(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        signing.open_envelope(unsigned_envelope(b"{}", fields))


# ---------------------------------------------------------------------------------------------
# garbage from strangers


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"[" * 100_000, "nested deeper than 64 levels"),
        (b'{"a":' * 100_000, "nested deeper than 64 levels"),
        (b"[" * 65 + b"]" * 65, "nested deeper"),
        (b"", "not valid JSON"),
        (b"\xef\xbb\xbf{}", "not valid JSON"),
        (b"\xff\xfe{\x00}\x00", "not UTF-8"),
        (b'{"a": NaN}', "NaN is not JSON"),
        (b"[" + b"9" * 5000 + b"]", "more than 400 digits"),
        (b'"' + b'\\"' * 100_000, "not valid JSON"),
        (b"null", "not a kit report envelope"),
    ],
)
def test_hostile_files_fail_cleanly(data: bytes, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        signing.open_envelope(data)


def test_brackets_inside_strings_do_not_count() -> None:
    payload = signing.canonical_bytes({"text": "[" * 1000 + '\\"{' * 100})
    env = signing.open_envelope(unsigned_envelope(payload))
    assert signing.load_payload(env) == {"text": "[" * 1000 + '\\"{' * 100}


def test_deep_payload_is_refused_before_parsing() -> None:
    env = signing.open_envelope(
        unsigned_envelope(b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    )
    with pytest.raises(BadInputError, match="the report payload is nested deeper than 64"):
        signing.load_payload(env)
    ok = signing.open_envelope(unsigned_envelope(b'{"a":[[1]]}'))
    with pytest.raises(BadInputError, match="deeper than 2"):
        signing.load_payload(ok, max_depth=2)


def test_size_limit_comes_first(tmp_path: Path) -> None:
    huge = b" " * (signing.MAX_BYTES + 1)
    with pytest.raises(BadInputError, match=r"the report file is 33554433 bytes, over the"):
        signing.open_envelope(huge)
    with pytest.raises(BadInputError, match="over the 10-byte limit"):
        signing.open_envelope(signing.unsigned_report({}), max_bytes=10)
    sparse = tmp_path / "huge.json"
    with open(sparse, "wb") as f:
        f.truncate(1 << 34)  # 16 GiB, sparse: never read in full
    with pytest.raises(BadInputError, match=r"huge\.json: the report file is over"):
        signing.open_envelope_file(sparse)
    small = tmp_path / "r.json"
    small.write_bytes(b"{}")
    with pytest.raises(BadInputError, match=r"r\.json: the report file is not a kit report"):
        signing.open_envelope_file(small)
    with pytest.raises(BadInputError, match=r"the report file would be \d+ bytes"):
        signing.unsigned_report({"x": "a" * signing.MAX_BYTES})


def test_truncated_files(signed: bytes, keys: tuple[Any, Ed25519PublicKey]) -> None:
    for n in range(len(signed)):
        with pytest.raises(BadInputError):
            signing.open_envelope(signed[:n])
        with pytest.raises(BadInputError):
            signing.open_envelope(signed[n + 1 :])


@fuzz(2000)
@given(data=st.binary(max_size=2000))
def test_random_bytes_fail_cleanly(data: bytes) -> None:
    with pytest.raises(BadInputError):
        signing.open_envelope(data)


@fuzz(500)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=40,
    )
)
def test_random_json_fails_cleanly(value: Any) -> None:
    data = json.dumps(value).encode()
    with pytest.raises(BadInputError):
        signing.open_envelope(data)
    try:  # as a payload: refused (not an object, not canonical), or read back exactly
        payload = signing.load_payload(signing.open_envelope(unsigned_envelope(data)))
    except BadInputError:
        return
    assert signing.canonical_bytes(payload) == data


def json_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(json_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(json_depth, value), default=0)
    return 0


tricky_text = st.text(alphabet='[]{}"\\/,:ab\n\u2028\U0001f600', max_size=8)


@fuzz(600)
@given(
    value=st.recursive(
        st.none() | st.integers(-9, 9) | tricky_text,
        lambda c: st.lists(c, max_size=3) | st.dictionaries(tricky_text, c, max_size=3),
        max_leaves=25,
    ),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
)
def test_depth_scan_agrees_with_the_parser(
    value: Any, ascii_only: bool, indent: int | None
) -> None:
    """The bracket scan sees exactly the nesting json.loads would build, whatever the strings."""
    data = json.dumps(value, ensure_ascii=ascii_only, indent=indent).encode()
    depth = json_depth(value)
    env = signing.open_envelope(unsigned_envelope(data))
    if depth:
        with pytest.raises(BadInputError, match=f"nested deeper than {depth - 1} levels"):
            signing.load_payload(env, max_depth=depth - 1)
    try:
        signing.load_payload(env, max_depth=depth)
    except BadInputError as e:  # refused for what it is, never for its depth
        assert "deeper" not in e.message


@fuzz(2000)
@given(
    payload=st.binary(max_size=300) | st.text('[]{}"\\,:0123456789.eE+-tnulfrase ').map(str.encode)
)
def test_random_payloads_fail_cleanly(payload: bytes) -> None:
    env = signing.open_envelope(unsigned_envelope(payload))
    try:
        report = signing.load_payload(env)
    except BadInputError:
        return
    assert signing.canonical_bytes(report) == payload


@fuzz(2000)
@given(st.data())
def test_random_edits_of_a_signed_file(
    signed: bytes, keys: tuple[Any, Ed25519PublicKey], data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(signed)), label="start")
    end = data.draw(st.integers(start, min(len(signed), start + 8)), label="end")
    insert = data.draw(st.binary(max_size=8), label="insert")
    tampered = signed[:start] + insert + signed[end:]
    if tampered != signed:
        assert refused_or_same(tampered, signed, keys[1])


# ---------------------------------------------------------------------------------------------
# in-toto

"""Write tests/fixtures/reports/ from tests/factories.py: `make fixtures`, after a change to the
report or recipe models. cpu-tiny-a.signed.json is A signed with a new key whose private half is
thrown away (signer.pub keeps the public half), made again only when A's payload changed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from factories import FIXTURE_REPORTS, build_report

from kit.report.files import encode_report

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "tests" / "fixtures" / "reports"
SIGNED, PUBLIC = REPORTS / "cpu-tiny-a.signed.json", REPORTS / "signer.pub"


def write(path: Path, data: bytes) -> None:
    if path.exists() and path.read_bytes() == data:
        return
    path.write_bytes(data)
    print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)


def main() -> None:
    REPORTS.mkdir(parents=True, exist_ok=True)
    for name, kwargs in FIXTURE_REPORTS.items():
        write(REPORTS / name, encode_report(build_report(ROOT, **kwargs)))
    unsigned = (REPORTS / "cpu-tiny-a.json").read_bytes()
    if SIGNED.exists() and PUBLIC.exists():
        if json.loads(SIGNED.read_bytes())["payload"] == json.loads(unsigned)["payload"]:
            return  # signed, by the key signer.pub holds, over A as it is now
    key = Ed25519PrivateKey.generate()
    write(SIGNED, encode_report(build_report(ROOT), key))
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    write(PUBLIC, public)


if __name__ == "__main__":
    main()

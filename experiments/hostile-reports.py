"""Hostile report files against kit's reader and verifier: worst time and peak memory per class.

Generates the hostile classes of issue 11 (FIFOs, a 32 MB ``[{},...]``, a 3 M-note report signed
by an attacker, deep nesting, huge integers, duplicate keys, truncations and random byte
mutations of a real signed report, ...) in a temporary directory and runs each file through
``verify_report`` and ``read_report`` (with the key that signed it) in worker processes held to
RLIMIT_AS 512 MB, with a 5 s alarm on each call (the time shown is the slower call). A file is
handled when both calls give a result or a clean ``KitError`` within the limits; anything else
(a traceback, MemoryError, the alarm, a worker killed) is a failure, and the exit status is 1.

Peak RSS is per worker process (ru_maxrss, so it only grows): for a class run in batches it is
the worst file of a batch plus the interpreter with kit imported (the baseline, printed last).
For files of 1 MiB and more, a second, untimed pass under tracemalloc gives the peak of Python
memory while each call runs, as a multiple of the file's size ("x size"): kit's bound is 4 times
the size plus an allowance of 8 MiB (kit.signing.canonical.AMPLIFICATION_ALLOWANCE).

    .venv/bin/python experiments/hostile-reports.py                  # the full corpus (minutes)
    .venv/bin/python experiments/hostile-reports.py --mutations 50   # a quick smoke run
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "reports"
MEMORY_LIMIT = 512 << 20
TIME_LIMIT_S = 5
BATCH = 250  # files per worker process
AMPLIFIED = 1 << 20  # files at least this large get the tracemalloc pass
MEDIA_TYPE = "application/vnd.kit.report.v1+json"


# ---- the worker: one process, a list of files, one JSON line per file -------------------------


def worker(key_file: str, paths: list[str]) -> None:
    import signal

    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    from kit.errors import KitError
    from kit.report.files import read_report
    from kit.report.verify import verify_report

    def alarm(signum: int, frame: object) -> None:
        raise TimeoutError(f"over {TIME_LIMIT_S} s")

    signal.signal(signal.SIGALRM, alarm)
    key = load_pem_public_key(Path(key_file).read_bytes())
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"baseline_mb": base_kb / 1024}), flush=True)
    for path in paths:
        outcome, worst = "accepted", 0.0
        for step in (verify_report, read_report):  # each held to the limit on its own
            start = time.perf_counter()
            signal.alarm(TIME_LIMIT_S)
            try:
                step(Path(path), key)  # type: ignore[operator]
            except KitError:
                outcome = "refused" if outcome == "accepted" else outcome
            except TimeoutError:
                outcome = "TIMEOUT"
            except MemoryError:
                outcome = "MEMORY"
            except Exception as e:  # the failure this bench looks for
                outcome = f"CRASH {type(e).__name__}: {str(e)[:120]}"
            finally:
                signal.alarm(0)
            worst = max(worst, time.perf_counter() - start)
        result = row(path, outcome, worst)
        if os.path.isfile(path) and (size := os.path.getsize(path)) >= AMPLIFIED:
            result["x_size"] = traced_peak(path, key, (verify_report, read_report)) / size
        print(json.dumps(result), flush=True)


def traced_peak(path: str, key: object, steps: tuple[object, ...]) -> int:
    """The most Python memory (tracemalloc) that any of ``steps`` takes on ``path``, in bytes."""
    import tracemalloc

    from kit.errors import KitError

    peak = 0
    for step in steps:
        tracemalloc.start()
        try:
            step(Path(path), key)  # type: ignore[operator]
        except KitError:
            pass
        finally:
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    return peak


def key_loader(paths: list[str]) -> None:
    """The FIFO-as-key class: ``load_public_key`` on each path."""
    import signal

    from kit.errors import KitError
    from kit.signing import load_public_key

    def alarm(signum: int, frame: object) -> None:
        raise TimeoutError(f"over {TIME_LIMIT_S} s")

    signal.signal(signal.SIGALRM, alarm)
    print(json.dumps({"baseline_mb": 0}), flush=True)
    for path in paths:
        start = time.perf_counter()
        signal.alarm(TIME_LIMIT_S)
        try:
            load_public_key(Path(path))
            outcome = "accepted"
        except KitError:
            outcome = "refused"
        except TimeoutError:
            outcome = "TIMEOUT"
        finally:
            signal.alarm(0)
        print(json.dumps(row(path, outcome, time.perf_counter() - start)), flush=True)


def row(path: str, outcome: str, seconds: float) -> dict[str, object]:
    """One file's outcome, with the worker's peak RSS so far (it only grows)."""
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"path": path, "outcome": outcome, "s": seconds, "rss_mb": rss_mb}


# ---- the corpus --------------------------------------------------------------------------------


def envelope(payload: bytes, signature: dict[str, str] | None = None) -> bytes:
    sigs = [signature] if signature else []
    env = {"payload": base64.b64encode(payload).decode(), "payloadType": MEDIA_TYPE}
    env["signatures"] = sigs  # type: ignore[assignment]
    return json.dumps(env, sort_keys=True, separators=(",", ":")).encode()


def signed(payload: bytes, private_key: object) -> bytes:
    from kit.signing import fingerprint, pae

    sig = private_key.sign(pae(MEDIA_TYPE, payload))  # type: ignore[attr-defined]
    keyid = fingerprint(private_key.public_key())  # type: ignore[attr-defined]
    return envelope(payload, {"keyid": keyid, "sig": base64.b64encode(sig).decode()})


def mutate(data: bytes, rng: random.Random) -> bytes:
    """1-8 random byte sets, inserts and deletes; never the input itself (a set can write the
    byte that was there: such a no-op mutant is drawn again)."""
    while (mutant := _mutate_once(data, rng)) == data:
        pass
    return mutant


def _mutate_once(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(out))
        op = rng.random()
        if op < 0.6:
            out[at] = rng.randrange(256)
        elif op < 0.8:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:
            del out[at : at + rng.randint(1, 256)]
    return bytes(out)


def build(out: Path, mutations: int, seed: int) -> dict[str, tuple[str, list[Path]]]:
    """Each class: (the key file to verify with, its files)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from kit.signing import canonical_bytes, load_payload, open_envelope

    rng = random.Random(seed)
    attacker = Ed25519PrivateKey.generate()
    attacker_pub = out / "attacker.pub"
    attacker_pub.write_bytes(
        attacker.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    signer_pub = str(FIXTURES / "signer.pub")
    real = (FIXTURES / "cpu-tiny-a.signed.json").read_bytes()
    report = load_payload(open_envelope(real))
    classes: dict[str, tuple[str, list[Path]]] = {}

    def add(name: str, files: dict[str, bytes], key: str = str(attacker_pub)) -> None:
        paths = []
        for fname, data in files.items():
            (path := out / f"{name}.{fname}.json").write_bytes(data)
            paths.append(path)
        classes[name] = (key, paths)

    def with_report(**changes: object) -> bytes:
        return canonical_bytes({**report, **changes})

    fifo = out / "fifo.json"
    os.mkfifo(fifo)
    classes["fifo (report, compare B)"] = (signer_pub, [fifo])
    classes["fifo (as --key)"] = ("", [fifo])
    loop = out / "loop.json"
    loop.symlink_to(loop)
    classes["special files"] = (signer_pub, [loop, Path("/dev/zero"), out])
    sparse = out / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(64 << 20)
    classes["oversize (sparse 64 MB)"] = (signer_pub, [sparse])
    add("list-32mb", {"dicts": b"[" + b"{}," * ((32 << 20) // 3 - 1) + b"{}]"})
    add("notes-3m", {"signed": signed(with_report(notes=["ab"] * 3_000_000), attacker)})
    ten = "abcdefghij"  # long enough to pass the memory estimate: the value counts stop these
    add("notes-31mb", {"signed": signed(with_report(notes=[ten] * 1_800_000), attacker)})
    add("notes-280k", {"signed": signed(with_report(notes=[ten] * 280_000), attacker)})
    records = report["bench"]["records"]
    many = [records[i % len(records)] for i in range(2_000)]  # a long real run: 9,000 values
    bench = {**report["bench"], "records": many}
    add("long run (valid, 4 MB)", {"signed": signed(with_report(bench=bench), attacker)})
    add(
        "deep nesting",
        {
            "envelope": b"[" * 100_000 + b"]" * 100_000,
            "payload": signed(b'{"a":' * 100_000 + b"1" + b"}" * 100_000, attacker),
            "payload-64": signed(b"[" * 64 + b"]" * 64, attacker),
        },
    )
    add(
        "huge integers",
        {
            "envelope": b'{"payload":' + b"9" * 100_000 + b"}",
            "payload": signed(b'{"schema_version":' + b"9" * 5_000 + b"}", attacker),
            "float": signed(b'{"schema_version":1e999999}', attacker),
        },
    )
    payload = open_envelope(real).payload
    add(
        "duplicate keys",
        {
            "envelope": real.replace(b'{"payload":', b'{"payload":"e30=","payload":', 1),
            "payload": signed(
                payload.replace(b'{"bench":', b'{"bench":null,"bench":', 1), attacker
            ),
        },
    )
    add("truncations", {str(i): real[: rng.randrange(len(real))] for i in range(300)}, signer_pub)
    add(
        "payload truncations",
        {str(i): signed(payload[: rng.randrange(len(payload))], attacker) for i in range(100)},
    )
    add("byte mutations", {str(i): mutate(real, rng) for i in range(mutations)}, signer_pub)
    return classes


# ---- the driver --------------------------------------------------------------------------------


def set_limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_batch(key: str, paths: list[Path]) -> tuple[list[dict[str, object]], str]:
    """Run one worker on ``paths``; its rows, and the tail of its stderr if it failed."""
    mode = ["--key-worker"] if not key else ["--worker", key]
    cmd = [sys.executable, __file__, *mode, *map(str, paths)]
    proc = subprocess.Popen(  # this script, with paths it made
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=set_limits, cwd=ROOT
    )
    try:
        stdout, stderr = proc.communicate(timeout=TIME_LIMIT_S * len(paths) + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    rows = [json.loads(line) for line in stdout.decode().splitlines() if line.startswith("{")]
    tail = stderr.decode()[-300:] if proc.returncode else ""
    return rows, tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutations", type=int, default=3000, help="byte-mutated files")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    failures = 0
    worst_s, worst_mb, worst_x, baseline = 0.0, 0.0, 0.0, 0.0
    with tempfile.TemporaryDirectory(prefix="kit-hostile-") as tmp:
        print("building the corpus ...", file=sys.stderr)
        classes = build(Path(tmp), args.mutations, args.seed)
        print(
            f"{'class':28} {'files':>6} {'accepted':>8} {'refused':>8} {'failed':>6} "
            f"{'worst s':>8} {'peak MB':>8} {'x size':>7}"
        )
        for name, (key, paths) in classes.items():
            counts = {"accepted": 0, "refused": 0, "failed": 0}
            class_s, class_mb, class_x = 0.0, 0.0, 0.0
            for i in range(0, len(paths), BATCH):
                batch = paths[i : i + BATCH]
                rows, tail = run_batch(key, batch)
                seen = 0
                for result in rows:
                    if "baseline_mb" in result:
                        baseline = max(baseline, float(result["baseline_mb"]))  # type: ignore[arg-type]
                        continue
                    seen += 1
                    took, rss_mb = float(result["s"]), float(result["rss_mb"])  # type: ignore[arg-type]
                    class_s, class_mb = max(class_s, took), max(class_mb, rss_mb)
                    class_x = max(class_x, float(result.get("x_size", 0.0)))  # type: ignore[arg-type]
                    outcome = str(result["outcome"])
                    if outcome in ("accepted", "refused") and took <= TIME_LIMIT_S:
                        counts[outcome] += 1
                    else:
                        counts["failed"] += 1
                        print(f"  FAILED {result['path']}: {outcome} ({took:.2f} s)")
                if seen < len(batch):  # the worker died: memory, a hang, a signal
                    counts["failed"] += len(batch) - seen
                    print(f"  FAILED {len(batch) - seen} file(s): the worker died: {tail!r}")
            if class_mb > MEMORY_LIMIT >> 20:
                counts["failed"] += 1
            failures += counts["failed"]
            worst_s, worst_mb = max(worst_s, class_s), max(worst_mb, class_mb)
            worst_x = max(worst_x, class_x)
            shown_x = f"{class_x:7.2f}" if class_x else f"{'-':>7}"
            print(
                f"{name:28} {len(paths):6} {counts['accepted']:8} {counts['refused']:8} "
                f"{counts['failed']:6} {class_s:8.2f} {class_mb:8.0f} {shown_x}"
            )
    print(
        f"{'overall':28} {'':6} {'':8} {'':8} {failures:6} {worst_s:8.2f} {worst_mb:8.0f} "
        f"{worst_x:7.2f}"
    )
    print(
        f"limits: {TIME_LIMIT_S} s a file, RLIMIT_AS {MEMORY_LIMIT >> 20} MB a worker; "
        f"peak RSS includes the worker's own {baseline:.0f} MB with kit imported"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        sys.path.insert(0, str(ROOT))
        worker(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) > 1 and sys.argv[1] == "--key-worker":
        sys.path.insert(0, str(ROOT))
        key_loader(sys.argv[2:])
    else:
        sys.exit(main())

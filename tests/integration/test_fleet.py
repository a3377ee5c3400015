"""kit sweep over a real local Ray cluster: two nodes (``ray start --head`` and ``ray start
--address``) on this machine, each offering its own rig class and signing with its own key.
Two cells of the CPU recipe, one per node by resource: both reports come back and verify,
each signed by its node's key; a second run skips them. A job stopped mid-run is a failed
cell with its log, and running the sweep again resumes it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clirun import small

from kit.signing import generate_keypair

pytestmark = [pytest.mark.integration, pytest.mark.fleet]
ray_jobs = pytest.importorskip("ray.job_submission", reason="kit[fleet]")

SMALL = small()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self, address: str, keys: Path, fingerprints: dict[str, str]) -> None:
        self.address, self.keys, self.fingerprints = address, keys, fingerprints


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    keys = tmp_path_factory.mktemp("rig-keys")
    private = tmp_path_factory.mktemp("rig-private")
    pairs = {rig: generate_keypair(private, rig) for rig in ("cpu-a", "cpu-b")}
    for pair in pairs.values():
        (keys / pair.public_key.name).write_bytes(pair.public_key.read_bytes())
    ray = str(Path(sys.executable).with_name("ray"))
    # the nodes run from kit's environment, as docs/fleet.md says: their jobs' `python` is it
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
           "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}  # fmt: skip
    gcs, dashboard = _free_port(), _free_port()
    starts = [
        ([ray, "start", "--head", f"--port={gcs}", f"--dashboard-port={dashboard}",
          "--include-dashboard=true", "--num-cpus=1", '--resources={"rig:cpu-a": 1}',
          "--disable-usage-stats"], "cpu-a"),
        ([ray, "start", f"--address=127.0.0.1:{gcs}", "--num-cpus=1",
          '--resources={"rig:cpu-b": 1}', f"--dashboard-agent-listen-port={_free_port()}",
          "--disable-usage-stats"], "cpu-b"),
    ]  # fmt: skip
    try:
        for argv, rig in starts:
            # the node's own signing key: what its jobs (kit reproduce) sign with
            node_env = {**env, "KIT_SIGNING_KEY": str(pairs[rig].private_key)}
            proc = subprocess.run(argv, env=node_env, capture_output=True, text=True, timeout=180)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        yield Cluster(
            f"http://127.0.0.1:{dashboard}", keys, {r: p.fingerprint for r, p in pairs.items()}
        )
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=120)


def sweep(cluster: Cluster, out: Path, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "kit.cli", "sweep", "recipes/cpu-tiny.yaml",
            *[a for s in SMALL for a in ("--set", s)], *args, "--ray", cluster.address,
            "--keys", str(cluster.keys), "-o", str(out)]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def cell(out: Path, name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / name / "cell.json").read_text())
    return data


def verified(cluster: Cluster, out: Path, rig: str) -> None:
    """The rig's cell is done, signed by the node that ran it, and its report verifies."""
    result = cell(out, f"cpu-tiny_{rig}")
    assert result["status"] == "done", result
    assert result["signed_by"] == cluster.fingerprints[rig]  # the node that ran it
    pub = cluster.keys / f"{rig}.pub"
    checked = subprocess.run(
        [sys.executable, "-m", "kit.cli", "report", "verify", "--key", str(pub),
         str(out / f"cpu-tiny_{rig}" / "report.json")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


def stop_when_running(cluster: Cluster, name: str) -> None:
    """Stop the Ray job of cell ``name`` once it runs kit (its log says so)."""
    jobs = ray_jobs.JobSubmissionClient(cluster.address)
    deadline = time.monotonic() + 600
    job_id = None
    while job_id is None and time.monotonic() < deadline:
        time.sleep(2)
        for job in jobs.list_jobs():
            if (
                (job.metadata or {}).get("kit_cell") == name
                and str(job.status).endswith("RUNNING")
                and not job.status.is_terminal()
            ):
                if "kit fleet: cell" in jobs.get_job_logs(job.submission_id):
                    job_id = job.submission_id
    assert job_id is not None, f"the job of {name} never ran"
    time.sleep(5)
    jobs.stop_job(job_id)


def test_cells_come_back_signed_by_their_rig_and_a_stopped_one_runs_again(
    cluster: Cluster, tmp_path: Path
) -> None:
    """One sweep, one cell per node: cpu-b's job is stopped mid-run, cpu-a's comes back. The
    same sweep again runs only the failed cell; a third runs nothing. (Three cells run in all,
    one of them stopped: each cell is a whole `kit reproduce`.)"""
    both = ("--rig", "cpu-a", "--rig", "cpu-b")
    proc = sweep(cluster, tmp_path, *both)
    stop_when_running(cluster, "cpu-tiny_cpu-b")
    stdout, stderr = proc.communicate(timeout=1800)
    assert proc.returncode == 1, stdout + stderr
    verified(cluster, tmp_path, "cpu-a")
    stopped = cell(tmp_path, "cpu-tiny_cpu-b")
    assert stopped["status"] == "failed" and "STOPPED" in str(stopped["error"]), stopped
    assert (
        "kit fleet: cell cpu-tiny_cpu-b" in (tmp_path / "cpu-tiny_cpu-b" / "cell.log").read_text()
    )
    assert not (tmp_path / "cpu-tiny_cpu-b" / "report.json").exists()

    # the same sweep again: cpu-a's report is there and verifies, the failed cell runs anew
    again = sweep(cluster, tmp_path, *both)
    stdout, stderr = again.communicate(timeout=1800)
    assert again.returncode == 0, stdout + stderr
    status = {line.split()[1].rstrip(":"): line.split()[0] for line in stdout.splitlines()[:2]}
    assert status == {"cpu-tiny_cpu-a": "skipped", "cpu-tiny_cpu-b": "done"}, stdout
    verified(cluster, tmp_path, "cpu-b")

    # and again: both reports are there and verify, so nothing runs
    third = sweep(cluster, tmp_path, *both)
    stdout, stderr = third.communicate(timeout=300)
    assert third.returncode == 0, stdout + stderr
    assert [line.split()[0] for line in stdout.splitlines()[:2]] == ["skipped", "skipped"]
    table = (tmp_path / "BENCHMARKS.md").read_text()  # both rigs' reports, verified
    assert "cpu-a (" in table and "cpu-b (" in table, table
    assert "submitted" not in stderr

"""kit's long-running commands stop cleanly on SIGTERM and on SIGINT, also when started from a
script in the background (a shell without job control starts those with SIGINT ignored)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

CHILD = """
import time
from kit.serve import install_sigterm_handler
install_sigterm_handler()
try:
    print("ready", flush=True)  # inside the try: the signal may come at once
    time.sleep(60)
except KeyboardInterrupt:
    print("unwound", flush=True)
"""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_unwinds_when_sigint_was_ignored_at_start(sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    assert out.strip() == "unwound"
    assert proc.returncode == 0


def test_sigterm_reads_as_a_time_limit_not_a_user() -> None:
    """A report ended by SIGTERM (a `timeout` around kit, a service manager) says so, and the
    CLI exits 143 as a shell reports such a process; Ctrl-C stays 'interrupted', 130."""
    from kit.console import report_error
    from kit.errors import Terminated
    from kit.report.assemble import failure_text

    assert failure_text(Terminated()) == (
        "stopped by SIGTERM (a time limit, a service manager or kill)"
    )
    assert failure_text(KeyboardInterrupt()) == "interrupted by the user"
    assert report_error(Terminated()) == 143
    assert report_error(KeyboardInterrupt()) == 130

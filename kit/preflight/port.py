"""The port a server is to listen on (``--port``): free, or in use and by whom (the processes
holding it, from ``/proc``), before any build rather than at the server's start."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from kit.preflight.check import Check

HOST = "127.0.0.1"  # where kit's servers listen (kit.serve.NativeRuntime, the compose port)


def _inodes(port: int, proc: Path) -> set[str]:
    """The socket inodes bound to local ``port`` (``/proc/net/tcp`` and ``tcp6``)."""
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                if fields[9] != "0":
                    found.add(fields[9])
    return found


def holders(port: int, proc: Path = Path("/proc")) -> list[tuple[int, str]]:
    """(pid, command name) of each process this user can see holding a socket on ``port``."""
    inodes = {f"socket:[{inode}]" for inode in _inodes(port, proc)}
    if not inodes:
        return []
    out: list[tuple[int, str]] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            held = any(os.readlink(fd) in inodes for fd in (entry / "fd").iterdir())
            if held:
                out.append((int(entry.name), (entry / "comm").read_text().strip()))
        except OSError:  # another user's, or gone
            continue
    return sorted(out)


def port_check(port: int, host: str = HOST) -> Check:
    """Whether a server could listen on ``host:port`` now (a bind, then closed again)."""
    where = f"{host}:{port}"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            failure = exc
        else:
            return Check("port", True, f"{where} is free")
    if failure.errno == errno.EACCES:
        return Check(
            "port",
            False,
            f"{where}: this user may not listen on port {port}",
            "pick a port above 1023 with --port, or leave --port out for a free one",
        )
    if failure.errno != errno.EADDRINUSE:
        return Check(
            "port",
            False,
            f"{where}: cannot listen ({failure.strerror})",
            "pick another port with --port, or leave --port out for a free one",
        )
    found = holders(port)
    who = (
        ", ".join(f"pid {pid} ({name})" for pid, name in found)
        if found
        else "a process this user cannot see (another user's, or a container's)"
    )
    stop = f"stop what holds it (kill {' '.join(str(pid) for pid, _ in found)}), " if found else ""
    return Check(
        "port",
        False,
        f"{where} is in use, held by {who}",
        f"{stop}pick another port with --port, or leave --port out for a free one",
    )

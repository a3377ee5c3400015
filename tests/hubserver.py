"""A local stand-in for the Hugging Face hub (this machine cannot reach it): the part of the
hub's HTTP API that huggingface_hub's real client uses to resolve a revision
(``HfApi.model_info``) and to download a snapshot (``snapshot_download``: the file tree, then
each file), serving files kit made. Point the client at it with ``HF_ENDPOINT`` (kit passes
it through at call time).

    with serving_hub({"kit-test/tiny": model_dir}) as hub:
        hub.url, hub.sha["kit-test/tiny"]      # the endpoint, the commit of main
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

# cpu-tiny with both models from the stand-in, their revisions left open (as the seed's are)
HUB_TINY_RECIPE = """\
extends: cpu-tiny.yaml
name: hub-tiny
model:
  source: hub
  repo_id: kit-test/tiny
  revision: null
speculative:
  method: dflash
  num_speculative_tokens: 7
  draft:
    source: hub
    repo_id: kit-test/tiny-draft
    revision: null
"""

_TREE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/?]+)(?:/[^?]*)?(?:\?.*)?$")
_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/?]+))?(?:\?.*)?$")
_FILE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>[^?]+)(?:\?.*)?$")


@dataclass
class Hub:
    url: str
    sha: dict[str, str]
    requests: list[str] = field(default_factory=list)


def _blob(data: bytes) -> str:
    """The git blob id of a file, as the hub lists it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _commit(files: dict[str, bytes]) -> str:
    digest = hashlib.sha1()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha1(files[name]).digest())
    return digest.hexdigest()


@contextmanager
def serving_hub(repos: dict[str, Path]) -> Iterator[Hub]:
    """Serve each repository (its files: every file under the directory) at one commit, which
    is also its ``main``."""
    content = {
        repo: {
            str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
        }
        for repo, root in repos.items()
    }
    shas = {repo: _commit(files) for repo, files in content.items()}
    hub = Hub(url="", sha=shas)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _missing(self, what: str) -> None:
            body = json.dumps({"error": what}).encode()
            self._send(
                404, body, {"Content-Type": "application/json", "X-Error-Code": "RepoNotFound"}
            )

        def _revision(self, repo: str, rev: str | None) -> str | None:
            if repo not in shas:
                return None
            return shas[repo] if rev in (None, "main", shas[repo]) else None

        def do_GET(self) -> None:
            path = unquote(self.path)
            hub.requests.append(f"{self.command} {path}")
            if m := _TREE.match(path):
                repo, sha = m["repo"], self._revision(m["repo"], m["rev"])
                if sha is None:
                    self._missing(f"{repo}@{m['rev']}")
                    return
                tree = [
                    {"type": "file", "path": name, "size": len(data), "oid": _blob(data)}
                    for name, data in content[repo].items()
                ]
                self._send(200, json.dumps(tree).encode(), {"Content-Type": "application/json"})
                return
            if m := _INFO.match(path):
                repo, sha = m["repo"], self._revision(m["repo"], m["rev"])
                if sha is None:
                    self._missing(f"{repo}@{m['rev']}")
                    return
                info = {
                    "id": repo,
                    "modelId": repo,
                    "sha": sha,
                    "private": False,
                    "disabled": False,
                    "gated": False,
                    "tags": [],
                    "downloads": 0,
                    "likes": 0,
                    "lastModified": "2026-12-01T00:00:00.000Z",
                    # with the sizes and blob ids huggingface_hub asks for (files_metadata)
                    "siblings": [
                        {"rfilename": name, "size": len(data), "blobId": _blob(data)}
                        for name, data in content[repo].items()
                    ],
                }
                self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"})
                return
            if m := _FILE.match(path):
                repo, sha = m["repo"], self._revision(m["repo"], m["rev"])
                data = content.get(repo, {}).get(m["path"]) if sha else None
                if data is None:
                    self._missing(f"{repo}/{m['path']}@{m['rev']}")
                    return
                headers = {
                    "Content-Type": "application/octet-stream",
                    "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                    "X-Repo-Commit": str(sha),
                }
                self._send(200, data, headers)
                return
            self._missing(path)

        do_HEAD = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()

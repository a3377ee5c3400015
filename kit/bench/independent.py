"""A minimal streamed chat client that shares no code with kit: the yardstick of
``kit bench --fidelity``. Standard library only (http.client, json), run as a script in its own
process, so that nothing of kit's (its threads, samplers, scrapes, HTTP stack) is near it.
"""

import http.client
import json
import sys
import time
from urllib.parse import urlsplit


def one(conn: http.client.HTTPConnection, path: str, payload: str) -> dict:  # type: ignore[type-arg]
    t0 = time.perf_counter()
    conn.request("POST", path, payload, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    ttft = wall = None
    usage = None
    error = None if resp.status == 200 else f"HTTP {resp.status}"
    while error is None:
        line = resp.readline()
        if not line:
            error = "stream ended without [DONE]"
            break
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        now = time.perf_counter()
        if data == b"[DONE]":
            wall = now - t0
            break
        chunk = json.loads(data)
        choices = chunk.get("choices") or []
        delta = choices[0].get("delta") or {} if choices else {}
        if ttft is None and any(
            delta.get(k) for k in ("content", "reasoning_content", "reasoning")
        ):
            ttft = now - t0
        if chunk.get("usage"):
            usage = chunk["usage"]
    resp.read()
    return {
        "ttft_s": ttft,
        "wall_s": wall,
        "completion_tokens": (usage or {}).get("completion_tokens"),
        "prompt_tokens": (usage or {}).get("prompt_tokens"),
        "error": error,
    }


def main() -> None:
    """``python kit/bench/independent.py URL BODY.json COUNT``: send BODY COUNT times, one at a
    time, and print one JSON line per request: the seconds to the first chunk carrying text and
    to ``[DONE]`` (perf_counter after the send), and the usage chunk's token counts."""
    url, body_file, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    parts = urlsplit(url)
    with open(body_file) as fh:
        payload = fh.read()
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=600)
    path = parts.path.rstrip("/") + "/v1/chat/completions"
    for _ in range(count):
        print(json.dumps(one(conn, path, payload)), flush=True)
    conn.close()


if __name__ == "__main__":
    main()

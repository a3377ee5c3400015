"""What kit asks the server outside the timed requests: the served model (``/v1/models``) and
its counters (``/metrics``)."""

from __future__ import annotations

import logging

import httpx

from kit.errors import ServerAnswerError
from kit.metrics import Sample, parse_prometheus

log = logging.getLogger(__name__)


def scrape_metrics(client: httpx.Client, url: str) -> dict[Sample, float]:
    """The server's /metrics, parsed; empty when it cannot be read or parsed (logged)."""
    try:
        resp = client.get(url + "/metrics")
    except httpx.HTTPError:
        return {}
    if resp.status_code != 200:
        return {}
    try:
        return parse_prometheus(resp.text)
    except ValueError as exc:
        log.warning("bench: %s: no server-side figures for this window", exc)
        return {}


def model_info(url: str) -> tuple[str, int | None]:
    """Served model name and its max_model_len, from /v1/models. A server that cannot be
    reached raises httpx's error (:func:`kit.errors.to_kit_error` words it); one that answers
    an error status or no OpenAI model list raises ``ServerAnswerError``."""
    endpoint = url.rstrip("/") + "/v1/models"
    resp = httpx.get(endpoint, timeout=10)
    if resp.is_error:
        raise ServerAnswerError(endpoint, resp.status_code, resp.text)
    try:
        entry = resp.json()["data"][0]
        limit = entry.get("max_model_len")
        return str(entry["id"]), int(limit) if limit else None
    except (ValueError, LookupError, TypeError, AttributeError):
        raise ServerAnswerError(
            endpoint, resp.status_code, resp.text, expected="no OpenAI model list"
        ) from None

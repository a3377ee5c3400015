"""Metric definitions shared by the bench, the report and its verifier.

Pure functions only: summary statistics, the per-request figures of the reference protocol,
Prometheus text parsing and the speculative-decoding figures from counter deltas.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

from pydantic import Field

from kit.base import KitModel


class Stats(KitModel):
    """Summary of one figure over the usable measured runs."""

    n: int = Field(description="Number of values.")
    mean: float | None = Field(description="Arithmetic mean.")
    std: float | None = Field(description="Sample standard deviation (n-1); None when n < 2.")
    cv_pct: float | None = Field(description="std / mean in percent.")
    min: float | None = Field(description="Smallest value.")
    max: float | None = Field(description="Largest value.")


def summarize(values: Iterable[float]) -> Stats:
    """n, mean, std, CV, min and max; a statistic beyond a double's range is None, and so is
    every one of values that are not all finite numbers (it never raises)."""
    vals = [float(v) for v in values]
    if not vals or not all(map(math.isfinite, vals)):
        return Stats(n=len(vals), mean=None, std=None, cv_pct=None, min=None, max=None)
    mean = fmean(vals)
    std = stdev(vals)
    cv = finite(std / mean * 100.0) if std is not None and mean else None
    return Stats(n=len(vals), mean=mean, std=std, cv_pct=cv, min=min(vals), max=max(vals))


# ---------------------------------------------------------------------------------------------
# statistics that stay within doubles: finite values in, a finite number or None out


def finite(value: float | None) -> float | None:
    """``value`` where it is a finite number, else None."""
    return value if value is not None and math.isfinite(value) else None


def fmean(values: Sequence[float]) -> float | None:
    """The mean of finite values (None for none). Their sum may overflow where the mean
    cannot: then statistics.mean, whose exact sum is rounded to a double only once divided."""
    if not values:
        return None
    try:
        return finite(statistics.fmean(values))
    except OverflowError:  # fsum's intermediate overflow
        return finite(float(statistics.mean(values)))
    except ValueError:  # inf - inf
        return None


def stdev(values: Sequence[float]) -> float | None:
    """The sample standard deviation (n - 1) of finite values; None below two values, or
    where it is beyond a double (statistics.stdev is exact, then rounds to a double)."""
    if len(values) < 2 or not all(map(math.isfinite, values)):
        return None
    try:
        return finite(statistics.stdev(values))
    except OverflowError:
        return None


def between(low: float, high: float, fraction: float) -> float:
    """``low + (high - low) * fraction``, the linear interpolation of percentiles, also where
    ``high - low`` is beyond a double."""
    value = low + (high - low) * fraction
    return value if math.isfinite(value) else low * (1 - fraction) + high * fraction


def decode_tps(tokens: int, wall_s: float, ttft_s: float) -> float | None:
    """Tokens over the time after the first token: tokens / (wall - TTFT); None without time
    after it, or where the rate is beyond a double."""
    span = wall_s - ttft_s
    return finite(tokens / span) if span > 0 else None


def wall_tps(tokens: int, wall_s: float) -> float | None:
    return finite(tokens / wall_s) if wall_s > 0 else None


def is_usable(completion_tokens: int | None, max_tokens: int, fraction: float) -> bool:
    """A run that stops before ``fraction`` of max_tokens is not usable."""
    return completion_tokens is not None and completion_tokens >= fraction * max_tokens


# ---------------------------------------------------------------------------------------------
# Prometheus text format

Sample = tuple[str, tuple[tuple[str, str], ...]]


def parse_prometheus(text: str) -> dict[Sample, float]:
    """Prometheus exposition text as {(sample name, sorted labels): value}, with
    prometheus-client's parser (the one the format's maintainers ship). Text it cannot parse
    raises ValueError naming the line, rather than being skipped unsaid."""
    # lazy: 70 ms to import, and only a bench parses /metrics
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    out: dict[Sample, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    except (ValueError, TypeError, IndexError) as exc:
        raise ValueError(f"/metrics is not Prometheus text: {_bad_line(text) or exc}") from None
    return out


def _bad_line(text: str) -> str | None:
    """The first line the parser refuses on its own, quoted with its number."""
    # lazy: 70 ms to import, and only a bench parses /metrics
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            for family in text_string_to_metric_families(line + "\n"):
                list(family.samples)
        except (ValueError, TypeError, IndexError):
            return f"line {n}: {line[:120]!r}"
    return None


def metric_sum(samples: Mapping[Sample, float], name: str, **match: str) -> float | None:
    """Sum of every sample of ``name`` whose labels include ``match``; None when absent."""
    total = None
    for (n, labels), value in samples.items():
        if n != name:
            continue
        lab = dict(labels)
        if all(lab.get(k) == v for k, v in match.items()):
            total = (total or 0.0) + value
    return total


def metric_delta(
    before: Mapping[Sample, float], after: Mapping[Sample, float], name: str, **match: str
) -> float | None:
    a = metric_sum(after, name, **match)
    if a is None:
        return None
    b = metric_sum(before, name, **match) or 0.0
    return a - b


# ---------------------------------------------------------------------------------------------
# speculative decoding


class SpecDecode(KitModel):
    """Speculative-decoding figures from counter deltas over a measured window."""

    drafts: int = Field(description="Draft steps (vllm:spec_decode_num_drafts delta).")
    draft_tokens: int = Field(description="Draft tokens proposed.")
    accepted_tokens: int = Field(description="Draft tokens accepted.")
    acceptance_rate: float | None = Field(description="accepted / draft_tokens.")
    acceptance_length: float | None = Field(
        description="1 + accepted / drafts: vLLM's convention, the bonus token counted."
    )
    accepted_per_draft: float | None = Field(
        description="accepted / drafts: the convention without the bonus token."
    )
    per_position_rate: list[float] = Field(
        description="Accepted at position i / drafts, for each draft position."
    )
    per_position_accepted: list[int] = Field(description="Accepted count at each position.")


SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
SPEC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def spec_decode_from_counts(
    drafts: int, draft_tokens: int, accepted: int, per_pos: list[int]
) -> SpecDecode:
    return SpecDecode(
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        acceptance_rate=accepted / draft_tokens if draft_tokens else None,
        acceptance_length=1 + accepted / drafts if drafts else None,
        accepted_per_draft=accepted / drafts if drafts else None,
        per_position_rate=[a / drafts for a in per_pos] if drafts else [],
        per_position_accepted=per_pos,
    )


def spec_decode_delta(
    before: Mapping[Sample, float], after: Mapping[Sample, float]
) -> SpecDecode | None:
    """Figures over a window, or None when the server exports no spec-decode counters."""
    drafts = metric_delta(before, after, SPEC_DRAFTS)
    if drafts is None:
        return None
    tokens = metric_delta(before, after, SPEC_DRAFT_TOKENS) or 0.0
    accepted = metric_delta(before, after, SPEC_ACCEPTED) or 0.0
    positions = sorted(
        {
            int(dict(lab)["position"])
            for (n, lab) in after
            if n == SPEC_PER_POS and "position" in dict(lab)
        }
    )
    per_pos = [
        int(metric_delta(before, after, SPEC_PER_POS, position=str(p)) or 0) for p in positions
    ]
    return spec_decode_from_counts(int(drafts), int(tokens), int(accepted), per_pos)


def add_spec(parts: Iterable[SpecDecode]) -> SpecDecode | None:
    items = list(parts)
    if not items:
        return None
    width = max(len(p.per_position_accepted) for p in items)
    per_pos = [
        sum(p.per_position_accepted[i] for p in items if i < len(p.per_position_accepted))
        for i in range(width)
    ]
    return spec_decode_from_counts(
        sum(p.drafts for p in items),
        sum(p.draft_tokens for p in items),
        sum(p.accepted_tokens for p in items),
        per_pos,
    )


class ServerWindow(KitModel):
    """Server-side figures over a measured window, from /metrics deltas."""

    requests: float | None = Field(description="Finished requests.")
    prompt_tokens: float | None = Field(description="Prompt tokens processed.")
    generation_tokens: float | None = Field(description="Tokens generated.")
    mean_ttft_ms: float | None = Field(description="Server TTFT histogram mean.")
    mean_e2e_ms: float | None = Field(description="Server end-to-end latency mean.")
    mean_decode_s: float | None = Field(description="Server decode-phase time mean.")
    decode_tps: float | None = Field(description="generation tokens / decode-phase time.")
    mean_itl_ms: float | None = Field(description="Server inter-token latency mean.")


def _hist_mean(
    before: Mapping[Sample, float], after: Mapping[Sample, float], base: str
) -> tuple[float | None, float | None]:
    s = metric_delta(before, after, base + "_sum")
    c = metric_delta(before, after, base + "_count")
    if s is None or not c:
        return None, s
    return s / c, s


def server_window(before: Mapping[Sample, float], after: Mapping[Sample, float]) -> ServerWindow:
    ttft, _ = _hist_mean(before, after, "vllm:time_to_first_token_seconds")
    e2e, _ = _hist_mean(before, after, "vllm:e2e_request_latency_seconds")
    dec_mean, dec_sum = _hist_mean(before, after, "vllm:request_decode_time_seconds")
    itl, _ = _hist_mean(before, after, "vllm:inter_token_latency_seconds")
    if itl is None:
        itl, _ = _hist_mean(before, after, "vllm:time_per_output_token_seconds")
    gen = metric_delta(before, after, "vllm:generation_tokens_total")
    reqs = metric_delta(before, after, "vllm:request_success_total")
    return ServerWindow(
        requests=reqs,
        prompt_tokens=metric_delta(before, after, "vllm:prompt_tokens_total"),
        generation_tokens=gen,
        mean_ttft_ms=ttft * 1000 if ttft is not None else None,
        mean_e2e_ms=e2e * 1000 if e2e is not None else None,
        mean_decode_s=dec_mean,
        decode_tps=(gen / dec_sum) if gen and dec_sum else None,
        mean_itl_ms=itl * 1000 if itl is not None else None,
    )


class RequestWitness(KitModel):
    """The server's own account of one request, from /metrics deltas around it alone (the
    sequential protocol has one request in flight). vLLM times decode on the engine core's clock
    (its first to last token) and TTFT in the API server, when it processed the first token."""

    requests: float | None = Field(description="Finished requests in the window (1 to use it).")
    generation_tokens: float | None = Field(description="Tokens generated in the window.")
    ttft_s: float | None = Field(description="API server's time to first token (histogram sum).")
    decode_s: float | None = Field(description="Engine's first-to-last-token time (sum).")
    e2e_s: float | None = Field(description="API server's end-to-end latency (sum).")

    @property
    def single(self) -> bool:
        """Whether the window held exactly this request (nothing else used the server)."""
        return self.requests == 1


def request_witness(
    before: Mapping[Sample, float], after: Mapping[Sample, float]
) -> RequestWitness | None:
    """One request's server-side figures, or None when the server exports none of them."""
    decode = metric_delta(before, after, "vllm:request_decode_time_seconds_sum")
    if decode is None:
        return None
    return RequestWitness(
        requests=metric_delta(before, after, "vllm:request_success_total"),
        generation_tokens=metric_delta(before, after, "vllm:generation_tokens_total"),
        ttft_s=metric_delta(before, after, "vllm:time_to_first_token_seconds_sum"),
        decode_s=decode,
        e2e_s=metric_delta(before, after, "vllm:e2e_request_latency_seconds_sum"),
    )

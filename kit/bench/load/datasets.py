"""A load point's requests: the (text, max_tokens) of each, from the recipe's dataset."""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.errors import BadInputError
from kit.model.synthetic import word_list
from kit.recipe.traffic import FileDataset, RandomDataset


@dataclass(frozen=True)
class Planned:
    text: str
    max_tokens: int


def nth(planned: list[Planned], n: int) -> Planned:
    """The request a point sends as its ``n``-th (warm-ups first): the plan, over and over."""
    return planned[n % len(planned)]


def file_requests(ds: FileDataset, recipe_dir: Path | None) -> list[Planned]:
    """The prompts of a local JSONL or ShareGPT file, refused unless its sha256 matches."""
    path = Path(ds.path)
    if not path.is_absolute() and recipe_dir is not None:
        path = recipe_dir / path
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise BadInputError(f"bench.dataset.path: {ds.path}: {exc.strerror or exc}") from None
    digest = hashlib.sha256(blob).hexdigest()
    if digest != ds.sha256:
        raise BadInputError(
            f"bench.dataset.sha256: {ds.path} has sha256 {digest}, the recipe pins {ds.sha256}",
            hint="the file changed since the recipe was written: restore it, or pin the new one",
        )
    out: list[Planned] = []
    try:
        if ds.format == "jsonl":
            for n, line in enumerate(blob.decode().splitlines(), 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
                    raise BadInputError(f'bench.dataset: {ds.path} line {n}: no "prompt" string')
                out.append(Planned(row["prompt"], int(row.get("max_tokens") or ds.max_tokens)))
        else:
            for n, conv in enumerate(json.loads(blob), 1):
                turns = conv.get("conversations") if isinstance(conv, dict) else None
                first = next(
                    (t for t in turns or [] if isinstance(t, dict) and t.get("from") == "human"),
                    None,
                )
                if first is None or not isinstance(first.get("value"), str):
                    raise BadInputError(f"bench.dataset: {ds.path} entry {n}: no human turn")
                out.append(Planned(first["value"], ds.max_tokens))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInputError(f"bench.dataset: {ds.path}: not {ds.format}: {exc}") from None
    if not out:
        raise BadInputError(f"bench.dataset: {ds.path} holds no prompt")
    return out


def random_requests(
    ds: RandomDataset, count: int, count_tokens: Callable[[str], int | None]
) -> list[Planned]:
    """``count`` prompts of random words sized to the drawn token lengths: words per token
    fitted on two /tokenize counts of the server, as the prefill probe sizes its prompts."""
    words = list(word_list())
    rng = random.Random(ds.seed)
    probe_a = " ".join(rng.choice(words) for _ in range(64))
    probe_b = " ".join(rng.choice(words) for _ in range(512))
    a, b = count_tokens(probe_a), count_tokens(probe_b)
    if a is None or b is None or b <= a:
        raise BadInputError(
            "bench.dataset: random prompts are sized with the server's /tokenize, which did not "
            "answer",
            hint="use a server with /tokenize (vLLM has it), or kind: prompts / file",
        )
    per_word = (b - a) / (512 - 64)
    fixed = a - per_word * 64
    out = []
    for _ in range(count):
        n_in = _draw(rng, ds.input_tokens, ds.range_ratio)
        n_out = _draw(rng, ds.output_tokens, ds.range_ratio)
        n_words = max(int((n_in - fixed) / per_word), 1)
        out.append(Planned(" ".join(rng.choice(words) for _ in range(n_words)), n_out))
    return out


def _draw(rng: random.Random, mean: int, ratio: float) -> int:
    if ratio == 0:
        return mean
    return max(rng.randint(int(mean * (1 - ratio)), math.ceil(mean * (1 + ratio))), 1)

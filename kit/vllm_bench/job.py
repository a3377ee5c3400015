"""What one `vllm bench serve` run beside kit's bench needs: :class:`VllmBenchJob`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kit.recipe import Bench, VllmBenchSettings


@dataclass(frozen=True)
class VllmBenchJob:
    """vLLM's own benchmark against the server at ``url`` serving ``model`` (its ``tokenizer``
    read from disk), under the recipe's ``bench`` and its ``settings``, run by the engine's
    ``python`` (with ``pythonpath``); results go to ``out_dir``, and a dataset file's relative
    path starts at ``recipe_dir``."""

    python: str
    pythonpath: str | None
    url: str
    model: str
    tokenizer: Path
    bench: Bench
    settings: VllmBenchSettings
    out_dir: Path
    recipe_dir: Path | None = None

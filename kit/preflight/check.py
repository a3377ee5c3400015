"""One preflight item, and whose fault a failed one is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Fault = Literal["recipe", "environment"]


@dataclass(frozen=True)
class Check:
    """One preflight item. A failed item is the recipe's fault (exit 2: change the recipe) or
    the environment's (exit 3: change the machine)."""

    name: str
    ok: bool
    detail: str
    hint: str = ""
    fault: Fault = "environment"

"""One preflight item, in one of three states, and whose fault a problem is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Fault = Literal["recipe", "environment"]
State = Literal["ok", "problem", "not checked"]


@dataclass(frozen=True)
class Check:
    """One preflight item: ``ok`` True (checked, fine), False (a problem) or None (not checked:
    ``detail`` says why, ``hint`` what would let it be checked). A problem is the recipe's fault
    (exit 2: change the recipe) or the environment's (exit 3: change the machine); an item not
    checked fails nothing."""

    name: str
    ok: bool | None
    detail: str
    hint: str = ""
    fault: Fault = "environment"

    @property
    def state(self) -> State:
        return "not checked" if self.ok is None else "ok" if self.ok else "problem"

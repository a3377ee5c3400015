"""What both Club-3090 readers share: the canonical protocol's prompts, the rig cell's parts and
the speculative method a text names."""

from __future__ import annotations

import re
from typing import Literal

from kit.importers.schema import Prompts, SpecDecode
from kit.recipe.figures import Definition, PointFigure
from kit.recipe.protocol import RigDetail
from kit.recipe.serving import REFERENCE_PROMPTS

TOOL = "club3090 bench.sh"
# bench.sh's shapes by kit's prompt names; both are the reference protocol's prompts
PROMPT_NAMES = {"narrative": "narrative", "code": "code"}
CANONICAL = {p.name: p for p in REFERENCE_PROMPTS}
DEFINITIONS: dict[PointFigure, Definition] = {
    "ttft_ms": Definition(
        kit="ttft_ms",
        text="Club-3090 bench.sh: to the first chunk with content or reasoning text, as kit's",
    ),
}


def canonical_protocol(runs: int | None = None) -> Prompts:
    """The canonical bench as BENCHMARKS.md states it: 3 warm-ups and 5 measured runs per
    prompt, narrative (max_tokens 1000) then code (800)."""
    return Prompts(
        warmups=3,
        runs=runs or 5,
        max_tokens={name: CANONICAL[name].max_tokens for name in PROMPT_NAMES.values()},
        # the file quotes the two prompts whole in its "Canonical bench" section
        chars={name: len(CANONICAL[name].text) for name in PROMPT_NAMES.values()},
    )


def _plain(text: str) -> str:
    return re.sub(r"[*`]", "", text)


_CARDS = re.compile(r"(\d+)\s*[×x]\s+([^,();]+)")
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*GB\b", re.I)
# a cap as written ("350 W", "230W cap"), not an approximate or ranged draw ("~300-316 W")
_WATTS = re.compile(r"(?<![~–\-\d./])(\d+(?:\.\d+)?)\s*W\b")
_UNCAPPED = re.compile(r"no power cap|uncapped|cap unstated", re.I)
_LANES = re.compile(r"(?:(?i:gen)\s*(\d)\s+)?(?<!\w)[x×](\d+(?:/[x×]?\d+)*)(?!\w)")
# a card's name: words like RTX, Ti, FE and tokens with a digit ("3090", "V100-SXM2")
_CARD_WORDS = {"RTX", "GeForce", "Tesla", "Quadro", "Ti", "FE", "SUPER", "Super"}
_CARD_TOKEN = re.compile(r"^[A-Za-z]{0,3}\d[\w-]*$")
_LINK_WORDS = (
    "patched P2P (engaged)",
    "patched P2P (engagement unconfirmed)",
    "no NVLink",
    "NVLink",
    "patched P2P",
)
_CUSTOM_AR = re.compile(r"custom AR (on|off)", re.I)


def rig_detail(cell: str) -> RigDetail | None:
    """The parts a Club-3090 ``Rig`` cell states (cards, card, memory, lanes, power caps,
    interconnect, custom all-reduce), each None or empty where the cell says nothing."""
    text = _plain(cell)
    inner = text[text.index("(") + 1 : text.rindex(")")] if "(" in text and ")" in text else text
    cards = card = memory = None
    pcie: list[str] = []
    found = _CARDS.findall(inner)
    # one kind of card: several (2x A + 1x B) or "mixed" leave cards, card and memory open
    if len(found) == 1 and "mixed" not in inner.lower():
        cards = int(found[0][0])
        name = found[0][1]
        mem = _MEMORY.search(name)
        if mem:
            memory = round(float(mem.group(1)) * 1024)
            name = name[: mem.start()].rstrip(" -")
        words = []
        for token in name.split():
            if token not in _CARD_WORDS and not _CARD_TOKEN.match(token):
                break
            words.append(token)
        card = " ".join(words) or None
    for lanes in _LANES.finditer(inner):
        gen = f"gen{lanes.group(1)} " if lanes.group(1) else ""
        pcie += [f"{gen}x{w.lstrip('x×')}" for w in lanes.group(2).split("/")]
    watts = [] if _UNCAPPED.search(inner) else [float(w) for w in _WATTS.findall(inner)]
    link = next((w for w in _LINK_WORDS if w.lower() in inner.lower()), None)
    ar = _CUSTOM_AR.search(inner)
    detail = RigDetail(
        cards=cards,
        card=card,
        memory_mib=memory,
        power_cap_w=watts,
        pcie=pcie,
        interconnect=link,
        custom_all_reduce=(ar.group(1).lower() == "on") if ar else None,
    )
    return detail if detail != RigDetail() else None


KitMethod = Literal["dflash2", "dflash", "mtp", "ngram"]
_METHODS: tuple[tuple[KitMethod, re.Pattern[str]], ...] = (
    ("dflash2", re.compile(r"\bDFlash2\b", re.I)),
    ("dflash", re.compile(r"\bDFlash(?!2)\b", re.I)),
    ("mtp", re.compile(r"\bMTP\b")),
    ("ngram", re.compile(r"\bngram\b", re.I)),
)
_TOKENS = re.compile(r"\b(?:MTP|DFlash2?|n_max|draft)\b[^.;|]{0,24}?\b[Nn]\s*=\s*`?(\d+)", re.I)


_NEGATED = re.compile(r"\b(?:no|without)[- ](MTP|DFlash2?|spec(?:ulative)?[- ]dec\w*)\b", re.I)


def spec_from_text(text: str, where: str) -> SpecDecode | None:
    """Speculative decoding as a row's words name it: one method (DFlash2, DFlash, MTP,
    ngram) and its ``n=`` where written; several methods named leave the method open; only
    "no MTP" (or the like) says none ran."""
    plain = _plain(text)
    negated = _NEGATED.search(plain)
    rest = _NEGATED.sub(" ", plain)
    named = [kit for kit, pattern in _METHODS if pattern.search(rest)]
    if not named:
        if negated:
            return SpecDecode(drafting=False, source=f"{where}: {negated.group(0)!r}")
        return None
    tokens = _TOKENS.search(rest)
    method = named[0] if len(named) == 1 else None
    return SpecDecode(
        drafting=True,
        method=method,
        kit_method=method,
        num_speculative_tokens=int(tokens.group(1)) if tokens and method else None,
        source=where,
    )

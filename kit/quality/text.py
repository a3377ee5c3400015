"""kit's evaluation text (``kit/data/quality/text.txt``, written for kit: its README says so):
the same bytes for every run, and their sha256."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

TEXT_PATH = Path(__file__).parents[1] / "data" / "quality" / "text.txt"


@functools.cache
def evaluation_text() -> str:
    """The text, as scored."""
    return TEXT_PATH.read_bytes().decode("utf-8")


@functools.cache
def text_sha256() -> str:
    """sha256 of the text's UTF-8 bytes: what the reference cache and the report name it by."""
    return hashlib.sha256(TEXT_PATH.read_bytes()).hexdigest()

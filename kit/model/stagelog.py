"""A stage's log file: what torch, transformers and other libraries log or warn while a stage
runs goes there, not to the terminal, where kit's own lines stay (``-v``: both)."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

# loggers that keep handlers of their own (transformers writes to stderr itself)
LIBRARIES = ("transformers", "torch", "auto_round", "huggingface_hub", "tokenizers", "datasets")


@contextmanager
def library_output_to(path: Path) -> Iterator[Path]:
    """Within the block, third-party logging and Python warnings go to ``path`` (appended);
    at DEBUG on kit's logger (``-v``) to stderr as well."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = [logging.FileHandler(path, encoding="utf-8")]
    if logging.getLogger("kit").isEnabledFor(logging.DEBUG):
        handlers.append(logging.StreamHandler(sys.stderr))
    for h in handlers:
        h.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    saved = {name: logging.getLogger(name) for name in LIBRARIES}
    before = {name: (lg.handlers[:], lg.propagate) for name, lg in saved.items()}
    py_warnings = logging.getLogger("py.warnings")

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = warnings.formatwarning(message, category, filename, lineno, line)
        py_warnings.warning("%s", text.rstrip())

    try:
        for lg in saved.values():
            lg.handlers[:] = handlers
            lg.propagate = False
        for h in handlers:
            root.addHandler(h)
        with warnings.catch_warnings():
            warnings.showwarning = show
            yield path
    finally:
        for name, lg in saved.items():
            lg.handlers[:], lg.propagate = before[name]
        for h in handlers:
            root.removeHandler(h)
        handlers[0].close()

"""Quiet by default: a chatty stage's library output goes to its log file, kit's own lines to
the terminal; ``-v`` (DEBUG on kit's logger) shows both."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.model.stagelog import library_output_to
from kit.quantize import run_logged

CHATTY = (
    "import sys, warnings\n"
    "print('auto_round WARNING: the screenful', flush=True)\n"
    "sys.stderr.write('torch UserWarning: more\\n')\n"
    "warnings.warn('transformers: and more')\n"
    "sys.exit(3)\n"
)


@pytest.fixture
def kit_level() -> Iterator[logging.Logger]:
    kit = logging.getLogger("kit")
    before = kit.level
    yield kit
    kit.setLevel(before)


def test_a_chatty_child_writes_to_its_log_only(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], kit_level: logging.Logger
) -> None:
    kit_level.setLevel(logging.INFO)
    log = tmp_path / "logs" / "stage.log"
    assert run_logged([sys.executable, "-c", CHATTY], log) == 3
    text = log.read_text()
    assert "auto_round WARNING: the screenful\n" in text
    assert "torch UserWarning: more\n" in text
    assert "UserWarning: transformers: and more" in text
    assert capfd.readouterr() == ("", "")


def test_verbose_shows_the_child_too(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], kit_level: logging.Logger
) -> None:
    kit_level.setLevel(logging.DEBUG)
    log = tmp_path / "stage.log"
    assert run_logged([sys.executable, "-c", CHATTY], log) == 3
    out, err = capfd.readouterr()
    assert out == ""
    assert err == log.read_text()


def test_library_logging_and_warnings_go_to_the_log(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], kit_level: logging.Logger
) -> None:
    kit_level.setLevel(logging.INFO)
    transformers = logging.getLogger("transformers")
    own = logging.StreamHandler(sys.stderr)  # as transformers sets up its own
    transformers.addHandler(own)
    try:
        with library_output_to(tmp_path / "model.log") as log:
            transformers.warning("chatty library")
            logging.getLogger("somelib").warning("another one")
            warnings.warn("deprecated thing", DeprecationWarning, stacklevel=1)
        transformers.warning("after the stage")  # its handler is back
    finally:
        transformers.removeHandler(own)
    lines = log.read_text().splitlines()
    assert lines[:2] == ["WARNING transformers: chatty library", "WARNING somelib: another one"]
    assert "DeprecationWarning: deprecated thing" in lines[2]
    assert capfd.readouterr().err == "after the stage\n"

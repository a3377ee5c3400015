"""What an engine environment is, as the engine stage and the report both record it. Apart from
:mod:`kit.engine`, so that reading a report loads no engine code."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.base import KitModel


class EngineFacts(KitModel):
    """What an engine environment is: shared by the engine stage's EngineEnv (with this
    machine's paths) and the report's EngineInfo (paths shown KIT_HOME-relative)."""

    kind: Literal["managed", "external"] = Field(description="kit's own venv, or given.")
    name: str = Field(description="Engine distribution.")
    version: str = Field(description="Installed engine version.")
    python: str = Field(description="Interpreter running the engine.")
    python_version: str = Field(description="Its Python version.")
    site_packages: str = Field(description="Where the engine package lives.")
    pythonpath: str | None = Field(None, description="PYTHONPATH used with an external engine.")
    versions: dict[str, str] = Field(description="torch, transformers, triton in that env.")
    patch_series: str | None = Field(None, description="Patch series this env carries.")

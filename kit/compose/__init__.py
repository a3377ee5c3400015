"""The compose runtime: the recipe's stack in containers (compose.yaml), run for real.

- :mod:`kit.compose.env`: the env file compose.yaml reads, rendered from a recipe
  (``kit compose env``); every recipe-dependent value comes from it.
- :mod:`kit.compose.project`: the compose binary and the project kit drives through it.
- :mod:`kit.compose.stack`: :class:`ComposeRuntime` (the :class:`kit.serve.Runtime` seam with
  a ``server`` container) and :func:`reproduce` (``prepare`` -> ``server`` healthy ->
  ``bench``, always ``down``).
- :mod:`kit.compose.roles`: what the containers run (``python -m kit.compose ROLE``).
"""

from kit.compose.env import (
    env_text,
    port_of,
    project_name,
    render,
    signing_key_file,
    write_env,
)
from kit.compose.project import ComposeProject, compose_command
from kit.compose.stack import ComposeRuntime, ContainerServer, reproduce, require_gpus

__all__ = [
    "ComposeProject",
    "ComposeRuntime",
    "ContainerServer",
    "compose_command",
    "env_text",
    "port_of",
    "project_name",
    "render",
    "reproduce",
    "require_gpus",
    "signing_key_file",
    "write_env",
]

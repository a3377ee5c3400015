"""The compose runtime (kit.runtimes.Compose): the recipe's stack in containers, run for real.

:mod:`~kit.compose.env` renders the env file compose.yaml reads, :mod:`~kit.compose.project`
drives ``docker compose``, :mod:`~kit.compose.stack` runs the stack (:func:`reproduce`: prepare,
server, bench, always down) and :mod:`~kit.compose.roles` is what the containers run.
"""

from kit.compose.env import (
    StackEnv,
    env_text,
    port_of,
    project_name,
    render,
    signing_key_file,
    write_env,
)
from kit.compose.project import ComposeProject, compose_command
from kit.compose.stack import (
    ComposeRuntime,
    ContainerServer,
    StackOptions,
    reproduce,
    require_gpus,
)

__all__ = [
    "ComposeProject",
    "ComposeRuntime",
    "ContainerServer",
    "StackEnv",
    "StackOptions",
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

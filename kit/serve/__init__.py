"""Serve stage: start the recipe's vLLM OpenAI server, wait until healthy, always tear down.

:class:`NativeRuntime` runs the engine as a child process group of kit, :class:`MultiNodeRuntime`
a recipe's nodes; kit.compose's ``ComposeRuntime`` implements the same :class:`Runtime` seam with
containers. Which a run uses is its runtime's (kit.runtimes).
"""

from kit.serve.args import server_args, speculative_config
from kit.serve.native import MultiNodeRuntime, NativeRuntime
from kit.serve.server import (
    LOG_TAIL_LINES,
    RunningServer,
    Runtime,
    check_port,
    free_port,
    install_sigterm_handler,
    log_tail,
    served_model,
    terminate,
    wait_healthy,
)

__all__ = [
    "LOG_TAIL_LINES",
    "MultiNodeRuntime",
    "NativeRuntime",
    "RunningServer",
    "Runtime",
    "check_port",
    "free_port",
    "install_sigterm_handler",
    "log_tail",
    "served_model",
    "server_args",
    "speculative_config",
    "terminate",
    "wait_healthy",
]

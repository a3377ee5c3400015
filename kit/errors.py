"""Every error kit raises: one hierarchy, each carrying a hint and an exit code.

Library code raises these and never prints or exits; the CLI turns them into
``error: ...`` / ``hint: ...`` lines on stderr and the documented exit code.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # a verification or comparison failed
EXIT_BAD_INPUT = 2  # a recipe, report or argument is wrong
EXIT_ENVIRONMENT = 3  # the machine cannot do it: no GPU, server never healthy, engine died
EXIT_DIFFERENT = 4  # a re-run or comparison: DIFFERENT (NOT COMPARABLE is EXIT_FAILED)
EXIT_INCONCLUSIVE = 5  # a re-run or comparison: INCONCLUSIVE (an INVALID side, a band too wide)


class KitError(Exception):
    """Base of every error kit raises on purpose."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class BadInputError(KitError):
    """Input that kit cannot use: a file, a field, an argument."""

    exit_code = EXIT_BAD_INPUT


class RecipeError(BadInputError):
    """A recipe with one or more problems; each is ``file: field.path: message``."""

    def __init__(self, problems: list[str], hint: str | None = None) -> None:
        super().__init__("\n".join(problems), hint)
        self.problems = problems


class EnvironmentProblem(KitError):
    """The machine cannot run this: missing engine, no GPU, port in use, server died."""

    exit_code = EXIT_ENVIRONMENT


class ServerError(EnvironmentProblem):
    """The inference server never became healthy or died; carries its log tail."""

    def __init__(self, message: str, log_tail: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.log_tail = log_tail


class VerificationFailed(KitError):
    """A verification or comparison ran and found failures."""

    exit_code = EXIT_FAILED


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwound like Ctrl-C so that servers are torn down and partial reports kept
    (kit.serve.install_sigterm_handler): sent by a time limit (``timeout``), a service manager
    or ``kill``, not typed by a user."""

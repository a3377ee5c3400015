"""Transitional: kit.signing is the home. Removed once every caller imports from there."""

from kit.paths import default_config_dir, default_private_key_path
from kit.signing import *  # noqa: F403
from kit.signing import __all__ as _signing

__all__ = [*_signing, "default_config_dir", "default_private_key_path"]

"""``python -m kit.compose ROLE``: the entry point of compose.yaml's services."""

import sys

from kit.compose.roles import container_main

sys.exit(container_main(sys.argv[1:]))

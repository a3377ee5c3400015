"""The env file compose.yaml reads, rendered from a recipe (``kit compose env``).

Every recipe-dependent value of the stack comes from it; nothing is copied by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from kit import image
from kit.errors import BadInputError, EnvironmentProblem
from kit.paths import default_private_key_path, kit_home
from kit.probe.dump import host_facts_for_containers
from kit.recipe import LoadedRecipe, Recipe
from kit.serve import free_port
from kit.signing import load_private_key

CONTAINER_PORT = 8000  # inside the project network only; the host port is KIT_HOST_PORT
CACHE_VOLUME = "kit-home"
GPU_COMPOSE_FILE = "compose.gpu.yaml"
NO_KEY = "/dev/null"


def project_name(recipe: Recipe) -> str:
    """Compose project of a recipe: ``kit-<name>`` (lower case, digits, '-', '_')."""
    return "kit-" + recipe.name.replace(".", "-")


def _recipe_mount(loaded: LoadedRecipe) -> tuple[Path, str]:
    """The directory to mount read-only (holding the recipe, what it extends and the local
    paths it names) and the recipe's path inside it. The containers run as another user than
    the one who owns it; where that user could not read it (a 0700 checkout), the recipe files
    are mounted from a readable copy instead (:func:`_readable_copy`)."""
    chain = [p.resolve() for p in loaded.chain]
    if loaded.lock_file is not None:
        chain.append(loaded.lock_file.resolve())
    paths = list(chain)
    recipe = loaded.recipe
    local = []
    for spec in (recipe.model, recipe.speculative.draft):
        if spec is not None and spec.source == "local":
            local.append(loaded.resolve_path(spec.path))
    calibration = getattr(recipe.quantization, "calibration", None)
    if calibration is not None and calibration.source == "file":
        local.append(loaded.resolve_path(calibration.path))
    paths += local
    root = Path(os.path.commonpath([str(p if p.is_dir() else p.parent) for p in paths]))
    if root == Path(root.anchor):
        raise BadInputError(
            f"{loaded.path.name}: the recipe and the paths it names share no directory but /",
            hint="keep the recipe, what it extends and its local files under one directory",
        )
    relative = str(loaded.path.resolve().relative_to(root))
    if _others_can_read(root):
        return root, relative
    if local:
        raise EnvironmentProblem(
            f"{root}: the containers' user cannot read this directory "
            f"(mode {stat.S_IMODE(root.stat().st_mode):o}), and it holds local model or "
            "calibration files too large to copy",
            hint=f"chmod o+rx {root}, or keep the recipe and its files in a readable directory",
        )
    return _readable_copy(root, chain, loaded.recipe.sha256()), relative


def _others_can_read(directory: Path) -> bool:
    """Whether a user who is neither the owner nor in the group may list and enter it."""
    return directory.stat().st_mode & 0o005 == 0o005


def _readable_copy(root: Path, files: list[Path], key: str) -> Path:
    """The recipe files under ``root`` copied, at the same relative paths, into a directory of
    kit's cache that every user may read (0755, files 0644); with empty ``recipes/`` and
    ``patches/`` where ``root`` has them, so the loader in the container finds the repository
    it may extend from, as it would in ``root``."""
    copy = kit_home() / "compose-recipes" / key[:16]
    for marker in ("recipes", "patches"):
        if (root / marker).is_dir():
            (copy / marker).mkdir(parents=True, exist_ok=True)
    for path in files:
        target = copy / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        target.chmod(0o644)
    for directory in (copy, *(p for p in copy.rglob("*") if p.is_dir())):
        directory.chmod(0o755)  # its parents need not be: the daemon mounts it as root
    return copy


def signing_key_file(key_path: str | None, sign: bool = True) -> Path | None:
    """The private key file the bench sidecar signs with (same choice as the native run)."""
    if not sign:
        return None
    path = Path(key_path).expanduser() if key_path else default_private_key_path()
    if key_path and not path.is_file():
        raise BadInputError(f"--key {key_path}: no such file")
    if not path.is_file():
        return None

    load_private_key(path)  # refused here (mode, format) before any image is built
    return path.resolve()


@dataclass(frozen=True)
class StackEnv:
    """What the env file says besides the recipe: the image (default: the recipe's tag, and
    the id the Docker engine has for it), where the sidecar writes reports, the keys it
    mounts, the host port (default: a free one) and the run id."""

    image_ref: str | None = None
    image_id: str | None = None
    reports_dir: Path | None = None
    signing_key: Path | None = None
    redaction_key: Path | None = None
    host_port: int | None = None
    run_id: str = ""


def render(loaded: LoadedRecipe, stack: StackEnv = StackEnv()) -> dict[str, str]:
    """Every variable compose.yaml reads, for one recipe (in the order they are written)."""
    recipe = loaded.recipe
    mount, recipe_file = _recipe_mount(loaded)
    gpu = recipe.server.engine.device == "cuda"
    image_ref = stack.image_ref or image.plan(loaded, allow_unpinned=True).tag
    image_id = stack.image_id if stack.image_id is not None else _local_image_id(image_ref)
    files = ["compose.yaml", GPU_COMPOSE_FILE] if gpu else ["compose.yaml"]
    return {
        "COMPOSE_PROJECT_NAME": project_name(recipe),
        "COMPOSE_FILE": os.pathsep.join(files),
        "KIT_RECIPE_NAME": recipe.name,
        "KIT_RECIPE_SHA256": recipe.sha256(),
        "KIT_RECIPE_DIR": str(mount),
        "KIT_RECIPE_FILE": recipe_file,
        "KIT_SET": json.dumps(list(loaded.overrides)),
        "KIT_RESOLVED": "1" if loaded.resolved else "",
        "KIT_IMAGE": image_ref,
        "KIT_IMAGE_ID": image_id,
        "KIT_BASE_IMAGE": image.base_image_for(recipe.server.engine),
        "KIT_DEVICE": recipe.server.engine.device,
        # GPUs per engine container: the world (tensor x pipeline parallel) over its nodes
        "KIT_GPU_COUNT": str(gpus_per_node(recipe) if gpu else 0),
        # server.nodes: replicas of server-worker, the nodes after the head (0 on one host)
        "KIT_WORKER_NODES": str(recipe.server.nodes.count - 1 if recipe.server.nodes else 0),
        "KIT_PORT": str(CONTAINER_PORT),
        "KIT_HOST_PORT": str(stack.host_port or free_port()),
        "KIT_HEALTH_START_PERIOD": f"{int(recipe.server.health_timeout_s)}s",
        # several GPU workers share memory through /dev/shm: the host's IPC namespace
        "KIT_IPC": "host" if gpu else "private",
        "KIT_SHM_SIZE": "16g" if gpu else "1g",
        "KIT_CACHE_VOLUME": CACHE_VOLUME,
        "KIT_REPORTS_DIR": str((stack.reports_dir or Path("reports")).resolve()),
        "KIT_SIGNING_KEY_FILE": str(stack.signing_key) if stack.signing_key else NO_KEY,
        "KIT_REDACTION_KEY_FILE": str(stack.redaction_key) if stack.redaction_key else NO_KEY,
        "KIT_UID": str(os.getuid()),
        "KIT_GID": str(os.getgid()),
        "KIT_RUN_ID": stack.run_id,
        # the host's name (a stand-in) and OS, which the bench sidecar cannot see itself
        "KIT_HOST_FACTS": host_facts_for_containers(),
    }


def gpus_per_node(recipe: Recipe) -> int:
    server = recipe.server
    return server.world_size // (server.nodes.count if server.nodes else 1)


def _local_image_id(ref: str) -> str:
    """The id of a local image, or "" (no such image, no Docker engine: a static render)."""
    try:
        info = image.inspect(ref)
    except EnvironmentProblem:
        return ""
    return info.id if info else ""


def port_of(env_file: Path) -> int | None:
    """KIT_HOST_PORT of an env file rendered before, so that a re-render keeps it."""
    try:
        lines = env_file.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("KIT_HOST_PORT="):
            value = line.split("=", 1)[1].strip('"')
            return int(value) if value.isdigit() else None
    return None


def _quote(value: str) -> str:
    """A double-quoted env-file value: compose reads it back exactly (no interpolation)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return '"' + escaped.replace("\n", "\\n") + '"'


def env_text(loaded: LoadedRecipe, values: dict[str, str]) -> str:
    """The env file: a header saying where it came from, then one quoted value a line."""
    head = [
        f"# rendered by kit compose env from {loaded.path.name}"
        + (f" with --set {' '.join(loaded.overrides)}" if loaded.overrides else ""),
        f"# recipe sha256 {loaded.recipe.sha256()}; do not edit: render it again",
    ]
    return "\n".join([*head, *(f"{k}={_quote(v)}" for k, v in values.items())]) + "\n"


def write_env(loaded: LoadedRecipe, values: dict[str, str], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(env_text(loaded, values))
    return path

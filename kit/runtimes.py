"""The runtimes, one class each: where the engine runs and what that means for a run.

:class:`Native`, :class:`MultiNode`, :class:`Compose` and :class:`External` each say what the
report calls them, what they check before a run, how the host is probed around the bench, where
the engine's processes are and, for the native two, which server starts the engine.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal
from urllib.parse import urlsplit

from kit.bench.claims.memory import MemoryProbe, engine_memory, gpu_memory
from kit.nodes import is_local
from kit.probe.hostspeed import WitnessPlan, binding_cpus, plan
from kit.probe.procfs import process_tree
from kit.probe.schedstat import EngineClock, supported
from kit.recipe import LoadedRecipe, Recipe

if TYPE_CHECKING:
    from kit.engine import EngineEnv
    from kit.preflight import Card, Check
    from kit.serve import MultiNodeRuntime, NativeRuntime

# what a report's server.runtime holds (kit.report.schema.ServerInfo): its names never change
RuntimeName = Literal["native", "compose", "external"]


@dataclass(frozen=True)
class Place:
    """Where a run serves and writes (``--port``, ``-o``) and the engine it is given
    (``--engine-python``); None: not given."""

    port: int | None = None
    out_dir: Path | None = None
    engine_python: str | None = None


class Runtime:
    """One runtime. Its attributes say what the report and ``kit reproduce`` need to know of
    it; its methods answer for the run."""

    name: ClassVar[RuntimeName]  # the report's server.runtime
    label: ClassVar[str] = ""  # after the engine's name where a report is shown
    knows_engine: ClassVar[bool] = True  # kit started the server: its engine and patches known
    host_load: ClassVar[bool] = True  # the server's CPU can be told from the host's other work
    engine_where: ClassVar[str] = "not started by kit"  # where the engine's processes are
    images: ClassVar[bool] = False  # serves the recipe's image: --resolve pins it too
    reruns: ClassVar[bool] = True  # can run a shared report's embedded recipe
    takes_engine_python: ClassVar[bool] = True  # serves an engine kit may be given

    def for_recipe(self, recipe: Recipe) -> Runtime:
        """This runtime as it runs ``recipe`` (the native one spreads over its nodes)."""
        return self

    def own_checks(self, loaded: LoadedRecipe, place: Place) -> list[Check]:
        """The preflight items of this runtime itself, after the recipe's pins."""
        return []

    def checks(
        self, loaded: LoadedRecipe, place: Place = Place(), rig: list[Card] | None = None
    ) -> list[Check]:
        """Every preflight item a run here needs: the recipe's pins, :meth:`own_checks`, then
        the machine's GPUs (or ``rig``), CPU, memory and disk."""
        # lazy: the preflight (the engine's and the image's modules) loads for a run, not
        # where a report is read
        from kit import preflight  # noqa: PLC0415

        return preflight.checks(loaded, self.own_checks(loaded, place), rig)

    def preflight(
        self, loaded: LoadedRecipe, place: Place = Place(), rig: list[Card] | None = None
    ) -> list[Check]:
        """Run :meth:`checks` once and settle them (:func:`kit.preflight.settle`)."""
        from kit import preflight  # noqa: PLC0415  # lazy: as in checks

        return preflight.settle(loaded.recipe.name, self.checks(loaded, place, rig))

    def engine_processes(self) -> set[int] | None:
        """The engine's processes as they are now; None where they are not kit's to see."""
        return None

    def memory_probe(self, device: Literal["cpu", "cuda"]) -> MemoryProbe:
        """What the soak reads of the engine's memory: the cards (NVML sees them wherever the
        engine runs), else the resident memory of its processes where kit sees them."""
        if device == "cuda":
            return MemoryProbe("nvml", gpu_memory)
        if self.engine_processes() is None:
            return MemoryProbe(
                None, None, f"not measured: the engine's processes are {self.engine_where}"
            )
        return MemoryProbe("rss", lambda: engine_memory(self.engine_processes() or set()))

    def engine_clock(self, cpu_binding: str | None) -> EngineClock | None:
        """The scheduler's account of each request, where the engine's threads are kit's."""
        return None

    def witness_plan(self, url: str, cpu_binding: str | None) -> WitnessPlan:
        """Where the host-speed witness runs for the server at ``url``."""
        return plan(is_local(urlsplit(url).hostname or ""), cpu_binding)


class Native(Runtime):
    """The engine as kit's child process group on this host (kit.serve.NativeRuntime)."""

    name = "native"

    def for_recipe(self, recipe: Recipe) -> Native:
        return MultiNode() if recipe.server.nodes is not None else self

    def server(
        self, env: EngineEnv, progress: Callable[[float], None] | None = None
    ) -> NativeRuntime:
        """What starts and stops the engine."""
        from kit.serve import NativeRuntime  # noqa: PLC0415  # lazy: as in checks

        return NativeRuntime(env, progress=progress)

    def own_checks(self, loaded: LoadedRecipe, place: Place) -> list[Check]:
        """The engine's Python (or the indexes of one to install), the port and output folder,
        and /dev/shm."""
        from kit import preflight  # noqa: PLC0415  # lazy: as in checks

        return [
            preflight.engine_python_check(loaded.recipe, place.engine_python),
            *preflight.place_checks(place.port, place.out_dir),
            preflight.shm_check(preflight.shm_free_mib()),
        ]

    def engine_processes(self) -> set[int] | None:
        me = os.getpid()
        return process_tree([me]) - {me}

    def engine_clock(self, cpu_binding: str | None) -> EngineClock | None:
        return EngineClock(binding_cpus(cpu_binding)) if supported() else None

    def witness_plan(self, url: str, cpu_binding: str | None) -> WitnessPlan:
        return plan(True, cpu_binding)


class MultiNode(Native):
    """A native server spread over nodes (server.nodes): the head and the nodes on this host
    as kit's children, the others started there (``kit serve --node-rank``); the report's
    server.nodes lists them."""

    def server(
        self, env: EngineEnv, progress: Callable[[float], None] | None = None
    ) -> MultiNodeRuntime:
        from kit.serve import MultiNodeRuntime  # noqa: PLC0415  # lazy: as in checks

        return MultiNodeRuntime(env, progress=progress)


class Compose(Runtime):
    """The recipe's stack in containers (kit.compose): the server container, benched from the
    bench sidecar, which probes the host."""

    name = "compose"
    engine_where = "in another container"
    images = True
    reruns = False  # the sidecar runs a recipe file it mounts; a report's is in no file
    takes_engine_python = False  # the image's engine serves

    def own_checks(self, loaded: LoadedRecipe, place: Place) -> list[Check]:
        """The image's pin, a Docker engine (with the NVIDIA runtime for a GPU recipe), the
        port and the output folder."""
        from kit import preflight  # noqa: PLC0415  # lazy: as in checks

        gpu = loaded.recipe.server.engine.device == "cuda"
        return [
            *preflight.image_pin_checks(loaded),
            *preflight.container_checks(gpu),
            *preflight.place_checks(place.port, place.out_dir),
        ]

    def witness_plan(self, url: str, cpu_binding: str | None) -> WitnessPlan:
        if binding_cpus(cpu_binding) is None:
            return WitnessPlan(
                None, "host-speed witness not run: in a container, the engine's cores are unknown"
            )
        return super().witness_plan(url, cpu_binding)


class External(Runtime):
    """A server kit was given (``kit bench --target``): nothing of it is kit's to know."""

    name = "external"
    label = " (external server)"
    knows_engine = False
    host_load = False  # its CPU would count as another process's

    def checks(
        self, loaded: LoadedRecipe, place: Place = Place(), rig: list[Card] | None = None
    ) -> list[Check]:
        """The dataset file of a load pattern only: kit builds and serves nothing."""
        from kit.preflight.pins import dataset_checks  # noqa: PLC0415  # lazy: as in checks

        return dataset_checks(loaded)


BY_NAME: dict[str, Runtime] = {r.name: r for r in (Native(), Compose(), External())}


def named(name: object) -> Runtime | None:
    """The runtime a report's ``server.runtime`` names; None for a name kit never wrote."""
    return BY_NAME.get(name) if isinstance(name, str) else None


def serving(name: RuntimeName | None) -> Runtime:
    """The runtime of a server whose facts say ``name``; with none known yet, external (nothing
    of the server is kit's to see)."""
    return BY_NAME[name or External.name]

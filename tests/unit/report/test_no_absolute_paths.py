"""No absolute path anywhere in a report: one is built through kit's own code from inputs full
of this machine's paths (engine python, site-packages, PYTHONPATH, model and served
directories, the server's and `vllm bench serve`'s command lines, the probe's interpreter),
and every string of it, keys included, is checked."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from factories import finished

from kit.build import Built
from kit.engine import EngineEnv
from kit.model.hub import local
from kit.probe import host_probe_from_dump
from kit.recipe import VllmBenchSettings, load_recipe
from kit.recipe.sources import LocalModel
from kit.report.assemble import engine_info, host_for_report, new_report, server_info
from kit.report.schema import Report
from kit.serve import RunningServer
from kit.vllm_bench import VllmBench, VllmBenchJob, bench_argv, compare, parse_result, shown_argv

USER, HOST = "alice", "alice-box"
# the API path vllm bench serve posts to: a URL path, not a file
URL_PATHS = {"/v1/chat/completions"}
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
_MARKERS = ("/home/", "/root/", "/tmp/", "/Users/", "\\Users\\", "/private/var/", "/opt/")
# the probe's container evidence names fixed files every such container has, no machine's own
FIXED_EVIDENCE = {"/.dockerenv exists", "/run/.containerenv exists"}


def strings(value: Any) -> Iterator[str]:
    """Every string of a JSON value: keys and values, all the way down."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def absolute_paths(report: Report, planted: list[Path]) -> list[str]:
    """The strings of the report that are, or hold, an absolute path."""
    found = []
    for text in strings(report.model_dump(mode="json")):
        if text in URL_PATHS or text in FIXED_EVIDENCE:
            continue
        if (
            text.startswith("/")
            or _DRIVE.match(text)
            or any(marker in text for marker in _MARKERS)
            or any(str(root) in text for root in planted)
        ):
            found.append(text)
    return found


@dataclass
class Machine:
    """A machine's directories, all under one temporary root."""

    root: Path
    kit_home: Path
    home: Path
    work: Path


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    m = Machine(tmp_path, tmp_path / "kithome", tmp_path / "home" / USER, tmp_path / "work")
    for directory in (m.kit_home, m.home, m.work):
        directory.mkdir(parents=True)
    monkeypatch.setenv("KIT_HOME", str(m.kit_home))
    monkeypatch.setenv("HOME", str(m.home))
    monkeypatch.setenv("KIT_CONFIG_DIR", str(m.home / ".config" / "kit"))
    monkeypatch.chdir(m.work)
    return m


def touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def build(
    m: Machine,
    fixtures_dir: Path,
    *,
    python: Path,
    site_packages: Path,
    server_args: tuple[str, ...] = (),
) -> Report:
    """A finished report of cpu-tiny, built the way a run builds it, from ``m``'s paths."""
    loaded = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml")
    recipe = loaded.recipe
    model_dir = m.home / "models" / "tiny"
    touch(model_dir / "config.json", json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    _, model = local(LocalModel(source="local", path=str(model_dir)), loaded, "target", "model")
    served = m.kit_home / "quantized" / "5c351d7f" / "model"
    draft = m.kit_home / "models" / "draft"
    for directory in (served, draft, m.kit_home / "hf"):
        directory.mkdir(parents=True, exist_ok=True)
    built = Built(
        model_dir=model_dir,
        model=model,
        draft_dir=draft,
        draft=None,
        served_dir=served,
        quantization=None,
    )
    src = m.home / "src" / "vllm"
    src.mkdir(parents=True)
    env = EngineEnv(
        kind="managed",
        name=recipe.server.engine.name,
        version=recipe.server.engine.version,
        python=str(python),
        python_version="3.11.7",
        site_packages=str(site_packages),
        pythonpath=os.pathsep.join([str(src), str(m.work / "patches")]),
        versions={"torch": "2.13.0+cpu"},
    )
    out_dir = m.work / "reports" / "cpu-tiny-run"
    log = touch(
        out_dir / "server.log",
        "INFO Using CPUWNA16LinearKernel for AutoGPTQLinearMethod\n"
        "kit: CPU kernel build vllm._C_AVX2 (cpu_gemm_wna16: absent)\n",
    )
    server = RunningServer(
        url="http://127.0.0.1:8000",
        argv=[
            str(python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(served),
            "--download-dir",
            str(m.kit_home / "hf"),
            "--tokenizer",
            str(served),
            "--speculative-config",
            json.dumps({"method": "dflash", "model": str(draft), "num_speculative_tokens": 7}),
            *server_args,
        ],
        log_path=log,
        boot_s=50.5,
    )
    prompt = recipe.bench.prompts[0]
    job = VllmBenchJob(
        python="python",
        pythonpath=None,
        url=server.url,
        model=str(served),  # vLLM's served name is the model path when none is given
        tokenizer=served,
        bench=recipe.bench,
        settings=VllmBenchSettings(warmups=1),
        out_dir=out_dir,
    )
    dataset = out_dir / f"vllm-bench-{prompt.name}.jsonl"
    argv = bench_argv(job, prompt, dataset, runs=5, result_file=f"vllm-bench-{prompt.name}.json")
    result = json.loads((fixtures_dir / "vllm-bench" / "h200-tp1-code.json").read_text())
    entry = compare(prompt, parse_result(result), None, shown_argv(argv, out_dir), "r.json")
    dump = json.loads((fixtures_dir / "probe" / "h200x2-nvml-dump.json").read_text())
    dump["host"].update(hostname=HOST, user=USER, home=str(m.home))
    dump["host"]["python"]["executable"] = str(m.home / ".venv" / "bin" / "python")
    report = finished(
        new_report(loaded, "20261201T120000Z-abcdef"),
        built=built,
        env=env,
        result=None,
        host=host_for_report(host_probe_from_dump(dump)),
        server=server_info(server, "native"),
        vllm_bench=VllmBench(
            tool="vllm bench serve",
            definitions="",
            warmups=1,
            runs=5,
            prompts=[entry],
            agree=None,
        ),
    )
    assert report.engine == engine_info(env)
    return report


def test_no_absolute_path_in_a_report(machine: Machine, fixtures_dir: Path) -> None:
    venv = machine.kit_home / "engines" / "vllm-cpu-py311"
    python = touch(venv / "bin" / "python")
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    report = build(machine, fixtures_dir, python=python, site_packages=site)
    planted = [machine.root, machine.kit_home, machine.home, machine.work]
    assert absolute_paths(report, planted) == []
    text = report.model_dump_json()
    assert USER not in text and HOST not in text
    # the paths are still there, shown relative to where they lie
    assert report.engine is not None
    assert report.engine.python == "$KIT_HOME/engines/vllm-cpu-py311/bin/python"
    assert report.engine.pythonpath == "~/src/vllm:./patches"
    assert report.model is not None and report.model.directory == "~/models/tiny"
    assert report.vllm_bench is not None
    argv = report.vllm_bench.prompts[0].argv
    assert argv[argv.index("--tokenizer") + 1] == "$KIT_HOME/quantized/5c351d7f/model"
    assert argv[argv.index("--model") + 1] == "$KIT_HOME/quantized/5c351d7f/model"
    assert argv[argv.index("--result-dir") + 1] == "cpu-tiny-run"
    assert report.host is not None and report.host.python.executable == "~/.venv/bin/python"


def _outside_roots(m: Machine) -> dict[str, Any]:
    """An engine whose python and site-packages lie outside KIT_HOME, cwd and home (/usr, /opt)."""
    elsewhere = m.root / "opt" / "pythons" / "3.11"
    site = elsewhere / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    return {"python": touch(elsewhere / "bin" / "python3.11"), "site_packages": site}


def _venv_symlink(m: Machine) -> dict[str, Any]:
    """kit's own venv in KIT_HOME, its python a symlink to a base interpreter elsewhere."""
    base = touch(m.root / "opt" / "pythons" / "3.11" / "bin" / "python3.11")
    venv = m.kit_home / "engines" / "vllm-cpu-py311"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(base)
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    return {"python": venv / "bin" / "python", "site_packages": site}


def _flag_equals_path(m: Machine) -> dict[str, Any]:
    """A recipe's server.extra_args written ``--flag=/abs/path``."""
    venv = m.kit_home / "engines" / "vllm-cpu-py311"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    return {
        "python": touch(venv / "bin" / "python"),
        "site_packages": site,
        "server_args": (f"--download-dir={m.kit_home / 'hf'}",),
    }


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param(_outside_roots, id="outside-kit-home-cwd-and-home"),
        pytest.param(
            _venv_symlink,
            id="venv-python-symlink",
        ),
        pytest.param(
            _flag_equals_path,
            id="flag-equals-path",
        ),
    ],
)
def test_no_absolute_path_in_harder_cases(
    machine: Machine, fixtures_dir: Path, inputs: Any
) -> None:
    report = build(machine, fixtures_dir, **inputs(machine))
    assert absolute_paths(report, [machine.root]) == []


def test_a_path_outside_every_root_keeps_its_last_parts(
    machine: Machine, fixtures_dir: Path
) -> None:
    report = build(machine, fixtures_dir, **_outside_roots(machine))
    assert report.engine is not None
    assert report.engine.python == "…/bin/python3.11"
    assert report.engine.site_packages == "…/python3.11/site-packages"


def test_an_absolute_local_model_path_in_the_recipe_is_shown_relative(
    machine: Machine, fixtures_dir: Path
) -> None:
    from kit.recipe import recipe_sha256, shown_recipe_sha256
    from kit.report.verify.embedded import recipe_item

    model_dir, draft_dir = (machine.root / "data" / "models" / n for n in ("tiny", "draft"))
    overrides = [
        f"model={{source: local, path: {model_dir}}}",
        f"speculative.draft={{source: local, path: {draft_dir}}}",
        f"server.extra_args=[--download-dir={machine.root / 'data' / 'hf'}]",
    ]
    loaded = load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml", overrides)
    report = new_report(loaded, "20261201T120000Z-abcdef")
    assert report.recipe["model"] == {"source": "local", "path": "…/models/tiny"}
    assert report.recipe["speculative"]["draft"] == {"source": "local", "path": "…/models/draft"}
    assert absolute_paths(report, [machine.root]) == []
    assert report.recipe_overrides == [
        "model={source: local, path: …/models/tiny}",
        "speculative.draft={source: local, path: …/models/draft}",
        "server.extra_args=[--download-dir=…/data/hf]",
    ]
    assert report.recipe["server"]["extra_args"] == ["--download-dir=…/data/hf"]
    # the report's hash is over the recipe it embeds, so verify still recomputes it
    assert (
        report.recipe_sha256 == recipe_sha256(report.recipe) == shown_recipe_sha256(loaded.recipe)
    )
    assert report.recipe_sha256 != loaded.recipe.sha256()
    assert recipe_item(report.model_dump(mode="json")).ok

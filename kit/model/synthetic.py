"""Synthetic models: a random-initialised Qwen3 target with a tokenizer trained locally on
pseudo-English text, and a DFlash (or DFlash2: :mod:`kit.model.dflash2`) draft that matches it.
Both need no hub and are cached under ``$KIT_HOME/models`` by their spec.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from kit.errors import BadInputError
from kit.model import dflash2
from kit.model.manifest import (
    ModelManifest,
    architecture,
    hash_tree,
    identity_of,
    model_dir,
    read_manifest,
    write_manifest,
)
from kit.model.stagelog import library_output_to
from kit.paths import display_path, kit_home
from kit.recipe import DFlash2Draft, SyntheticDraft, SyntheticModel
from kit.recipe.base import RecipeModel, drop_late_defaults

log = logging.getLogger(__name__)

# The text comes from the fixed word list in words.txt, read in file order: the list, its order
# and the generator below make the bytes of a synthetic model. Change any of them and bump
# SYNTH_VERSION.
SYNTH_VERSION = "4"  # bump when the generator's output changes for the same spec

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]


@functools.cache
def word_list() -> tuple[str, ...]:
    """The word list, one word a line, in file order (repeats kept: they weigh the choice)."""
    text = resources.files("kit.model").joinpath("words.txt").read_text(encoding="utf-8")
    return tuple(text.split())


def generated_texts(count: int, seed: int, min_words: int = 24, max_words: int = 64) -> list[str]:
    """Deterministic pseudo-English texts from a fixed word list (tokenizer corpus, calibration)."""
    words_list = word_list()
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(min_words, max_words)
        words = [rng.choice(words_list) for _ in range(n)]
        words[0] = words[0].capitalize()
        out.append(" ".join(words) + ".")
    return out


def _train_tokenizer(vocab_size: int, seed: int, out: Path) -> dict[str, int]:
    # lazy: heavy, and in the build extra
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: PLC0415
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415

    # Metaspace BPE over printable ASCII: every token decodes to visible text, so a random
    # model's stream carries text from its first token (a byte-level vocabulary would emit
    # partial UTF-8 sequences that decode to nothing and skew TTFT). Special tokens are added
    # after training so that id 0 is an ordinary visible token.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    alphabet = [chr(c) for c in range(33, 127)] + ["\n", "\u2581"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    corpus = generated_texts(4000, seed)
    corpus += [
        "Write a detailed 800-word essay explaining transformer attention.",
        "Write a Python implementation of quicksort with comments explaining each step.",
    ] * 50
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.add_special_tokens(
        {
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "additional_special_tokens": ["<|im_start|>", "<|mask|>"],
        }
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    ids = {t: int(fast.convert_tokens_to_ids(t)) for t in SPECIAL_TOKENS}
    if len(fast) > vocab_size:
        raise BadInputError(
            f"tokenizer has {len(fast)} tokens, more than vocab_size {vocab_size}",
            hint="raise model.shape.vocab_size",
        )
    return ids


def _synthesise_target(spec: SyntheticModel, out: Path) -> int:
    # lazy: heavy, and in the build extra
    import torch  # noqa: PLC0415
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM  # noqa: PLC0415

    s = spec.shape
    ids = _train_tokenizer(s.vocab_size, spec.seed, out)
    config = Qwen3Config(
        vocab_size=s.vocab_size,
        hidden_size=s.hidden_size,
        intermediate_size=s.intermediate_size,
        num_hidden_layers=s.num_hidden_layers,
        num_attention_heads=s.num_attention_heads,
        num_key_value_heads=s.num_key_value_heads,
        head_dim=s.head_dim,
        max_position_embeddings=s.max_position_embeddings,
        tie_word_embeddings=False,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    torch.manual_seed(spec.seed)
    dtype = getattr(torch, spec.dtype)
    model = Qwen3ForCausalLM(config).to(dtype)
    if spec.zero_final_norm:
        with torch.no_grad():
            model.model.norm.weight.zero_()
    known = max(ids.values()) + 1  # the tokenizer's size (special tokens are added last)
    if known < s.vocab_size:
        # A realistic vocabulary (e.g. 151936) is far larger than the trained tokenizer, and
        # ids it cannot decode stream as empty text. Zero their lm_head rows: their logits are
        # 0 while the tokenizer's own tokens keep random logits (std ~1.3), so greedy and
        # top-k sampling pick tokens that decode to text. The lm_head's size is unchanged.
        with torch.no_grad():
            model.lm_head.weight[known:].zero_()
    if spec.mask_picks_token0:  # a DFlash2 'token0' draft's hidden state points at token 0
        with torch.no_grad():
            mask = model.model.embed_tokens.weight[ids["<|mask|>"]]
            model.lm_head.weight[0] = dflash2.token0_row(model.lm_head.weight, mask).to(dtype)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    ).save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def default_target_layers(num_layers: int, count: int = 5) -> list[int]:
    """Evenly spaced target layers for a DFlash draft.

    vLLM reads ``target_layer_ids`` as zero-based layers whose output feeds the draft and
    collects the hidden state entering layer ``id + 1``, so the last layer cannot be used:
    ids lie in ``0 .. num_layers - 2``.
    """
    top = max(num_layers - 2, 0)
    n = min(count, top + 1)
    if n == 1:
        return [0]
    return sorted({round(i * top / (n - 1)) for i in range(n)})


def _synthesise_draft(
    target: SyntheticModel,
    draft: SyntheticDraft,
    target_dir: Path,
    out: Path,
    d2: DFlash2Draft | None = None,
) -> int:
    """A DFlash draft matching the target: config.json + model.safetensors, no embeddings. With
    ``d2``, a DFlash2 draft: the same v1 tensors (the same generator, drawn first) and its own."""
    # lazy: heavy, and in the build extra
    import torch  # noqa: PLC0415
    from safetensors.torch import save_file  # noqa: PLC0415

    s = target.shape
    tok_cfg = json.loads((target_dir / "tokenizer_config.json").read_text())
    mask_id = _token_id(target_dir, "<|mask|>", tok_cfg)
    layer_ids = draft.target_layer_ids or default_target_layers(s.num_hidden_layers)
    config: dict[str, Any] = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": s.hidden_size,
        "intermediate_size": s.intermediate_size,
        "num_hidden_layers": draft.num_hidden_layers,
        "num_attention_heads": s.num_attention_heads,
        "num_key_value_heads": s.num_key_value_heads,
        "head_dim": s.head_dim,
        "vocab_size": s.vocab_size,
        "max_position_embeddings": s.max_position_embeddings,
        "rms_norm_eps": dflash2.RMS_NORM_EPS,
        "rope_theta": 1000000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": target.dtype,
        "block_size": draft.block_size,
        "num_target_layers": s.num_hidden_layers,
        "dflash_config": {"mask_token_id": mask_id, "target_layer_ids": layer_ids},
    }
    gen = torch.Generator().manual_seed(draft.seed)
    dtype = getattr(torch, target.dtype)

    def rand(*shape: int) -> Any:
        return (torch.randn(*shape, generator=gen) * 0.02).to(dtype)

    h, i, d = s.hidden_size, s.intermediate_size, s.head_dim
    q, kv = s.num_attention_heads * d, s.num_key_value_heads * d
    tensors: dict[str, Any] = {}
    for n in range(draft.num_hidden_layers):
        p = f"layers.{n}."
        tensors |= {
            p + "self_attn.q_proj.weight": rand(q, h),
            p + "self_attn.k_proj.weight": rand(kv, h),
            p + "self_attn.v_proj.weight": rand(kv, h),
            p + "self_attn.o_proj.weight": rand(h, q),
            p + "self_attn.q_norm.weight": torch.ones(d, dtype=dtype),
            p + "self_attn.k_norm.weight": torch.ones(d, dtype=dtype),
            p + "mlp.gate_proj.weight": rand(i, h),
            p + "mlp.up_proj.weight": rand(i, h),
            p + "mlp.down_proj.weight": rand(h, i),
            p + "input_layernorm.weight": torch.ones(h, dtype=dtype),
            p + "post_attention_layernorm.weight": torch.ones(h, dtype=dtype),
        }
    tensors["fc.weight"] = rand(h, h * len(layer_ids))
    tensors["hidden_norm.weight"] = torch.ones(h, dtype=dtype)
    norm = torch.zeros(h, dtype=dtype) if draft.zero_final_norm else torch.ones(h, dtype=dtype)
    tensors["norm.weight"] = norm
    if d2 is not None:
        config["architectures"] = [dflash2.ARCHITECTURE]
        config["dflash_config"] |= dflash2.config_keys(d2)
        n_layers = draft.num_hidden_layers
        tensors |= dflash2.tensors(d2, h, s.vocab_size, n_layers, rand, dtype)
        if d2.weights == "token0":
            dflash2.silence_layers(tensors, n_layers)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / "model.safetensors"))
    return sum(int(t.numel()) for t in tensors.values())


def _token_id(model_dir: Path, token: str, tok_cfg: dict[str, Any]) -> int:
    decoder = tok_cfg.get("added_tokens_decoder", {})
    for key, value in decoder.items():
        if value.get("content") == token:
            return int(key)
    tok = json.loads((model_dir / "tokenizer.json").read_text())
    for added in tok.get("added_tokens", []):
        if added.get("content") == token:
            return int(added["id"])
    raise BadInputError(f"{model_dir}: token {token} not in the tokenizer")


# ---------------------------------------------------------------------------------------------
# the cache


def _spec_data(model: RecipeModel) -> dict[str, Any]:
    """A recipe model as its cache key reads it: fields added later are left out while at their
    default, so a model that does not use them keeps the key it had before they existed."""
    data = model.model_dump(mode="json")
    drop_late_defaults(model, data)
    return data


def spec_key(spec: dict[str, Any]) -> str:
    """The cache key of a keyed spec: ``$KIT_HOME/models/<kind>-<key>``."""
    blob = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _build_cached(
    kind: str,
    spec: dict[str, Any],
    role: Literal["target", "draft"],
    build: Callable[[Path], int],
) -> ModelManifest:
    """Run ``build(tmpdir) -> params`` once per spec; later calls reuse the directory."""
    key = spec_key(spec)
    final = kit_home() / "models" / f"{kind}-{key}"
    cached = read_manifest(final)
    if cached is not None:
        # the build stage reports the target's cache hit (kit.build): said here for the draft
        log.log(
            logging.INFO if role == "draft" else logging.DEBUG,
            "model: cache hit for %s %s (%s), no work done",
            role,
            kind,
            display_path(final),
        )
        return cached.model_copy(update={"cached": True, "duration_s": 0.0})
    tmp = final.with_name(final.name + f".partial-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    t0 = time.monotonic()
    log_path = final.with_name(final.name + ".log")
    log.info(
        "model: building the %s %s; library messages -> %s", role, kind, display_path(log_path)
    )
    with library_output_to(log_path):
        params = build(tmp)
    files = hash_tree(tmp)
    manifest = ModelManifest(
        role=role,
        source="synthetic",
        spec=spec,
        architecture=architecture(tmp),
        parameters=params,
        files=files,
        identity=identity_of(files),
        directory=display_path(final),
        duration_s=round(time.monotonic() - t0, 3),
        cached=False,
    )
    write_manifest(tmp, manifest)
    theirs = read_manifest(final) if final.exists() else None
    if theirs is not None:  # another run made the same model meanwhile: keep it
        shutil.rmtree(tmp, ignore_errors=True)
        return theirs
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return manifest


def target_spec(spec: SyntheticModel) -> dict[str, Any]:
    """The keyed spec of a synthetic target (cache kind ``synthetic``)."""
    return {"generator": SYNTH_VERSION, **_spec_data(spec)}


def synthesise(spec: SyntheticModel) -> tuple[Path, ModelManifest]:
    data = target_spec(spec)
    manifest = _build_cached("synthetic", data, "target", lambda d: _synthesise_target(spec, d))
    return model_dir(manifest), manifest


def draft_spec(
    draft: SyntheticDraft, target_identity: str, method: str = "dflash"
) -> tuple[str, dict[str, Any], DFlash2Draft | None]:
    """The cache kind, the keyed spec and the DFlash2 settings (None: a v1 draft) of a synthetic
    draft for ``method``. A v1 draft's spec is what it was before DFlash2 existed; a DFlash2
    draft's has every DFlash2 setting, defaults included."""
    data = {"generator": SYNTH_VERSION, "target": target_identity, **_spec_data(draft)}
    if method != "dflash2":
        return "dflash-draft", data, None
    d2 = draft.dflash2 or DFlash2Draft()
    data["dflash2"] = d2.model_dump(mode="json")
    return "dflash2-draft", data, d2


def synthesise_draft(
    target: SyntheticModel, draft: SyntheticDraft, method: str = "dflash"
) -> tuple[Path, ModelManifest]:
    """The synthetic draft for ``method`` (``dflash`` or ``dflash2``) beside its target."""
    tdir, tman = synthesise(target)
    kind, data, d2 = draft_spec(draft, tman.identity, method)
    manifest = _build_cached(
        kind, data, "draft", lambda d: _synthesise_draft(target, draft, tdir, d, d2)
    )
    return model_dir(manifest), manifest

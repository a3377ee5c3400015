"""The reference scorer, run as a child interpreter by the build stage (``python -m
kit.quality.scorer JOB OUT``): kit's evaluation text through the unquantized model with
transformers on the CPU in float32, teacher-forced; the scores written as ReferenceScores."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

from kit import __version__
from kit.quality.measures import scores_of
from kit.quality.schema import ReferenceProvenance, ReferenceScores
from kit.quality.text import evaluation_text, text_sha256


def score(job: dict[str, Any]) -> ReferenceScores:
    """Score the text's first ``max_tokens`` tokens with the model in ``job['model']``."""
    # lazy: heavy, and in the build extra
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    tokenizer = AutoTokenizer.from_pretrained(job["model"])
    ids = [int(t) for t in tokenizer(evaluation_text())["input_ids"][: job["max_tokens"]]]
    model = AutoModelForCausalLM.from_pretrained(job["model"], dtype=getattr(torch, job["dtype"]))
    model.eval()
    with torch.inference_mode():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        target = logprobs.gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
        values, indices = logprobs.topk(job["top_k"], dim=-1)
    tops = [
        list(zip(i, v, strict=True)) for i, v in zip(indices.tolist(), values.tolist(), strict=True)
    ]
    return ReferenceScores(
        text_sha256=text_sha256(),
        token_ids=ids,
        vocab_size=int(logprobs.shape[-1]),
        top_k=job["top_k"],
        scores=scores_of(target.tolist(), tops),
        provenance=ReferenceProvenance(
            method="transformers",
            model_identity=job["model_identity"],
            dtype=job["dtype"],
            device="cpu",
            versions={
                "torch": importlib.metadata.version("torch"),
                "transformers": importlib.metadata.version("transformers"),
                "kit": __version__,
            },
            key=job["key"],
        ),
    )


def main(job_path: str, out_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    if job["text_sha256"] != text_sha256():
        raise SystemExit("the evaluation text changed under the job")
    Path(out_path).write_text(score(job).model_dump_json())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""kit.quality.reference: when kit scores the reference, its cache key, and a recipe's own
reference scores (reference.quality), checked against their pin, kit's text and the model."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kit.errors import BadInputError
from kit.model import FileHash, ModelManifest
from kit.quality import find_reference, text_sha256
from kit.quality.measures import scores_of
from kit.quality.reference import ReferenceJob, build_reference, reference_job
from kit.quality.schema import ReferenceProvenance, ReferenceScores
from kit.recipe import LoadedRecipe, load_recipe


def _model(weights: int, identity: str = "a" * 64) -> ModelManifest:
    return ModelManifest(
        role="target",
        source="synthetic",
        files=[
            FileHash(path="model.safetensors", size=weights, sha256="b" * 64),
            FileHash(path="tokenizer.json", size=10 << 30, sha256="c" * 64),
        ],
        identity=identity,
        directory="model",
        duration_s=0.0,
        cached=True,
    )


def _recipe(fixtures_dir: Path, *overrides: str) -> LoadedRecipe:
    return load_recipe(fixtures_dir / "recipes" / "cpu-tiny.yaml", list(overrides))


def test_auto_scores_models_up_to_8_gib_of_weights(fixtures_dir: Path) -> None:
    loaded = _recipe(fixtures_dir)
    job = reference_job(loaded, Path("m"), _model(1 << 20))
    assert isinstance(job, ReferenceJob)
    # the window: bench.quality.max_tokens 2048, cut to server.max_model_len 2048 - 1
    assert (job.max_tokens, job.top_k) == (2047, 10)
    too_big = reference_job(loaded, Path("m"), _model(9 << 30))  # the tokenizer does not count
    assert too_big == (
        "the model's weights (9.7 GB) are over 8 GiB, more than bench.quality.reference auto "
        "scores on the CPU (transformers scores it anyway; reference.quality gives scores made "
        "elsewhere)"
    )
    forced = _recipe(fixtures_dir, "bench.quality.reference=transformers")
    assert isinstance(reference_job(forced, Path("m"), _model(9 << 30)), ReferenceJob)
    none = _recipe(fixtures_dir, "bench.quality.reference=none")
    assert reference_job(none, Path("m"), _model(1)) == "bench.quality.reference is none"
    off = _recipe(fixtures_dir, "bench.quality=null")
    assert reference_job(off, Path("m"), _model(1)) == "bench.quality is off"


def test_the_cache_key_follows_what_the_scores_depend_on(fixtures_dir: Path) -> None:
    def key(*overrides: str, identity: str = "a" * 64) -> str:
        job = reference_job(_recipe(fixtures_dir, *overrides), Path("m"), _model(1, identity))
        assert isinstance(job, ReferenceJob)
        return job.key

    base = key()
    assert key("bench.quality.max_perplexity_ratio=2") == base  # a threshold: same scores
    assert key("bench.quality.top_k=5") != base
    assert key("bench.quality.max_tokens=512") != base
    assert key("server.max_model_len=1024") != base  # a shorter window
    assert key(identity="d" * 64) != base


def test_without_cached_scores_the_probe_is_told_why(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIT_HOME", str(tmp_path))
    reference, why = find_reference(_recipe(fixtures_dir), Path("m"), _model(1))
    assert reference is None
    assert why is not None and why.startswith("not in kit's cache: the build stage scores it")


def _scores(identity: str | None, text: str | None = None, tokens: int = 4) -> ReferenceScores:
    ids = list(range(tokens))
    return ReferenceScores(
        text_sha256=text or text_sha256(),
        token_ids=ids,
        vocab_size=1024,
        top_k=1,
        scores=scores_of([-1.0] * (tokens - 1), [[(1, -0.5)]] * (tokens - 1)),
        provenance=ReferenceProvenance(
            method="transformers", model_identity=identity, dtype="float32", device="cpu"
        ),
    )


def _with_file(fixtures_dir: Path, tmp_path: Path, scores: ReferenceScores, pin: str = "") -> Path:
    data = scores.model_dump_json().encode()
    (tmp_path / "ref.json").write_bytes(data)
    recipe = (fixtures_dir / "recipes" / "cpu-tiny.yaml").read_text()
    recipe += (
        "reference:\n  source: a test\n  quality:\n    path: ref.json\n"
        f"    sha256: {pin or hashlib.sha256(data).hexdigest()}\n"
        "    source: scored by kit on a bigger machine\n"
    )
    path = tmp_path / "cpu-tiny-ref.yaml"
    path.write_text(recipe)
    return path


def test_a_recipes_reference_file_is_read_and_said_so(fixtures_dir: Path, tmp_path: Path) -> None:
    path = _with_file(fixtures_dir, tmp_path, _scores("a" * 64))
    reference, why = find_reference(load_recipe(path), tmp_path, _model(1))
    assert why is None and reference is not None
    assert reference.provenance.method == "file"
    assert reference.provenance.source == "scored by kit on a bigger machine"
    assert (
        reference.provenance.file_sha256
        == hashlib.sha256((tmp_path / "ref.json").read_bytes()).hexdigest()
    )
    # the build stage checks it too, before anything is served
    assert build_reference(load_recipe(path), tmp_path, _model(1)) == reference


@pytest.mark.parametrize(
    ("scores", "pin", "message"),
    [
        (
            _scores("a" * 64),
            "f" * 64,
            "cpu-tiny-ref.yaml: reference.quality.sha256: the file's is",
        ),
        (
            _scores("a" * 64, text="e" * 64),
            "",
            "cpu-tiny-ref.yaml: reference.quality: scores text sha256 eeeeeeeeeeee, kit's "
            "evaluation text is",
        ),
        (
            _scores("d" * 64),
            "",
            "cpu-tiny-ref.yaml: reference.quality: scores model dddddddddddd, the recipe's "
            "model is aaaaaaaaaaaa",
        ),
        (
            _scores(None, tokens=2049),
            "",
            "cpu-tiny-ref.yaml: reference.quality: 2049 tokens, more than "
            "server.max_model_len - 1 (2047)",
        ),
    ],
)
def test_a_reference_file_that_does_not_fit_is_bad_input(
    fixtures_dir: Path, tmp_path: Path, scores: ReferenceScores, pin: str, message: str
) -> None:
    path = _with_file(fixtures_dir, tmp_path, scores, pin)
    with pytest.raises(BadInputError) as err:
        build_reference(load_recipe(path), tmp_path, _model(1))
    assert err.value.message.startswith(message), err.value.message

"""kit.model.synthetic: the pure parts of the synthetic target and draft."""

from __future__ import annotations

import hashlib

from kit.model import default_target_layers, generated_texts


def test_default_target_layers_never_use_the_last_layer() -> None:
    assert default_target_layers(2) == [0]
    assert default_target_layers(3) == [0, 1]
    assert default_target_layers(36) == [0, 8, 17, 26, 34]
    assert max(default_target_layers(64)) == 62


def test_generated_texts_are_those_synthetic_models_were_built_from() -> None:
    # The tokenizer of every synthetic model is trained on these texts: they change only
    # together with SYNTH_VERSION (the word list, its order and the generator).
    assert generated_texts(1, 7, 4, 6) == ["Encoder base when query head."]
    blob = "\n".join(generated_texts(100, 0)).encode()
    assert (
        hashlib.sha256(blob).hexdigest()
        == "cc7015fec2df9378043b15d2dff812c664c10c7409f5631b5dcd15cefbb3c479"
    )

"""Model stage: fetch a pinned model from the hub, take a local directory, or synthesise one.

Every model ends as a directory plus a :class:`~kit.model.manifest.ModelManifest` (where it came
from, the resolved revision, each file's sha256). Hub and local: :mod:`kit.model.hub`; synthetic
targets and drafts: :mod:`kit.model.synthetic`; the choice for a recipe: :mod:`kit.model.fetch`.
"""

from kit.model.fetch import fetch_draft, fetch_model
from kit.model.hub import download, local
from kit.model.manifest import (
    MANIFEST,
    FileHash,
    ModelManifest,
    architecture,
    hash_tree,
    identity_of,
    model_dir,
    read_manifest,
    sha256_file,
    write_manifest,
)
from kit.model.synthetic import (
    CHAT_TEMPLATE,
    SPECIAL_TOKENS,
    SYNTH_VERSION,
    default_target_layers,
    generated_texts,
    synthesise,
    synthesise_draft,
)

__all__ = [
    "CHAT_TEMPLATE",
    "MANIFEST",
    "SPECIAL_TOKENS",
    "SYNTH_VERSION",
    "FileHash",
    "ModelManifest",
    "architecture",
    "default_target_layers",
    "download",
    "fetch_draft",
    "fetch_model",
    "generated_texts",
    "hash_tree",
    "identity_of",
    "local",
    "model_dir",
    "read_manifest",
    "sha256_file",
    "synthesise",
    "synthesise_draft",
    "write_manifest",
]

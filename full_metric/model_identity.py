"""What identifies a model, so that the signature changes whenever a score can: a local folder's content digest
over every file that can change a score, an adapter's over its weights and configuration, an adapted judge's revision
(a Hub model is named by its commit: :func:`full_metric.model_sources.hub_commit`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .errors import UsageError

#: A LoRA adapter's folder (``adapt --save-adapter``) holds this file (peft's).
ADAPTER_CONFIG = "adapter_config.json"


def _file_digest(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return "sha256:" + digest.hexdigest()[:16]


#: What an adapted judge's folder records of its adaptation (``full_metric.research.adapt``).
ADAPTATION_FILE = "adaptation.json"


#: A local folder's files that cannot change a score, left out of its digest: its card and licence, the
#: adaptation record (identified by its own digest), generation settings (scoring generates nothing).
NOT_SCORING = (ADAPTATION_FILE, "generation_config.json", "README.md", "LICENSE", ".gitattributes")


def scoring_files(folder: Path) -> list[Path]:
    """The files of a local model folder that can change a score: every file at its top level but
    :data:`NOT_SCORING` and hidden ones (weights, ``config.json``, the tokenizer's files, a chat template
    in ``chat_template.jinja`` ...), so that changing any of them changes the signature."""
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and not p.name.startswith(".") and p.name not in NOT_SCORING)


def local_revision(source: str, gguf_file: str | None) -> str:
    """What identifies a local model: its content digest (:func:`scoring_files`: weights, configuration,
    tokenizer and chat template; a GGUF file alone, which holds them all), an adapted judge's with its
    adaptation's digest (:func:`adapted_revision`). A Hub model's is the commit it was loaded at
    (:func:`hub_commit`)."""
    if gguf_file is not None:
        return _file_digest([Path(source) / gguf_file])
    weights = [p for p in Path(source).glob("*") if p.suffix in (".safetensors", ".bin", ".pt", ".gguf")]
    digest = _file_digest(scoring_files(Path(source))) if weights else "unknown"
    record = Path(source) / ADAPTATION_FILE
    if record.is_file():
        try:
            return adapted_revision(digest, str(json.loads(record.read_text(encoding="utf-8"))["digest"]))
        except (ValueError, KeyError) as error:
            raise UsageError(f"{record}: not an adaptation record ({error})") from None
    return digest


def adapted_revision(weights: str, adaptation: str, adapter: str | None = None) -> str:
    """An adapted judge's revision, the one format for both ways to load it: the weights' revision (a
    merged judge's own, or the base's under an adapter), the adapter's digest when it is loaded as an
    adapter, and the adaptation's digest."""
    return f"{weights}+adapter:{adapter}+adapted:{adaptation}" if adapter else f"{weights}+adapted:{adaptation}"


def adapter_digest(folder: Path) -> str:
    """An adapter's own identity: its weights (``adapter_model.*``) and its configuration (rank, scaling, the
    layers it changes), the files that change what it adds to its base."""
    return _file_digest([*folder.glob("adapter_model.*"), folder / ADAPTER_CONFIG])

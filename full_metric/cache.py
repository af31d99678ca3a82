"""Where long runs keep what must outlive a stopped job or a checkout laid anew: checkpoints and
finished outputs of training runs (``full-metric adapt``, GRPO) and probes, in a folder outside
the checkout, so that the same command resumes from it.

The folder is ``$FULL_METRIC_CACHE`` when set, else ``full-metric`` under the user's cache
directory (``$XDG_CACHE_HOME``, default ``~/.cache``): the rule huggingface_hub follows for its
own ``HF_HOME``.

    python -m full_metric.cache          (prints the folder; the reports' reproduce.sh scripts read it)
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

#: The environment variable that names the cache folder.
CACHE_VARIABLE = "FULL_METRIC_CACHE"


def cache_dir() -> Path:
    """The folder long runs keep their checkpoints and outputs in (not created here)."""
    named = os.environ.get(CACHE_VARIABLE)
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "full-metric"


def checkpoint_for(output: str | Path) -> Path:
    """Where the checkpoint of a run that writes ``output`` is kept: in the cache folder, named by the output's
    name and a digest of its absolute path, so that the same command finds it again after a stop, and after
    the checkout holding ``output`` was removed and laid anew at the same place."""
    resolved = Path(output).expanduser().resolve()
    key = hashlib.sha256(str(resolved).encode("utf-8")).hexdigest()[:12]
    return cache_dir() / "checkpoints" / f"{resolved.name}-{key}.checkpoint"


def run_folder(name: str) -> Path:
    """A long run's own folder in the cache (``runs/NAME``): the GRPO example's checkpoints by default."""
    return cache_dir() / "runs" / name


if __name__ == "__main__":
    print(cache_dir())

"""Checks shared by the tests that read back what a command wrote."""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def assert_drawn_png(path: Path, min_width: int = 300, min_height: int = 200) -> tuple[int, int]:
    """``path`` is a PNG of at least this size with something drawn on it (not one flat colour,
    nor only a frame); returns its size."""
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "PNG"
        width, height = image.size
        pixels = np.asarray(image.convert("L"))
    assert width >= min_width and height >= min_height, (width, height)
    assert len(np.unique(pixels)) > 8, "a blank image"
    assert (pixels < 250).mean() > 0.01, "almost nothing drawn"
    return width, height


def run_checked(args: list[str], timeout: float = 300, ok: bool = True, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run a child process with a timeout (it is killed when the time runs out); with ``ok`` a
    non-zero exit fails the test showing the child's stderr."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"{' '.join(map(str, args[:5]))} ran over {timeout} s and was killed; stderr:\n"
                    f"{(error.stderr or b'')[-3000:]!s}")
    if ok and done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args[:5]))} exited {done.returncode}; stderr:\n{done.stderr[-3000:]}")
    return done


def run_together(commands: list[list[str]], timeout: float = 300, **kwargs: Any) -> list[str]:
    """Start several child processes at once, wait for all under one deadline (killing every one
    left when it passes), fail showing each failed child's stderr; returns their stdouts."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs) for c in commands]
    deadline = time.monotonic() + timeout
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=max(1.0, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        pytest.fail(f"{len(procs)} processes ran over {timeout} s and were killed")
    failed = [f"process {k} exited {p.returncode}:\n{err[-3000:]}" for k, (p, (_, err)) in enumerate(zip(procs, outs))
              if p.returncode != 0]
    if failed:
        pytest.fail("\n".join(failed))
    return [out for out, _ in outs]


def sha_of_files(*files: Path) -> str:
    """The digest a signature must carry for these files, worked out with hashlib (an oracle outside the code
    under test): sha256 over their bytes, in name order, its first 16 hex digits."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.read_bytes())
    return "sha256:" + h.hexdigest()[:16]

"""Protects honest version floors: the lowest torch and transformers that pyproject.toml declares
are the versions CI installs in its second environment (``.ci/run``) to run the engine tests (the
Space's requirements.txt installs the package itself, so it declares no versions of its own)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_declared_floors_are_the_versions_ci_tests():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = dict(re.fullmatch(r"([a-z]+)>=([\d.]+)", d).groups() for d in dependencies if d.startswith(("torch", "transformers")))
    ci = (ROOT / ".ci" / "run").read_text()
    floor_line = next(line for line in ci.splitlines() if ".venv-floor/bin/pip install torch" in line)
    assert f"torch=={floors['torch']}" in floor_line or f"torch=={floors['torch']}.0" in floor_line
    assert f"transformers=={floors['transformers']}" in floor_line

"""Protects honest version floors: the lowest torch, transformers and peft that pyproject.toml declares
are the versions CI installs in its second environment (``.ci/run``) to run the engine tests and read
the shipped adapter (the Space's requirements.txt installs the package itself, so it declares no
versions of its own)."""

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


def test_the_declared_peft_floor_is_the_one_ci_tests():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    floor = next(d for d in extras["adapt"] if d.startswith("peft")).removeprefix("peft>=")
    assert f"peft>={floor}" in extras["test"]
    floor_line = next(line for line in (ROOT / ".ci" / "run").read_text().splitlines()
                      if ".venv-floor/bin/pip install torch" in line)
    assert f"peft=={floor}" in floor_line


def test_the_shipped_adapters_config_reads_with_the_installed_peft():
    """peft 0.13 could not read the shipped config (a TypeError on ``alora_invocation_tokens``, a field of
    later versions): in the floors' environment this reads it with the declared lowest peft."""
    import json

    peft = __import__("pytest").importorskip("peft")
    from peft import LoraConfig, PeftConfig

    folder = ROOT / "full_metric" / "judges" / "smollm2-complaints"
    written = json.loads((folder / "adapter_config.json").read_text())
    config = PeftConfig.from_pretrained(str(folder))
    assert isinstance(config, LoraConfig), peft.__version__
    assert (config.r, config.lora_alpha, config.lora_dropout) == (written["r"], written["lora_alpha"], written["lora_dropout"])

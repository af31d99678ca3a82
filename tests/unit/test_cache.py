"""Issue 61, 1: where long runs keep what must outlive a stop (full_metric.cache): the folder by the rule
huggingface_hub follows for HF_HOME, and a checkpoint named by the output's absolute path, so that two runs whose
outputs share a name never share a checkpoint, and the same output however it is written finds its own."""

from __future__ import annotations

from pathlib import Path

from full_metric.cache import cache_dir, checkpoint_for, run_folder


def test_the_folder_is_the_variable_else_the_users_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("FULL_METRIC_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine" and run_folder("grpo") == tmp_path / "mine" / "runs" / "grpo"
    monkeypatch.delenv("FULL_METRIC_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "full-metric"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "full-metric"


def test_a_checkpoint_is_named_by_the_outputs_absolute_path(monkeypatch, tmp_path):
    monkeypatch.setenv("FULL_METRIC_CACHE", str(tmp_path / "cache"))
    a, b = checkpoint_for(tmp_path / "one" / "judge"), checkpoint_for(tmp_path / "two" / "judge")
    assert a != b and a.parent == b.parent == tmp_path / "cache" / "checkpoints"
    assert a.name.startswith("judge-") and a.name.endswith(".checkpoint")
    (tmp_path / "one").mkdir()
    monkeypatch.chdir(tmp_path / "one")
    assert checkpoint_for("judge") == a  # relative or absolute: one output, one checkpoint


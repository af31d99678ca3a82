"""Loading a Hub model the way huggingface_hub is configured (issue 46, 1 and 2b): through a mirror
(``HF_ENDPOINT``) and through a proxy (``HTTP_PROXY``, the Hub's own host unreachable directly), the
model is downloaded and named by the commit it was loaded at (never "unknown"); with no Hub and no
cached copy, one clear line within seconds; with no Hub and a cached copy, it loads from the cache.
Each case runs in a process of its own (huggingface_hub reads its settings when it is imported), against
the stand-in Hub of tests/hub_server.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from full_metric.model_sources import OFFLINE_HINT

from ..hub_server import COMMIT, serving

REPO = Path(__file__).resolve().parents[2]
MODEL = "someorg/tiny-blenderbot"
SCORE = """
import json, sys, time
from full_metric import FullScorer
started = time.monotonic()  # from the load on (importing torch takes seconds of its own)
try:
    scorer = FullScorer(sys.argv[1], revision=sys.argv[2] if len(sys.argv) > 2 else None, device="cpu",
                        progress=False)
    out = {"scores": scorer.score([["Hi! How was your weekend?"]], ["Great, I went hiking."]).scores,
           "signature": scorer.signature()}
except ValueError as error:
    out = {"error": str(error)}
out["seconds"] = time.monotonic() - started
print(json.dumps(out))
"""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _load(model: str, cache: Path, *revision: str, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items()  # no proxy, and online unless told
               if "proxy" not in k.lower() and not k.startswith(("HF_", "TRANSFORMERS_OFFLINE"))}
    environ.update({"PYTHONPATH": str(REPO), "HF_HOME": str(cache), **env})
    done = subprocess.run([sys.executable, "-c", SCORE, model, *revision], env=environ, capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def local(tiny_blenderbot_path) -> list[float]:
    from full_metric import FullScorer

    return FullScorer(str(tiny_blenderbot_path), device="cpu", progress=False).score(
        [["Hi! How was your weekend?"]], ["Great, I went hiking."]).scores


@pytest.mark.parametrize("route", ["mirror", "proxy"])
def test_a_hub_model_loads_through_a_mirror_or_a_proxy_and_is_named_by_its_commit(route, tiny_blenderbot_path,
                                                                                   local, tmp_path):
    with serving({MODEL: tiny_blenderbot_path}) as hub:
        env = {"HF_ENDPOINT": hub.url} if route == "mirror" else {
            "HF_ENDPOINT": "http://hub.invalid", "HTTP_PROXY": hub.url, "http_proxy": hub.url}
        got = _load(MODEL, tmp_path / "cache", "main", **env)  # a branch asked for: named by its commit
    assert "error" not in got, got
    assert got["scores"] == local  # the very model: the same numbers
    assert f"|model:{MODEL}@{COMMIT}|" in got["signature"]
    assert {host for _, host, _ in hub.requests} == ({"hub.invalid"} if route == "proxy" else {hub.url[7:]})


def test_an_unreachable_hub_is_one_line_within_seconds_and_a_cached_model_still_loads(tiny_blenderbot_path,
                                                                                      local, tmp_path):
    nowhere = f"http://127.0.0.1:{_closed_port()}"
    got = _load(MODEL, tmp_path / "empty", HF_ENDPOINT=nowhere)
    assert got["error"] == f"model {MODEL!r} is not on this machine and the Hub cannot be reached: {OFFLINE_HINT}"
    assert got["seconds"] < 15
    with serving({MODEL: tiny_blenderbot_path}) as hub:  # cached once ...
        assert "error" not in _load(MODEL, tmp_path / "cache", HF_ENDPOINT=hub.url)
    for env in ({"HF_ENDPOINT": nowhere}, {"HF_HUB_OFFLINE": "1"}):  # ... then loaded with no Hub
        got = _load(MODEL, tmp_path / "cache", **env)
        assert got.get("scores") == local and f"|model:{MODEL}@{COMMIT}|" in got["signature"], (env, got)


def test_a_name_the_hub_does_not_know_is_one_line(tiny_blenderbot_path, tmp_path):
    with serving({MODEL: tiny_blenderbot_path}) as hub:
        got = _load("someorg/no-such-model", tmp_path / "cache", HF_ENDPOINT=hub.url)
    assert got["error"].startswith("model 'someorg/no-such-model' could not be loaded from the Hub (")
    assert "\n" not in got["error"] and "check its name" in got["error"]


def test_a_hub_that_answers_with_an_error_leaves_a_cached_model_loading(tiny_blenderbot_path, local, tmp_path):
    """Issue 62, 2: a 503 (or any error answer) from the endpoint: a cached model loads from the cache at
    its commit, as transformers and huggingface_hub do; with nothing cached, the Hub's real answer, not
    a word about the model's name."""
    with serving({MODEL: tiny_blenderbot_path}) as hub:
        assert "error" not in _load(MODEL, tmp_path / "cache", HF_ENDPOINT=hub.url)  # cached once
        for status in (503, 500, 404):
            hub.failing = status
            got = _load(MODEL, tmp_path / "cache", HF_ENDPOINT=hub.url)
            assert got.get("scores") == local and f"|model:{MODEL}@{COMMIT}|" in got["signature"], (status, got)
        hub.failing = 503
        got = _load(MODEL, tmp_path / "empty", HF_ENDPOINT=hub.url)
    assert "503" in got["error"] and "check its name" not in got["error"] and "\n" not in got["error"]


def test_every_file_is_read_at_the_commit_the_branch_resolved_to(tiny_blenderbot_path, tmp_path):
    """Issue 62, 6: asked for a branch, only the first file's lookup names the branch; every other file
    request goes to the commit it resolved to (the model, the tokenizer: one snapshot)."""
    with serving({MODEL: tiny_blenderbot_path}) as hub:
        assert "error" not in _load(MODEL, tmp_path / "cache", "main", HF_ENDPOINT=hub.url)
    files = [path.split("/resolve/", 1)[1].split("/", 1) for _, _, path in hub.requests if "/resolve/" in path]
    assert {name for revision, name in files if revision != COMMIT} == {"config.json"}
    assert {name for revision, name in files if revision == COMMIT} >= {"model.safetensors", "tokenizer_config.json"}

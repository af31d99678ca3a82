"""A model that cannot be loaded is one line that names it and says what to do, from the scorer,
the training reward and the command line alike (before: 66 to 94 lines of transformers' traceback):
a Hub id while offline, a local folder that does not exist, a file that is not a model, a folder
that is not a model folder. (Loading with no Hub, through a mirror or a proxy: test_hub_loading.py.)"""

from __future__ import annotations

import json
from pathlib import Path

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


def test_a_local_folders_identity_covers_every_file_that_can_change_a_score(tmp_path):
    """Issue 62, 5: the chat template, the tokenizer's files, the weights and config.json each change the
    revision (so the signature); the card, generation settings and a hidden file do not."""
    import json as json_module
    import shutil

    from full_metric.model_identity import local_revision

    folder = tmp_path / "model"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "tiny-blenderbot", folder)
    first = local_revision(str(folder), None)
    seen = {first}
    (folder / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")  # a template added
    seen.add(local_revision(str(folder), None))
    for name in ("chat_template.jinja", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                 "special_tokens_map.json", "config.json", "model.safetensors"):
        with open(folder / name, "ab") as handle:
            handle.write(b" ")
        seen.add(local_revision(str(folder), None))
    assert len(seen) == 10  # each change a new identity
    last = local_revision(str(folder), None)
    (folder / "README.md").write_text("a card", encoding="utf-8")
    (folder / ".gitattributes").write_text("*", encoding="utf-8")
    (folder / "generation_config.json").write_text(json_module.dumps({"max_length": 5}), encoding="utf-8")
    assert local_revision(str(folder), None) == last


def test_an_adapters_digest_covers_its_weights_and_its_config(tmp_path):
    """Issue 62, 6: a unit test of seconds for what a ten-minute adapt test caught: each of the adapter's files
    changes its digest; its card does not."""
    from full_metric.model_identity import adapter_digest

    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 8, "lora_alpha": 16}), encoding="utf-8")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"weights")
    seen = {adapter_digest(tmp_path)}
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 8, "lora_alpha": 32}), encoding="utf-8")
    seen.add(adapter_digest(tmp_path))
    (tmp_path / "adapter_model.safetensors").write_bytes(b"weights2")
    seen.add(adapter_digest(tmp_path))
    (tmp_path / "README.md").write_text("a card", encoding="utf-8")
    seen.add(adapter_digest(tmp_path))
    assert len(seen) == 3


def test_no_progress_means_no_loading_bar_of_transformers(tiny_blenderbot_path, capfd):
    """Issue 62, 9: progress=False (--no-progress) hides transformers' weight-loading bar and a GGUF file's
    de-quantizing bar too; progress=True shows them; either way the bars are as they were afterwards."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    from full_metric.models import loading_bars

    FullScorer(str(tiny_blenderbot_path), progress=False)
    assert "Loading weights" not in capfd.readouterr().err
    FullScorer(str(tiny_blenderbot_path), progress=True)
    assert "Loading weights" in capfd.readouterr().err
    original = gguf_utils.tqdm
    with loading_bars(False):
        assert gguf_utils.tqdm([1, 2]).disable and not hf_logging.is_progress_bar_enabled()
    assert gguf_utils.tqdm is original and hf_logging.is_progress_bar_enabled()

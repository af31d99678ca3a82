"""Protects "one settings object": every setting of ``full_metric.settings.SETTINGS`` reaches every
face (the scorer's keywords, ``evaluate.load``'s, the command line's options, the app's environment
variables, the docs), and bad values are refused by their declaration before any model loads."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from full_metric import FullScorer
from full_metric.settings import SETTINGS, markdown_table

ROOT = Path(__file__).resolve().parent.parent
NAMES = [s.name for s in SETTINGS]


def test_every_setting_is_a_scorer_keyword_and_nothing_else_is():
    params = set(inspect.signature(FullScorer.__init__).parameters) - {"self", "tokenizer"}
    assert params == set(NAMES)
    for name in NAMES:
        assert f"        {name}:" in FullScorer.__doc__ or name == "model"


def test_every_setting_is_an_evaluate_load_keyword():
    from full_metric.metric import _KWARGS_DESCRIPTION, FULL

    params = inspect.signature(FULL.__init__).parameters
    for setting in SETTINGS:
        assert params[setting.keyword].kind is inspect.Parameter.KEYWORD_ONLY
        assert f"    {setting.keyword}: " in _KWARGS_DESCRIPTION


@pytest.mark.parametrize("command", ["score", "correlate", "rank-follow-ups", "report", "score-candidates"])
def test_every_setting_is_an_option_of_every_scoring_command(command):
    from full_metric.cli import _parser

    sub = next(a for a in _parser()._actions if a.dest == "command").choices[command]
    flags = {flag: action.dest for action in sub._actions for flag in action.option_strings}
    for setting in SETTINGS:
        assert flags.get(setting.flag) == setting.name, setting.flag


def test_every_setting_is_an_app_environment_variable():
    from full_metric.webapp import settings_from_env

    values = {"batch_size": "3", "max_batch_tokens": "512", "context_budget": "40", "max_turns": "2",
              "progress": "1", "follow_ups": "Why?\nWhat?"}
    environ = {s.env: values.get(s.name, f"value-of-{s.name}") for s in SETTINGS}
    settings = settings_from_env(environ)
    assert set(settings) == set(NAMES)
    assert settings["batch_size"] == 3 and settings["max_turns"] == 2 and settings["progress"] is True
    assert settings["follow_ups"] == ["Why?", "What?"] and settings["gguf_file"] == "value-of-gguf_file"
    assert settings_from_env({})["progress"] is False and settings_from_env({})["model"] is None


def test_the_readme_table_is_the_declaration():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- settings table: python -m full_metric.settings -->\n")[1].split("\n<!-- end")[0]
    assert block.strip() == markdown_table()


@pytest.mark.parametrize("setting, value, message", [
    ("max_batch_tokens", 0, "max_batch_tokens must be a positive integer"),
    ("context_budget", -1, "context_budget must be a positive integer"),
    ("max_turns", True, "max_turns must be a positive integer"),
    ("rendering", "fancy", "unknown rendering 'fancy'"),
    ("dtype", "float8", "unknown dtype 'float8'"),
    ("aggregation", "median", "unknown aggregation"),
])
def test_bad_settings_are_refused_before_the_model_loads(setting, value, message, monkeypatch):
    import full_metric.scorer as scorer_module

    monkeypatch.setattr(scorer_module, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(ValueError, match=message):
        FullScorer("any/model", **{setting: value})


def test_the_cli_passes_every_setting_to_the_scorer(monkeypatch, tmp_path):
    import full_metric.cli as cli
    import full_metric.scorer as scorer_module

    seen = {}
    monkeypatch.setattr(scorer_module, "FullScorer", lambda model, **kw: seen.update(model=model, **kw) or 1 / 0)
    args = cli._parser().parse_args([
        "score", "in.jsonl", "-o", "out.jsonl", "--model", "m", "--gguf-file", "g", "--revision", "r",
        "--follow-ups", "paper", "--positive-follow-ups", "positive", "--aggregation", "mean", "--preset", "paper",
        "--rendering", "speaker", "--device", "cpu", "--dtype", "bfloat16", "--batch-size", "2",
        "--max-batch-tokens", "99", "--context-budget", "50", "--max-turns", "3", "--no-progress",
    ])
    with pytest.raises(ZeroDivisionError):
        cli._make_scorer(args)
    assert seen == {"model": "m", "gguf_file": "g", "revision": "r", "follow_ups": "paper",
                    "positive_follow_ups": "positive", "aggregation": "mean", "preset": "paper",
                    "rendering": "speaker", "device": "cpu", "dtype": "bfloat16", "batch_size": 2,
                    "max_batch_tokens": 99, "context_budget": 50, "max_turns": 3, "progress": False}


def test_an_unknown_setting_is_named():
    from full_metric.scorer import check_settings

    with pytest.raises(TypeError, match="unknown setting 'batchsize'"):
        check_settings({"batchsize": 4})

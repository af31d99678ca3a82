"""Protects "one meaning per setting": every setting and per-call option of
``full_metric.settings.SETTINGS`` reaches every face of its scope (the scorer's keywords and
``score``'s options, ``evaluate.load``'s keywords and ``compute``'s options, the command line's
options, the app's environment variables, the docs); a name means the same at load and per call;
the app's variables each have one meaning; bad values are refused by their declaration before any
model loads."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from full_metric import FullScorer
from full_metric.settings import CALL_OPTIONS, LOAD_SETTINGS, SETTINGS, markdown_table

ROOT = Path(__file__).resolve().parents[2]
LOAD = [s.name for s in LOAD_SETTINGS]
CALL = [s.name for s in CALL_OPTIONS]


def test_every_setting_has_one_scope_and_a_default_in_words():
    assert len({s.name for s in SETTINGS}) == len(SETTINGS)
    for s in SETTINGS:
        assert s.scope in ("load", "call", "both"), s.name
        assert "(default: " in s.full_help and s.default_text, s.name
    assert {"follow_ups", "positive_follow_ups", "aggregation", "batch_size", "progress"} <= set(CALL)


def test_every_load_setting_is_a_scorer_keyword_and_every_option_a_score_keyword():
    params = set(inspect.signature(FullScorer.__init__).parameters) - {"self", "tokenizer"}
    assert params == set(LOAD)
    for name in LOAD:
        assert f"        {name}:" in FullScorer.__doc__ or name == "model"
    options = set(inspect.signature(FullScorer.score).parameters) - {"self", "contexts", "responses"}
    assert options == set(CALL)
    for name in CALL:
        assert f"        {name}:" in FullScorer.score.__doc__


def test_every_setting_is_an_evaluate_keyword_of_its_scope():
    from full_metric.faces.comparison_metric import _KWARGS_DESCRIPTION as COMPARISON
    from full_metric.faces.metric import _KWARGS_DESCRIPTION, FULL

    params = inspect.signature(FULL.__init__).parameters
    for setting in LOAD_SETTINGS:
        assert params[setting.keyword].kind is inspect.Parameter.KEYWORD_ONLY
        assert f"    {setting.keyword}: " in _KWARGS_DESCRIPTION
    options = _KWARGS_DESCRIPTION.split("Options of one ``compute`` call")[1].split("Returns:")[0]
    for setting in CALL_OPTIONS:
        assert f"    {setting.name}: " in options
        assert f"    {setting.name}: " in COMPARISON.split("Options of one ``compute`` call")[1]


@pytest.mark.parametrize("command", ["score", "correlate", "rank-follow-ups", "report", "score-candidates"])
def test_every_load_setting_is_an_option_of_every_scoring_command(command):
    from full_metric.faces.cli import _parser

    sub = next(a for a in _parser()._actions if a.dest == "command").choices[command]
    flags = {flag: action.dest for action in sub._actions for flag in action.option_strings}
    for setting in LOAD_SETTINGS:
        assert flags.get(setting.flag) == setting.name, setting.flag


def test_every_load_setting_is_an_app_environment_variable():
    from full_metric.faces.webapp import settings_from_env

    values = {"batch_size": "3", "max_batch_tokens": "512", "context_budget": "40", "max_turns": "2",
              "progress": "1", "follow_ups": "Why?\nWhat?"}
    environ = {s.env: values.get(s.name, f"value-of-{s.name}") for s in LOAD_SETTINGS}
    settings = settings_from_env(environ)
    assert set(settings) == set(LOAD)
    assert settings["batch_size"] == 3 and settings["max_turns"] == 2 and settings["progress"] is True
    assert settings["follow_ups"] == ["Why?", "What?"] and settings["gguf_file"] == "value-of-gguf_file"
    assert settings_from_env({})["progress"] is False and settings_from_env({})["model"] is None
    # the app's text boxes take pasted "User: ..." lines: its scorer strips labels unless told not to
    assert settings_from_env({})["strip_speaker_prefixes"] is True
    assert settings_from_env({"FULL_STRIP_SPEAKER_PREFIXES": "0"})["strip_speaker_prefixes"] is False


def test_every_app_environment_variable_has_exactly_one_meaning():
    """The scorer's settings and the app's limits are read from names that cannot collide: before,
    FULL_FOLLOW_UPS was both the follow-up set and the limit on custom follow-ups, and
    ``FULL_FOLLOW_UPS=paper`` stopped the app at start-up."""
    from full_metric.faces.webapp import LIMIT_SETTINGS, Limits, settings_from_env

    names = [s.env for s in LOAD_SETTINGS] + [s.env for s in LIMIT_SETTINGS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert all(s.env.startswith("FULL_LIMIT_") for s in LIMIT_SETTINGS)
    environ = {"FULL_FOLLOW_UPS": "paper", "FULL_LIMIT_FOLLOW_UPS": "7"}
    assert Limits.from_env(environ).follow_ups == 7 and Limits.from_env({"FULL_FOLLOW_UPS": "paper"}) == Limits()
    assert settings_from_env(environ)["follow_ups"] == "paper"
    with pytest.raises(ValueError, match="FULL_LIMIT_ROWS must be"):
        Limits.from_env({"FULL_LIMIT_ROWS": "0"})


def test_defaults_are_values_and_their_help_is_derived():
    from full_metric.models import DTYPE_NAMES
    from full_metric.presets import DEFAULT_MODEL, PRESETS
    from full_metric.settings import BY_NAME

    assert "'paper'" in BY_NAME["preset"].full_help
    for name in ("follow_ups", "aggregation", "max_turns", "model"):
        assert "the preset's" in BY_NAME[name].full_help
    assert all(d in BY_NAME["dtype"].full_help for d in DTYPE_NAMES)
    assert str(PRESETS["paper"]["max_turns"]) in BY_NAME["max_turns"].full_help
    assert PRESETS["paper"]["model"] == DEFAULT_MODEL
    assert "4 on a CPU, 32 on an accelerator" in BY_NAME["batch_size"].full_help


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
    import full_metric.faces.cli as cli
    import full_metric.scorer as scorer_module

    seen = {}
    monkeypatch.setattr(scorer_module, "FullScorer", lambda model, **kw: seen.update(model=model, **kw) or 1 / 0)
    args = cli._parser().parse_args([
        "score", "in.jsonl", "-o", "out.jsonl", "--model", "m", "--gguf-file", "g", "--revision", "r",
        "--follow-ups", "paper", "--positive-follow-ups", "positive", "--aggregation", "mean", "--preset", "paper",
        "--rendering", "speaker", "--device", "cpu", "--dtype", "bfloat16", "--batch-size", "2",
        "--max-batch-tokens", "99", "--context-budget", "50", "--max-turns", "3", "--strip-speaker-prefixes",
        "--no-progress",
    ])
    with pytest.raises(ZeroDivisionError):
        cli._make_scorer(args)
    assert seen == {"model": "m", "gguf_file": "g", "revision": "r", "follow_ups": "paper",
                    "positive_follow_ups": "positive", "aggregation": "mean", "preset": "paper",
                    "rendering": "speaker", "device": "cpu", "dtype": "bfloat16", "batch_size": 2,
                    "max_batch_tokens": 99, "context_budget": 50, "max_turns": 3, "strip_speaker_prefixes": True,
                    "progress": False}


def test_an_unknown_setting_is_named():
    from full_metric.settings import check_settings

    with pytest.raises(TypeError, match="unknown setting 'batchsize'"):
        check_settings({"batchsize": 4})


def test_the_app_docs_table_is_the_limits_declaration():
    from full_metric.faces.webapp import limits_table

    text = (ROOT / "docs" / "app.md").read_text(encoding="utf-8")
    assert text.split("<!-- limits table: full_metric.faces.webapp.limits_table() -->\n")[1].split("\n<!-- end")[0] == limits_table()


def test_positive_follow_ups_with_perplexity_are_refused_by_one_rule_everywhere():
    """Settings, the app's options, the training objective and the aggregation itself refuse positive
    follow-ups with 'perplexity' by the one rule (aggregate.check_signs), in the same words."""
    import torch

    from full_metric.aggregate import aggregate_tensor
    from full_metric.research.complaints import check_trainable
    from full_metric.settings import resolve_options

    said = "the 'perplexity' aggregation takes no positive follow-ups"
    base = {"follow_ups": ("Huh?",), "positive_follow_ups": (), "aggregation": "sum"}
    with pytest.raises(ValueError, match=said):
        resolve_options({"positive_follow_ups": ["Nice!"], "aggregation": "perplexity"}, base)
    with pytest.raises(ValueError, match=said):
        check_trainable("perplexity", 1)
    with pytest.raises(ValueError, match=said):
        aggregate_tensor(torch.zeros(1, 2), [1, 1], "perplexity", positive=1)
    check_trainable("perplexity", 0)
    resolve_options({"aggregation": "perplexity"}, base)

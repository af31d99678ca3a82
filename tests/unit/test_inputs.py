"""Bad input raises a clear error naming the item, before any model work."""

from __future__ import annotations

import pytest

from full_metric import FullScorer


@pytest.fixture(scope="module")
def scorer(tiny_blenderbot_path):
    return FullScorer(tiny_blenderbot_path, device="cpu", progress=False)


@pytest.mark.parametrize(
    "contexts,responses,error,message",
    [
        ([["a"], ["b"]], ["x"], ValueError, "2 contexts but 1 responses"),
        ([["a"], ["b", None]], ["x", "y"], TypeError, r"contexts\[1\]\[1\] must be a string, got NoneType"),
        ([["a"], "b"], ["x", "y"], TypeError, r"contexts\[1\] is a string"),
        ([["a"], ["b"]], ["x", None], TypeError, r"responses\[1\] must be a string"),
        ([["a"], ["b"]], ["x", 3], TypeError, r"responses\[1\] must be a string, got int"),
        ("a dialog", None, TypeError, "contexts must be a list"),
        (None, None, TypeError, "contexts must be a list"),
        ([["a"], []], None, ValueError, r"contexts\[1\] is an empty dialog"),
        ([["a"], [1]], None, TypeError, r"contexts\[1\]\[0\] must be a string, got int"),
    ],
)
def test_bad_dialogs(scorer, contexts, responses, error, message, monkeypatch):
    """Each kind of malformed dialog input is refused before model work, naming the item."""
    monkeypatch.setattr(scorer.loaded.model, "forward", _no_model_work)
    with pytest.raises(error, match=message):
        scorer.score(contexts, responses)


def _no_model_work(*args, **kwargs):
    raise AssertionError("the model ran before the input was checked")


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"follow_ups": []}, ValueError, "follow_ups is empty"),
        ({"follow_ups": ["ok", ""]}, ValueError, r"follow_ups\[1\] is empty"),
        ({"follow_ups": ["ok", "ok"]}, ValueError, r"follow_ups\[1\] repeats follow_ups\[0\]"),
        ({"follow_ups": ["ok", None]}, TypeError, r"follow_ups\[1\] must be a string"),
        ({"follow_ups": "no-such-set"}, ValueError, "unknown follow-up set"),
        ({"batch_size": 0}, ValueError, "batch_size must be a positive integer"),
        ({"engine": "fast"}, ValueError, "unknown engine"),
    ],
)
def test_bad_score_settings(scorer, kwargs, error, message, monkeypatch):
    """Bad per-call settings are refused before model work, naming the setting."""
    monkeypatch.setattr(scorer.loaded.model, "forward", _no_model_work)
    with pytest.raises(error, match=message):
        scorer.score([["a"]], ["b"], **kwargs)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"aggregation": "max"}, ValueError, "unknown aggregation"),
        ({"preset": "best"}, ValueError, "unknown preset"),
        ({"follow_ups": []}, ValueError, "follow_ups is empty"),
        ({"batch_size": -2}, ValueError, "batch_size"),
        ({"max_turns": 0}, ValueError, "max_turns"),
        ({"context_budget": 0}, ValueError, "context_budget"),
        ({"dtype": "float8"}, ValueError, "unknown dtype"),
    ],
)
def test_bad_settings_fail_before_loading(kwargs, error, message):
    with pytest.raises(error, match=message):
        FullScorer("/nonexistent/model/folder", **kwargs)


def test_rendering_must_fit_the_family(tiny_blenderbot_path):
    with pytest.raises(ValueError, match="does not fit an encoder-decoder model"):
        FullScorer(tiny_blenderbot_path, rendering="speaker", progress=False)


def test_loaded_model_needs_tokenizer(tiny_models):
    with pytest.raises(ValueError, match="tokenizer="):
        FullScorer(tiny_models["llama"])


def test_valid_edge_cases_score(scorer):
    contexts = [["", "", ""], [], ["emoji 🎉🎉", "Ünïcödé ✓"], ["word " * 2000]]
    responses = ["fine", "first turn", "日本語", "long " * 3000]
    result = scorer.score(contexts, responses)
    assert len(result.scores) == 4
    assert all(s == s for s in result.scores[:3])  # no NaN where the context was read
    assert result.unscored == [3] and result.dropped_tokens[3] > 0  # a 3,000-word response leaves no room


def test_empty_input_gives_empty_result(scorer):
    result = scorer.score([], [])
    assert result.scores == [] and result.mean != result.mean


def test_a_response_under_another_name_is_refused_not_scored_as_a_dialog():
    """Before, ``{"context": [...], "reply": "..."}`` was silently scored at dialog level."""
    import pytest

    from full_metric.files.dialog_files import DialogFileError, check_row

    with pytest.raises(DialogFileError, match=r"line 3: no field 'response' but a field 'reply'"):
        check_row({"context": ["Hi!"], "reply": "Hello."}, "in.jsonl, line 3")
    with pytest.raises(DialogFileError, match="field 'Answer'"):
        check_row({"context": "Hi!", "Answer": "Hello."}, "in.csv, line 2", csv_row=True)
    assert check_row({"context": ["Hi!", "Hello."], "system": "bot-a", "id": 7}, "x") == (["Hi!", "Hello."], None)
    assert check_row({"context": ["Hi!"], "response": "Hello.", "reply": "kept as is"}, "x") == (["Hi!"], "Hello.")

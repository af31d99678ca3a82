"""Protects FULL inside training loops, each run for real with tiny models on the CPU: the Trainer
callback (logged value equal to a direct score of the answers it generated, judge loaded once,
the trained model's state kept, logged through on_log or refused), Seq2SeqTrainer's
compute_metrics, the example script under a real 2-process ``torchrun`` (two processes log what one
does, in input order), a GRPOTrainer run with FULL as reward, policies as users bring them (no
padding token, prompts longer than the model's positions, BlenderBot without a chat template),
the judge's placement, and the bad inputs, refused before any model work."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from full_metric import FullScorer
from full_metric.faces.training import FullCallback, full_compute_metrics, full_reward, generate_responses

from ..helpers import run_checked

REPO = Path(__file__).resolve().parents[2]
CONTEXTS = [["Hi! How was your weekend?"], ["I just adopted a puppy!", "Oh wow! What breed?"], ["Do you cook?"]]
FIVE_CONTEXTS = [*CONTEXTS, ["What is your favourite film?", "Probably Alien.", "Why that one?"], ["Good morning."]]


@pytest.fixture(scope="module")
def policy_folder(tmp_path_factory, tiny_models, tokenizer):
    """A tiny random Llama with the fixture's tokenizer, saved as a local folder (the model to train)."""
    folder = tmp_path_factory.mktemp("policy")
    tiny_models["llama"].save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _training_args(tmp_path, **extra):
    from transformers import TrainingArguments

    settings = dict(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, learning_rate=1e-3,
                    eval_strategy="steps", eval_steps=1, logging_steps=1, save_strategy="no", report_to=[],
                    use_cpu=True, disable_tqdm=True)
    return TrainingArguments(**{**settings, **extra})


def _lm_data(tokenizer, n=4):
    rows = []
    for k in range(n):
        ids = tokenizer(f"A: hello number {k}\nB: hi there {k}")["input_ids"]
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": list(ids)})
    return rows


def _collate(batch):
    width = max(len(b["input_ids"]) for b in batch)
    fill = {"input_ids": 1, "attention_mask": 0, "labels": -100}
    return {k: torch.tensor([b[k] + [fill[k]] * (width - len(b[k])) for b in batch]) for k in batch[0]}


def test_the_callback_logs_what_a_direct_score_gives_and_loads_the_judge_once(
        policy_folder, tiny_blenderbot_path, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainerCallback

    tokenizer = AutoTokenizer.from_pretrained(policy_folder)
    model = AutoModelForCausalLM.from_pretrained(policy_folder)
    trainer = Trainer(model=model, args=_training_args(tmp_path), train_dataset=_lm_data(tokenizer),
                      eval_dataset=_lm_data(tokenizer, 2), data_collator=_collate, processing_class=tokenizer)
    modes = []
    probe = type("Probe", (TrainerCallback,), {"on_evaluate": lambda self, *a, model=None, **k: modes.append(
        (model.training, model.config.use_cache))})
    trainer.add_callback(probe())  # before FULL's
    callback = FullCallback(CONTEXTS, model=str(tiny_blenderbot_path), device="auto").attach(trainer)
    trainer.add_callback(probe())  # after
    trainer.train()
    logged = [r for r in trainer.state.log_history if "eval_full" in r]
    assert [r["step"] for r in logged] == [1, 2]  # two evaluations ...
    assert callback.judge.loads == 1  # ... one judge
    judge = callback.judge.get()
    assert judge.model.device.type == "cpu" and not judge.model.training
    table = [json.loads(line) for line in (tmp_path / "full" / "step-2.jsonl").read_text().splitlines()]
    assert [row["context"] for row in table] == CONTEXTS
    direct = FullScorer(tiny_blenderbot_path, progress=False).score(CONTEXTS, [row["response"] for row in table])
    assert logged[-1]["eval_full"] == pytest.approx(direct.mean, rel=1e-6)
    assert [row["full"] for row in table] == pytest.approx(direct.scores, rel=1e-6)
    assert logged[-1]["eval_full_signature"] == direct.signature
    assert logged[-1]["eval_full_ci_low"] <= logged[-1]["eval_full"] <= logged[-1]["eval_full_ci_high"]
    assert modes[0::2] == modes[1::2]  # the trained model's mode and cache setting as FULL found them


def test_the_callback_logs_the_mean_over_scored_answers_when_one_is_too_long(policy_folder, tiny_blenderbot_path,
                                                                             tmp_path):
    """Issue 62, 0: a rambling answer (60 new tokens of a random policy, past a judge that reads 30) did abort
    training at evaluation; now the mean is over the scored answers, the count of the others is logged, and the
    table holds valid JSON (null and the reason)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

    tokenizer = AutoTokenizer.from_pretrained(policy_folder)
    model = AutoModelForCausalLM.from_pretrained(policy_folder)
    trainer = Trainer(model=model, args=_training_args(tmp_path, max_steps=1), train_dataset=_lm_data(tokenizer),
                      eval_dataset=_lm_data(tokenizer, 2), data_collator=_collate, processing_class=tokenizer)
    contexts = [["Hi!"], ["How are you?"]]
    FullCallback(contexts, model=str(tiny_blenderbot_path), device="cpu", context_budget=30,
                 generation_kwargs={"max_new_tokens": 60, "min_new_tokens": 60, "do_sample": False}).attach(trainer)
    trainer.train()
    logged = next(r for r in trainer.state.log_history if "eval_full" in r)
    table = [json.loads(line, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
             for line in (tmp_path / "full" / "step-1.jsonl").read_text().splitlines()]
    unscored = [row for row in table if row["full"] is None]
    assert unscored and logged["eval_full_unscored"] == len(unscored) and all(row["unscored"] for row in unscored)
    scored = [row["full"] for row in table if row["full"] is not None]
    assert (math.isnan(logged["eval_full"]) if not scored else logged["eval_full"] == pytest.approx(
        sum(scored) / len(scored), rel=1e-6))


def test_generation_leaves_the_trained_models_state_as_it_was(tiny_models, tokenizer):
    model = tiny_models["gpt2"]
    model.train()
    model.gradient_checkpointing_enable()
    use_cache = model.config.use_cache
    answers = generate_responses(model, tokenizer, CONTEXTS, {"max_new_tokens": 4})
    assert len(answers) == 3 and all(isinstance(a, str) and a for a in answers)
    assert model.training and model.is_gradient_checkpointing and model.config.use_cache == use_cache
    assert any(m.training for m in model.modules())  # dropout still on
    model.gradient_checkpointing_disable()
    model.eval()


def test_seq2seq_compute_metrics_logs_full(tiny_blenderbot_path, tmp_path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, Seq2SeqTrainer, Seq2SeqTrainingArguments

    tokenizer = AutoTokenizer.from_pretrained(tiny_blenderbot_path)
    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_blenderbot_path)
    rows = [{"input_ids": tokenizer("  ".join(c))["input_ids"], "labels": tokenizer(text_target="Fine, thanks.")["input_ids"]}
            for c in CONTEXTS]

    def collate(batch):
        width = max(len(b["input_ids"]) for b in batch)
        labels = max(len(b["labels"]) for b in batch)
        pad = tokenizer.pad_token_id
        return {"input_ids": torch.tensor([b["input_ids"] + [pad] * (width - len(b["input_ids"])) for b in batch]),
                "attention_mask": torch.tensor([[1] * len(b["input_ids"]) + [0] * (width - len(b["input_ids"]))
                                                for b in batch]),
                "labels": torch.tensor([b["labels"] + [-100] * (labels - len(b["labels"])) for b in batch])}

    seen = []
    metrics = full_compute_metrics(CONTEXTS, tokenizer, model=str(tiny_blenderbot_path))

    def compute(prediction):
        seen.append(prediction.predictions)
        return metrics(prediction)

    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path), predict_with_generate=True, generation_max_length=12,
                                    per_device_eval_batch_size=2, report_to=[], use_cpu=True, disable_tqdm=True)
    trainer = Seq2SeqTrainer(model=model, args=args, eval_dataset=rows, data_collator=collate,
                             processing_class=tokenizer, compute_metrics=compute)
    out = trainer.evaluate()
    ids = [[t for t in row if t >= 0] for row in seen[0].tolist()]
    responses = [t.strip() for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]
    direct = FullScorer(tiny_blenderbot_path, progress=False).score(CONTEXTS, responses)
    assert out["eval_full"] == pytest.approx(direct.mean, rel=1e-6) and out["eval_full_n"] == 3
    assert any("eval_full" in r for r in trainer.state.log_history)


def test_two_real_processes_log_what_one_logs_in_input_order(policy_folder, tiny_blenderbot_path, tmp_path):
    """The example script under ``torchrun --nproc_per_node 2`` (gloo on the CPU): two processes ran
    (each prints its rank and the world size its process group reports), 5 contexts over 2 ranks
    (uneven shares) all scored, FULL equal to the one-process run's and the table in input order."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    contexts = tmp_path / "contexts.jsonl"
    contexts.write_text("".join(json.dumps({"context": c, "response": "ok"}) + "\n" for c in FIVE_CONTEXTS))
    script = [str(REPO / "examples" / "train_with_full.py"), "--policy", str(policy_folder), "--judge",
              str(tiny_blenderbot_path), "--steps", "2", "--eval-steps", "2", "--contexts", str(contexts),
              "--generation-batch-size", "2"]  # shares of 3 and 2 contexts: 2 calls and 1 call + a filler
    env = {**_environ(), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONUNBUFFERED": "1"}  # the ranks write as they go: their lines must still come whole
    one = run_checked([sys.executable, *script, "--output-dir", str(tmp_path / "one")], timeout=600, cwd=REPO, env=env)
    two = run_checked([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
                       *script, "--output-dir", str(tmp_path / "two")], timeout=600, cwd=REPO, env=env)
    calls = "generate calls per evaluation"
    assert sorted(line for line in two.stdout.splitlines() if line.startswith("rank ")) == [
        f"rank 0 of 2: 2 {calls}", f"rank 1 of 2: 2 {calls}"]  # both ranks ran, the one with 2 contexts padded out
    assert [line for line in one.stdout.splitlines() if line.startswith("rank ")] == [f"rank 0 of 1: 3 {calls}"]
    single, double = (json.loads(next(x for x in reversed(done.stdout.splitlines()) if x.startswith("{")))
                      for done in (one, two))
    assert double["before"]["eval_full_n"] == single["before"]["eval_full_n"] == len(FIVE_CONTEXTS)
    assert double["before"]["eval_full"] == pytest.approx(single["before"]["eval_full"], rel=1e-5)
    assert double["before"]["eval_full_signature"] == single["before"]["eval_full_signature"]
    assert [r["eval_full_n"] for r in double["logged"]] == [len(FIVE_CONTEXTS)]  # after training (two ranks train
    # with twice the batch, so the trained models differ: only the evaluation before training compares)
    tables = [[json.loads(x) for x in (tmp_path / run / "full" / "step-0.jsonl").read_text().splitlines()]
              for run in ("one", "two")]
    assert [row["context"] for row in tables[1]] == FIVE_CONTEXTS  # input order, every context
    assert [row["full"] for row in tables[1]] == pytest.approx([row["full"] for row in tables[0]], rel=1e-5)
    assert [row["response"] for row in tables[1]] == [row["response"] for row in tables[0]]
    after = [json.loads(x)["context"] for x in (tmp_path / "two" / "full" / "step-2.jsonl").read_text().splitlines()]
    assert after == FIVE_CONTEXTS


def _environ():
    import os

    return dict(os.environ)


def test_a_grpo_run_with_full_as_reward(policy_folder, tiny_blenderbot_path, tmp_path):
    """Two GRPO steps, FULL one of the reward functions, plain and conversational prompts: finite
    rewards, each the direct FULL score of its completion (raw scale)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(policy_folder)
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}" \
                              "{% if add_generation_prompt %}assistant:{% endif %}"
    model = AutoModelForCausalLM.from_pretrained(policy_folder)
    reward = full_reward(model=str(tiny_blenderbot_path))
    calls = []

    def recorded(prompts, completions, **kwargs):
        values = reward(prompts, completions, **kwargs)
        calls.append((prompts, completions, values))
        return values

    recorded.__name__ = "full"
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "Hi! How was your weekend?"}]},
                              {"prompt": [{"role": "user", "content": "I just adopted a puppy!"}]}])
    plain = Dataset.from_list([{"prompt": "Hi! How was your weekend?"}, {"prompt": "Do you cook?"}])
    for dataset in (data, plain):
        config = GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, num_generations=2,
                            max_completion_length=6, report_to=[], use_cpu=True, logging_steps=1, save_strategy="no",
                            disable_tqdm=True)
        GRPOTrainer(model=model, reward_funcs=[recorded], args=config, train_dataset=dataset,
                    processing_class=tokenizer).train()
    assert len(calls) >= 4 and reward.judge.loads == 1
    scorer = FullScorer(tiny_blenderbot_path, progress=False)
    for prompts, completions, values in calls:
        assert all(math.isfinite(v) for v in values)
        contexts = [[m["content"] for m in p] if isinstance(p, list) else [p] for p in prompts]
        answers = [(" ".join(m["content"] for m in c) if isinstance(c, list) else c).strip() for c in completions]
        assert values == pytest.approx(scorer.score(contexts, answers).scores, rel=1e-6)


# -- bad input, before any model work -----------------------------------------------------------
@pytest.fixture
def no_model(monkeypatch):
    import full_metric.faces.training as training

    monkeypatch.setattr(training, "FullScorer", lambda *a, **k: pytest.fail("the judge was loaded"))


def test_no_contexts_is_refused(no_model):
    with pytest.raises(ValueError, match="contexts is empty"):
        FullCallback([], model="any/model")
    with pytest.raises(ValueError, match=r"contexts\[1\] has no turn"):
        FullCallback([["Hi"], []], model="any/model")
    with pytest.raises(TypeError, match=r"contexts\[0\]\[0\] must be a string"):
        full_compute_metrics([[3]], tokenizer=None)


def test_a_tokenizer_that_cannot_generate_is_refused(no_model, tokenizer):
    mute = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    mute.pad_token, mute.eos_token = None, None
    with pytest.raises(ValueError, match="neither a padding nor an end-of-text token"):
        FullCallback(CONTEXTS, tokenizer=mute, model="any/model")


def test_bad_reward_calls_are_named(no_model):
    reward = full_reward(model="any/model")
    with pytest.raises(ValueError, match="got 2 prompts but 1 completions"):
        reward(["a", "b"], ["x"])
    with pytest.raises(ValueError, match=r"prompts\[1\] has no user turn"):
        reward([[{"role": "user", "content": "Hi"}], [{"role": "system", "content": "Be nice."}]],
               [[{"role": "assistant", "content": "Hello"}], [{"role": "assistant", "content": "Hi"}]])
    assert reward.judge.loads == 0


def test_importing_full_metric_does_not_import_trl():
    code = "import sys, full_metric, full_metric.faces.training; print(full_metric.__file__); print('trl' in sys.modules)"
    done = run_checked([sys.executable, "-c", code], timeout=120, cwd=REPO, env={**_environ(), "PYTHONPATH": str(REPO)})
    where, trl = done.stdout.strip().splitlines()
    assert Path(where) == REPO / "full_metric" / "__init__.py" and trl == "False"  # this checkout's package


# -- policies as they are ----------------------------------------------------------------------
@pytest.fixture
def no_pad_tokenizer(tokenizer):
    """A GPT-2 style tokenizer: an end-of-text token, no padding token."""
    import copy

    tok = copy.deepcopy(tokenizer)
    tok.pad_token = None
    assert tok.pad_token_id is None and tok.eos_token_id is not None
    return tok


def test_a_policy_without_padding_token_in_a_real_trainer_run_keeps_the_newest_turn(
        tiny_models, no_pad_tokenizer, tiny_blenderbot_path, tmp_path):
    """GPT-2 style tokenizer (no padding token) through FullCallback in a Trainer run; a context
    longer than the policy's 96 positions keeps its newest turn in the prompt (read back from the
    table); the tokenizer is as it was."""
    from transformers import GPT2LMHeadModel, Trainer

    tok = no_pad_tokenizer
    model = GPT2LMHeadModel(tiny_models["gpt2"].config)
    model.load_state_dict(tiny_models["gpt2"].state_dict())
    long_context = [f"This is old turn number {k} about the harbour." for k in range(30)] + ["NEWEST turn: do you sail?"]
    before = {k: getattr(tok, k) for k in ("pad_token", "padding_side", "truncation_side", "model_max_length")}
    trainer = Trainer(model=model, args=_training_args(tmp_path), train_dataset=_lm_data(tok),
                      eval_dataset=_lm_data(tok, 2), data_collator=_collate, processing_class=tok)
    FullCallback([*CONTEXTS, long_context], model=str(tiny_blenderbot_path), generation_kwargs={"max_new_tokens": 4}) \
        .attach(trainer)
    trainer.train()
    assert {k: getattr(tok, k) for k in before} == before
    table = [json.loads(x) for x in (tmp_path / "full" / "step-2.jsonl").read_text().splitlines()]
    prompt = table[-1]["prompt"]
    assert "NEWEST turn: do you sail?" in prompt and "old turn number 0 " not in prompt
    assert len(tok(prompt, add_special_tokens=False)["input_ids"]) <= 96 - 4
    assert [row["context"] for row in table] == [*CONTEXTS, long_context]


def test_generation_pads_with_end_of_text_and_restores_the_tokenizer(tiny_models, no_pad_tokenizer, monkeypatch):
    """A tokenizer without a padding token: a batch of prompts of different lengths is padded on the
    left with the end-of-text token (masked out), generate is told so; the tokenizer is unchanged."""
    tok = no_pad_tokenizer
    tok.padding_side, tok.truncation_side = "right", "right"
    model = tiny_models["llama"]
    calls = []
    real = model.generate

    def recorded(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(model, "generate", recorded)
    answers = generate_responses(model, tok, CONTEXTS, {"max_new_tokens": 3})
    assert len(answers) == 3
    assert (tok.pad_token, tok.padding_side, tok.truncation_side) == (None, "right", "right")
    (call,) = calls
    ids, mask = call["input_ids"], call["attention_mask"]
    assert call["pad_token_id"] == tok.eos_token_id
    assert (mask == 0).any()  # the prompts differ in length: some row is padded
    assert bool((ids[mask == 0] == tok.eos_token_id).all())  # padded with end-of-text ...
    assert all(m.tolist() == sorted(m.tolist()) for m in mask)  # ... on the left


def test_every_rank_calls_generate_equally_often(tiny_models, tokenizer, monkeypatch):
    """5 contexts over 2 ranks, 2 per batch: shares of 3 and 2, so both ranks call generate twice
    (the short share pads with a discarded filler batch); an empty share still calls it."""
    model = tiny_models["llama"]
    calls = []
    real = model.generate
    monkeypatch.setattr(model, "generate", lambda **kw: calls.append(kw["input_ids"].shape[0]) or real(**kw))
    answers = generate_responses(model, tokenizer, FIVE_CONTEXTS[3:], {"max_new_tokens": 2}, batch_size=2, batches=2)
    assert len(answers) == 2 and len(calls) == 2
    calls.clear()
    assert generate_responses(model, tokenizer, [], {"max_new_tokens": 2}, batch_size=2, batches=1) == []
    assert len(calls) == 1
    with pytest.raises(ValueError, match="need 2 batches"):
        generate_responses(model, tokenizer, FIVE_CONTEXTS[:3], {"max_new_tokens": 2}, batch_size=2, batches=1)


def test_the_callback_shares_the_contexts_so_that_ranks_generate_equally(tiny_models, tokenizer, tiny_blenderbot_path,
                                                                         monkeypatch):
    """Each rank of a (simulated) 2-process run: an equal number of generate calls, shares that
    together hold every context once."""
    import full_metric.faces.training as training
    from full_metric.files.distributed import Rank

    model = tiny_models["llama"]
    callback = FullCallback(FIVE_CONTEXTS, model=str(tiny_blenderbot_path), batch_size=2,
                            generation_kwargs={"max_new_tokens": 2})
    seen, calls = [], []
    real = model.generate
    monkeypatch.setattr(model, "generate", lambda **kw: calls.append(1) or real(**kw))

    class Gathered(Exception):
        """This rank's part reached the gathering: the rest needs the other rank."""

    def gather(part):
        seen.append(part)
        raise Gathered

    monkeypatch.setattr(training, "gather_results", gather)
    for rank in (0, 1):
        calls.clear()
        monkeypatch.setattr(training, "current_rank", lambda rank=rank: Rank(rank, 2))
        with pytest.raises(Gathered):
            callback.evaluate(model, tokenizer)
        assert len(calls) == 2, rank
    assert sorted(i for indices, *_ in seen for i in indices) == list(range(5))


def test_merge_in_order_puts_each_ranks_scores_back_in_input_order(tiny_blenderbot_path):
    from full_metric.files.distributed import balanced_shares, merge_in_order

    scorer = FullScorer(tiny_blenderbot_path, progress=False)
    responses = ["Fine.", "A beagle.", "Sometimes.", "Alien.", "Morning!"]
    whole = scorer.score(FIVE_CONTEXTS, responses)
    for world in (2, 3):
        shares = balanced_shares([1] * 5, world)
        assert sorted(i for share in shares for i in share) == list(range(5))  # nothing dropped
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
        parts = [(share, scorer.score([FIVE_CONTEXTS[i] for i in share], [responses[i] for i in share]))
                 for share in shares]
        for ordered in (parts, parts[::-1]):  # whatever order the ranks arrive in
            merged = merge_in_order(ordered)
            assert merged.scores == pytest.approx(whole.scores, rel=1e-6)
            for got, want in zip(merged.follow_up_log_likelihoods, whole.follow_up_log_likelihoods, strict=True):
                assert got == pytest.approx(want, rel=1e-6)
    with pytest.raises(ValueError, match="not each of"):
        merge_in_order([([0, 1], whole), ([1, 2, 3], whole)])


def test_a_blenderbot_policy_without_chat_template_is_prompted_in_blenderbots_format(tiny_blenderbot_path):
    from transformers import AutoConfig, AutoTokenizer

    from full_metric.rendering import Renderer
    from full_metric.faces.training import prompt_text

    tok = AutoTokenizer.from_pretrained(tiny_blenderbot_path)
    tok.chat_template = None
    config = AutoConfig.from_pretrained(tiny_blenderbot_path)
    turns = ["I just adopted a puppy!", "Oh wow! What breed?"]
    assert prompt_text(tok, turns, config) == Renderer(tok, "blenderbot", True).context_text(turns) \
        == "I just adopted a puppy!   Oh wow! What breed?"


def test_every_scores_the_first_and_every_nth_evaluation(policy_folder, tiny_blenderbot_path, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

    tokenizer = AutoTokenizer.from_pretrained(policy_folder)
    trainer = Trainer(model=AutoModelForCausalLM.from_pretrained(policy_folder), args=_training_args(tmp_path, max_steps=4),
                      train_dataset=_lm_data(tokenizer), eval_dataset=_lm_data(tokenizer, 2), data_collator=_collate,
                      processing_class=tokenizer)
    FullCallback(CONTEXTS[:1], model=str(tiny_blenderbot_path), every=2, generation_kwargs={"max_new_tokens": 2}) \
        .attach(trainer)
    trainer.train()
    assert [r["step"] for r in trainer.state.log_history if "eval_full" in r] == [1, 3]


# -- logging through on_log, or refusing -------------------------------------------------------
def _recorder():
    from transformers import TrainerCallback

    class Recorder(TrainerCallback):  # what every report_to integration sees
        def __init__(self):
            self.logs = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.logs.append(dict(logs or {}))

    return Recorder()


def test_callbacks_given_to_the_trainer_reach_on_log_or_are_refused_before_training(
        policy_folder, tiny_blenderbot_path, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

    from full_metric.faces.training import NO_TRAINER

    tokenizer = AutoTokenizer.from_pretrained(policy_folder)

    def trainer_with(*callbacks):
        return Trainer(model=AutoModelForCausalLM.from_pretrained(policy_folder), args=_training_args(tmp_path),
                       train_dataset=_lm_data(tokenizer), eval_dataset=_lm_data(tokenizer, 2), data_collator=_collate,
                       processing_class=tokenizer, callbacks=list(callbacks))

    recorder = _recorder()
    callback = FullCallback(CONTEXTS, model=str(tiny_blenderbot_path), generation_kwargs={"max_new_tokens": 2})
    trainer = trainer_with(callback, recorder)  # the way callbacks are normally passed ...
    with pytest.raises(ValueError, match="FullCallback needs the Trainer to log eval_full through"):
        trainer.train()  # ... without the trainer to log through: refused before any step
    assert trainer.state.global_step == 0 and not recorder.logs
    assert "attach(trainer)" in NO_TRAINER

    recorder = _recorder()
    callback = FullCallback(CONTEXTS, model=str(tiny_blenderbot_path), generation_kwargs={"max_new_tokens": 2})
    trainer = trainer_with(callback, recorder)
    callback.attach(trainer)  # already in the list: not added twice
    assert sum(cb is callback for cb in trainer.callback_handler.callbacks) == 1
    trainer.train()
    assert [r["eval_full_n"] for r in recorder.logs if "eval_full" in r] == [3, 3]  # one per evaluation, via on_log


# -- the judge's placement: one rule for the three faces --------------------------------------
def test_judge_placement_is_one_rule(monkeypatch):
    from full_metric.faces.training import judge_placement

    # nothing given, on a machine without accelerators: the CPU, in the model's own float32 (literal
    # expectations, not the function judge_placement calls)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert judge_placement({}, None) == {"device": "cpu", "dtype": None}
    assert judge_placement({"device": "auto"}, None) == {"device": "cpu", "dtype": None}
    # one GPU, no launcher: cuda, in bfloat16
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert judge_placement({}, None) == {"device": "cuda", "dtype": "bfloat16"}
    # under torchrun on a machine with two GPUs, "auto" is this process's own GPU (LOCAL_RANK)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert judge_placement({"device": "auto"}, None)["device"] == "cuda:1"
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert judge_placement({}, None)["device"] == "cuda:0"
    monkeypatch.undo()
    assert judge_placement({"device": "auto"}, "cuda:1") == {"device": "cuda:1", "dtype": "bfloat16"}
    assert judge_placement({}, "cuda:0")["dtype"] == "bfloat16"  # an accelerator: bfloat16 ...
    assert judge_placement({"dtype": "float32"}, "cuda:0")["dtype"] == "float32"  # ... unless dtype says otherwise
    assert judge_placement({"device": "cpu"}, "cuda:0") == {"device": "cpu", "dtype": None}  # a device given is kept


def test_device_auto_for_all_three_faces(tiny_blenderbot_path, tokenizer):
    reward = full_reward(model=str(tiny_blenderbot_path), device="auto")
    assert len(reward(["Hi!"], ["Hello."])) == 1
    assert reward.judge.get().model.device.type == "cpu"
    callback = FullCallback(CONTEXTS, model=str(tiny_blenderbot_path), device="auto")
    assert callback.judge.get().model.device.type == "cpu"
    metrics = full_compute_metrics(CONTEXTS[:1], tokenizer, model=str(tiny_blenderbot_path), device="auto")
    ids = tokenizer(["Fine, thanks."])["input_ids"]
    assert metrics(type("P", (), {"predictions": ids})())["full_n"] == 1


def test_compute_metrics_drops_the_minus_100_padding(tiny_blenderbot_path, tokenizer):
    import numpy as np

    scorer = FullScorer(tiny_blenderbot_path, progress=False)
    answers = ["Fine, thanks.", "A beagle, she is loud."]
    ids = [tokenizer(a)["input_ids"] for a in answers]
    width = max(map(len, ids))
    padded = np.array([row + [-100] * (width - len(row)) for row in ids])
    out = full_compute_metrics(CONTEXTS[:2], tokenizer, scorer)(type("P", (), {"predictions": (padded, None)})())
    assert out["full"] == pytest.approx(scorer.score(CONTEXTS[:2], answers).mean, rel=1e-6)


def test_the_reward_leaves_system_messages_out_and_is_unscaled(tiny_blenderbot_path):
    """System messages are not part of the dialog the judge reads; the reward is the raw FULL score
    (GRPO scales it per prompt over all processes: GRPOConfig(scale_rewards="group"), its default)."""
    import dataclasses

    from trl import GRPOConfig

    scorer = FullScorer(tiny_blenderbot_path, progress=False)
    reward = full_reward(scorer)
    system = [{"role": "system", "content": "You are a pirate. Always answer in pirate speak."}]
    user = [{"role": "user", "content": "Hi! How was your weekend?"}]
    answers = [[{"role": "assistant", "content": "Great."}], [{"role": "assistant", "content": "Arr, grand."}]]
    with_system = reward([system + user, system + user], answers)
    assert with_system == pytest.approx(reward([user, user], answers), rel=1e-9)
    assert with_system == pytest.approx(scorer.score([["Hi! How was your weekend?"]] * 2, ["Great.", "Arr, grand."]).scores,
                                        rel=1e-9)  # raw: not z-scored within the prompt's group
    assert {f.name: f.default for f in dataclasses.fields(GRPOConfig)}["scale_rewards"] == "group"


def test_a_policy_prompt_cut_for_a_chat_template_keeps_its_opening_and_whole_turns(tiny_models, tokenizer):
    """The trained model's prompt is cut as the judge's context is: between whole turns, the chat
    template's opening (its system header) kept."""
    from full_metric.faces.training import prompt_ids, prompt_limit

    tok = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    opening = "<s>system: be kind</s>\n"
    tok.chat_template = ("{{ '<s>system: be kind</s>\\n' }}{% for m in messages %}<s>{{ m['role'] }}: "
                         "{{ m['content'] }}</s>\n{% endfor %}{% if add_generation_prompt %}<s>assistant: {% endif %}")
    model = tiny_models["llama"]
    turns = [f"turn {k} says something about boats and the harbour" for k in range(60)]
    limit = prompt_limit(model, tok, 4)
    full = tok.apply_chat_template([{"role": "user", "content": t} for t in turns], tokenize=False)
    assert len(tok(full, add_special_tokens=False)["input_ids"]) > limit
    ids = prompt_ids(model, tok, [turns], 4)[0]
    text = tok.decode(ids)
    assert len(ids) <= limit and text.startswith(opening) and text.endswith("<s>assistant: ")
    assert "<s>user: turn 59 says" in text and text.count("<s>") - 2 < 60  # the newest turn, whole turns only


@pytest.mark.slow
def test_the_documented_grpo_command_with_a_kl_term_runs_on_a_gguf_policy(smollm2_gguf, tmp_path):
    """docs/training.md's GRPO command as written (a GGUF policy, the offline judge, --beta 0.04), cut
    to one step: TRL's reference model loads (from the de-quantized policy written beside the run)
    and the run prints its record. The reference model is built before the long measurement."""
    import re

    docs = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    command = re.search(r"python examples/grpo_with_full\.py (.+?)\n(.+?)\n", docs.replace("\\\n", "\n"))
    assert command is not None, "docs/training.md gives the GRPO command"
    words = " ".join(command.groups()).replace('"$SMOL"', str(smollm2_gguf.parent)).split()
    assert "--beta" in words and float(words[words.index("--beta") + 1]) > 0
    words[words.index("--steps") + 1] = "1"
    words[words.index("--output-dir") + 1] = str(tmp_path / "grpo")
    cut = ["--held-out", "2", "--num-generations", "2", "--prompts-per-step", "1", "--max-completion-length", "3"]
    env = {**_environ(), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    done = run_checked([sys.executable, str(REPO / "examples" / "grpo_with_full.py"), *words, *cut], timeout=900,
                       cwd=REPO, env=env)
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["settings"]["beta"] == 0.04 and len(record["after"]["answers"]) == 2
    assert any("kl" in row for row in record["history"])  # the KL term was computed against the reference
    assert (tmp_path / "grpo" / "initial-policy" / "config.json").is_file()


@pytest.mark.parametrize("every, best", [(2, "eval_full"), (3, "full"), (1, "eval_full")])
def test_a_best_model_chosen_by_full_needs_full_at_every_evaluation(policy_folder, tiny_blenderbot_path, tmp_path,
                                                                    every, best):
    """metric_for_best_model on FULL with every > 1: refused before the first training step, with a
    message (the Trainer raised KeyError at the first skipped evaluation); with every=1 it trains."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

    tokenizer = AutoTokenizer.from_pretrained(policy_folder)
    args = _training_args(tmp_path, max_steps=2, metric_for_best_model=best, save_strategy="steps", save_steps=1,
                          load_best_model_at_end=True, greater_is_better=True)
    trainer = Trainer(model=AutoModelForCausalLM.from_pretrained(policy_folder), args=args,
                      train_dataset=_lm_data(tokenizer), eval_dataset=_lm_data(tokenizer, 2), data_collator=_collate,
                      processing_class=tokenizer)
    FullCallback(CONTEXTS[:1], model=str(tiny_blenderbot_path), every=every, generation_kwargs={"max_new_tokens": 2}) \
        .attach(trainer)
    if every == 1:
        trainer.train()
        assert trainer.state.best_metric is not None
        return
    with pytest.raises(ValueError, match=f"metric_for_best_model='{best}' needs FULL at every evaluation"):
        trainer.train()
    assert trainer.state.global_step == 0


def test_the_example_teaches_a_chat_answer_to_end_as_its_template_ends_a_turn(tokenizer, tiny_models):
    """examples/train_with_full.py's labels for a chat model end with the template's end-of-turn
    (Gemma's <end_of_turn>), not the end-of-text token the template never writes after an answer."""
    sys.path.insert(0, str(REPO / "examples"))
    try:
        from train_with_full import DialogData
    finally:
        sys.path.remove(str(REPO / "examples"))
    tok = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    tok.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]})
    tok.chat_template = ("{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
                         "{{ m['content'] }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>"
                         "model\n{% endif %}")
    data = DialogData([{"context": ["Hi! How was your weekend?"], "response": "Great, I went hiking."}], tok,
                      tiny_models["llama"].config, max_length=512)
    labels = [t for t in data[0]["labels"] if t != -100]
    assert tok.decode(labels) == "Great, I went hiking.<end_of_turn>\n"
    assert tok.eos_token_id not in labels


def test_a_decoder_prompt_loses_only_the_tokenizers_trailing_end_of_text(tiny_models, tokenizer):
    """A tokenizer that closes every text with end-of-text (BlenderBot's here) gives a decoder-only
    prompt without it: exactly that one token goes, every token of the prompt's text stays."""
    from full_metric.faces.training import prompt_ids, prompt_text

    model = tiny_models["llama"]
    for context in (["Hi! How was your weekend?"], ["Hi!", "Hello, who is this?", "It's me."]):
        text = prompt_text(tokenizer, context, model.config)
        full = tokenizer(text)["input_ids"]
        assert full[-1] == tokenizer.eos_token_id and full[-2] != tokenizer.eos_token_id
        ids = prompt_ids(model, tokenizer, [context], 4)[0]
        assert ids == full[:-1] and tokenizer.decode(ids).endswith("B:")


def test_the_grpo_example_measures_kept_contexts_and_resumes_from_its_checkpoint(policy_folder, tiny_blenderbot_path,
                                                                                 tmp_path):
    """examples/grpo_with_full.py as reports/smollm2-complaints/reproduce.sh runs it: measured on the
    --held-out-prompts file's contexts (not on --prompts rows), a checkpoint every step; a run of two steps
    stopped after one (--stop-after) and continued by --resume goes on from its checkpoint (step 1's record
    restored, not redone), keeps the measurement made before training and ends with the weights of a run never
    stopped (issue 61, 1); the profile counts echoes of the last turn."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    chat = tmp_path / "chat-policy"
    tokenizer = AutoTokenizer.from_pretrained(policy_folder)
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}" \
                              "{% if add_generation_prompt %}assistant:{% endif %}"
    tokenizer.save_pretrained(chat)
    AutoModelForCausalLM.from_pretrained(policy_folder).save_pretrained(chat)
    for name, turns in (("train", ["Do you cook?", "I love hiking.", "Any plans?", "Hi there!"]),
                        ("held", ["How was your weekend?", "I just adopted a puppy!", "Unused."])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"context": [t], "response": "Fine."}) + "\n"
                                                        for t in turns))
    env = {**_environ(), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    base = [sys.executable, str(REPO / "examples" / "grpo_with_full.py"), "--policy", str(chat), "--judge",
            str(tiny_blenderbot_path), "--prompts", str(tmp_path / "train.jsonl"), "--held-out-prompts",
            str(tmp_path / "held.jsonl"), "--held-out", "2", "--num-generations", "2", "--prompts-per-step", "1",
            "--max-completion-length", "3", "--save-steps", "1", "--output-dir", str(tmp_path / "run")]
    first = json.loads(run_checked([*base, "--steps", "2", "--stop-after", "1"], timeout=600, cwd=REPO,
                                   env=env).stdout.splitlines()[-1])  # a run of two steps, stopped after one
    assert first["contexts"] == [["How was your weekend?"], ["I just adopted a puppy!"]]
    assert {"echo_share", "generic_share", "mean_words"} <= set(first["before"])
    assert (tmp_path / "run" / "checkpoint-1").is_dir()
    second = json.loads(run_checked([*base, "--steps", "2", "--resume"], timeout=600, cwd=REPO,
                                    env=env).stdout.splitlines()[-1])
    rows = [row for row in second["history"] if "reward" in row]
    assert [row["step"] for row in rows] == [1, 2] and second["before"] == first["before"]
    assert rows[0] == first["history"][0]  # step 1 restored from the checkpoint (its own step time), not run again
    assert second["settings"]["held_out_prompts"] == "held.jsonl"
    # issue 61, 1: the resumed run ends with the very weights of a run never stopped (its schedule the whole run's)
    whole = [*base[:-1], str(tmp_path / "whole")]
    uninterrupted = json.loads(run_checked([*whole, "--steps", "2"], timeout=600, cwd=REPO, env=env).stdout.splitlines()[-1])
    assert second["weights"] == uninterrupted["weights"] != first["weights"]


def test_every_training_face_reads_a_generation_by_one_rule(tiny_blenderbot_path, tiny_models, tokenizer, monkeypatch):
    """The GRPO reward, compute_metrics and generate_responses (the callback's and the examples'
    answers) take the same response from the same generated text (full_metric.answers.response_of:
    its first non-empty line): a second rule in any of them would score other text."""
    from types import SimpleNamespace

    import full_metric.answers as answers

    text = "\n  Sure thing, I went hiking.\nB: And you?"
    scorer = FullScorer(tiny_blenderbot_path, progress=False)
    want = scorer.score([["Hi!"]], ["Sure thing, I went hiking."]).scores
    reward = full_reward(scorer)
    assert reward(["Hi!"], [text]) == pytest.approx(want)
    assert reward([[{"role": "user", "content": "Hi!"}]], [[{"role": "assistant", "content": text}]]) == \
        pytest.approx(want)
    decoding = SimpleNamespace(batch_decode=lambda ids, skip_special_tokens: [text])
    assert full_compute_metrics([["Hi!"]], decoding, scorer)(SimpleNamespace(predictions=[[5, 6]]))["full"] == \
        pytest.approx(want[0])
    seen = []
    monkeypatch.setattr(answers, "response_of", lambda generated: seen.append(generated) or "ruled")
    assert generate_responses(tiny_models["llama"], tokenizer, [["Hi!"]], {"max_new_tokens": 3}) == ["ruled"]
    assert len(seen) == 1

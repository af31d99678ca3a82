"""The Hub Space app: score a turn, score a dialog, batch-score a file. A thin layer over the scorer.

The pure helpers (reading uploads, input limits, ranking, summaries) need no Gradio; only
:func:`build_app` imports it. The model comes from ``FULL_MODEL`` (a Hub id or a local folder,
default the preset's) and ``FULL_GGUF_FILE`` (a GGUF file in that folder), the starting preset
from ``FULL_PRESET`` (default ``paper``), every other setting from ``FULL_<NAME>`` (see
:func:`settings_from_env`); the model is loaded once and shared by every request and
every preset picked in the settings.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import tempfile
import time
from dataclasses import field, make_dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ..aggregate import AGGREGATIONS
from ..files.dialog_files import check_row, scored_records, table_rows
from ..errors import UsageError
from ..follow_ups import NAMED_SETS, PAPER_FIVE, validate_follow_ups
from ..presets import fitting_presets
from ..scorer import FullScorer
from ..settings import LOAD_SETTINGS, Setting, check_signs, positive_int, resolve_positive
from ..turns import split_turns, strip_speaker


#: What one request may hold, and how long a batch may run: the app's limits, each declared once,
#: read from ``FULL_LIMIT_<NAME>`` (``FULL_LIMIT_ROWS=200``): names that no scorer setting can take.
LIMIT_SETTINGS: tuple[Setting, ...] = tuple(
    Setting(name, text, kind=int, default=default, prefix="FULL_LIMIT_") for name, text, default in (
        ("turns", "turns in one dialog or context", 100),
        ("characters", "characters in one dialog, context or response", 20_000),
        ("candidates", "candidate responses in the turn tab", 10),
        ("rows", "rows of an uploaded file", 1_000),
        ("upload_bytes", "bytes of an uploaded file", 2_000_000),
        ("follow_ups", "custom follow-ups", 20),
        ("follow_up_characters", "characters of one custom follow-up", 200),
        ("batch_seconds", "seconds a batch runs before it stops with the rows scored so far", 600),
        ("queue", "requests waiting for the model", 32),
    )
)


def _limits_from_env(cls: type, environ: Mapping[str, str] | None = None) -> Any:
    """The limits, each from its ``FULL_LIMIT_<NAME>`` variable where set (a positive integer)."""
    environ = os.environ if environ is None else environ
    values = {}
    for setting in LIMIT_SETTINGS:
        text = environ.get(setting.env, "").strip()
        if text:
            values[setting.name] = positive_int(setting.parse(text), setting.env)
    return cls(**values)


Limits = make_dataclass(
    "Limits", [(s.name, int, field(default=s.default)) for s in LIMIT_SETTINGS], frozen=True,
    namespace={"from_env": classmethod(_limits_from_env),
               "__doc__": "The app's limits (:data:`LIMIT_SETTINGS`); ``Limits.from_env()`` reads them."},
)
LIMITS = Limits()
logger = logging.getLogger(__name__)
CUSTOM = "custom (one per line below)"
#: The dropdown choice "the chosen preset's follow-ups (and aggregation)" (not settings.FROM_PRESET, a default).
PRESET_CHOICE = "the preset's"
FOLLOW_UP_CHOICES = [PRESET_CHOICE, "paper", *[name for name in NAMED_SETS if name != "paper"], CUSTOM]


class InputError(UsageError):
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


def _lines(text: str, what: str, limits: Limits = LIMITS) -> tuple[str, ...]:
    if len(text) > limits.characters:
        raise InputError(f"{what}: {len(text)} characters; the limit is {limits.characters}")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > limits.follow_ups:
        raise InputError(f"{what}: {len(lines)} follow-ups; the limit is {limits.follow_ups}")
    long = next((k for k, line in enumerate(lines) if len(line) > limits.follow_up_characters), None)
    if long is not None:
        raise InputError(f"{what}: follow-up {long + 1} has {len(lines[long])} characters; "
                         f"the limit is {limits.follow_up_characters}")
    try:
        return validate_follow_ups(lines)
    except (TypeError, ValueError) as error:
        raise InputError(f"{what}: {error}") from None


def choose_follow_ups(choice: str, custom_text: str, limits: Limits = LIMITS) -> tuple[str, ...]:
    """The follow-up set picked in the settings, or the custom lines (within the limits)."""
    if choice == CUSTOM:
        return _lines(custom_text, "custom follow-ups", limits)
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
        line = data[: error.start].count(b"\n") + 1
        raise InputError(f"line {line}: not UTF-8 text (byte {error.start}); save the file as UTF-8") from None
    if "\x00" in text:
        raise InputError(f"line {text[: text.index(chr(0))].count(chr(10)) + 1}: a NUL byte; this looks like a "
                         "binary file, not JSON Lines or CSV text")
    suffix = Path(name).suffix.lower()
    if suffix not in (".jsonl", ".json", ".csv"):
        raise InputError(f"upload a .jsonl or .csv file, not {suffix or 'a file without extension'}")
    rows = table_rows(text, suffix, InputError, required="context")
    if not rows:
        raise InputError("the file holds no rows")
    if len(rows) > limits.rows:
        raise InputError(f"the file has {len(rows)} rows; the limit is {limits.rows}")
    return [_row_within_limits(line, row, limits, suffix == ".csv") for line, row in rows]


def _row_within_limits(line: int, row: dict[str, Any], limits: Limits, csv_file: bool) -> dict[str, Any]:
    """The one row check (:func:`full_metric.files.dialog_files.check_row`), then the app's limits."""
    context, response = check_row(row, f"line {line}", InputError, csv_row=csv_file)
    if len(context) > limits.turns:
        raise InputError(f"line {line}: {len(context)} turns; the limit is {limits.turns}")
    if sum(map(len, context)) > limits.characters:
        raise InputError(f"line {line}: the context has {sum(map(len, context))} characters; "
                         f"the limit is {limits.characters}")
    if response is not None and len(response) > limits.characters:
        raise InputError(f"line {line}: the response has {len(response)} characters; the limit is {limits.characters}")
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
    from ..comparison import PairingError, compare_systems, mean_interval, pair_items

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
    scorer: FullScorer, choice: str, custom_text: str, positive_text: str, aggregation: str, limits: Limits = LIMITS
) -> dict[str, Any]:
    """The scoring options picked in the settings: the preset's follow-ups (negative and positive)
    and aggregation, or a named set / custom lines (custom positive lines with custom only)."""
    if choice == PRESET_CHOICE:
        follow_ups, positive = scorer.follow_ups, scorer.positive_follow_ups
    else:
        follow_ups = choose_follow_ups(choice, custom_text, limits)
        positive = (_lines(positive_text, "custom positive follow-ups", limits)
                    if choice == CUSTOM and positive_text.strip() else ())
    agg = scorer.aggregation if aggregation == PRESET_CHOICE else aggregation
    try:
        resolve_positive(positive, (), follow_ups)
        check_signs(positive, agg)
    except ValueError as error:
        raise InputError(str(error)) from None
    return {"follow_ups": follow_ups, "positive_follow_ups": positive, "aggregation": agg}


def score_in_chunks(
    scorer: FullScorer, rows: list[dict[str, Any]], follow_ups: Sequence[str], aggregation: str,
    positive_follow_ups: Sequence[str] = (), chunk_size: int = 16,
) -> Iterator[tuple[int, list[str]]]:
    """Score uploaded rows in place, ``chunk_size`` at a time in input order (turn-level and
    dialog-level rows of a chunk each in one call); after each chunk yields (rows scored so far,
    the signatures so far: one per level)."""
    signatures: list[str] = []
    for start in range(0, len(rows), chunk_size):
        chunk = rows[start : start + chunk_size]
        for turn_level in (True, False):
            chosen = [r for r in chunk if (r["response"] is not None) == turn_level]
            if not chosen:
                continue
            result = scorer.score(
                [r["context"] for r in chosen], [r["response"] for r in chosen] if turn_level else None,
                follow_ups=follow_ups, positive_follow_ups=positive_follow_ups, aggregation=aggregation, progress=False,
            )
            for row, record in zip(chosen, scored_records(chosen, result)):
                row.update(record)
            if result.signature not in signatures:
                signatures.append(result.signature)
        yield start + len(chunk), signatures


def score_rows(
    scorer: FullScorer, rows: list[dict[str, Any]], follow_ups: Sequence[str], aggregation: str,
    positive_follow_ups: Sequence[str] = (),
) -> str:
    """Score uploaded rows in place; returns the signatures (one line per level)."""
    signatures: list[str] = []
    for _, signatures in score_in_chunks(scorer, rows, follow_ups, aggregation, positive_follow_ups, len(rows)):
        pass
    return "\n".join(signatures)


#: Characters that make a spreadsheet read a cell as a formula (OWASP's CSV injection list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    """A CSV cell: text that a spreadsheet would run as a formula gets a leading ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def write_scored(rows: Sequence[dict[str, Any]], path: Path, as_csv: bool) -> Path:
    """The scored rows, full precision: JSON Lines, or CSV (context turns on separate lines, one
    column per follow-up, formula-like text made inert) for CSV uploads."""
    if not as_csv:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        return path
    follow_ups = list(dict.fromkeys(f for r in rows for f in r.get("follow_up_log_likelihoods", {})))
    columns = list(dict.fromkeys(k for r in rows for k in r if k != "follow_up_log_likelihoods"))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*columns, *(f"log-likelihood: {f}" for f in follow_ups)])
        for r in rows:
            values = ["\n".join(r[c]) if c == "context" else r.get(c, "") for c in columns]
            lls = r.get("follow_up_log_likelihoods", {})
            writer.writerow([*map(_cell, values), *(lls.get(f, "") for f in follow_ups)])
    return path


class TemporaryFiles:
    """The app's own folder for files it serves: each request gets a fresh sub-folder; folders
    older than ``max_age`` seconds are removed at the next request, and all at exit. (Gradio copies
    what it serves into its cache, which ``gr.Blocks(delete_cache=...)`` empties in turn.)"""

    def __init__(self, max_age: float = 600.0):
        import atexit
        import shutil

        self.root = Path(tempfile.mkdtemp(prefix="full-app-"))
        self.max_age = max_age
        atexit.register(shutil.rmtree, self.root, True)

    def new_folder(self) -> Path:
        self.clean()
        return Path(tempfile.mkdtemp(dir=self.root))

    def clean(self, now: float | None = None) -> None:
        import shutil
        import time

        now = time.time() if now is None else now
        for folder in self.root.iterdir():
            if now - folder.stat().st_mtime > self.max_age:
                shutil.rmtree(folder, ignore_errors=True)


# -- the Gradio app -------------------------------------------------------------------------
EXAMPLES = [
    ["Hi! How was your weekend?", "It was great, I went hiking with my sister on Saturday.\nThe capital of Australia is Canberra."],
    ["I just adopted a puppy!", "Congratulations! What breed is it?\nMy car needs new tires."],
]


def settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The scorer's settings from ``FULL_<NAME>`` environment variables (``FULL_MODEL``,
    ``FULL_GGUF_FILE``, ``FULL_PRESET``, ``FULL_DEVICE``..., one per load setting of
    :data:`full_metric.settings.SETTINGS`); unset or empty ones keep their defaults, and the
    progress bar is off unless ``FULL_PROGRESS`` turns it on."""
    environ = os.environ if environ is None else environ
    settings = {s.name: s.parse(environ.get(s.env, "")) for s in LOAD_SETTINGS}
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


CHART_NOTE = ("Each bar is one follow-up's log-likelihood: how likely the model finds that complaint after the "
              "response. Bars closer to 0 mean likelier complaints, so a worse response.")


class _Handlers:
    """What the app's tabs do, around one loaded scorer (model work of all tabs shares its queue)."""

    def __init__(self, scorer: FullScorer, limits: Limits):
        self.scorer, self.limits = scorer, limits
        self.scorers = {scorer.preset: scorer}
        self.files = TemporaryFiles()

    def settings(self, preset: str, choice: str, custom: str, positive: str, aggregation: str) -> tuple[FullScorer, dict]:
        """The scorer of ``preset`` (sharing the loaded model) and the chosen options."""
        import gradio as gr

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

    def score_turn(self, dialog: str, candidates: str, *options_in: str):
        import gradio as gr
        import pandas as pd

        try:
            context, options = parse_dialog(dialog, self.limits), parse_candidates(candidates, self.limits)
        except InputError as error:
            raise gr.Error(str(error)) from None
        chosen, options_out = self.settings(*options_in)
        result = chosen.score([context] * len(options), options, **options_out)
        names = candidate_labels(options)  # one label per candidate, the same in the table and the chart
        ranked = pd.DataFrame([(r, names[options.index(c)], c, round(s, 3)) for r, c, s in rank(options, result.scores)],
                              columns=["rank", "candidate", "response", "score"])
        return ranked, self.chart(names, result.follow_ups, result.follow_up_log_likelihoods), result.signature

    def score_dialog(self, dialog: str, *options_in: str):
        import gradio as gr

        try:
            turns = parse_dialog(dialog, self.limits)
        except InputError as error:
            raise gr.Error(str(error)) from None
        if not turns:
            raise gr.Error("the dialog is empty")
        chosen, options_out = self.settings(*options_in)
        result = chosen.score([turns], **options_out)
        chart = self.chart(["dialog"], result.follow_ups, result.follow_up_log_likelihoods)
        return f"{result.scores[0]:.3f}", chart, result.signature

    def read(self, upload: Any) -> tuple[Path, list[dict[str, Any]]]:
        path = Path(upload if isinstance(upload, str) else upload.name)
        size = path.stat().st_size
        if size > self.limits.upload_bytes:  # the server refuses larger uploads first (max_file_size)
            raise InputError(f"the file has {size} bytes; the limit is {self.limits.upload_bytes}")
        return path, read_upload(path.name, path.read_bytes(), self.limits)

    def upload_systems(self, upload: Any):
        """The baseline menu's choices: the systems the uploaded file names."""
        import gradio as gr

        try:
            names = systems_in(self.read(upload)[1]) if upload is not None else []
        except (InputError, OSError):
            names = []
        return gr.update(choices=names, value=names[0] if names else None)

    def score_file(self, upload: Any, baseline_name: str | None, *options_in: str, progress: Any = None):
        import gradio as gr

        if upload is None:
            raise gr.Error("upload a .jsonl or .csv file first")
        try:
            path, rows = self.read(upload)
        except InputError as error:
            raise gr.Error(f"{Path(str(getattr(upload, 'name', upload))).name}: {error}") from None
        chosen, options_out = self.settings(*options_in)
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
        status = (f"all {len(rows)} rows scored" if done == len(rows) else
                  f"stopped at the time limit ({limit} s): {done} of {len(rows)} rows scored; the download holds them")
        yield self.outputs(rows[:done], baseline_name, out, as_csv, signatures, status)

    @staticmethod
    def outputs(rows: list[dict[str, Any]], baseline_name: str | None, out: Path, as_csv: bool,
                signatures: list[str], status: str) -> tuple:
        import pandas as pd

        table = pd.DataFrame(
            [{"system": r.get("system", ""), "context": " / ".join(r["context"])[-120:],
              "response": r["response"] or "", "full": round(r["full"], 3)} for r in rows]
        )
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
        positive = gr.Textbox(label="Custom positive follow-ups, counted with the opposite sign (optional)", lines=2)
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
        score = gr.Textbox(label="Dialog-level FULL", interactive=False, elem_id="dialog-result")
        chart = gr.BarPlot(x="candidate", y="log-likelihood", color="follow-up",
                           label="Log-likelihood of each follow-up (stacked)")
        gr.Markdown(CHART_NOTE)
        signature = gr.Textbox(label="Signature", interactive=False, elem_id="dialog-signature")
        button.click(handlers.score_dialog, [whole, *options], [score, chart, signature],
                     api_name="score_dialog", **MODEL_QUEUE)


def _batch_tab(gr: Any, handlers: _Handlers, options: list[Any], limits: Limits) -> None:
    with gr.Tab("Batch"):
        gr.Markdown(f"Upload `.jsonl` or `.csv` rows with `context` (list of turns, or one turn per line), "
                    f"optional `response` (turn level) and `system`. At most {limits.rows:,} rows and "
                    f"{limits.upload_bytes / 1e6:g} MB; a batch stops after {limits.batch_seconds} s with the "
                    "rows scored so far.")
        upload = gr.File(label="Dialogs file", file_types=[".jsonl", ".csv"], elem_id="batch-upload")
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

        def score_file(upload: Any, baseline_name: str | None, *options_in: str, progress=gr.Progress()):
            yield from handlers.score_file(upload, baseline_name, *options_in, progress=progress)

        batch = button.click(score_file, [upload, baseline, *options],
                             [table, summary, means, download, signature, status], api_name="score_file", **MODEL_QUEUE)
        cancel.click(None, None, None, cancels=[batch])


def build_app(scorer: FullScorer, limits: Limits | None = None) -> Any:
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
        gr.Markdown(_card())
    demo.queue(default_concurrency_limit=1, max_size=limits.queue)
    return demo


def limits_table() -> str:
    """The app's limits as docs/app.md's table (``python -c "from full_metric.faces.webapp import limits_table; print(limits_table())"``)."""
    rows = ["| limit | default | variable |", "|---|---|---|"]
    rows += [f"| {s.help} | {s.default:,} | `{s.env}` |" for s in LIMIT_SETTINGS]
    return "\n".join(rows)

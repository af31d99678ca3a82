"""The ``full-metric`` command line: ``full-metric score INPUT.jsonl -o OUTPUT.jsonl``."""

from __future__ import annotations

import argparse
import csv
import json
import logging
import shlex
import sys
from pathlib import Path
from typing import Any, Sequence

from ..files.dialog_files import DialogFileError, read_dialog_lines, read_follow_ups, refuse_overwriting_input, scored_records
from ..errors import UsageError
from ..follow_ups import NAMED_SETS
from ..settings import LOAD_SETTINGS
from ..version import __version__

_FOLLOW_UP_SETTINGS = ("follow_ups", "positive_follow_ups")
#: The settings ``adapt`` takes (a judge is adapted for one model, preset and rendering).
ADAPT_SETTINGS = ("model", "gguf_file", "preset", "rendering", "device", "batch_size", "progress")


def _follow_ups(value: str | None) -> str | list[str] | None:
    """A built-in set name, several joined by ``+`` (``paper+positive``), or a file with one
    follow-up per line."""
    if value is None or value in NAMED_SETS:
        return value
    names = value.split("+")
    if not Path(value).is_file() and all(n in NAMED_SETS for n in names):
        return list(dict.fromkeys(f for n in names for f in NAMED_SETS[n]))
    if not Path(value).is_file():
        raise DialogFileError(f"--follow-ups {value!r} is neither a file nor a built-in set ({sorted(NAMED_SETS)})")
    return read_follow_ups(value)


def _scorer_options(command: argparse.ArgumentParser, names: Sequence[str] | None = None,
                    helps: dict[str, str] | None = None) -> None:
    """One option per load setting of :data:`full_metric.settings.SETTINGS` (``names``: those
    only), flag, type, choices and help from its declaration (``helps``: a help of the command's
    own where the setting means something more there; every default is None, so the function
    called applies its own)."""
    helps = helps or {}
    for setting in LOAD_SETTINGS:
        if names is not None and setting.name not in names:
            continue
        if setting.kind is bool:
            command.add_argument(setting.flag, dest=setting.name, action="store_false", help=f"do not {setting.help}")
            continue
        choices = setting.choices() if setting.choices else None
        text = helps.get(setting.name) or setting.full_help + (
            f"; a file with one per line, or a set: {', '.join(NAMED_SETS)} (join with +)"
            if setting.name in _FOLLOW_UP_SETTINGS else "")
        command.add_argument(setting.flag, dest=setting.name, type=setting.kind, choices=choices,
                             help=text.replace("%", "%%"))


def _rated_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("data", help="FED JSON (.json), or JSON Lines / CSV with the columns named below")
    command.add_argument("--format", choices=("auto", "fed", "table"), default="auto")
    command.add_argument("--context-field", default="context")
    command.add_argument("--response-field", default="response")
    command.add_argument("--score-field", default="human", help="the human rating column (JSON Lines / CSV)")
    command.add_argument("--skip-invalid", action="store_true", help="leave out malformed items (and say how many)")
    command.add_argument("--seed", type=int, default=0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="full-metric", description="FULL: follow-up log-likelihood dialog scores.")
    parser.add_argument("--version", action="version", version=f"full-metric {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="score the dialogs of a file or Hub dataset (streamed, resumable, "
                                "sharded under torchrun / accelerate launch)")
    score.add_argument("input", nargs="?", help='JSON Lines, CSV or Parquet rows: {"context": [turns...] or "one turn '
                       'per line", "response": "..."} (no response: dialog level)')
    score.add_argument("-o", "--output", required=True,
                       help="JSON Lines (.jsonl) or Parquet (.parquet): the input's columns plus the score "
                            "('full'), the per-follow-up log-likelihoods and the signature")
    score.add_argument("--dataset", help="a Hub dataset to score instead of a file (read with datasets, streamed)")
    score.add_argument("--split", default="train", help="the dataset's split (default: train)")
    score.add_argument("--config", help="the dataset's configuration")
    score.add_argument("--context-column", default="context", help="the column of the contexts (default: context)")
    score.add_argument("--response-column", default="response", help="the column of the responses (default: response)")
    score.add_argument("--resume", action="store_true",
                       help="continue a killed run into the same output: rows already scored are kept")
    score.add_argument("--chunk-size", type=int, default=256,
                       help="rows scored and written at a time (a killed run loses at most one chunk)")
    _scorer_options(score)
    corr = commands.add_parser("correlate", help="correlate FULL with human ratings (turn and dialog level)")
    _rated_options(corr)
    _scorer_options(corr)
    corr.add_argument("--aspects", nargs="*", help="aspects to report (default: every rated aspect)")
    corr.add_argument("--fine-grained", action="store_true", help="also each aspect's category score (63 follow-ups)")
    corr.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the 95%% intervals")
    corr.add_argument("--json", dest="json_out", help="write the rows as JSON")
    corr.add_argument("--csv", dest="csv_out", help="write the rows as CSV")
    corr.add_argument("--plot", help="save a PNG scatter of FULL against the human rating per level")
    rank = commands.add_parser("rank-follow-ups", help="rank candidate follow-ups by their correlation with people")
    _rated_options(rank)
    _scorer_options(rank)
    rank.add_argument("--candidates", default="all", help="a set name or file of candidates (default: Table 3's 63)")
    rank.add_argument("--aspect", default=None, help="the rating to correlate with (default: Overall, or --score-field)")
    rank.add_argument("--top-k", type=int, default=5)
    rank.add_argument("--holdout", type=float, help="select on the rest, report on this held-out fraction")
    rank.add_argument("-o", "--output", required=True, help="the top-k follow-ups, one per line (a --follow-ups file)")
    rank.add_argument("--json", dest="json_out", help="write the full ranking as JSON")
    rank.add_argument("--plot", help="save a PNG bar chart of the follow-ups' correlations")
    rep = commands.add_parser("report", help="write the FED reproduction report (Markdown and figures)")
    _rated_options(rep)
    _scorer_options(rep)
    rep.add_argument("-o", "--output", required=True, help="the folder for report.md and its figures")
    rep.add_argument("--top-k", type=int, default=5)
    rep.add_argument("--holdout", type=float, default=0.5)
    rep.add_argument("--bootstrap", type=int, default=1000)
    table = commands.add_parser(
        "score-candidates", help="score candidate follow-ups on a rated file and save the log-likelihood table (for study)")
    _rated_options(table)
    _scorer_options(table)
    table.add_argument("--candidates", default="all", help="a set name or file of candidates (default: Table 3's 63)")
    table.add_argument("--name", help="the data set's name in the study (default: the file name without suffix)")
    table.add_argument("--label", help="the model's name in the study (default: the model id or GGUF file)")
    table.add_argument("-o", "--output", required=True, help="the table, JSON")
    comp = commands.add_parser("compare", help="compare systems' scored (or unscored) files: intervals, paired tests")
    comp.add_argument("files", nargs="+", help="JSON Lines files of `full-metric score` (unscored ones are scored "
                      "first), one system each, or one file whose records name their systems")
    comp.add_argument("--baseline", help="the system the others are tested against (default: the first file's)")
    comp.add_argument("--method", choices=("bootstrap", "randomization"), default="bootstrap",
                      help="paired bootstrap resampling or approximate randomization")
    comp.add_argument("--resamples", type=int, help="resamples (bootstrap, default 1000) or trials (randomization, 10000)")
    comp.add_argument("--seed", type=int, default=12345)
    comp.add_argument("--unpaired", action="store_true", help="compare files whose contexts differ, unpaired")
    comp.add_argument("--json", dest="json_out", help="write the comparison as JSON")
    comp.add_argument("--plot", help="save a PNG of the means with their intervals")
    _scorer_options(comp)
    systems = commands.add_parser("systems", help="does FULL rank the systems of rated sets as people do?")
    systems.add_argument("data", nargs="+", help="rated files whose items name their 'system' (FED JSON, USR JSON Lines)")
    systems.add_argument("--score-field", default="human", help="the human rating column (JSON Lines / CSV)")
    systems.add_argument("--presets", nargs="+", help="presets to run (default: every preset that fits the model)")
    systems.add_argument("--resamples", type=int, default=1000)
    systems.add_argument("--seed", type=int, default=12345)
    systems.add_argument("-o", "--output", required=True, help="the folder for report.md and results.json")
    _scorer_options(systems)
    agree = commands.add_parser("agreement", help="agreement with people (pooled, within context, over systems) and "
                                "how often a generic reply beats a person's answer, per preset")
    agree.add_argument("data", nargs="+", help="rated sets: FED JSON, USR JSON Lines")
    agree.add_argument("--presets", nargs="+", help="presets to run (default: every preset that fits the model)")
    agree.add_argument("--replies", nargs="+", help="the generic replies (default: 'Yes.', \"I don't know.\", "
                       "\"That's cool.\", 'Haha, ok.', 'Sure.')")
    agree.add_argument("--generic-only", action="store_true", help="measure the generic-reply rate alone (scores "
                       "only the human-written answers and the replies; no correlation)")
    agree.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the 95%% intervals")
    agree.add_argument("--seed", type=int, default=0)
    agree.add_argument("-o", "--output", required=True, help="the folder for report.md and results.json")
    _scorer_options(agree)
    adapt = commands.add_parser("adapt", help="adapt the judge: continue training FULL's model on unlabeled dialogs")
    adapt.add_argument("dialogs", nargs="+", help="JSON Lines / CSV / Parquet files of dialogs (context plus "
                       "response), hf:NAME for a Hub dataset, or 'chitchat' (the chitchat-dataset package)")
    adapt.add_argument("-o", "--output", required=True, help="the folder of the adapted judge (must not exist)")
    _scorer_options(adapt, ADAPT_SETTINGS, {
        "model": "the judge to adapt: a Hub id, a local folder or a GGUF file (default: the preset's)",
        "preset": "the preset whose rendering (and, for complaints, follow-ups) the judge learns (default: paper)",
        "batch_size": "training examples (complaints: pairs) per step (default 8)"})
    adapt.add_argument("--method", choices=("lora", "full"), default="lora", help="LoRA through peft (default) or "
                       "full fine-tuning")
    adapt.add_argument("--max-tokens", type=int, default=250_000, help="the training token budget (default 250000)")
    adapt.add_argument("--held-out", type=float, default=0.05, help="the fraction of dialogs held out (at most 200)")
    adapt.add_argument("--max-length", type=int, default=512, help="tokens per example at most, the dialog's end "
                       "kept (default 512)")
    adapt.add_argument("--learning-rate", type=float, help="default 2e-4 for LoRA, 2e-5 for full fine-tuning")
    adapt.add_argument("--lora-rank", type=int, default=16)
    adapt.add_argument("--seed", type=int, default=0)
    adapt.add_argument("--objective", choices=("dialogs", "complaints"), default="dialogs",
                       help="dialogs: the language-modelling loss on whole dialogs (default); complaints: FULL's own "
                            "question, pairs of a real next turn and a corrupted reply (docs/cli.md)")
    adapt.add_argument("--max-pairs", type=int, default=2000, help="complaints: the training pair budget (default 2000)")
    adapt.add_argument("--autocast", choices=("auto", "bfloat16", "none"), default="auto",
                       help="training precision: auto (bfloat16 on an accelerator or a CPU that computes it natively), "
                            "bfloat16, none (float32)")
    adapt.add_argument("--margin", type=float, default=1.0, help="complaints: the pairwise loss's margin (default 1.0)")
    adapt.add_argument("--lm-weight", type=float, default=0.1,
                       help="complaints: the weight of the language-modelling regulariser (default 0.1)")
    study = commands.add_parser("study", help="compare FULL configurations on log-likelihood tables, leave one set out")
    study.add_argument("tables", nargs="+", help="tables written by score-candidates (every variant on every set)")
    study.add_argument("-o", "--output", required=True, help="the folder for report.md and results.json")
    return parser


def _make_scorer(args: argparse.Namespace) -> Any:
    from ..scorer import FullScorer

    settings = {s.name: getattr(args, s.name) for s in LOAD_SETTINGS}
    for name in _FOLLOW_UP_SETTINGS:
        settings[name] = _follow_ups(settings[name])
    return FullScorer(settings.pop("model"), **settings)


def _score(args: argparse.Namespace) -> int:
    from ..files.corpus import Source, score_corpus
    from ..files.distributed import teardown

    source = Source(args.input, args.dataset, args.split, args.config, args.context_column, args.response_column)
    progress = args.progress is not False
    try:
        done = score_corpus(source, args.output, lambda: _make_scorer(args), resume=args.resume,
                            chunk_size=args.chunk_size, progress=progress)
    finally:
        teardown()
    if done["world_size"] > 1:
        print(f"rank {done['rank']} of {done['world_size']}: scored {done['scored_here']} rows", file=sys.stderr)
    if done["mean"] is not None:
        print(f"scored {done['items']} dialogs: mean FULL {done['mean']:.4f}", file=sys.stderr)
        print(done["signature"], file=sys.stderr)
    return 0


def _system_file(path: str) -> list[tuple[str, list[int], list[dict[str, Any]]]]:
    """(system name, line numbers, records) of each system in one file of ``compare``, read and
    checked, not scored: the name is the records' common ``system`` field or the file's stem, and a
    file whose records all name systems, several of them, holds one system each."""
    lines = read_dialog_lines(path)
    if not lines:
        raise DialogFileError(f"{path}: no records")
    numbers, records = [n for n, _ in lines], [r for _, r in lines]
    scored = ["full" in r for r in records]
    if any(scored) and not all(scored):
        first = numbers[scored.index(not scored[0])]
        raise DialogFileError(f"{path}, line {first}: some records have a 'full' score and some do not")
    if all(scored):
        bad = next((n for n, r in lines if isinstance(r["full"], bool) or not isinstance(r["full"], (int, float))), None)
        if bad is not None:
            raise DialogFileError(f"{path}, line {bad}: field 'full' is not a number")
    names = list(dict.fromkeys(r.get("system") for r in records))
    if len(names) > 1 and None not in names:  # one file, several systems: one group each
        return [(str(n), [k for k, r in zip(numbers, records) if r["system"] == n],
                 [r for r in records if r["system"] == n]) for n in names]
    name = str(names[0]) if len(names) == 1 and names[0] is not None else Path(path).stem
    return [(name, numbers, records)]


def _scored(path: str, records: list[dict[str, Any]], scorer: Any) -> tuple[list[dict[str, Any]], str | None]:
    """A system's records with their FULL scores (scored now where the file had none) and the
    signature they share."""
    if "full" not in records[0]:
        turn_level = records[0].get("response") is not None
        records = scored_records(records, scorer().score([r["context"] for r in records],
                                                         [r["response"] for r in records] if turn_level else None))
    signatures = {r.get("signature") for r in records}
    if len(signatures) > 1:
        raise DialogFileError(f"{path}: its records were scored with different settings: {sorted(map(str, signatures))}")
    return records, signatures.pop()


def _compare(args: argparse.Namespace) -> int:
    from ..comparison import PairingError, compare_systems, pair_items

    made: list[Any] = []

    def scorer() -> Any:  # loaded once, and only if a file needs scoring
        if not made:
            made.append(_make_scorer(args))
        return made[0]

    # what is cheap is checked before the model is loaded: names, their number, the baseline, the pairing
    systems = [(path, *system) for path in args.files for system in _system_file(path)]
    names = [name for _, name, _, _ in systems]
    if len(names) < 2:
        raise DialogFileError(f"compare needs two systems or more; {args.files} hold {len(names)} ({names})")
    if len(set(names)) != len(names):
        raise DialogFileError(f"two files name the same system ({names}); give them a 'system' field or other names")
    baseline = args.baseline or names[0]
    if baseline not in names:
        raise DialogFileError(f"--baseline {baseline!r} is not one of the systems {names}")
    order = None
    if not args.unpaired:
        keys = {name: [(tuple(r["context"]), r.get("response") is None) for r in records]
                for _, name, _, records in systems}
        try:
            order = pair_items(keys, baseline)
        except PairingError as error:
            path, _, numbers, _ = next(s for s in systems if s[1] == error.system)
            raise DialogFileError(f"{path}, line {numbers[error.index]}: {error}; "
                                  "the files must answer the same contexts (or pass --unpaired)") from None
    done = [(path, name, *_scored(path, records, scorer)) for path, name, _, records in systems]
    signatures = {str(sig) for *_, sig in done}
    if len(signatures) > 1:
        raise DialogFileError("the files were scored with different settings, their scores do not compare: "
                              + "; ".join(f"{path} ({name}): {sig}" for path, name, _, sig in done))
    scores = {name: [r["full"] for r in records] for _, name, records, _ in done}
    if order is not None:
        scores = {name: [values[k] for k in order[name]] for name, values in scores.items()}
    comparison = compare_systems(scores, baseline=baseline, method=args.method, resamples=args.resamples,
                                 seed=args.seed, paired=not args.unpaired)
    print(comparison.table())
    signature = signatures.pop()
    print(signature, file=sys.stderr)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({**comparison.to_dict(), "signature": signature}, indent=2))
    if args.plot:
        from ..research.plots import means_with_intervals

        means_with_intervals(args.plot, comparison)
    return 0


def _preset_scorers(args: argparse.Namespace) -> Any:
    """(preset, scorer) for each preset of ``--presets`` (default: every preset that fits the model),
    all sharing the one loaded model."""
    from ..presets import fitting_presets

    first = _make_scorer(args)
    loaded = first.loaded
    presets = args.presets or fitting_presets(loaded.name, loaded.model.config.model_type, loaded.is_encoder_decoder)
    for preset in presets:
        yield preset, first.with_preset(preset)


def _systems(args: argparse.Namespace) -> int:
    from ..research.human_eval import LEVELS, score_items
    from ..files.rated_files import read_rated
    from ..research.systems import system_agreement, write_system_report

    rows = []
    for preset, scorer in _preset_scorers(args):
        label = Path(args.gguf_file).name if args.gguf_file else scorer.loaded.name
        for path in args.data:
            data = read_rated(path, score_field=args.score_field)
            aspect = data.aspect
            for level in LEVELS:
                items = [i for i in data.level(level) if i.system is not None]
                if len({i.system for i in items}) < 2:
                    continue
                result = score_items(scorer, items)
                row = system_agreement(items, result.scores, aspect, resamples=args.resamples, seed=args.seed)
                rows.append({"data_set": Path(path).stem, "level": level, "model": label, "preset": preset,
                             "signature": result.signature, **row})
                print(f"{Path(path).stem} {level} {preset}: Spearman over {len(row['systems'])} systems "
                      f"{row['spearman']:.2f}, pairs {row['counts']}")
    print(f"wrote {write_system_report(rows, args.output, _command_line(args))}", file=sys.stderr)
    return 0


def _read_rated(args: argparse.Namespace) -> Any:
    from ..files.rated_files import read_rated

    fields = {"context_field": args.context_field, "response_field": args.response_field, "score_field": args.score_field}
    data = read_rated(args.data, args.format, args.skip_invalid, **fields)
    if data.skipped:
        print(f"skipped {len(data.skipped)} malformed items on request, first: {data.skipped[0]}", file=sys.stderr)
    if not data.items:
        raise UsageError(f"{args.data}: no items to score")
    return data


def _correlate(args: argparse.Namespace) -> int:
    from ..research.human_eval import LEVELS, correlation_rows, score_items

    data = _read_rated(args)
    scorer = _make_scorer(args)
    follow_ups = "all" if args.fine_grained else None
    results = {lvl: score_items(scorer, data.level(lvl), follow_ups) for lvl in LEVELS}
    if args.fine_grained:  # the FULL score itself stays on the scorer's own follow-ups
        results = {lvl: _with_main_scores(scorer, r) for lvl, r in results.items()}
    rows = correlation_rows(data, results, aspects=args.aspects, fine_grained=args.fine_grained,
                            bootstrap=args.bootstrap, seed=args.seed)
    print(f"{'level':7} {'aspect':26} {'signal':30} {'n':>4}  {'spearman [95% CI]':24} {'pearson':>8} {'kendall':>8}")
    for r in rows:
        ci = f"{r['spearman']:.3f} [{r['spearman_low']:.2f}, {r['spearman_high']:.2f}]"
        print(f"{r['level']:7} {r['aspect'][:26]:26} {r['signal'][:30]:30} {r['n']:>4}  {ci:24} "
              f"{r['pearson']:>8.3f} {r['kendall']:>8.3f}")
    signature = next(r.signature for r in results.values() if r is not None)
    print(signature, file=sys.stderr)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"signature": signature, "rows": rows}, indent=2))
    if args.csv_out:
        with open(args.csv_out, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    if args.plot:
        from ..research.plots import scatter

        panels = []
        for level, result in results.items():
            items = data.level(level)
            aspect = data.aspect
            rated = [k for k, item in enumerate(items) if aspect in item.ratings]
            row = next((r for r in rows if r["level"] == level and r["aspect"] == aspect and r["signal"] == "full"), None)
            if result is not None and row is not None:
                panels.append((f"{level} level", [result.scores[k] for k in rated],
                               [items[k].ratings[aspect] for k in rated], row["spearman"]))
        scatter(args.plot, panels)
    return 0


def _with_main_scores(scorer: Any, result: Any) -> Any:
    """A result over all 63 candidates, re-scored on the scorer's own follow-ups (no model work)."""
    from dataclasses import replace

    from ..research.human_eval import subset_result

    if result is None:
        return None
    if not set(scorer.follow_ups) <= set(result.follow_ups):
        raise UsageError("--fine-grained needs follow-ups taken from Table 3's candidates")
    return replace(result, scores=subset_result(result, scorer.follow_ups, scorer.aggregation))


def _rank(args: argparse.Namespace) -> int:
    from ..research.human_eval import LEVELS, rank_follow_ups, score_items, split_holdout, subset_result

    data = _read_rated(args)
    scorer = _make_scorer(args)
    aspect = args.aspect or data.aspect
    candidates = _follow_ups(args.candidates)
    select, report = split_holdout(data, args.holdout, args.seed) if args.holdout else (data, None)
    results = {lvl: score_items(scorer, select.level(lvl), candidates) for lvl in LEVELS}
    ranking = rank_follow_ups(select, results, aspect)
    top = [row["follow_up"] for row in ranking[: args.top_k]]
    Path(args.output).write_text("".join(f + "\n" for f in top), encoding="utf-8")
    print(f"{'rank':>4} {'turn':>6} {'dialog':>6}  follow-up")
    for position, row in enumerate(ranking, start=1):
        print(f"{position:>4} {row.get('turn', float('nan')):>6.3f} {row.get('dialog', float('nan')):>6.3f}  {row['follow_up']}")
    print(f"top {args.top_k} written to {args.output}", file=sys.stderr)
    summary: dict[str, Any] = {"aspect": aspect, "top": top, "ranking": ranking}
    if report is not None:
        from ..research.correlation import correlate

        print(f"held out: {len(report.items)} items (selection on the other {len(select.items)})")
        held = {lvl: score_items(scorer, report.level(lvl), tuple(dict.fromkeys([*top, *scorer.follow_ups])))
                for lvl in LEVELS}
        summary["held_out"] = {}
        for level, result in held.items():
            items = report.level(level)
            rated = [k for k, item in enumerate(items) if aspect in item.ratings]
            if result is None or len(rated) < 3:
                continue
            human = [items[k].ratings[aspect] for k in rated]
            for name, subset in (("selected", top), ("default", scorer.follow_ups)):
                values = subset_result(result, subset, scorer.aggregation)
                rho = correlate([values[k] for k in rated], human, methods=("spearman",), bootstrap=0)["spearman"].value
                summary["held_out"][f"{level}/{name}"] = rho
                print(f"held-out {level:6} Spearman, {name} follow-ups: {rho:.3f}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=2))
    if args.plot:
        from ..research.plots import follow_up_bars

        follow_up_bars(args.plot, ranking, [lvl for lvl in LEVELS if results.get(lvl) is not None])
    return 0


def _report(args: argparse.Namespace) -> int:
    from ..research.report import build_report

    data = _read_rated(args)
    command = _command_line(args)
    path = build_report(_make_scorer(args), data, args.output, command, top_k=args.top_k, holdout=args.holdout,
                        seed=args.seed, bootstrap=args.bootstrap)
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _command_line(args: argparse.Namespace) -> str:
    """This run's command line as a user would type it (``full-metric ...``), an absolute path
    shortened to ``<...>/`` and its last two parts (reports carry no path of the machine)."""
    def short(arg: str) -> str:
        return f"<...>/{'/'.join(Path(arg).parts[-2:])}" if Path(arg).is_absolute() else arg

    def quoted(arg: str) -> str:  # an argument with spaces or quotes, as a shell reads it back
        return shlex.quote(arg) if any(c in arg for c in " '\"") else arg

    return " ".join(["full-metric", *(quoted(short(a)) for a in args.argv)])


def _score_candidates(args: argparse.Namespace) -> int:
    from ..follow_ups import resolve_follow_ups
    from ..research.loglik_tables import score_table, write_table

    data = _read_rated(args)
    scorer = _make_scorer(args)
    candidates = resolve_follow_ups(_follow_ups(args.candidates))
    label = args.label or (Path(args.gguf_file).name if args.gguf_file else scorer.loaded.name)
    table = score_table(scorer, data, args.name or Path(args.data).stem, candidates, label, _command_line(args))
    write_table(args.output, table)
    print(f"wrote {len(table.items)} items x {len(candidates)} follow-ups to {args.output}", file=sys.stderr)
    return 0


def _study(args: argparse.Namespace) -> int:
    from ..research.loglik_tables import read_table
    from ..research.study_report import write_study

    path, results = write_study([read_table(t) for t in args.tables], args.output, _command_line(args))
    for protocol in results["protocols"]:
        for fold in protocol["folds"]:
            scores = ", ".join(f"{k} {v:.3f}" for k, v in fold["held_out_scores"].items())
            print(f"{protocol['family']}: held out {fold['held_out']}: {scores}")
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _agreement(args: argparse.Namespace) -> int:
    from ..research.agreement import GENERIC_REPLIES, agreement, markdown, per_reply_markdown

    rows, signatures, scores = [], {}, []
    replies = tuple(args.replies or GENERIC_REPLIES)
    for preset, scorer in _preset_scorers(args):
        loaded = scorer.loaded
        signatures[preset] = scorer.signature()
        for path in args.data:
            kept: list[dict] = []
            rows += [{"preset": preset, **row} for row in agreement(scorer, path, replies=replies,
                                                                    generic_only=args.generic_only,
                                                                    bootstrap=args.bootstrap, seed=args.seed,
                                                                    scores_out=kept)]
            scores += [{"preset": preset, **level} for level in kept]
    folder = Path(args.output)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scores.json").write_text(json.dumps({"signatures": signatures, "levels": scores}), encoding="utf-8")
    (folder / "results.json").write_text(json.dumps({"command": _command_line(args), "signatures": signatures,
                                                     "rows": rows}, indent=2), encoding="utf-8")
    text = (f"# Agreement with people, and the generic-reply rate\n\nMade by `{_command_line(args)}`.\n\n"
            f"Model `{loaded.name}`; 95% percentile bootstrap intervals ({args.bootstrap} resamples, seed {args.seed}). "
            f"Generic replies: {', '.join(repr(r) for r in replies)}; the rate is the share of (context, "
            "generic reply) pairs where the reply outscores the human-written answer.\n\n"
            + markdown(rows, "preset") + "\n\nEach generic reply on its own (share of the human-written answers it "
            "outscores):\n\n" + per_reply_markdown(rows, replies, "preset") + "\n\nSignatures:\n\n"
            + "".join(f"- {p}: `{s}`\n" for p, s in signatures.items()))
    (folder / "report.md").write_text(text, encoding="utf-8")
    print(markdown(rows, "preset"))
    return 0


def _adapt(args: argparse.Namespace) -> int:
    from ..research.adapt import adapt

    given = {k: getattr(args, k) for k in ADAPT_SETTINGS if k != "model" and getattr(args, k) is not None}
    done = adapt(args.model, args.dialogs, args.output, method=args.method, max_tokens=args.max_tokens,
                 held_out=args.held_out, max_length=args.max_length, learning_rate=args.learning_rate,
                 lora_rank=args.lora_rank, seed=args.seed, objective=args.objective, max_pairs=args.max_pairs,
                 margin=args.margin, lm_weight=args.lm_weight, autocast=args.autocast, **given)
    pairs = (f"; held-out pair accuracy {done.held_out_pair_accuracy_before:.3f} -> {done.held_out_pair_accuracy_after:.3f}"
             if done.objective == "complaints" else "")
    print(f"adapted {done.base_model} on {done.training_tokens} tokens in {done.seconds:.0f} s: held-out loss "
          f"{done.held_out_loss_before:.4f} -> {done.held_out_loss_after:.4f}{pairs}; wrote {args.output}", file=sys.stderr)
    return 0


COMMANDS = {"agreement": _agreement, "adapt": _adapt, "score": _score, "compare": _compare, "systems": _systems, "score-candidates": _score_candidates, "study": _study, "correlate": _correlate, "rank-follow-ups": _rank, "report": _report}


#: The extra that installs each optional library a command may need.
EXTRAS = {"scipy": "analysis", "matplotlib": "analysis", "peft": "adapt", "trl": "training", "gradio": "app",
          "evaluate": "evaluate", "datasets": "evaluate", "pyarrow": "evaluate", "gguf": "gguf", "accelerate": "gguf"}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status: 2 for bad input or settings (one line saying
    what to fix), 1 for an internal error (a bug: one line, or its traceback with ``--debug``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    args.argv = argv  # for the reports that name the command that made them
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        inputs = [getattr(args, name, None) for name in ("input", "data")] + list(getattr(args, "files", None) or [])
        for output in ("output", "json_out", "csv_out", "plot"):
            if getattr(args, output, None) is not None:
                refuse_overwriting_input([i for group in inputs for i in ([group] if isinstance(group, str) else
                                                                          group or [])], getattr(args, output))
        return COMMANDS[args.command](args)
    except UsageError as error:  # bad input or settings: the message says what to fix
        print(f"full-metric: error: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        library = (error.name or "").split(".")[0]
        if library in EXTRAS:
            print(f"full-metric: error: {args.command} needs {library}, which is not installed: "
                  f"pip install 'full-metric[{EXTRAS[library]}]'", file=sys.stderr)
            return 2
        return _internal(args, error)
    except Exception as error:  # noqa: BLE001 - anything else is a bug, shown as one
        return _internal(args, error)


#: The exit status of an internal error (a bug), apart from a user error's 2.
INTERNAL_ERROR = 1


def _internal(args: argparse.Namespace, error: BaseException) -> int:
    """An error that is not the user's: its traceback with ``--debug``, else one line that says it
    is a bug and how to report it."""
    if args.debug:
        raise error
    print(f"full-metric: internal error (a bug in full-metric, not in your input): {type(error).__name__}: {error}. "
          f"Please report it with the command you ran and the output of the same command with --debug.",
          file=sys.stderr)
    return INTERNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())

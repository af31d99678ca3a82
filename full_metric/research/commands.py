"""The research subcommands of ``full-metric``, registered here for the command line to read
(:data:`COMMANDS`, as lm-evaluation-harness registers its tasks): each declares its arguments and
runs on the parsed arguments, given the command line's shared pieces (:class:`Tools`: options
declared by the settings, the scorer they make...), so this package never imports the command line.
Heavy libraries are imported inside each command, not when the parser is built.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

from ..errors import UsageError
from ..unscored import left_out
from .adapt_options import BY_NAME as BY_OPTION, OPTIONS, mix_text

#: The settings ``adapt`` takes (a judge is adapted for one model, preset and rendering).
ADAPT_SETTINGS = ("model", "gguf_file", "preset", "rendering", "device", "batch_size", "progress")


class Tools(Protocol):
    """What the command line lends its commands."""

    def scorer_options(self, command: argparse.ArgumentParser, names: Sequence[str] | None = None,
                       helps: dict[str, str] | None = None) -> None: ...
    def rated_options(self, command: argparse.ArgumentParser) -> None: ...
    def make_scorer(self, args: argparse.Namespace) -> Any: ...
    def preset_scorers(self, args: argparse.Namespace) -> Iterator[tuple[str, Any]]: ...
    def follow_ups(self, value: str | None) -> Any: ...
    def command_line(self, args: argparse.Namespace) -> str: ...


@dataclass(frozen=True)
class Command:
    """One subcommand: its help line, the function that declares its arguments, the one that runs it."""

    help: str
    arguments: Callable[[argparse.ArgumentParser, Tools], None]
    run: Callable[[argparse.Namespace, Tools], int]


#: The research subcommands by name, in the order ``full-metric --help`` lists them.
COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser, Tools], None]) -> Callable:
    """Register the decorated function as the subcommand ``name``."""
    def register(run: Callable[[argparse.Namespace, Tools], int]) -> Callable[[argparse.Namespace, Tools], int]:
        COMMANDS[name] = Command(help, arguments, run)
        return run

    return register



def _correlate_arguments(command: argparse.ArgumentParser, tools: Tools) -> None:
    tools.rated_options(command)
    tools.scorer_options(command)
    command.add_argument("--aspects", nargs="*", help="aspects to report (default: every rated aspect)")
    command.add_argument("--fine-grained", action="store_true", help="also each aspect's category score (63 follow-ups)")
    command.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the 95%% intervals")
    command.add_argument("--json", dest="json_out", help="write the rows as JSON")
    command.add_argument("--csv", dest="csv_out", help="write the rows as CSV")
    command.add_argument("--plot", help="save a PNG scatter of FULL against the human rating per level")


def _rank_follow_ups_arguments(command: argparse.ArgumentParser, tools: Tools) -> None:
    tools.rated_options(command)
    tools.scorer_options(command)
    command.add_argument("--candidates", default="all", help="a set name or file of candidates (default: Table 3's 63)")
    command.add_argument("--aspect", default=None, help="the rating to correlate with (default: Overall, or --score-field)")
    command.add_argument("--top-k", type=int, default=5)
    command.add_argument("--holdout", type=float, help="select on the rest, report on this held-out fraction")
    command.add_argument("-o", "--output", required=True, help="the top-k follow-ups, one per line (a --follow-ups file)")
    command.add_argument("--json", dest="json_out", help="write the full ranking as JSON")
    command.add_argument("--plot", help="save a PNG bar chart of the follow-ups' correlations")


def _report_arguments(command: argparse.ArgumentParser, tools: Tools) -> None:
    tools.rated_options(command)
    tools.scorer_options(command)
    command.add_argument("-o", "--output", required=True, help="the folder for report.md and its figures")
    command.add_argument("--top-k", type=int, default=5)
    command.add_argument("--holdout", type=float, default=0.5)
    command.add_argument("--bootstrap", type=int, default=1000)


def _score_candidates_arguments(command: argparse.ArgumentParser, tools: Tools) -> None:
    tools.rated_options(command)
    tools.scorer_options(command)
    command.add_argument("--candidates", default="all", help="a set name or file of candidates (default: Table 3's 63)")
    command.add_argument("--name", help="the data set's name in the study (default: the file name without suffix)")
    command.add_argument("--label", help="the model's name in the study (default: the model id or GGUF file)")
    command.add_argument("-o", "--output", required=True, help="the table, JSON")


def _systems_arguments(command: argparse.ArgumentParser, tools: Tools) -> None:
    command.add_argument("data", nargs="+", help="rated files whose items name their 'system' (FED JSON, USR JSON Lines)")
    command.add_argument("--score-field", default="human", help="the human rating column (JSON Lines / CSV)")
    command.add_argument("--presets", nargs="+", help="presets to run (default: every preset that fits the model)")
    command.add_argument("--resamples", type=int, default=1000)
    command.add_argument("--seed", type=int, default=12345)
    command.add_argument("-o", "--output", required=True, help="the folder for report.md and results.json")
    tools.scorer_options(command)


def _agreement_arguments(command: argparse.ArgumentParser, tools: Tools) -> None:
    command.add_argument("data", nargs="+", help="rated sets: FED JSON, USR JSON Lines")
    command.add_argument("--presets", nargs="+", help="presets to run (default: every preset that fits the model)")
    command.add_argument("--replies", nargs="+", help="the generic replies (default: 'Yes.', \"I don't know.\", "
                         "\"That's cool.\", 'Haha, ok.', 'Sure.')")
    command.add_argument("--generic-only", action="store_true", help="measure the generic-reply rate alone (scores "
                         "only the human-written answers and the replies; no correlation)")
    command.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the 95%% intervals")
    command.add_argument("--seed", type=int, default=0)
    command.add_argument("-o", "--output", required=True, help="the folder for report.md and results.json")
    tools.scorer_options(command)


def _adapt_arguments(command: argparse.ArgumentParser, tools: Tools) -> None:
    command.add_argument("dialogs", nargs="+", help="JSON Lines / JSON array / CSV / Parquet files of dialogs (context plus "
                         "response), hf:NAME for a Hub dataset, or 'chitchat' (the chitchat-dataset package)")
    command.add_argument("-o", "--output", required=True, help="the folder of the adapted judge (must not exist)")
    tools.scorer_options(command, ADAPT_SETTINGS, {
        "model": "the judge to adapt: a Hub id, a local folder or a GGUF file (default: the preset's)",
        "preset": "the preset whose rendering (and, for complaints, follow-ups) the judge learns (default: paper)",
        "batch_size": f"{BY_OPTION['batch_size'].help} (default {BY_OPTION['batch_size'].default})"})
    for option in OPTIONS:  # each option's default, choices and meaning: research/adapt_options.py
        if option.name in ADAPT_SETTINGS:
            continue  # a scorer setting: its flag is the settings' (unset: adapt's default applies)
        shown = "" if option.default is None else f" (default {option.default})"
        command.add_argument("--" + option.name.replace("_", "-"), type=option.kind, default=option.default,
                             choices=option.choices, help=option.help + shown)
    command.add_argument("--mix", type=_corruption_mix, metavar="KIND=WEIGHT,...",
                         help=f"complaints: how often each corruption is drawn for training (default {mix_text()}); "
                         "the held-out pairs always use the default mix, so runs with different mixes compare")
    command.add_argument("--resume", action="store_true", help="continue an interrupted run from its checkpoint "
                         "(beside the output folder, written every --checkpoint-every steps); the same settings only")
    command.add_argument("--save-adapter", action="store_true", help="LoRA: also write the adapter alone (peft "
                         "format, float16) to OUTPUT/adapter")


def _corruption_mix(text: str) -> dict[str, float]:
    """``other=0.4,echo=0.2`` as a corruption mix (kinds left out weigh 0); ``adapt`` checks the
    kinds and weights, before any model work."""
    mix: dict[str, float] = {}
    for part in text.split(","):
        kind, _, weight = part.partition("=")
        try:  # no "=" leaves the weight empty, which float refuses too
            mix[kind.strip()] = float(weight)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is not KIND=WEIGHT") from None
    return mix


def _study_arguments(command: argparse.ArgumentParser, tools: Tools) -> None:
    command.add_argument("tables", nargs="+", help="tables written by score-candidates (every variant on every set)")
    command.add_argument("-o", "--output", required=True, help="the folder for report.md and results.json")


@command('systems', "does FULL rank the systems of rated sets as people do?", _systems_arguments)
def _systems(args: argparse.Namespace, tools: Tools) -> int:
    from .human_eval import LEVELS, score_items
    from ..files.rated_files import read_rated
    from .systems import system_agreement, write_system_report

    rows = []
    for preset, scorer in tools.preset_scorers(args):
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
    print(f"wrote {write_system_report(rows, args.output, tools.command_line(args))}", file=sys.stderr)
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


@command('correlate', "correlate FULL with human ratings (turn and dialog level)", _correlate_arguments)
def _correlate(args: argparse.Namespace, tools: Tools) -> int:
    from .human_eval import LEVELS, correlation_rows, score_items

    data = _read_rated(args)
    scorer = tools.make_scorer(args)
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
    for level, result in results.items():
        if result is not None and result.unscored:
            print(f"{level} level, left out of every row: {left_out(result.unscored, len(result), 'items')}")
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
        from .plots import scatter

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

    from .human_eval import subset_result

    if result is None:
        return None
    if not set(scorer.follow_ups) <= set(result.follow_ups):
        raise UsageError("--fine-grained needs follow-ups taken from Table 3's candidates")
    return replace(result, scores=subset_result(result, scorer.follow_ups, scorer.aggregation))


@command('rank-follow-ups', "rank candidate follow-ups by their correlation with people", _rank_follow_ups_arguments)
def _rank(args: argparse.Namespace, tools: Tools) -> int:
    from .human_eval import LEVELS, rank_follow_ups, score_items, split_holdout, subset_result

    data = _read_rated(args)
    scorer = tools.make_scorer(args)
    aspect = args.aspect or data.aspect
    candidates = tools.follow_ups(args.candidates)
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
        from .correlation import correlate

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
        from .plots import follow_up_bars

        follow_up_bars(args.plot, ranking, [lvl for lvl in LEVELS if results.get(lvl) is not None])
    return 0


@command('report', "write the FED reproduction report (Markdown and figures)", _report_arguments)
def _report(args: argparse.Namespace, tools: Tools) -> int:
    from .report import build_report

    data = _read_rated(args)
    command = tools.command_line(args)
    path = build_report(tools.make_scorer(args), data, args.output, command, top_k=args.top_k, holdout=args.holdout,
                        seed=args.seed, bootstrap=args.bootstrap)
    print(f"wrote {path}", file=sys.stderr)
    return 0


@command('score-candidates', "score candidate follow-ups on a rated file and save the log-likelihood table (for study)", _score_candidates_arguments)
def _score_candidates(args: argparse.Namespace, tools: Tools) -> int:
    from ..follow_ups import resolve_follow_ups
    from .loglik_tables import score_table, write_table

    data = _read_rated(args)
    scorer = tools.make_scorer(args)
    candidates = resolve_follow_ups(tools.follow_ups(args.candidates))
    label = args.label or (Path(args.gguf_file).name if args.gguf_file else scorer.loaded.name)
    table = score_table(scorer, data, args.name or Path(args.data).stem, candidates, label, tools.command_line(args))
    write_table(args.output, table)
    print(f"wrote {len(table.items)} items x {len(candidates)} follow-ups to {args.output}", file=sys.stderr)
    return 0


@command('study', "compare FULL configurations on log-likelihood tables, leave one set out", _study_arguments)
def _study(args: argparse.Namespace, tools: Tools) -> int:
    from .loglik_tables import read_table
    from .study_report import write_study

    path, results = write_study([read_table(t) for t in args.tables], args.output, tools.command_line(args))
    for protocol in results["protocols"]:
        for fold in protocol["folds"]:
            scores = ", ".join(f"{k} {v:.3f}" for k, v in fold["held_out_scores"].items())
            print(f"{protocol['family']}: held out {fold['held_out']}: {scores}")
    print(f"wrote {path}", file=sys.stderr)
    return 0


@command('agreement', "agreement with people (pooled, within context, over systems) and "
                                "how often a generic reply beats a person's answer, per preset", _agreement_arguments)
def _agreement(args: argparse.Namespace, tools: Tools) -> int:
    from .agreement import GENERIC_REPLIES, agreement, markdown, per_reply_markdown

    rows, signatures, scores = [], {}, []
    replies = tuple(args.replies or GENERIC_REPLIES)
    for preset, scorer in tools.preset_scorers(args):
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
    (folder / "results.json").write_text(json.dumps({"command": tools.command_line(args), "signatures": signatures,
                                                     "rows": rows}, indent=2), encoding="utf-8")
    text = (f"# Agreement with people, and the generic-reply rate\n\nMade by `{tools.command_line(args)}`.\n\n"
            f"Model `{loaded.name}`; 95% percentile bootstrap intervals ({args.bootstrap} resamples, seed {args.seed}). "
            f"Generic replies: {', '.join(repr(r) for r in replies)}; the rate is the share of (context, "
            "generic reply) pairs where the reply outscores the human-written answer.\n\n"
            + markdown(rows, "preset") + "\n\nEach generic reply on its own (share of the human-written answers it "
            "outscores):\n\n" + per_reply_markdown(rows, replies, "preset") + "\n\nSignatures:\n\n"
            + "".join(f"- {p}: `{s}`\n" for p, s in signatures.items()))
    (folder / "report.md").write_text(text, encoding="utf-8")
    print(markdown(rows, "preset"))
    return 0


@command('adapt', "adapt the judge: continue training FULL's model on unlabeled dialogs", _adapt_arguments)
def _adapt(args: argparse.Namespace, tools: Tools) -> int:
    from .adapt import adapt

    given = {k: getattr(args, k) for k in ADAPT_SETTINGS if k != "model" and getattr(args, k) is not None}
    options = {o.name: getattr(args, o.name) for o in OPTIONS if o.name not in ADAPT_SETTINGS}
    done = adapt(args.model, args.dialogs, args.output, corruption_mix=args.mix, resume=args.resume,
                 save_adapter=args.save_adapter, **options, **given)
    pairs = (f"; held-out pair accuracy {done.held_out_pair_accuracy_before:.3f} -> {done.held_out_pair_accuracy_after:.3f}"
             if done.objective == "complaints" else "")
    print(f"adapted {done.base_model} on {done.training_tokens} tokens in {done.seconds:.0f} s: held-out loss "
          f"{done.held_out_loss_before:.4f} -> {done.held_out_loss_after:.4f}{pairs}; wrote {args.output}", file=sys.stderr)
    return 0

"""The ``full-metric`` command line: ``full-metric score INPUT.jsonl -o OUTPUT.jsonl``."""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

from ..files.dialog_files import DialogFileError, read_dialog_lines, read_follow_ups, refuse_overwriting_input, scored_records
from ..errors import UsageError, install_hint
from ..follow_ups import NAMED_SETS
from ..result import signature_differences
from ..unscored import left_out
from ..settings import LOAD_SETTINGS
from ..research.commands import COMMANDS as RESEARCH_COMMANDS
from ..version import __version__

_FOLLOW_UP_SETTINGS = ("follow_ups", "positive_follow_ups")


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
        if setting.kind is bool:  # a switch: --no-NAME turns off one that is on by default
            command.add_argument(setting.flag, dest=setting.name, default=None,
                                 action="store_false" if setting.default else "store_true",
                                 help=f"do not {setting.help}" if setting.default else setting.help)
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
    score.add_argument("input", nargs="?", help='JSON Lines, JSON array, CSV or Parquet rows: {"context": [turns...] or "one turn '
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
    for name, research in RESEARCH_COMMANDS.items():  # research/ registers its own (research.commands)
        research.arguments(commands.add_parser(name, help=research.help), TOOLS)
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
        unscored = done["unscored"]
        mean = "none (no dialog was scored)" if len(unscored) == done["items"] else f"{done['mean']:.4f}"
        count = f"{done['items'] - len(unscored)} of {done['items']}" if unscored else f"{done['items']}"
        print(f"scored {count} dialogs: mean FULL {mean}", file=sys.stderr)
        if unscored:
            print(f"left out of the mean: {left_out(unscored, done['items'], 'rows')}", file=sys.stderr)
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
        bad = next((n for n, r in lines if isinstance(r["full"], bool)
                    or not (isinstance(r["full"], (int, float)) or (r["full"] is None and "unscored" in r))), None)
        if bad is not None:
            raise DialogFileError(f"{path}, line {bad}: field 'full' is not a number (nor null with the field "
                                  "'unscored' of an item not scored)")
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
        first, second = sorted(map(str, signatures))[:2]
        raise DialogFileError(f"{path}: its records were scored with different settings: "
                              f"{signature_differences(first, second)}")
    return records, signatures.pop()


def _compare(args: argparse.Namespace) -> int:
    from ..comparison import PairingError, compare_systems, pair_items, pairing_keys

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
        keys = {name: pairing_keys(records) for _, name, _, records in systems}
        try:
            order = pair_items(keys, baseline)
        except PairingError as error:
            path, _, numbers, _ = next(s for s in systems if s[1] == error.system)
            raise DialogFileError(f"{path}, line {numbers[error.index]}: {error}; "
                                  "the files must answer the same contexts (or pass --unpaired)") from None
    done = [(path, name, *_scored(path, records, scorer)) for path, name, _, records in systems]
    signatures = {str(sig) for *_, sig in done}
    if len(signatures) > 1:
        (first_path, _, _, first), (path, _, _, sig) = done[0], next(d for d in done if str(d[3]) != str(done[0][3]))
        raise DialogFileError(f"the files were scored with different settings, their scores do not compare: {path} "
                              f"against {first_path}: {signature_differences(first, sig)}")
    scores = {name: [r["full"] for r in records] for _, name, records, _ in done}
    lines = {name: [f"{Path(path).name} line {n}" for n in numbers] for path, name, numbers, _ in systems}
    if order is not None:
        scores = {name: [values[k] for k in order[name]] for name, values in scores.items()}
        lines = {name: [values[k] for k in order[name]] for name, values in lines.items()}
    comparison = compare_systems(scores, baseline=baseline, method=args.method, resamples=args.resamples,
                                 seed=args.seed, paired=not args.unpaired, item_names=lines)
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


def _command_line(args: argparse.Namespace) -> str:
    """This run's command line as a user would type it (``full-metric ...``), an absolute path
    shortened to ``<...>/`` and its last two parts (reports carry no path of the machine)."""
    def short(arg: str) -> str:
        return f"<...>/{'/'.join(Path(arg).parts[-2:])}" if Path(arg).is_absolute() else arg

    def quoted(arg: str) -> str:  # an argument with spaces or quotes, as a shell reads it back
        return shlex.quote(arg) if any(c in arg for c in " '\"") else arg

    return " ".join(["full-metric", *(quoted(short(a)) for a in args.argv)])


#: The subcommands the command line holds itself; research/ registers the others (research.commands).
CORE_COMMANDS = {"score": _score, "compare": _compare}
#: What the command line lends the research commands (:class:`full_metric.research.commands.Tools`).
TOOLS = SimpleNamespace(scorer_options=_scorer_options, rated_options=_rated_options, make_scorer=_make_scorer,
                        preset_scorers=_preset_scorers, follow_ups=_follow_ups, command_line=_command_line)


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
        if args.command in CORE_COMMANDS:
            return CORE_COMMANDS[args.command](args)
        return RESEARCH_COMMANDS[args.command].run(args, TOOLS)
    except UsageError as error:  # bad input or settings: the message says what to fix
        print(f"full-metric: error: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        library = (error.name or "").split(".")[0]
        if library in EXTRAS:
            print(f"full-metric: error: {args.command} needs {library}, which is not installed: "
                  f"{install_hint(EXTRAS[library], library)}", file=sys.stderr)
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

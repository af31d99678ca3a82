"""The ``full-metric`` command line: ``full-metric score INPUT.jsonl -o OUTPUT.jsonl``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Sequence

from .aggregate import AGGREGATIONS
from .dialog_files import DialogFileError, read_dialogs, read_follow_ups, write_dialogs
from .follow_ups import NAMED_SETS
from .models import DEFAULT_MODEL
from .rendering import RENDERINGS
from .scorer import PRESETS
from .version import __version__


def _follow_ups(value: str | None) -> str | list[str] | None:
    """A built-in set name, or a file with one follow-up per line."""
    if value is None or value in NAMED_SETS:
        return value
    if not Path(value).is_file():
        raise DialogFileError(f"--follow-ups {value!r} is neither a file nor a built-in set ({sorted(NAMED_SETS)})")
    return read_follow_ups(value)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="full-metric", description="FULL: follow-up log-likelihood dialog scores.")
    parser.add_argument("--version", action="version", version=f"full-metric {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="score the dialogs of a JSON Lines file")
    score.add_argument("input", help='JSON Lines: {"context": [turns...], "response": "..."} (no response: dialog level)')
    score.add_argument("-o", "--output", required=True, help="JSON Lines out: the input records plus their scores")
    score.add_argument("--model", default=DEFAULT_MODEL, help=f"Hub id or local folder (default {DEFAULT_MODEL})")
    score.add_argument("--gguf-file", help="a GGUF file in the model folder, or a path to one")
    score.add_argument("--follow-ups", help=f"a file, one follow-up per line, or a set: {', '.join(NAMED_SETS)}")
    score.add_argument("--aggregation", choices=AGGREGATIONS)
    score.add_argument("--preset", choices=sorted(PRESETS))
    score.add_argument("--rendering", choices=RENDERINGS)
    score.add_argument("--batch-size", type=int)
    score.add_argument("--device", help="cuda, mps, cpu... (default: the best available)")
    score.add_argument("--dtype", choices=("float32", "bfloat16", "float16"))
    score.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser


def _score(args: argparse.Namespace) -> int:
    from .scorer import FullScorer

    records = read_dialogs(args.input)
    follow_ups = _follow_ups(args.follow_ups)
    scorer = FullScorer(
        args.model,
        gguf_file=args.gguf_file,
        follow_ups=follow_ups,
        aggregation=args.aggregation,
        preset=args.preset,
        rendering=args.rendering,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        progress=not args.no_progress,
    )
    turn_level = bool(records) and records[0].get("response") is not None
    contexts = [r["context"] for r in records]
    result = scorer.score(contexts, [r["response"] for r in records] if turn_level else None)
    for record, score, values in zip(records, result.scores, result.follow_up_log_likelihoods):
        record["full"] = score
        record["follow_up_log_likelihoods"] = dict(zip(result.follow_ups, values))
    write_dialogs(args.output, records)
    print(f"scored {len(records)} dialogs: mean FULL {result.mean:.4f}", file=sys.stderr)
    print(result.signature, file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for bad input)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return _score(args)
    except (DialogFileError, ValueError, TypeError) as error:
        print(f"full-metric: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

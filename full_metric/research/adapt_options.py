"""The options of judge adaptation (``full-metric adapt``, :func:`full_metric.research.adapt.adapt`)
in one place: each one's default, choices and meaning. The function takes its defaults from here
and the command line builds its options from here. Torch-free, so that the command line's parser
stays light."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .pairs import DEFAULT_MIX

#: How the judge is trained: LoRA through peft, or every weight.
METHODS = ("lora", "full")
#: The objectives: ``dialogs`` (the language-modelling loss on whole dialogs) and ``complaints``
#: (FULL's own question, :mod:`full_metric.research.complaints`).
OBJECTIVES = ("dialogs", "complaints")
#: Training precision: ``auto`` (bfloat16 on an accelerator and on a CPU that computes it natively: the
#: complaints objective's step ran 1.6x faster so on a 2-core AVX512-BF16 CPU, measured in
#: reports/complaint-judge), ``bfloat16``, ``none`` (float32).
AUTOCASTS = ("auto", "bfloat16", "none")
#: Learning-rate schedules: ``linear`` (a linear warm-up over 5% of the steps, then a linear decay to
#: zero) and ``constant`` (a 10-step warm-up, then constant: the judges trained before schedules existed).
SCHEDULES = ("linear", "constant")
#: The learning rate when none is given, by method.
LEARNING_RATES = {"lora": 2e-4, "full": 2e-5}


@dataclass(frozen=True)
class AdaptOption:
    """One option: its default, its choices (``None``: any value of its type) and what it means."""

    name: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    kind: type = str


OPTIONS: tuple[AdaptOption, ...] = (
    AdaptOption("method", "lora", "LoRA through peft, or full fine-tuning", METHODS),
    AdaptOption("objective", "dialogs", "dialogs: the language-modelling loss on whole dialogs; complaints: FULL's "
                "own question, pairs of a real next turn and a corrupted reply (docs/cli.md)", OBJECTIVES),
    AdaptOption("max_tokens", 250_000, "the training token budget (dialogs objective)", kind=int),
    AdaptOption("max_pairs", 2000, "complaints: the training pair budget", kind=int),
    AdaptOption("pairs_per_dialog", 1, "complaints: pairs drawn from each training dialog, each cut at another "
                "turn (more than 1: a larger budget from the same dialogs, the pairs shuffled)", kind=int),
    AdaptOption("batch_size", 8, "training examples (complaints: pairs) per step", kind=int),
    AdaptOption("held_out", 0.05, "the fraction of dialogs held out (at most 500; the held-out split and pairs are "
                "the same for every seed)", kind=float),
    AdaptOption("max_length", 512, "tokens per example at most, the dialog's end kept", kind=int),
    AdaptOption("learning_rate", None, "the peak learning rate (none given: "
                + ", ".join(f"{v:g} for {k}" for k, v in LEARNING_RATES.items()) + ")", kind=float),
    AdaptOption("lora_rank", 16, "the LoRA rank", kind=int),
    AdaptOption("seed", 0, "orders and corrupts the training dialogs and seeds LoRA's dropout", kind=int),
    AdaptOption("margin", 1.0, "complaints: the pairwise loss's margin", kind=float),
    AdaptOption("lm_weight", 0.1, "complaints: the weight of the language-modelling regulariser", kind=float),
    AdaptOption("autocast", "auto", "training precision: auto (bfloat16 on an accelerator or a CPU that computes "
                "it natively), bfloat16, none (float32)", AUTOCASTS),
    AdaptOption("schedule", "linear", "the learning rate: linear (warm-up over 5%% of the steps, then a linear "
                "decay to zero) or constant (after a 10-step warm-up)", SCHEDULES),
    AdaptOption("checkpoint_every", 25, "steps between checkpoints", kind=int),
)
BY_NAME = {o.name: o for o in OPTIONS}


def default(name: str) -> Any:
    """The default of option ``name``."""
    return BY_NAME[name].default


def mix_text(mix: dict[str, float] | None = None) -> str:
    """A corruption mix as the command line writes it (default: :data:`DEFAULT_MIX`)."""
    return ",".join(f"{k}={v:g}" for k, v in (DEFAULT_MIX if mix is None else mix).items())

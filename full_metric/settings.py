"""Every setting of a FULL scorer, declared once: name, type, help, choices, check.

The faces derive from :data:`SETTINGS`: ``evaluate.load("full", ...)`` keywords and their
documentation (:mod:`full_metric.metric`), the command line's options (:mod:`full_metric.cli`),
and the app's environment variables ``FULL_<NAME>`` (:mod:`full_metric.webapp`).
:class:`~full_metric.FullScorer` keeps an explicit, typed signature for editors;
``tests/test_settings.py`` fails when a setting is missing from any face.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence


def positive_int(value: Any, name: str) -> int:
    """``value`` if it is a positive integer, else ``ValueError`` naming the setting."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _presets() -> list[str]:
    from .scorer import PRESETS

    return sorted(PRESETS)


def _renderings() -> list[str]:
    from .rendering import RENDERINGS

    return list(RENDERINGS)


def _aggregations() -> list[str]:
    from .aggregate import AGGREGATIONS

    return list(AGGREGATIONS)


@dataclass(frozen=True)
class Setting:
    """One setting. ``kind`` is how text (a command-line option, an environment variable) is read;
    ``loads_model`` marks the settings that choose and load the model (the metric shares one loaded
    model per their values); ``metric_name`` is its name in ``evaluate.load`` where that differs
    (evaluate's own ``revision`` is the metric script's)."""

    name: str
    help: str
    kind: type = str
    choices: Callable[[], Sequence[str]] | None = None
    loads_model: bool = False
    metric_name: str | None = None
    default: Any = None

    @property
    def keyword(self) -> str:
        """The name ``evaluate.load`` takes."""
        return self.metric_name or self.name

    @property
    def flag(self) -> str:
        """The command-line option (``--no-progress`` for the one setting that is on by default)."""
        dashed = self.name.replace("_", "-")
        return f"--no-{dashed}" if self.kind is bool else f"--{dashed}"

    @property
    def env(self) -> str:
        """The app's environment variable."""
        return f"FULL_{self.name.upper()}"

    def check(self, value: Any) -> Any:
        """``value`` checked (``None`` means the default); positive integers and choices here,
        follow-ups and presets in the scorer's ``check_settings``."""
        if value is None:
            return None
        if self.kind is int:
            return positive_int(value, self.name)
        if self.choices is not None and value not in self.choices():
            raise ValueError(f"unknown {self.name} {value!r}; choose one of {list(self.choices())}")
        return value

    def parse(self, text: str) -> Any:
        """A value from text (environment variables); empty text means the default."""
        if text == "":
            return None
        if self.kind is bool:
            return text.strip().lower() not in ("0", "false", "no", "off")
        if self.kind is int:
            try:
                return int(text)
            except ValueError:
                raise ValueError(f"{self.env} must be an integer, got {text!r}") from None
        return text


SETTINGS: tuple[Setting, ...] = (
    Setting("model", "a Hub model id or a local folder (default: the preset's; facebook/blenderbot-400M-distill "
            "for 'paper' and 'reference')", loads_model=True),
    Setting("gguf_file", "a GGUF file in the model's folder or repository, or a path to one", loads_model=True),
    Setting("revision", "the Hub revision (branch, tag or commit) of the model", loads_model=True,
            metric_name="model_revision"),
    Setting("follow_ups", "the follow-ups: a list, or a built-in set name (default: the preset's, the paper's five)"),
    Setting("positive_follow_ups", "follow-ups that count with the opposite sign (not with 'perplexity'; "
            "default: the preset's, none for 'paper')"),
    Setting("aggregation", "how follow-up log-likelihoods make a score (default: the preset's, 'sum')",
            choices=_aggregations),
    Setting("preset", "a bundle of settings: 'paper' (default), 'reference' (the authors' package), or a "
            "model family's preset from the settings study", choices=_presets),
    Setting("rendering", "how a dialog is written for the model (default: the preset's, else the model "
            "family's)", choices=_renderings),
    Setting("device", "cuda, mps, cpu... (default: the best available)", loads_model=True),
    Setting("dtype", "the model's dtype: float32 (default), bfloat16, float16, or auto (bfloat16 on a CPU that "
            "computes it natively, else float32); the signature names the dtype that ran", loads_model=True,
            choices=lambda: ("float32", "bfloat16", "float16", "auto")),
    Setting("batch_size", "dialogs per forward pass (default 4 on a CPU, 32 on an accelerator)", kind=int),
    Setting("max_batch_tokens", "padded tokens per forward pass at most (default 1024 on a CPU, 65536 on an "
            "accelerator)", kind=int),
    Setting("context_budget", "the most context tokens the model reads (default: the model's positions)", kind=int),
    Setting("max_turns", "the most context turns kept, the newest (default: the preset's, 50)", kind=int),
    Setting("progress", "show a progress bar while scoring", kind=bool, default=True),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def describe(indent: int = 4, *, metric: bool = False, skip: Sequence[str] = ()) -> str:
    """One line per setting (the scorer's names, or ``evaluate.load``'s with ``metric``), for docstrings."""
    return "\n".join(
        f"{' ' * indent}{s.keyword if metric else s.name}: {s.help}." for s in SETTINGS if s.name not in skip
    )


def markdown_table() -> str:
    """The settings as the README's table (``python -m full_metric.settings`` prints it)."""
    rows = ["| `evaluate.load` / scorer | command line | app variable | what it sets |", "|---|---|---|---|"]
    for s in SETTINGS:
        name = f"`{s.keyword}`" + (f" / `{s.name}`" if s.keyword != s.name else "")
        rows.append(f"| {name} | `{s.flag}` | `{s.env}` | {s.help} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())

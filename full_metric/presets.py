"""Named bundles of settings, and which of them fit a model: decided here, once, for every face.

``paper``: the paper's method (its five follow-ups, equation (1), each model family rendered as
it was trained, oldest tokens dropped first). ``reference``: the authors' package ``full``
0.0.3.1 exactly (encoder-decoder models only, as that package was). The model-family presets of
the settings study come from :mod:`full_metric.study_presets` (generated from its results).
"""

from __future__ import annotations

from typing import Any

from .follow_ups import PAPER_FIVE, REFERENCE_PACKAGE_DEFAULT
from .study_presets import STUDY_PRESETS

#: The paper's model, the default of the method presets.
DEFAULT_MODEL = "facebook/blenderbot-400M-distill"
#: The preset of a scorer that names none.
DEFAULT_PRESET = "paper"

PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"model": DEFAULT_MODEL, "follow_ups": PAPER_FIVE, "positive_follow_ups": (), "aggregation": "sum",
              "rendering": None, "max_turns": 50},
    "reference": {"model": DEFAULT_MODEL, "follow_ups": REFERENCE_PACKAGE_DEFAULT, "positive_follow_ups": (),
                  "aggregation": "perplexity", "rendering": "reference", "max_turns": 50,
                  "encoder_decoder_only": True},
    **STUDY_PRESETS,
}


def _squash(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def preset_model(preset: str) -> str:
    """The model a preset scores with when none is given (the one place the default model is resolved)."""
    return PRESETS[preset].get("model", DEFAULT_MODEL)


def preset_runs(preset: str, is_encoder_decoder: bool) -> bool:
    """Whether ``preset`` can score a model of this kind at all (``reference`` needs an encoder-decoder)."""
    return is_encoder_decoder or not PRESETS[preset].get("encoder_decoder_only", False)


def preset_fits(preset: str, model_name: str, model_type: str, is_encoder_decoder: bool = True) -> bool:
    """Whether ``preset`` suits a model: it can run on it, and it is a method preset (no ``family``)
    or a family preset of the settings study whose family the model's name or model type names
    (``smollm2`` in ``.../SmolLM2-135M-Instruct...``, ``gemma3`` in ``gemma3_text``)."""
    if not preset_runs(preset, is_encoder_decoder):
        return False
    family = PRESETS[preset].get("family")
    return family is None or _squash(family) in _squash(model_name) or _squash(family) in _squash(model_type)


def fitting_presets(model_name: str, model_type: str, is_encoder_decoder: bool) -> list[str]:
    """The presets that fit a model, in :data:`PRESETS` order: what the command line's ``systems``
    and the app's preset menu offer."""
    return [p for p in PRESETS if preset_fits(p, model_name, model_type, is_encoder_decoder)]

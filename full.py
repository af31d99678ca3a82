"""The FULL metric script: what ``evaluate.load`` runs for this folder and for the Hub Space.

All the logic lives in the ``full_metric`` package; this file only exposes its ``evaluate``
metric class. Hub users receive only this file, so they install the package from the Space
repository first (``scripts/make_space.py --space <user>/full`` writes the Space's address below):

    pip install "full-metric[evaluate] @ git+https://huggingface.co/spaces/<user>/full"
"""

import warnings

from full_metric.faces.metric import FULL, __version__ as INSTALLED  # From: git+https://huggingface.co/spaces/<user>/full

#: The package version this script was written for (``scripts/make_space.py`` keeps it in step).
WRITTEN_FOR = "0.1.0"
if INSTALLED != WRITTEN_FOR:
    warnings.warn(
        f"this FULL metric script was written for full-metric {WRITTEN_FOR}, but {INSTALLED} is installed: "
        "scores and signatures may differ; install the version of the Space this script came from",
        stacklevel=2,
    )

__all__ = ["FULL"]

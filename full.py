"""The FULL metric script: what ``evaluate.load`` runs for this folder and for the Hub Space.

All the logic lives in the ``full_metric`` package (``pip install full-metric``); this file only
exposes its ``evaluate`` metric class.
"""

from full_metric.metric import FULL  # From: full-metric

__all__ = ["FULL"]

"""The FULL comparison script: what ``evaluate.load("full_comparison.py", module_type="comparison")``
runs (two systems' responses to the same contexts: both FULL scores, the difference, its interval
and a paired p-value). All the logic lives in the ``full_metric`` package, which Hub users
install from the Space repository first:

    pip install "full-metric[evaluate] @ git+https://huggingface.co/spaces/<user>/full"
"""

from full_metric.faces.comparison_metric import FULLComparison  # From: git+https://huggingface.co/spaces/<user>/full

__all__ = ["FULLComparison"]

"""FULL as an ``evaluate`` comparison module (like ``mcnemar`` and ``wilcoxon``): two systems'
responses to the same contexts, their FULL scores, the difference, its interval and a paired
p-value. The model is loaded once per process and shared with the FULL metric's cache."""

from __future__ import annotations

from typing import Any

import datasets
import evaluate

from ..comparison import DEFAULT_SEED, compare_systems
from ..errors import UsageError
from .metric import CITATION, FullSettings
from ..settings import describe
from ..unscored import is_unscored, unscored_items

_DESCRIPTION = """\
Compares two dialog systems that answered the same contexts with FULL (Follow-Up Log-Likelihood):
both systems' FULL scores, the difference (system 2 minus system 1, higher is better), its 95%
bootstrap interval and a two-sided paired p-value (paired bootstrap resampling or approximate
randomization, as sacrebleu computes them). The tests resample the per-example scores; the model
scores each response once.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions1: system 1's responses, one string each.
    predictions2: system 2's responses to the same contexts, in the same order.
    references: the contexts, each a list of turns or one string with a turn per line.
    method: "bootstrap" (default) or "randomization".
    resamples: bootstrap resamples (default 1000) or randomization trials (default 10000).
    seed: the resampling seed (default 12345).

Options of one ``compute`` call, as for the FULL metric:
{options}

Settings of ``evaluate.load(..., module_type="comparison")``: those of the FULL metric:
{settings}

Returns:
    full1, full2: each system's FULL (the mean of its scores).
    difference: full2 - full1.
    ci_low, ci_high: the difference's 95% percentile bootstrap interval.
    full1_ci, full2_ci: each system's [low, high] interval.
    p_value: two-sided, p = (c + 1) / (N + 1).
    scores1, scores2: the per-example scores.
    method, resamples, seed, signature: how the numbers were made.

Examples:
    >>> import evaluate
    >>> compare = evaluate.load("full_comparison.py", module_type="comparison", progress=False)
    >>> results = compare.compute(
    ...     predictions1=["The capital of Australia is Canberra.", "My car needs new tires."],
    ...     predictions2=["It was great, I went hiking.", "Congratulations! What breed is it?"],
    ...     references=[["How was your weekend?"], ["I just adopted a puppy!"]],
    ... )
    >>> sorted(results)[:4]
    ['ci_high', 'ci_low', 'difference', 'full1']
"""

_KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION.replace("{settings}", describe(4, metric=True)).replace(
    "{options}", describe(4, scope="call"))
__all__ = ["FULLComparison"]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class FULLComparison(FullSettings, evaluate.Comparison):
    """Two systems compared with FULL. Settings as keyword arguments (see ``_KWARGS_DESCRIPTION``)."""

    def _info(self) -> evaluate.ComparisonInfo:
        if self.config_name not in ("default", "turn"):
            raise UsageError(f"unknown config {self.config_name!r}; the comparison is turn level ('default')")
        return evaluate.ComparisonInfo(
            description=_DESCRIPTION,
            citation=CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({
                "predictions1": datasets.Value("string"),
                "predictions2": datasets.Value("string"),
                "references": datasets.Sequence(datasets.Value("string")),
            }),
            homepage="https://arxiv.org/abs/2209.05185",
        )

    def _prepare(self, predictions1: Any, predictions2: Any, references: Any, strip: bool | None) -> tuple:
        self.check_strip(strip)
        contexts = self.contexts(references)
        out = []
        for name, predictions in (("predictions1", predictions1), ("predictions2", predictions2)):
            try:
                self.check_input(contexts, predictions, names=("references", name))
            except (TypeError, ValueError) as error:
                raise type(error)(f"{name}: {error}") from None
            out.append(list(predictions))
        return out[0], out[1], contexts

    def add_batch(self, *, predictions1: Any = None, predictions2: Any = None, references: Any = None,
                  **kwargs: Any) -> None:
        """Check, normalise and store a batch of examples."""
        p1, p2, refs = self._prepare(predictions1, predictions2, references, kwargs.pop("strip_speaker_prefixes", None))
        super().add_batch(predictions1=p1, predictions2=p2, references=refs, **kwargs)

    def compute(self, *, predictions1: Any = None, predictions2: Any = None, references: Any = None,
                **kwargs: Any) -> dict[str, Any] | None:
        """Check and normalise the examples (before anything is stored), then score and compare."""
        strip = kwargs.pop("strip_speaker_prefixes", None)
        self.check_call_options(kwargs, own=("method", "resamples", "seed"))
        if predictions1 is not None or predictions2 is not None or references is not None:
            predictions1, predictions2, references = self._prepare(predictions1, predictions2, references, strip)
            kwargs.update(predictions1=predictions1, predictions2=predictions2, references=references)
        return super().compute(**kwargs)

    def _compute(
        self, predictions1: list[str], predictions2: list[str], references: list[list[str]],
        method: str = "bootstrap", resamples: int | None = None, seed: int = DEFAULT_SEED, **options: Any,
    ) -> dict[str, Any]:
        both = self.scorer.score([*references, *references], [*predictions1, *predictions2], **options)
        n = len(predictions1)
        scores1, scores2 = both.scores[:n], both.scores[n:]
        comparison = compare_systems({"predictions1": scores1, "predictions2": scores2}, method=method,
                                     resamples=resamples, seed=seed)
        one, two = comparison.systems
        return {
            "full1": one.mean, "full2": two.mean, "difference": two.delta,
            "ci_low": two.delta_ci_low, "ci_high": two.delta_ci_high, "p_value": two.p_value,
            "full1_ci": [one.ci_low, one.ci_high], "full2_ci": [two.ci_low, two.ci_high],
            "scores1": scores1, "scores2": scores2,
            "unscored1": unscored_items(scores1), "unscored2": unscored_items(scores2),
            "pairs_left_out": sum(is_unscored(a) or is_unscored(b) for a, b in zip(scores1, scores2)),
            "method": method, "resamples": comparison.resamples, "seed": seed, "signature": both.signature,
        }

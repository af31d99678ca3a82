"""PNG figures for the human-rating checks (matplotlib, imported on first use)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def scatter(path: str | Path, panels: Sequence[tuple[str, Sequence[float], Sequence[float], float]]) -> None:
    """One scatter per panel: (title, metric scores, human ratings, Spearman)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (title, metric, human, rho) in zip(axes[0], panels):
        ax.scatter(metric, human, s=10, alpha=0.6)
        ax.set_title(f"{title} (Spearman {rho:.2f}, n={len(metric)})")
        ax.set_xlabel("FULL score (higher is better)")
        ax.set_ylabel("human rating")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def follow_up_bars(path: str | Path, ranking: Sequence[dict[str, Any]], levels: Sequence[str]) -> None:
    """Horizontal bars of each follow-up's correlation per level, best combined rank on top."""
    plt = _pyplot()
    rows = list(ranking)[::-1]
    fig, ax = plt.subplots(figsize=(9, max(3, 0.25 * len(rows) + 1)))
    height = 0.8 / max(1, len(levels))
    for k, level in enumerate(levels):
        ax.barh([i + k * height for i in range(len(rows))], [r.get(level, 0.0) for r in rows], height=height, label=level)
    ax.set_yticks([i + height * (len(levels) - 1) / 2 for i in range(len(rows))])
    ax.set_yticklabels([r["follow_up"] for r in rows], fontsize=7)
    ax.set_xlabel("Spearman correlation of -log-likelihood with human rating")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def means_figure(comparison: Any) -> Any:
    """A :class:`~full_metric.comparison.Comparison` as a matplotlib figure: points (means) with
    error bars (intervals), best on top; the baseline's mean dashed, significant systems marked ``*``."""
    plt = _pyplot()
    rows = comparison.ranking()[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.5))
    means = [s.mean for s in rows]
    ax.errorbar(means, range(len(rows)), xerr=[[m - s.ci_low for m, s in zip(means, rows)],
                                               [s.ci_high - m for m, s in zip(means, rows)]], fmt="o", capsize=4)
    ax.axvline(next(s.mean for s in rows if s.system == comparison.baseline), linestyle="--", color="grey")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([s.system + (" *" if comparison.significant(s) else "") for s in rows])
    ax.set_xlabel(f"mean FULL with {comparison.confidence:.0%} interval (higher is better)\n"
                  f"dashed: the baseline; *: p (Holm) < {comparison.alpha}")
    fig.tight_layout()
    return fig


def means_with_intervals(path: str | Path, comparison: Any) -> None:
    """:func:`means_figure` saved as a PNG."""
    fig = means_figure(comparison)
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)

"""The report's 'What changed' section: where the campaign has two or more library rows (or a
baseline campaign is given), the report opens with what changed: per compared pair, the ratio
against size per kernel and placement, and the size ranges that changed with their verdict and
q value, its figures kept within a budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from commlens.report.analysis_table import ReportData
from commlens.report.comparison_figures import MAX_PANELS, ratio_figures
from commlens.report.comparisons import Comparison, changed_ranges_table
from commlens.report.elements import Figure, Skipped, Table


@dataclass
class ComparisonSection:
    comparison: Comparison
    figures: list[Figure]
    skipped: list[Skipped]
    table: Table


# Ratio figures per report, kept bounded: each panel costs about a quarter of a second to draw in both
# backends, and a broad campaign has dozens of kernel-placement curves per pair. Pairs the campaign
# lists under `compare:` (and a baseline campaign) are drawn up to MAX_COMPARISON_FIGURES figures;
# the default pairs (first row against each other) up to MAX_PANELS panels in all. Past these, a
# comparison keeps its verdict counts and table; notebooks/06-compare.ipynb draws any comparison.
MAX_COMPARISON_FIGURES = 16


def comparison_sections(data: ReportData) -> tuple[list[ComparisonSection], list[Skipped]]:
    """Every comparison's ratio figures and changed size ranges; the pairs that could not be compared."""
    sections, skipped = [], []
    budget = {"figures": MAX_COMPARISON_FIGURES, "default panels": MAX_PANELS}
    for item in data.comparisons:
        if isinstance(item, Skipped):
            skipped.append(item)
            continue
        drawn = ratio_figures(item)
        kept, left_out = [], [f for f in drawn if isinstance(f, Skipped)]
        for figure in (f for f in drawn if isinstance(f, Figure)):
            reason = _over_budget(item, figure, budget)
            if reason:
                left_out.append(Skipped(figure.name, figure.title, reason))
            else:
                kept.append(figure)
        sections.append(ComparisonSection(item, kept, left_out, changed_ranges_table(item)))
    return sections, skipped


def _over_budget(comparison: Comparison, figure: Figure, budget: dict) -> str:
    """Why `figure` is left out of the report (empty: it is drawn, and spends from `budget`)."""
    if budget["figures"] == 0:
        return (f"the report draws at most {MAX_COMPARISON_FIGURES} comparison figures; "
                "notebooks/06-compare.ipynb draws this one")
    if not comparison.asked and figure.panels > budget["default panels"]:
        budget["default panels"] = 0      # the first kernels in campaign order, not a pick of small families
        return (f"the report draws {MAX_PANELS} panels of the comparisons a campaign does not list; list this "
                "pair under `compare:` in the campaign file, or see notebooks/06-compare.ipynb")
    budget["figures"] -= 1
    if not comparison.asked:
        budget["default panels"] -= figure.panels
    return ""

"""The report's comparisons: each pair of library rows of a campaign, and each row against a
baseline campaign's, compared cell by cell (commlens.analysis.compare), with the size ranges
that changed as a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import xarray as xr

from commlens.analysis.bisection import Bisection, FailedBisection, read_bisections
from commlens.analysis.compare import VERDICTS, across, describe_launches, provenance_differences, within
from commlens.analysis.sequential import after_round
from commlens.analysis.configuration import comparison_settings
from commlens.analysis.ranges import changed_ranges, describe_range
from commlens.report.elements import Skipped, Table

if TYPE_CHECKING:     # ReportData's comparisons are made here: it imports this module
    from commlens.report.analysis_table import ReportData


@dataclass
class Comparison:
    """Candidate against baseline (commlens.analysis.compare's result over placement, kernel and size),
    with how its rows were matched and what differs in how the two were measured."""

    name: str          # file stem prefix of its figures
    title: str
    result: xr.Dataset
    matched: str
    warnings: tuple[str, ...] = ()
    asked: bool = True     # False: a default pair (first row against another), not one the campaign listed
    causes: tuple[str, ...] = ()   # what the campaign's bisections of the candidate's release found
    settings: tuple[str, ...] = ()   # which settings differ between the rows, and whether one lies where it changed

    @property
    def counts(self) -> dict[str, int]:
        """Verdicts of the cells either side measured: sizes no kernel of a placement ran are not 'missing'."""
        result = self.result
        measured = ((result["baseline_launches"] > 0) | (result["candidate_launches"] > 0)).values
        verdicts = result["verdict"].values[measured]
        return {verdict: int((verdicts == verdict).sum()) for verdict in VERDICTS}

    @property
    def statement(self) -> str:
        """The method and the false-discovery control, as printed under the table."""
        attrs = self.result.attrs
        return (f"Method: {attrs['method']}. Launches per cell: {describe_launches(self.result)}. "
                f"Multiple testing: {attrs['multiple_testing']}; a size range is listed where the interval its "
                f"verdict was read off lies wholly above or below 1 (beyond a margin of {attrs['min_effect']:.0%} "
                f"either way: regressed or improved; within it, or across it: a change whose size is left open).")


def comparison_pairs(data: ReportData) -> list[tuple[str, str]]:
    """(baseline, candidate) library rows: the campaign's `compare:` pairs, else the first row against each other."""
    listed = data.config.get("compare")
    if listed:
        return [(pair["baseline"], pair["candidate"]) for pair in listed]
    rows = data.libraries
    return [(rows[0], other) for other in rows[1:]]


def _has_data(ds: xr.Dataset, library: str) -> bool:
    return library in ds["library"].values and bool((ds["sample_count"].sel(library=library) > 0).any())


def library_row_comparisons(data: ReportData) -> list:
    items: list[Comparison | Skipped] = []
    asked = bool(data.config.get("compare"))
    for baseline, candidate in comparison_pairs(data):
        name, title = f"compare-{baseline}-{candidate}", f"{candidate} against {baseline}"
        empty = [row for row in (baseline, candidate) if not _has_data(data.ds, row)]
        if empty:
            items.append(Skipped(name, title, f"library row {', '.join(empty)} has no data in this dataset"))
            continue
        until = data.config.get("launches")
        if isinstance(until, dict) and asked:
            # Launches until decided: the verdicts the campaign stopped on, look by look, not one test
            # at the end, which would ignore that the number of rounds was chosen by looking.
            decision = after_round(data.ds, baseline, candidate, min_rounds=until["min"], max_rounds=until["max"],
                                   dim="library")
            if decision.result is None:     # fewer rounds than the first look needs: nothing was looked at
                items.append(Skipped(name, title, f"launches until decided: this dataset holds {decision.reason}, "
                                                  f"too few for a look"))
                continue
            result = decision.result
        else:
            result = within(data.ds, baseline, candidate, dim="library")
        settings = comparison_settings(data.ds, baseline, candidate, changed_ranges(result))
        items.append(Comparison(name, title, result, f"library rows of this campaign: baseline {baseline}, "
                                                     f"candidate {candidate}", asked=asked,
                                causes=_bisections_of(data, candidate), settings=tuple(settings)))
    return items


def _bisections_of(data: ReportData, row: str) -> tuple[str, ...]:
    """What the campaign's recorded bisections found about the installation library row `row` runs."""
    mpi = data.config.get("libraries", {}).get(row, {}).get("mpi")
    records = read_bisections(data.ds.attrs.get("bisections", "[]"))
    return tuple(_describe_bisection(record) for record in records if record.candidate == mpi)


def baseline_comparisons(data: ReportData) -> list:
    """Each library row against the same row (or, one row each, the only row) of the baseline campaign."""
    if data.baseline is None:
        return []
    campaign = str(data.baseline.attrs.get("campaign", "baseline"))
    try:
        result = across(data.baseline, data.ds)
    except ValueError as error:
        return [Skipped(f"baseline-{campaign}", f"Against campaign {campaign}", str(error))]
    warnings = tuple(provenance_differences(data.baseline, data.ds))
    items = []
    for library in (str(v) for v in result["library"].values):
        items.append(Comparison(f"baseline-{campaign}-{library}", f"{library} against campaign {campaign}",
                                result.sel(library=library, drop=True),
                                f"library rows of the two campaigns: {result.attrs['library_map']}", warnings))
    return items


def changed_ranges_table(comparison: Comparison) -> Table:
    ranges = changed_ranges(comparison.result)
    from commlens.report.conclusions import verdict_words

    frame = pd.DataFrame({"change": [describe_range(row) for _, row in ranges.iterrows()],
                          "verdict": [verdict_words(verdict, comparison.asked) for verdict in ranges["verdict"]],
                          "sizes": ranges["sizes"].tolist(), "q value": ranges["q_value"].tolist()})
    return Table(f"{comparison.name}-ranges", f"{comparison.title}: changed size ranges",
                 "Consecutive measured sizes with the same verdict and one ratio (a run of sizes is split where "
                 "the ratio moves by more than its interval), with the median of the range's ratios and an "
                 "interval that holds every one of its cells' intervals, and the smallest q value.", frame)


def baseline_warnings(dataset, baseline) -> list[str]:
    """What differs in how a baseline campaign was measured (commlens.analysis.compare.provenance_differences);
    raises ValueError when the two campaigns share no library row to compare."""
    from commlens.data.opening import open_campaign

    base, current = open_campaign(baseline), open_campaign(dataset)
    across(base, current)
    return provenance_differences(base, current)


def _describe_bisection(record: Bisection) -> str:
    """One sentence for the report: what a recorded bisection (commlens bisect's record) watched and found."""
    if isinstance(record, FailedBisection):
        return f"Bisecting {record.baseline} -> {record.candidate} failed: {record.error}."
    steps = []
    for step in record.steps:
        cell = next((c for c in step.cells if c.ratio is not None), None)
        measured = f", ratio {cell.ratio:.3g} [{cell.ratio_low:.3g}, {cell.ratio_high:.3g}]" if cell else ""
        steps.append(f"{step.release} {step.outcome}{measured}")
    return (f"Which release: commlens bisect from {record.baseline} to {record.candidate}, watching "
            f"{', '.join(record.cells)}, {record.launches} launches a side per step: {record.summary}. "
            f"Steps: {'; '.join(steps)}." + "".join(f" {line.rstrip('.')}." for line in record.settings))

"""The overlap figure: how much of a non-blocking exchange the computation posted with it hid, per
library row (the overlap.* kernels: raw samples, the computation alone kept beside them in subtracted_s,
overlap = 1 - (time - subtracted_s) / subtracted_s, as OSU defines it with the computation as long as the
exchange alone)."""

from __future__ import annotations

import holoviews as hv
import pandas as pd

from commbench.report.analysis_table import ReportData
from commbench.report.elements import Figure, Skipped
from commbench.report.plotting import _line_and_points, _size_options

TITLE = "Communication hidden behind computation"


def overlap_rows(data: ReportData) -> pd.DataFrame:
    """The overlap.* points with `overlap_pct`: 100 (1 - (median time - computation) / computation), the
    computation being the median over launches of subtracted_s."""
    kernels = data.kernels("overlap")
    rows = data.points[data.points["kernel"].isin(kernels)]
    if rows.empty or "subtracted_s" not in data.ds:
        return rows.assign(overlap_pct=pd.Series(dtype=float))
    computation = (data.ds["subtracted_s"].sel(kernel=kernels).median("launch").rename("computation_s")
                   .to_dataframe().reset_index()[["library", "placement", "kernel", "size", "computation_s"]])
    rows = rows.merge(computation, on=["library", "placement", "kernel", "size"], how="inner")
    rows = rows[rows["computation_s"] > 0]
    return rows.assign(overlap_pct=100 * (1 - (rows["median_s"] - rows["computation_s"]) / rows["computation_s"]))


def overlap_against_size(data: ReportData) -> list:
    rows = overlap_rows(data)
    if rows.empty:
        return [Skipped("overlap", TITLE, "needs an overlap.* kernel measured with its computation")]
    figures = []
    for placement, mine in rows.groupby("placement", sort=False):
        def build(mine=mine, placement=placement):
            layers = []
            for (kernel, library), curve in mine.groupby(["kernel", "library"]):
                layers += _line_and_points(curve.sort_values("size"), "size", "overlap_pct", f"{kernel} {library}")
            layers.append(hv.HLine(0).opts(color="grey"))
            return hv.Overlay(layers).opts(title=f"{TITLE}, {placement}", xlabel="size (B)",
                                           ylabel="overlap (%)", logx=True, **_size_options())

        figures.append(Figure(f"overlap-{placement}", f"{TITLE}, {placement}",
                              "Per library row: 100 (1 - (time - computation) / computation), the computation "
                              "calibrated to take as long as the exchange alone (OSU's overlap); 0 hides "
                              "nothing, 100 hides the exchange whole, below 0 the exchange took longer for it.",
                              build, curves=frozenset(mine[["library", "placement", "kernel"]].drop_duplicates()
                                                      .itertuples(index=False, name=None))))
    return figures

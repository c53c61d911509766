"""The figures of computation beside a non-blocking exchange, per library row:

- overlap: how much of the exchange the computation posted with it hid (the overlap.* kernels: raw samples,
  the computation alone kept beside them in subtracted_s, overlap = 1 - (time - subtracted_s) /
  subtracted_s, as OSU defines it with the computation as long as the exchange alone);
- availability: the share of the CPU the computation kept while the exchange was in flight (the
  availability.* kernels: the computation's time with the exchange, the same computation timed before MPI
  started in subtracted_s, availability = subtracted_s / time, NetPIPE's question)."""

from __future__ import annotations

import holoviews as hv
import pandas as pd

from commlens.report.analysis_table import ReportData
from commlens.report.elements import Figure, Skipped
from commlens.report.plotting import line_and_points, size_options

TITLE = "Communication hidden behind computation"
AVAILABILITY_TITLE = "CPU kept by computation while an exchange is in flight"


def _with_computation(data: ReportData, tag: str) -> pd.DataFrame:
    """The points of the kernels tagged `tag`, with `computation_s`: the median over launches of
    subtracted_s (points without one are left out)."""
    kernels = data.kernels(tag)
    rows = data.points[data.points["kernel"].isin(kernels)]
    if rows.empty or "subtracted_s" not in data.ds:
        return rows.assign(computation_s=pd.Series(dtype=float))
    computation = (data.ds["subtracted_s"].sel(kernel=kernels).median("launch").rename("computation_s")
                   .to_dataframe().reset_index()[["library", "placement", "kernel", "size", "computation_s"]])
    rows = rows.merge(computation, on=["library", "placement", "kernel", "size"], how="inner")
    return rows[rows["computation_s"] > 0]


def overlap_rows(data: ReportData) -> pd.DataFrame:
    """The overlap.* points with `overlap_pct`: 100 (1 - (median time - computation) / computation)."""
    rows = _with_computation(data, "overlap")
    return rows.assign(overlap_pct=100 * (1 - (rows["median_s"] - rows["computation_s"]) / rows["computation_s"]))


def availability_rows(data: ReportData) -> pd.DataFrame:
    """The availability.* points with `availability_pct`: 100 x the computation before MPI started / its
    median time with the exchange in flight."""
    rows = _with_computation(data, "availability")
    return rows.assign(availability_pct=100 * rows["computation_s"] / rows["median_s"])


def overlap_against_size(data: ReportData) -> list:
    return _against_size(
        overlap_rows(data), "overlap", TITLE, "overlap_pct", "overlap (%)",
        "Per library row: 100 (1 - (time - computation) / computation), the computation calibrated to take as "
        "long as the exchange alone (OSU's overlap); 0 hides nothing, 100 hides the exchange whole, below 0 "
        "the exchange took longer for it.")


def availability_against_size(data: ReportData) -> list:
    return _against_size(
        availability_rows(data), "availability", AVAILABILITY_TITLE, "availability_pct", "CPU kept (%)",
        "Per library row: 100 x the computation's time before MPI started / its time while the exchange was in "
        "flight (how it polled: the kernel's metric, in Methods). 100 keeps the whole CPU; polling costs the "
        "work of the calls that move the data, a progress thread the CPU it takes from the computation.")


def _against_size(rows: pd.DataFrame, name: str, title: str, column: str, label: str, caption: str) -> list:
    if rows.empty:
        return [Skipped(name, title, f"needs an {name}.* kernel measured with its computation")]
    figures = []
    for placement, mine in rows.groupby("placement", sort=False):
        def build(mine=mine, placement=placement):
            layers = []
            for (kernel, library), curve in mine.groupby(["kernel", "library"]):
                layers += line_and_points(curve.sort_values("size"), "size", column, f"{kernel} {library}")
            layers.append(hv.HLine(0 if name == "overlap" else 100).opts(color="grey"))
            return hv.Overlay(layers).opts(title=f"{title}, {placement}", xlabel="size (B)", ylabel=label,
                                           logx=True, **size_options())

        figures.append(Figure(f"{name}-{placement}", f"{title}, {placement}", caption, build,
                              curves=frozenset(mine[["library", "placement", "kernel"]].drop_duplicates()
                                               .itertuples(index=False, name=None))))
    return figures

"""A dataset as one tidy table: a row per measured point (library, placement, kernel, size,
launch), for spreadsheets, R, pandas or a database.

Columns: the point's labels and its placement's shape (nodes, ppn, nprocs); `count` (samples),
the per-point statistics in seconds (mean, median, min, iqm, std, p50, p90, p99 from the point's
quantiles) and the 95% interval of the median (`median_ci_low_s`, `median_ci_high_s`);
`bandwidth_MBps`, the report's bandwidth (commbench.data.quantities.bandwidth: bytes moved / median time, in
MB/s = 1e6 B/s); and `settled`, `rse`, `iters_per_sample`, `errors`, and where the dataset has
them, each library row's `imported` and `source`.

A dataset holding rows imported from another suite's files (commbench.data.imported) has three more
kinds of column, empty (blank, NaN) in the rows commbench measured: `suite_metric` (what the value
means as the suite measured it), `partial` (the file stopped short of what it was to run) and a
`reported_<column>` for each number the files print (`reported_avg_latency_s`, `reported_t_max_s`,
..., in SI units as the column's name says), beside commbench's own statistics.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import xarray as xr

from commbench.data.origins import imported_libraries
from commbench.data.samples import POINT_DIMS
from commbench.data.quantities import bandwidth, percentiles
from commbench.io.tables import table_format, write_table

FORMATS = ("csv", "parquet", "json")   # of commbench.io.tables, those export writes
MB = 1e6
RECORDS = ("settled", "rse", "iters_per_sample", "errors")


def points_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per point with samples, in the dataset's order (see the module's docstring)."""
    measured = ds["sample_count"] > 0
    columns = {"count": ds["sample_count"]}
    columns |= {f"{name}_s": ds[name] for name in ("mean", "median", "min", "iqm", "std")}
    columns |= {f"{name}_s": values for name, values in percentiles(ds["quantiles"]).items()}
    columns |= {"median_ci_low_s": ds["median_ci"].sel(bound="low", drop=True),
                "median_ci_high_s": ds["median_ci"].sel(bound="high", drop=True),
                "bandwidth_MBps": bandwidth(ds["median"], ds["size"]) / MB}
    columns |= {name: ds[name] for name in RECORDS if name in ds}
    columns |= imported_columns(ds)
    table = xr.Dataset(columns).reset_coords(drop=True).to_dataframe(dim_order=list(POINT_DIMS)).reset_index()
    table = table[measured.transpose(*POINT_DIMS).values.ravel()]
    labels = [coord for coord in ("nodes", "ppn", "nprocs") if coord in ds.coords] \
        + [coord for coord in ("imported", "source") if coord in ds.coords]
    for coord in labels:
        dim = ds[coord].dims[0]
        table.insert(len(POINT_DIMS) + labels.index(coord), coord,
                     table[dim].map(dict(zip(ds[dim].values.tolist(), ds[coord].values.tolist()))))
    if "partial" in columns:       # measured rows have no file, so neither a suite's metric nor a whole file
        imported = table["library"].isin(imported_libraries(ds))
        table["partial"] = table["partial"].astype("boolean").where(imported, pd.NA)
        table["suite_metric"] = table["suite_metric"].where(imported, None)
    return table.reset_index(drop=True)


def imported_columns(ds: xr.Dataset) -> dict[str, xr.DataArray]:
    """`suite_metric`, `partial` and `reported_<column>` where the dataset has imported rows; none else."""
    if not imported_libraries(ds):
        return {}
    columns = {name: ds[name] for name in ("suite_metric", "partial") if name in ds}
    if "reported" in ds:
        columns |= {f"reported_{column}": ds["reported"].sel(reported_column=column, drop=True)
                    for column in ds["reported_column"].values.tolist()}
    return columns


def export(dataset, fmt: str | None = None, output=None, source=None) -> Path | None:
    """Writes the points table of `dataset` (a Dataset, or a path open_campaign finds) to `output`:
    `-` is standard output, the default the dataset's path (`source`, else where it was read from)
    with the format's suffix. The format is `fmt`, else the output's suffix, else csv; a suffix that
    is no table format (x.xlsx) is refused naming the allowed ones before the dataset is read.
    Returns the path written (None for standard output)."""
    fmt = table_format(output, FORMATS, default="csv", requested=fmt)
    if not isinstance(dataset, xr.Dataset):
        from commbench.data.opening import open_campaign

        source, dataset = source or dataset, open_campaign(dataset)
    if output is None:
        output = Path(source or dataset.encoding["source"]).with_suffix(f".{fmt}")
    return write_table(points_table(dataset), output, fmt)

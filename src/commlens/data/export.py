"""A dataset as one tidy table: a row per measured point (library, placement, kernel, size,
launch), for spreadsheets, R, pandas or a database; or, for the kernels that time pairs of ranks
(allpairs.*, fan.*, bisection), a row per timed pair of each point (`pairs_table`).

Columns: the point's labels and its placement's shape (nodes, ppn, nprocs); `count` (samples),
the per-point statistics in seconds (mean, median, min, iqm, std, p50, p90, p99 from the point's
quantiles) and the 95% interval of the median (`median_ci_low_s`, `median_ci_high_s`);
`bandwidth_MBps`, the report's bandwidth (commlens.data.quantities.bandwidth: bytes moved / median time, in
MB/s = 1e6 B/s); and `settled`, `rse`, `iters_per_sample`, `errors`, and where the dataset has
them, `short_samples_dropped` and each library row's `imported` and `source`.

A dataset holding rows imported from another suite's files (commlens.data.imported) has three more
kinds of column, empty (blank, NaN) in the rows commlens measured: `suite_metric` (what the value
means as the suite measured it), `partial` (the file stopped short of what it was to run) and a
`reported_<column>` for each number the files print (`reported_avg_latency_s`, `reported_t_max_s`,
..., in SI units as the column's name says), beside commlens's own statistics.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from commlens.data.origins import imported_libraries
from commlens.data.pairs import PAIR_DIMS, rank_hosts
from commlens.data.samples import POINT_DIMS
from commlens.data.quantities import bandwidth, percentiles
from commlens.io.tables import table_format, write_table

FORMATS = ("csv", "parquet", "json")   # of commlens.io.tables, those export writes
TABLES = ("points", "pairs")
MB = 1e6
RECORDS = ("settled", "rse", "iters_per_sample", "errors", "short_samples_dropped")


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


def pairs_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per pair of ranks a point timed (the dataset's `pair_time`, each pair's median over the
    point's samples), in the dataset's order: library, placement, kernel, size, launch, the source and
    destination ranks and their nodes (the launch's `hosts`), `time_s` and `bandwidth_MBps` (size /
    time, as the pair kernels define it). Raises ValueError where no kernel of the dataset timed pairs."""
    if "pair_time" not in ds:
        raise ValueError("this dataset has no pair times: none of its kernels timed pairs of ranks (the "
                         "catalogue's kernels with pair_times_s: allpairs.*, fan.*, bisection)")
    times = ds["pair_time"].reset_coords(drop=True).transpose(*PAIR_DIMS).rename("time_s")
    table = times.to_dataframe().reset_index()
    table = table[np.isfinite(table["time_s"].to_numpy())].rename(columns={"pair_kernel": "kernel"})
    hosts = ds["hosts"].transpose("library", "placement", "kernel", "launch").to_series()
    ranks_of = {key: rank_hosts(value) for key, value in hosts.items()}
    nodes = []   # (source's, destination's) of each row
    for row in table.itertuples():
        ranks = ranks_of.get((row.library, row.placement, row.kernel, row.launch), [])
        nodes.append(tuple(ranks[rank] if rank < len(ranks) else ""
                           for rank in (row.source_rank, row.destination_rank)))
    table.insert(7, "source_node", [source for source, _ in nodes])
    table.insert(8, "destination_node", [destination for _, destination in nodes])
    table["bandwidth_MBps"] = table["size"] / table["time_s"] / MB
    return table.reset_index(drop=True)


def export(dataset, fmt: str | None = None, output=None, source=None, table: str = "points") -> Path | None:
    """Writes the points table of `dataset` (a Dataset, or a path open_campaign finds) to `output`, or
    its pairs table where `table` is "pairs": `-` is standard output, the default the dataset's path
    (`source`, else where it was read from) with the format's suffix (`.pairs.csv` and so on for the
    pairs). The format is `fmt`, else the output's suffix, else csv; a suffix that is no table format
    (x.xlsx) is refused naming the allowed ones before the dataset is read. Returns the path written
    (None for standard output)."""
    fmt = table_format(output, FORMATS, default="csv", requested=fmt)
    if table not in TABLES:
        raise ValueError(f"table {table!r}: allowed values: {', '.join(TABLES)}")
    if not isinstance(dataset, xr.Dataset):
        from commlens.data.opening import open_campaign

        source, dataset = source or dataset, open_campaign(dataset)
    if output is None:
        suffix = f".{fmt}" if table == "points" else f".{table}.{fmt}"
        output = Path(source or dataset.encoding["source"]).with_suffix(suffix)
    try:
        rows = points_table(dataset) if table == "points" else pairs_table(dataset)
    except ValueError as error:     # the file's name first, as every refusal of a dataset says it
        where = source or dataset.encoding.get("source")
        raise ValueError(f"{where}: {error}" if where else str(error)) from None
    return write_table(rows, output, fmt)

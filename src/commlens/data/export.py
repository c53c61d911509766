"""A dataset as one tidy table: a row per measured point (library, placement, kernel, size,
launch), for spreadsheets, R, pandas or a database; or, for the kernels that time pairs of ranks
(allpairs.*, fan.*, bisection), a row per timed pair of each point (`pairs_table`); or a folder of
OSU-style text files, one per curve (`write_osu`).

Columns: the point's labels (pandas categoricals, in the dataset's order) and its placement's shape
(nodes, ppn, nprocs); `count` (samples), the per-point statistics in seconds (mean, median, min, iqm,
std, p50, p90, p99 from the point's quantiles) and the 95% interval of the median (`median_ci_low_s`,
`median_ci_high_s`); `bandwidth_MBps`, the report's bandwidth (commlens.data.quantities.bandwidth:
bytes moved / median time, in MB/s = 1e6 B/s); `settled`, `rse`, `iters_per_sample`, `errors`, and
where the dataset has them, `short_samples_dropped` and each library row's `imported` and `source`;
then the launch's `status` and `reason`. A launch that gave no samples (failed, timed out, its raw
file refused, or never run: missing, its library's environment or build failed) is one row of its
own, without a size, with its status and why: so a launch that failed and one that never ran are told
apart, and neither is mistaken for a point nobody asked for (a kernel a placement does not run, status
`skipped`, has no row).

A dataset holding rows imported from another suite's files (commlens.data.imported) has three more
kinds of column, empty (blank, NaN) in the rows commlens measured: `suite_metric` (what the value
means as the suite measured it), `partial` (the file stopped short of what it was to run) and a
`reported_<column>` for each number the files print (`reported_avg_latency_s`, `reported_t_max_s`,
..., in SI units as the column's name says), beside commlens's own statistics.

What the columns mean travels with the file: each column's units and description (from the
dataset's own attributes) and the dataset's provenance (campaign, configuration hash, git commit,
compilers, commlens version) are Parquet field and file metadata, and a CSV's sidecar `<file>.json`.
So is what each library row was set to, where the dataset recorded it: `configuration` (JSON: per library,
its MPI_T status and each control variable's value, status, default, datatype, scope and description;
`configuration_table` gives it as a table). It is the file's metadata rather than columns or a table of its
own: a setting belongs to a library row, not to a point (as columns it would repeat some 700 values on every
row), and in the file's metadata it travels with the points it explains, in the one file, where any
Parquet reader finds it (DuckDB: parquet_kv_metadata).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from commlens.campaign import kernel_of
from commlens.data.origins import imported_libraries
from commlens.data.pairs import PAIR_DIMS, rank_hosts
from commlens.data.quantities import PERCENTILES, bandwidth, percentiles
from commlens.data.samples import POINT_DIMS
from commlens.io.conventions import ATTRIBUTES, machine_independent, path_roots
from commlens.io.importers.osu import BENCHMARKS
from commlens.io.tables import STDOUT, table_format, write_table

FORMATS = ("csv", "parquet", "json")   # of commlens.io.tables, those export writes
OSU = "osu"                            # a folder of OSU-style text files, one per curve
TABLES = ("points", "pairs")
MB = 1e6
RECORDS = ("settled", "rse", "iters_per_sample", "errors", "short_samples_dropped")
LABELS = ("library", "placement", "kernel")
# What a table's metadata says of the dataset it came from (its global attributes).
PROVENANCE = ("campaign", "id", "title", "source", "campaign_file", "config_hash", "git_commit", "commlens_version",
              "kernel_source_hash", "compilers", "compiler_flags", "hosts", "cpu_model", "os", "first_launch",
              "created", "creator_name", "institution", "license")


def points_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per point with samples, in the dataset's order, and one per launch that gave none
    (see the module's docstring)."""
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
    table = _with_launches(ds, table, labels)
    return _labels_as_categories(ds, table).reset_index(drop=True)


def _with_launches(ds: xr.Dataset, table: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """The table with each row's launch `status` and `reason`, and a row for every launch that gave no
    sample and was asked for (not `skipped`), after its curve's measured rows."""
    if "status" not in ds:
        return table
    cells = ds[["status", "reason"] if "reason" in ds else ["status"]].reset_coords(drop=True)
    launches = cells.to_dataframe(dim_order=["library", "placement", "kernel", "launch"]).reset_index()
    if "reason" not in launches:
        launches["reason"] = ""
    keys = ["library", "placement", "kernel", "launch"]
    table = table.merge(launches, on=keys, how="left")
    gave_samples = (ds["sample_count"] > 0).any("size").transpose(*keys).values.ravel()
    silent = launches[~gave_samples & (launches["status"] != "skipped").to_numpy()]
    for coord in labels:           # the placement's shape, the row's origin: as in the measured rows
        dim = ds[coord].dims[0]
        silent.insert(len(silent.columns), coord, silent[dim].map(dict(zip(ds[dim].values.tolist(),
                                                                           ds[coord].values.tolist()))))
    silent = silent.assign(count=0).reindex(columns=table.columns)
    if silent.empty:
        return table
    # Integers and flags a launch without samples has none of: blank (pandas' NA), the rest kept as they are.
    blank = {column: {"i": "Int64", "u": "Int64", "b": "boolean"}[table[column].dtype.kind] for column in table
             if table[column].dtype.kind in "iub" and silent[column].isna().any()}
    table = pd.concat([table.astype(blank), silent.astype(blank | {column: table[column].dtype for column in table
                                                                   if column not in blank})], ignore_index=True)
    order = [table[dim].map({label: i for i, label in enumerate(ds[dim].values.tolist())}) for dim in LABELS]
    return table.iloc[np.lexsort(order[::-1])] if len(table) else table    # stable: measured rows first


def _labels_as_categories(ds: xr.Dataset, table: pd.DataFrame) -> pd.DataFrame:
    """The label columns as pandas categoricals whose categories are the dataset's labels, in its order."""
    for dim in LABELS:
        if dim in table:
            table[dim] = pd.Categorical(table[dim], categories=ds[dim].values.tolist())
    return table


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
    return _labels_as_categories(ds, table).reset_index(drop=True)


def describe_columns(ds: xr.Dataset, table: pd.DataFrame) -> dict[str, dict[str, str]]:
    """Each column's units (none for text and true/false) and description, from the dataset's own
    attributes where the column is one of its variables."""
    return {column: _column_meaning(ds, column) for column in table.columns}


def _attribute(ds: xr.Dataset, name: str, key: str) -> str:
    """A variable's attribute as the dataset has it, else as commlens.io.conventions names it."""
    value = ds[name].attrs.get(key) if name in ds.variables else None
    return str(value if value is not None else ATTRIBUTES.get(name, {}).get(key, ""))


def _column_meaning(ds: xr.Dataset, column: str) -> dict[str, str]:
    quantiles = {f"{name}_s": q for name, q in PERCENTILES.items()}
    if column == "count":
        meaning = {"units": "1", "description": _attribute(ds, "sample_count", "long_name")}
    elif column in quantiles:
        meaning = {"units": "s", "description": f"the {quantiles[column]:g} quantile of the point's samples"}
    elif column in ("median_ci_low_s", "median_ci_high_s"):
        end = "low" if column.endswith("low_s") else "high"
        meaning = {"units": "s", "description": f"{_attribute(ds, 'median_ci', 'long_name')}: its {end} end"}
    elif column == "bandwidth_MBps":
        meaning = {"units": "MB/s", "description": "bytes moved (size x the kernel's bytes factor, both ways for "
                                                   "the bidirectional kernels) / median time, in MB/s = 1e6 B/s, "
                                                   "as the report; pairs: size / the pair's time"}
    elif column in ("source_node", "destination_node"):
        meaning = {"description": f"the node the {column.split('_')[0]} rank ran on (the launch's hosts)"}
    elif column == "time_s":
        meaning = {"units": "s", "description": _attribute(ds, "pair_time", "long_name")}
    elif column.startswith("reported_") and "reported_column" in ds.coords \
            and column.removeprefix("reported_") in ds["reported_column"].values:
        at = ds["reported_column"].values.tolist().index(column.removeprefix("reported_"))
        said = str(ds["reported_meaning"].values[at]) if "reported_meaning" in ds.coords else column
        meaning = {"units": str(ds["reported_units"].values[at]) if "reported_units" in ds.coords else "",
                   "description": f"as the imported file reports it: {said}"}
    else:
        name = column.removesuffix("_s") if column.endswith("_s") and column.removesuffix("_s") in ds else column
        units = _attribute(ds, name, "units") if name in ds.variables and ds[name].dtype.kind in "iuf" else ""
        meaning = {"units": units, "description": _attribute(ds, name, "long_name") or column.replace("_", " ")}
    return {key: value for key, value in meaning.items() if value}


def provenance(ds: xr.Dataset, source=None) -> dict[str, str]:
    """What made the dataset (PROVENANCE of its attributes, no path of this machine) and which file it is."""
    attrs = {key: ds.attrs[key] for key in PROVENANCE if key in ds.attrs}
    roots = path_roots(ds.attrs)
    found = {key: machine_independent(str(value), roots) for key, value in attrs.items()}
    where = source or ds.encoding.get("source")
    return found | ({"dataset": Path(where).name} if where else {})


def describe_table(ds: xr.Dataset, rows: pd.DataFrame, table: str, source=None) -> dict:
    """What a table file says of itself: which table, each column's units and description, the
    dataset's provenance and, where it recorded them, the libraries' control variables (a Parquet file's
    metadata, a CSV's sidecar)."""
    described = {"table": table, "columns": describe_columns(ds, rows), "provenance": provenance(ds, source)}
    configuration = configuration_metadata(ds)
    return described | ({"configuration": configuration} if configuration else {})


CONFIGURATION_FIELDS = ("value", "status", "default", "datatype", "scope", "description")


def configuration_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per (library, cvar) the dataset recorded (library, cvar and CONFIGURATION_FIELDS); empty
    where it recorded none."""
    if "cvar_value" not in ds.data_vars:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in ("library", "cvar", *CONFIGURATION_FIELDS)})
    names = {f"cvar_{field}": field for field in CONFIGURATION_FIELDS}
    table = ds[list(names)].reset_coords(drop=True).to_dataframe().reset_index().rename(columns=names)
    return table[table["status"] != "absent"].reset_index(drop=True)


def configuration_metadata(ds: xr.Dataset) -> dict:
    """{library: {"mpi_t_status": ..., "cvars": {cvar: {field: value}}}}, empty fields left out; {} where the
    dataset recorded no control variables."""
    table = configuration_table(ds)
    if table.empty:
        return {}
    status = dict(zip(ds["library"].values.tolist(), ds["mpi_t_status"].values.tolist()))
    found = {}
    for library, rows in table.groupby("library", sort=False):
        cvars = {row["cvar"]: {field: row[field] for field in CONFIGURATION_FIELDS if row[field] != ""}
                 for row in rows.to_dict("records")}
        for cvar, entry in cvars.items():
            if entry.get("status") == "varies" and "cvar_launch_value" in ds.data_vars:
                launches = ds["cvar_launch_value"].sel(library=library, cvar_varying=cvar)
                entry["by_placement"] = {str(placement): _most_read(launches.sel(placement=placement).values)
                                         for placement in ds["placement"].values}
        found[str(library)] = {"mpi_t_status": str(status.get(library, "")), "cvars": cvars}
    return found


def _most_read(values) -> str:
    """The value most launches read ("" none)."""
    read = [str(value) for value in np.ravel(values) if str(value)]
    return max(sorted(set(read)), key=read.count) if read else ""


def export(dataset, fmt: str | None = None, output=None, source=None, table: str = "points") -> Path | None:
    """Writes the points table of `dataset` (a Dataset, or a path open_campaign finds) to `output`, or
    its pairs table where `table` is "pairs": `-` is standard output, the default the dataset's path
    (`source`, else where it was read from) with the format's suffix (`.pairs.csv` and so on for the
    pairs). The format is `fmt`, else the output's suffix, else csv; a suffix that is no table format
    (x.xlsx) is refused naming the allowed ones before the dataset is read. `fmt` "osu" writes a folder
    of OSU-style files instead (write_osu; default: the dataset's path without suffix, `-osu`).
    Returns the path written (None for standard output)."""
    if fmt == OSU:
        if table != "points":
            raise ValueError("--pairs: a table of pairs has no OSU form; --format osu writes one file per curve")
        if output is not None and str(output) == STDOUT:
            raise ValueError(f"--format {OSU} writes a folder of files, one per curve; give --output FOLDER")
    else:
        fmt = table_format(output, FORMATS, default="csv", requested=fmt)
    if table not in TABLES:
        raise ValueError(f"table {table!r}: allowed values: {', '.join(TABLES)}")
    if not isinstance(dataset, xr.Dataset):
        from commlens.data.opening import open_campaign

        source, dataset = source or dataset, open_campaign(dataset)
    where = source or dataset.encoding.get("source")
    if fmt == OSU:
        folder = Path(output) if output is not None else Path(where).with_name(Path(where).stem + "-osu")
        return write_osu(dataset, folder, source=where)
    if output is None:
        suffix = f".{fmt}" if table == "points" else f".{table}.{fmt}"
        output = Path(where).with_suffix(suffix)
    try:
        rows = points_table(dataset) if table == "points" else pairs_table(dataset)
    except ValueError as error:     # the file's name first, as every refusal of a dataset says it
        raise ValueError(f"{where}: {error}" if where else str(error)) from None
    described = describe_table(dataset, rows, table, where)
    if fmt == "parquet":
        return write_parquet(rows, output, described)
    written = write_table(rows, output, fmt)
    if written is not None and fmt == "csv":
        sidecar(written).write_text(json.dumps(described, indent=1) + "\n")
    return written


def sidecar(path) -> Path:
    """Where a CSV table's description is written: beside it, `<file>.json`."""
    return Path(f"{path}.json")


def write_parquet(rows: pd.DataFrame, output, described: dict) -> Path | None:
    """`rows` as Parquet with what `described` says: each column's units and description as its field's
    metadata, and the whole description (table, columns, provenance) as the file's key-value metadata
    (`table`, `columns`, `provenance`, JSON), which any Parquet reader lists (DuckDB:
    parquet_kv_metadata)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError("--format parquet needs pyarrow, which is not installed here (pip install pyarrow); "
                         "--format csv needs nothing more") from None
    import sys

    arrow = pa.Table.from_pandas(rows, preserve_index=False)
    fields = [field.with_metadata({key: value for key, value in described["columns"].get(field.name, {}).items()})
              for field in arrow.schema]
    metadata = {**(arrow.schema.metadata or {}),
                **{key.encode(): (value if isinstance(value, str) else json.dumps(value)).encode()
                   for key, value in described.items()}}
    arrow = pa.Table.from_arrays(arrow.columns, schema=pa.schema(fields, metadata=metadata))
    to_stdout = str(output) == STDOUT
    pq.write_table(arrow, sys.stdout.buffer if to_stdout else str(output))
    if to_stdout:
        sys.stdout.flush()
        return None
    return Path(output)


# OSU 7.4's own lines for the benchmarks a curve is written as: its title, and the header of the one
# column it prints by default (the `Latency (us)` of its one-sided latency tests, OSU 5's, is not this).
OSU_VERSION = "7.4"
OSU_TITLES = {
    "osu_latency": "MPI Latency", "osu_multi_lat": "MPI Multi Latency", "osu_bw": "MPI Bandwidth",
    "osu_bibw": "MPI Bi-Directional Bandwidth", "osu_bcast": "MPI Broadcast Latency",
    "osu_scatter": "MPI Scatter Latency", "osu_scatterv": "MPI Scatterv Latency", "osu_reduce": "MPI Reduce Latency",
    "osu_gather": "MPI Gather Latency", "osu_gatherv": "MPI Gatherv Latency", "osu_allreduce": "MPI Allreduce Latency",
    "osu_allgather": "MPI Allgather Latency", "osu_allgatherv": "MPI Allgatherv Latency",
    "osu_alltoall": "MPI All-to-All Personalized Exchange Latency",
    "osu_alltoallv": "MPI All-to-Allv Personalized Exchange Latency",
}
OSU_COLUMNS = {"latency": "Avg Latency(us)", "bandwidth": "Bandwidth (MB/s)"}
OSU_DATATYPES = {"byte": "MPI_BYTE", "int": "MPI_INT", "double": "MPI_DOUBLE"}   # the kernels' --datatype
US = 1e-6
# What each file's one number is: OSU's (the mean of every timed iteration), from commlens's samples.
OSU_STATISTIC = ("the mean time per iteration over every sample of every launch (each launch's mean weighted by "
                 "its iterations: OSU's average over its timed iterations); a bandwidth is bytes moved / that time")


def osu_benchmark(kernel: str) -> str | None:
    """The OSU benchmark whose one column a kernel's curve is written as, or None: the importer's own
    kernel for it (commlens.io.importers.osu), among those that print one number per size."""
    for benchmark in BENCHMARKS.values():
        if benchmark.kernel == kernel_of(kernel) and benchmark.program in OSU_TITLES and not benchmark.options:
            return benchmark.program
    return None


def write_osu(ds: xr.Dataset, folder, source=None) -> Path:
    """A file per curve (library, placement, kernel) that has samples and an OSU counterpart, in `folder`,
    as OSU 7.4 prints it: a blank line, `# OSU <title> Test v7.4`, `# Datatype: ...`, the column header,
    then a row per size (size, then the number: Avg Latency in us, or Bandwidth in MB/s, two decimals), so
    that `commlens import-osu` reads it back and `awk '{print $2}'` prints its numbers. Files are named
    <benchmark>[@label]-<library>-<placement>.txt, as OSU's outputs are kept here; `commlens-osu.json`
    beside them says what each file's number is and where it comes from. Returns the folder."""
    folder = Path(folder)
    # Each launch's mean, weighted by the iterations it timed (samples x iterations per sample; a dataset
    # that did not record them, an import's: its samples).
    iterations_per_sample = ds["iters_per_sample"].where(ds["iters_per_sample"] > 0, 1) if "iters_per_sample" in ds \
        else 1
    weight = ds["sample_count"] * iterations_per_sample
    iterations = weight.sum("launch")
    mean = (ds["mean"].fillna(0) * weight).sum("launch") / iterations.where(iterations > 0)
    per_second = bandwidth(mean, ds["size"]) / MB
    config = json.loads(ds.attrs.get("campaign_config", "{}")).get("kernels", {})
    files: dict[str, dict] = {}
    left_out = []
    for library in ds["library"].values.tolist():
        for placement in ds["placement"].values.tolist():
            for kernel in ds["kernel"].values.tolist():
                cell = dict(library=library, placement=placement, kernel=kernel)
                sizes = ds["size"].values[np.isfinite(mean.sel(cell).values)]
                if not sizes.size:
                    continue
                program = osu_benchmark(kernel)
                if program is None:
                    left_out.append(f"{library} {placement} {kernel}: {_no_osu_file(kernel)}")
                    continue
                kind = "bandwidth" if "bandwidth" in OSU_TITLES[program].lower() else "latency"
                values = (per_second if kind == "bandwidth" else mean / US).sel(cell).sel(size=sizes).values
                label = kernel.partition("@")[2]
                name = _file_name(f"{program}{'@' + label if label else ''}-{library}-{placement}.txt")
                if name in files:
                    raise ValueError(f"{folder / name}: two curves would be written to it ({files[name]['kernel']} "
                                     f"and {kernel} of {library}, {placement}); rename one label")
                datatype = OSU_DATATYPES.get(str(config.get(kernel, {}).get("datatype", "byte")), "MPI_BYTE")
                lines = ["", f"# OSU {OSU_TITLES[program]} Test v{OSU_VERSION}", f"# Datatype: {datatype}.",
                         f"{'# Size':<10}{OSU_COLUMNS[kind]:>18}",
                         *(f"{int(size):<10d}{value:>18.2f}" for size, value in zip(sizes, values))]
                files[name] = {"library": library, "placement": placement, "kernel": kernel, "benchmark": program,
                               "column": OSU_COLUMNS[kind], "text": "\n".join(lines) + "\n"}
    if not files:
        raise ValueError(f"{source or 'the dataset'}: no curve has an OSU counterpart written here ("
                         f"{', '.join(OSU_TITLES)}); " + "; ".join(left_out[:3]))
    folder.mkdir(parents=True, exist_ok=True)
    for name, file in files.items():
        (folder / name).write_text(file.pop("text"))
    index = {"files": files, "statistic": OSU_STATISTIC, "left_out": left_out,
             "provenance": provenance(ds, source)}
    (folder / "commlens-osu.json").write_text(json.dumps(index, indent=1) + "\n")
    return folder


def _no_osu_file(kernel: str) -> str:
    """Why a kernel's curve has no OSU-style file."""
    theirs = [benchmark.program for benchmark in BENCHMARKS.values() if benchmark.kernel == kernel_of(kernel)]
    if not theirs:
        return f"no OSU benchmark measures what {kernel_of(kernel)} does"
    return (f"{', '.join(theirs)} print{'s' * (len(theirs) == 1)} more than one number per size, or none, or state "
            f"options a dataset does not hold; OSU-style files are written for {', '.join(OSU_TITLES)}")


def _file_name(name: str) -> str:
    """A label as part of a file name: what a shell or a file system takes badly (spaces, slashes) as _."""
    return re.sub(r"[^\w.@+=-]+", "_", name)

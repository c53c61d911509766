"""Other suites' results as a dataset in the campaign schema (their files are read by
commbench.io.importers).

An imported point holds what its file says and nothing more: see commbench.io.importers.common.
The dataset is built by commbench.data.collect.build_dataset, as a campaign's is, from one launch per
file: several files of one benchmark are launches 0, 1, ... of its kernel. Library rows are marked
`imported` with their `source`; each launch's `kernel_info` holds its file's provenance (path,
sha256, suite, version, options), and the attributes say which files made the dataset. Nothing of
the machine doing the import (CPU, OS, kernel sources) is recorded as if it had measured them.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import xarray as xr

from commbench.campaign import Campaign, CampaignError, validate_campaign
from commbench.data.collect import build_dataset
from commbench.data.kernels import is_windowed
from commbench.data.quantities import bytes_factor
from commbench.data.samples import POINT_DIMS, QUANTILES
from commbench.io.importers import ImportFileError, Measurement, placement_shape, read_imb, read_osu
from commbench.io.netcdf import write_dataset
from commbench.io.raw import LaunchResult, Point

# Provenance of the machine running the import, which collect stamps on a campaign's dataset;
# an imported dataset was measured elsewhere, so these are left out rather than misattributed.
NOT_MEASURED_HERE = ("hosts", "cpu_model", "os", "kernel_source_hash", "compilers", "compiler_flags",
                     "build_warnings", "timer_resolution_s", "first_launch", "refused_files", "campaign_file")



def import_files(paths, suite: str, library: str, placement: str, kernel: str | None = None,
                 nodes: int | None = None, ppn: int | None = None, name: str | None = None) -> xr.Dataset:
    """The files (all of `suite`: "osu" or "imb") as one library row on one placement; files of one
    benchmark are its launches, in the order given. `kernel` (OSU only) relabels the rows; nodes
    and ppn default to what the placement's name says (1N2P)."""
    nodes, ppn = placement_shape(placement, nodes, ppn)
    paths = [Path(p) for p in paths]
    if suite == "osu":
        measurements = [read_osu(path, kernel) for path in paths]
        suite_name = "OSU Micro-Benchmarks"
    elif suite == "imb":
        if kernel is not None:
            raise ValueError("--kernel is for OSU files (one benchmark each); an IMB file's benchmarks map to "
                             "their kernels by name")
        measurements = [m for path in paths for m in read_imb(path, nodes * ppn)]
        suite_name = "Intel MPI Benchmarks"
    else:
        raise ValueError(f"unknown suite {suite!r}; allowed values: osu, imb")
    return to_dataset(measurements, library, placement, nodes, ppn, name or f"{library}-{placement}", suite_name)


def write(ds: xr.Dataset, output) -> Path:
    """The imported dataset as netCDF at `output` (its folder made), as collect writes a campaign's."""
    path = Path(output)
    if path.suffix != ".nc":
        raise ValueError(f"--output {output}: give a .nc file (the dataset)")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_dataset(ds, path, keep_previous=False)
    return path


def describe(ds: xr.Dataset) -> list[str]:
    """What an import made, a line each: the row, its kernels with their launches and sizes, and
    what the files held that was not imported."""
    import json

    library, placement = str(ds["library"].values[0]), str(ds["placement"].values[0])
    lines = [f"library row {library} (imported), placement {placement}: {ds.attrs['source']}"]
    counts = ds["sample_count"].isel(library=0, placement=0)
    for kernel in ds["kernel"].values:
        measured = counts.sel(kernel=kernel)
        launches = int((measured > 0).any("size").sum())
        sizes = ds["size"].values[(measured > 0).any("launch").values]
        lines.append(f"  {kernel}: {launches} launch{'es' if launches != 1 else ''}, {len(sizes)} sizes "
                     f"({sizes.min()} to {sizes.max()} B)")
    left_out = {(Path(record["file"]).name, what) for record in json.loads(ds.attrs["imported_files"])
                for what in record.get("not_imported", [])}
    lines += [f"  not imported from {name}: {what}" for name, what in sorted(left_out)]
    return lines


def to_dataset(measurements: list[Measurement], library: str, placement: str, nodes: int, ppn: int,
               name: str, suite: str) -> xr.Dataset:
    """The measurements of one library row and one placement as a dataset in the campaign schema
    (see the module's docstring)."""
    if not measurements:
        raise ValueError("nothing to import")
    nprocs = nodes * ppn
    for m in measurements:
        if m.nprocs is not None and m.nprocs != nprocs:
            raise ImportFileError(m.path, f"{m.benchmark} ran on {m.nprocs} processes, but placement {placement} "
                                          f"has {nprocs} ({nodes} nodes x {ppn} per node); name the one it ran on")
    for m in measurements:
        if m.time_s is None:   # a bandwidth table: seconds per message from the rate and the bytes moved
            factor = bytes_factor(m.kernel, m.nprocs if m.nprocs is not None else np.nan)
            m.time_s = factor * m.sizes / m.bandwidth_Bps
    launches: dict[str, list[Measurement]] = {}
    for m in measurements:
        launches.setdefault(m.kernel, []).append(m)
    config = {
        "campaign": name,
        "description": f"Imported from {suite} output: " + ", ".join(Path(m.path).name for m in measurements),
        "libraries": {library: {"mpi": library}},
        "placements": [{"name": placement, "nodes": nodes, "ppn": ppn}],
        "kernels": {kernel: {"sizes": {"list": sorted({int(s) for m in runs for s in m.sizes})},
                             **({"window": runs[0].window} if runs[0].window else {})}
                    for kernel, runs in launches.items()},
        "launches": max(len(runs) for runs in launches.values()),
    }
    try:
        campaign = Campaign(name=name, source=f"{suite} output", config=validate_campaign(
            config, source="the import's names (--library, --placement, --kernel, --name)"))
    except CampaignError as error:
        raise ValueError(str(error)) from None
    results = [_launch_result(m, library, placement, launch)
               for runs in launches.values() for launch, m in enumerate(runs)]
    known = {library: {"status": "ok", "family": "unknown", "launcher": "unknown"}}
    ds = build_dataset(campaign, results, known, {library: {"status": "ok", "compiler": "unknown"}})
    ds = _with_reported_statistics(ds, launches)
    # Cells without a file were never asked for: not missing launches.
    ds["status"] = ds["status"].where(ds["status"] != "missing", "skipped").assign_attrs(ds["status"].attrs)
    source = f"{suite} output (imported): " + ", ".join(sorted({m.benchmark for m in measurements}))
    ds = ds.assign_coords(imported=("library", [True], {"long_name": "measured outside commbench, imported"}),
                          source=("library", [source], {"long_name": "where the row's numbers come from"}))
    for key in NOT_MEASURED_HERE:
        ds.attrs.pop(key, None)
    ds.attrs.update({
        "title": f"{suite} results imported into commbench: {library} on {placement}",
        "source": source,
        "imported": 1,
        "imported_files": json.dumps([m.provenance for m in measurements]),
        "campaign_config": json.dumps(config, sort_keys=True),
        "statistics": "one sample per point, the file's time per operation; spread statistics NaN unless the "
                      "file reports percentiles (quantiles, with the P50 as median); iters_per_sample 0: not "
                      "recorded (see commbench.io.importers)",
        "history": f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} imported by commbench from "
                   + ", ".join(str(m.path) for m in measurements),
    })
    return ds


def _launch_result(m: Measurement, library: str, placement: str, launch: int) -> LaunchResult:
    """A measurement as the launch record build_dataset reads; its provenance is the kernel_info."""
    iterations = m.iterations if m.iterations is not None else np.zeros(len(m.sizes), dtype=np.int64)
    errors = m.errors if m.errors is not None else [None] * len(m.sizes)
    points = [Point(size=int(size), samples=np.array([time]), iters_per_sample=int(n), settled=False,
                    rse=math.nan, errors=None if e is None else int(e))
              for size, time, n, e in zip(m.sizes, m.time_s, iterations, errors)]
    args = {"window_buffers": "shared", "window": m.window} if is_windowed(m.kernel, None) else {}
    return LaunchResult(
        path=str(m.path),
        launch={"library": library, "placement": placement, "kernel": m.kernel, "launch": launch, "status": "ok",
                "started": "", "transport": "unknown", "emulated": False},
        run={"library_version": "", "hosts": [], "timer_resolution_s": math.nan, "harness_overhead_s": math.nan,
             "metric": m.metric, "kernel_info": m.provenance, "args": args},
        points=points, end={"status": "ok", "points": len(points)})


def _with_reported_statistics(ds: xr.Dataset, launches: dict[str, list[Measurement]]) -> xr.Dataset:
    """Spread statistics NaN (one sample has none), then the file's percentiles where it has them."""
    ds = ds.copy()
    dims = list(POINT_DIMS)
    quantiles = ds["quantiles"].transpose(*dims, "quantile").values.copy()
    median = ds["median"].transpose(*dims).values.copy()
    unknown_with_percentiles = {name: ds[name].transpose(*dims).values.copy() for name in ("min", "iqm")}
    quantiles[:] = np.nan
    sizes = {int(s): i for i, s in enumerate(ds["size"].values)}
    kernels = {str(k): i for i, k in enumerate(ds["kernel"].values)}
    for kernel, runs in launches.items():
        for launch, m in enumerate(runs):
            if not m.percentiles:
                continue
            at = (0, 0, kernels[kernel], [sizes[int(s)] for s in m.sizes], launch)
            for q, values in m.percentiles.items():
                quantiles[at + (QUANTILES.index(q),)] = values
            median[at] = m.percentiles[0.5]
            for values in unknown_with_percentiles.values():
                values[at] = np.nan
    ds["quantiles"] = (dims + ["quantile"], quantiles, ds["quantiles"].attrs)
    ds["median"] = (dims, median, ds["median"].attrs)
    for name, values in unknown_with_percentiles.items():
        ds[name] = (dims, values, ds[name].attrs)
    ds["median_ci"] = ds["median_ci"].where(False).assign_attrs(ds["median_ci"].attrs)
    return ds

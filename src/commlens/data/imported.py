"""Other suites' results as a dataset in the campaign schema (their files are read by
commlens.io.importers).

An imported point holds what its file says and nothing more: see commlens.io.importers.common.
The dataset is built by commlens.data.collect.build_dataset, as a campaign's is, from one launch per
file: files of one kernel and one kind (commlens.io.importers.kinds) are launches 0, 1, ... of its
row. Beside a campaign's variables it holds:

- `reported` (point dims x `reported_column`): every number the files print for each point, in SI
  units, with `reported_units` and `reported_meaning` along `reported_column`;
- `suite_metric` (library x kernel): what one value of the row means as the suite measured it, and
  how that differs from the commlens kernel's metric;
- `partial` (per launch): the file stopped short of what it was to run (imported with --partial);
- the library coordinates `imported` (True) and `source`, and each launch's `kernel_info`: its file's
  provenance (path, sha256, suite, version, options, the ranks it states or "unknown") and its
  `sample_column`: the `reported` column that gives the point's one sample.

The attributes say which files made the dataset and which were refused (`refused_files`). Nothing
of the machine doing the import (CPU, OS, kernel sources) is recorded as if it had measured them.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, UTC
from pathlib import Path

import numpy as np
import xarray as xr

from commlens.campaign import Campaign, CampaignError, kernel_of, validate_campaign
from commlens.data.collect import RUN_DIMS, build_dataset
from commlens.data.kernels import is_windowed
from commlens.data.quantities import bytes_factor
from commlens.data.samples import POINT_DIMS, QUANTILES
from commlens.io.importers import (SUITES, ImportFileError, Measurement, Refusal, assign_labels, placement_shape,
                                    read_batch, reported_meaning)
from commlens.io.netcdf import write_dataset
from commlens.io.raw import LaunchResult, Point

# Provenance of the machine running the import, which collect stamps on a campaign's dataset;
# an imported dataset was measured elsewhere, so these are left out rather than misattributed.
NOT_MEASURED_HERE = ("hosts", "cpu_model", "os", "kernel_source_hash", "compilers", "compiler_flags",
                     "build_warnings", "timer_resolution_s", "first_launch", "campaign_file")


class ImportRefused(ValueError):
    """Files of a batch that cannot be imported, each with its reason; nothing was imported."""

    def __init__(self, refusals: list[Refusal], given: int, accepted: int):
        self.refusals = refusals
        head = (f"{len(refusals)} of {given} files refused; nothing written"
                + (f" (give --skip-bad to import the other {accepted})" if accepted else ""))
        super().__init__(head + ":\n" + "\n".join(f"  {refusal}" for refusal in refusals))


def import_files(paths, suite: str, library: str, placement: str, kernel: str | None = None,
                 nodes: int | None = None, ppn: int | None = None, name: str | None = None,
                 partial: bool = False, osu_sizes: tuple[int, int | None] | None = None,
                 skip_bad: bool = False) -> xr.Dataset:
    """The files (all of `suite`: osu, imb or netpipe) as one library row on one placement. Every
    file is tried: if any is refused, ImportRefused lists them all, unless `skip_bad`, when the
    others are imported and the refusals recorded (`refused_files`). `kernel` names the row of the
    batch's one kernel (its own name, or with an @label); nodes and ppn default to what the
    placement's name says (1N2P); `partial` imports truncated files, marked partial; `osu_sizes` is
    the -m MIN:MAX the OSU runs were given (default, or MAX None: each benchmark's own)."""
    nodes, ppn = placement_shape(placement, nodes, ppn)
    paths = list(paths)
    measurements, refusals = read_batch(paths, suite, nodes * ppn, partial, osu_sizes)
    if kernel is not None:
        refusals += [Refusal(str(m.path), str(ImportFileError(
            m.path, f"{m.benchmark} measures what {m.kernel} does; --kernel {kernel} does not match (allowed: "
                    f"{m.kernel}, or {m.kernel}@LABEL)"))) for m in measurements if m.kernel != kernel_of(kernel)]
        measurements = [m for m in measurements if m.kernel == kernel_of(kernel)]
    if refusals and (not skip_bad or not measurements):
        accepted = len(paths) - len({refusal.path for refusal in refusals}) if measurements else 0
        raise ImportRefused(refusals, len(paths), accepted)
    notes = assign_labels(measurements, kernel)
    ds = to_dataset(measurements, library, placement, nodes, ppn, name or f"{library}-{placement}", SUITES[suite])
    ds.attrs["refused_files"] = json.dumps([str(refusal) for refusal in refusals])
    ds.attrs["import_notes"] = json.dumps(notes)
    return ds


def write(ds: xr.Dataset, output) -> Path:
    """The imported dataset as netCDF at `output` (its folder made), as collect writes a campaign's."""
    path = Path(output)
    if path.suffix != ".nc":
        raise ValueError(f"--output {output}: give a .nc file (the dataset)")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_dataset(ds, path, keep_previous=False)
    return path


def describe(ds: xr.Dataset) -> list[str]:
    """What an import made, a line each: the row, its kernels with their launches and sizes, what the
    files held that was not imported, the files refused, and what the files do not state."""
    library, placement = str(ds["library"].values[0]), str(ds["placement"].values[0])
    lines = [f"library row {library} (imported), placement {placement}: {ds.attrs['source']}"]
    counts = ds["sample_count"].isel(library=0, placement=0)
    for kernel in ds["kernel"].values:
        measured = counts.sel(kernel=kernel)
        launches = int((measured > 0).any("size").sum())
        sizes = ds["size"].values[(measured > 0).any("launch").values]
        partial = int(ds["partial"].isel(library=0, placement=0).sel(kernel=kernel).sum())
        lines.append(f"  {kernel}: {launches} launch{'es' if launches != 1 else ''}, {len(sizes)} "
                     f"size{'s' if len(sizes) != 1 else ''} "
                     f"({sizes.min()} to {sizes.max()} B)" + (f", {partial} partial" if partial else ""))
    records = json.loads(ds.attrs["imported_files"])
    left_out = {(Path(record["file"]).name, what) for record in records for what in record.get("not_imported", [])}
    lines += [f"  not imported from {name}: {what}" for name, what in sorted(left_out)]
    lines += [f"  partial: {Path(record['file']).name}: {record['partial']}" for record in records
              if record.get("partial")]
    unstated = sorted({record["benchmark"] for record in records if not isinstance(record.get("ranks_stated"), int)})
    if unstated:
        lines.append(f"  ranks: {', '.join(unstated)} do not state theirs; the placement's "
                     f"{int(ds['nprocs'].values[0])} are assumed")
    lines += [f"  {note}" for note in json.loads(ds.attrs.get("import_notes", "[]"))]
    lines += [f"  refused: {refusal}" for refusal in json.loads(ds.attrs.get("refused_files", "[]"))]
    return lines


def to_dataset(measurements: list[Measurement], library: str, placement: str, nodes: int, ppn: int,
               name: str, suite: str) -> xr.Dataset:
    """The measurements of one library row and one placement, each labelled (kinds.assign_labels),
    as a dataset in the campaign schema (see the module's docstring)."""
    if not measurements:
        raise ValueError("nothing to import")
    launches: dict[str, list[Measurement]] = {}
    for m in measurements:
        launches.setdefault(m.label or m.kernel, []).append(m)
    launches = dict(sorted(launches.items()))
    config = {
        "campaign": name,
        "description": f"Imported from {suite} output: " + ", ".join(sorted({Path(m.path).name for m in measurements})),
        "libraries": {library: {"mpi": library}},
        "placements": [{"name": placement, "nodes": nodes, "ppn": ppn}],
        "kernels": {label: {"sizes": {"list": sorted({int(s) for m in runs for s in m.sizes})},
                            **{k: v for k, v in runs[0].options.items() if v is not None}}
                    for label, runs in launches.items()},
        "launches": max(len(runs) for runs in launches.values()),
    }
    try:
        campaign = Campaign(name=name, source=f"{suite} output", config=validate_campaign(
            config, source="the import's names (--library, --placement, --kernel, --name)"))
    except CampaignError as error:
        raise ValueError(str(error)) from None
    results = [_launch_result(m, label, library, placement, launch, nodes * ppn)
               for label, runs in launches.items() for launch, m in enumerate(runs)]
    known = {library: {"status": "ok", "family": "unknown", "launcher": "unknown"}}
    ds = build_dataset(campaign, results, known, {library: {"status": "ok", "compiler": "unknown"}})
    ds = _with_reported_statistics(ds, launches)
    # Cells without a file were never asked for: not missing launches.
    ds["status"] = ds["status"].where(ds["status"] != "missing", "skipped").assign_attrs(ds["status"].attrs)
    source = f"{suite} output (imported): " + ", ".join(sorted({m.benchmark for m in measurements}))
    ds = ds.assign_coords(imported=("library", [True], {"long_name": "measured outside commlens, imported"}),
                          source=("library", [source], {"long_name": "where the row's numbers come from"}))
    for key in NOT_MEASURED_HERE:
        ds.attrs.pop(key, None)
    ds.attrs.update({
        "title": f"{suite} results imported into commlens: {library} on {placement}",
        "source": source,
        "imported": 1,
        "imported_files": json.dumps([m.provenance for m in measurements]),
        "campaign_config": json.dumps(config, sort_keys=True),
        "statistics": "one sample per point, the number the suite reports (see suite_metric); min and iqm NaN, "
                      "spread statistics NaN unless the file reports percentiles (quantiles, with the P50 as "
                      "median); every number the file prints in `reported`; iters_per_sample 0: not recorded "
                      "(see commlens.io.importers)",
        "history": f"{datetime.now(UTC).isoformat(timespec='seconds')} imported by commlens from "
                   + ", ".join(str(m.path) for m in measurements),
    })
    return ds


def sample_seconds(m: Measurement, nprocs: int) -> np.ndarray:
    """The point's one sample: the file's time, or for a bandwidth the time per message it gives with
    the kernel's bytes factor (so that the report's bandwidth gives back the file's)."""
    if m.time_s is not None:
        return m.time_s
    factor = bytes_factor(m.kernel, m.nprocs if m.nprocs is not None else nprocs)
    return factor * m.sizes / m.reported[m.sample]


def _launch_result(m: Measurement, label: str, library: str, placement: str, launch: int,
                   nprocs: int) -> LaunchResult:
    """A measurement as the launch record build_dataset reads; its provenance is the kernel_info."""
    iterations = m.iterations if m.iterations is not None else np.zeros(len(m.sizes), dtype=np.int64)
    errors = m.errors if m.errors is not None else [None] * len(m.sizes)
    points = [Point(size=int(size), samples=np.array([time]), iters_per_sample=int(n), settled=False,
                    rse=math.nan, errors=None if e is None else int(e), short_samples_dropped=None)
              for size, time, n, e in zip(m.sizes, sample_seconds(m, nprocs), iterations, errors)]
    args = {"window_buffers": "shared", "window": m.options.get("window", "unknown")} \
        if is_windowed(m.kernel, None) else {}
    return LaunchResult(
        path=str(m.path),
        launch={"library": library, "placement": placement, "kernel": label, "launch": launch, "status": "ok",
                "started": "", "transport": "unknown", "emulated": False},
        run={"library_version": "", "hosts": [], "timer_resolution_s": math.nan, "harness_overhead_s": math.nan,
             "metric": m.metric, "kernel_info": {**m.provenance, "sample_column": m.sample}, "args": args},
        points=points, end={"status": "ok", "points": len(points)})


def _with_reported_statistics(ds: xr.Dataset, launches: dict[str, list[Measurement]]) -> xr.Dataset:
    """min, iqm and the spread statistics NaN (one sample has none), the file's percentiles where it
    has them, and `reported`, `partial` and `suite_metric` (see the module's docstring)."""
    ds = ds.copy()
    dims = list(POINT_DIMS)
    columns = list(dict.fromkeys(name for runs in launches.values() for m in runs for name in m.reported))
    quantiles = np.full(ds["quantiles"].transpose(*dims, "quantile").shape, np.nan)
    median = ds["median"].transpose(*dims).values.copy()
    reported = np.full(median.shape + (len(columns),), np.nan)
    partial = np.zeros(ds["status"].transpose(*RUN_DIMS).shape, dtype=bool)
    sizes = {int(s): i for i, s in enumerate(ds["size"].values)}
    kernels = {str(k): i for i, k in enumerate(ds["kernel"].values)}
    for label, runs in launches.items():
        for launch, m in enumerate(runs):
            at = (0, 0, kernels[label], [sizes[int(s)] for s in m.sizes], launch)
            for column, values in m.reported.items():
                reported[at + (columns.index(column),)] = values
            partial[0, 0, kernels[label], launch] = bool(m.partial)
            for q, values in m.percentiles.items():
                if q in QUANTILES:
                    quantiles[at + (QUANTILES.index(q),)] = values
            if 0.5 in m.percentiles:
                median[at] = m.percentiles[0.5]
    ds["quantiles"] = (dims + ["quantile"], quantiles, ds["quantiles"].attrs)
    ds["median"] = (dims, median, ds["median"].attrs)
    for name in ("min", "iqm", "median_ci"):
        ds[name] = ds[name].where(False).assign_attrs(ds[name].attrs)
    units = [reported_meaning(c)[0] for c in columns]
    ds = ds.assign_coords(reported_column=("reported_column", columns),
                          reported_units=("reported_column", units),
                          reported_meaning=("reported_column", [reported_meaning(c)[1] for c in columns]))
    ds["reported"] = (dims + ["reported_column"], reported,
                      {"long_name": "every number the suite's file prints for the point, by column, in SI units "
                                    "(reported_units); NaN where the file has no such column"})
    ds["partial"] = (list(RUN_DIMS), partial, {"long_name": "the file stopped short of what it was to run "
                                                            "(imported with --partial; kernel_info says why)"})
    ds["suite_metric"] = (("library", "kernel"), [[launches[str(k)][0].metric for k in ds["kernel"].values]],
                          {"long_name": "what one value of an imported row means, as its suite measured it, and "
                                        "how that differs from the kernel's metric (empty: measured by commlens)"})
    return ds

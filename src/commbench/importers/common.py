"""What every importer produces, and how it becomes a dataset in the campaign schema.

An imported point holds what its file says and nothing more:

- one sample: the file's time per operation (OSU's average over its timed loop, or the time
  derived from its MB/s; IMB's t or t_max), so `sample_count` is 1 and `mean`, `median`, `min`
  and `iqm` are that value. The single operations' times are not in these files: none is made up.
- the spread statistics (`std`, `quantiles`, `median_ci`) are NaN: one loop's average says
  nothing of how single operations spread.
- where the file reports percentiles of single operations (OSU's `-z`: P50, P90, P99), they are
  the point's `quantiles` at 0.5, 0.9 and 0.99 and the P50 is its `median`; `min` and `iqm` are
  then NaN (the average is neither).
- `iters_per_sample` is the iteration count where the file prints one (IMB's #repetitions),
  else 0: not recorded.

The dataset is built by commbench.collect.build_dataset, as a campaign's is, from one launch per
file: several files of one benchmark are launches 0, 1, ... of its kernel. Library rows are marked
`imported` with their `source`; each launch's `kernel_info` holds its file's provenance (path,
sha256, suite, version, options), and the attributes say which files made the dataset. Nothing of
the machine doing the import (CPU, OS, kernel sources) is recorded as if it had measured them.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import xarray as xr

from ..campaign import Campaign, CampaignError, kernel_of, validate_campaign
from ..guards import WINDOWED_KERNELS
from ..raw import LaunchResult, Point
from ..samples import POINT_DIMS, QUANTILES

US = 1e-6
MB = 1e6
# Provenance of the machine running the import, which collect stamps on a campaign's dataset;
# an imported dataset was measured elsewhere, so these are left out rather than misattributed.
NOT_MEASURED_HERE = ("hosts", "cpu_model", "os", "kernel_source_hash", "compilers", "compiler_flags",
                     "build_warnings", "timer_resolution_s", "first_launch", "refused_files", "campaign_file")


class ImportFileError(ValueError):
    """A file that cannot be imported; the message names the file (and line) and what is allowed."""

    def __init__(self, path, message: str, line: int | None = None):
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")


@dataclass
class Measurement:
    """One benchmark's table from one file: a launch of `kernel` in the dataset."""

    path: Path
    benchmark: str                 # as its suite names it: osu_latency, IMB-MPI1 PingPong
    kernel: str                    # the commbench kernel that measures the same thing
    metric: str                    # what one value means, and how it was derived from the file
    sizes: np.ndarray              # bytes
    time_s: np.ndarray             # seconds per operation (the point's one sample)
    percentiles: dict[float, np.ndarray] = field(default_factory=dict)   # quantile -> seconds
    iterations: np.ndarray | None = None     # per size, where the file prints them
    errors: np.ndarray | None = None         # per size, where the file checked the data
    nprocs: int | None = None                # ranks the file says it ran on (None: it does not say)
    window: int | None = None                # messages per window (windowed kernels)
    provenance: dict = field(default_factory=dict)


def file_provenance(path: Path) -> dict:
    """What identifies an input file: its absolute path, size and sha256."""
    data = Path(path).read_bytes()
    return {"file": str(Path(path).resolve()), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def check_kernel(path, benchmark: str, measured_as: str, requested: str | None) -> str:
    """The kernel label a file's rows get: the benchmark's kernel, or `requested` if it is that
    kernel (optionally with an @label, to keep it apart from a campaign's entry)."""
    if requested is None:
        return measured_as
    if kernel_of(requested) != measured_as:
        raise ImportFileError(path, f"{benchmark} measures what {measured_as} does; --kernel {requested} does not "
                                    f"match (allowed: {measured_as}, or {measured_as}@LABEL)")
    return requested


def placement_shape(placement: str, nodes: int | None, ppn: int | None) -> tuple[int, int]:
    """(nodes, ppn) of a placement: given, or read from a name such as 1N2P or 2N1P-1g."""
    if nodes is not None and ppn is not None:
        return nodes, ppn
    match = re.match(r"^(\d+)N(\d+)P(?:$|[-_@.])", placement)
    if not match:
        raise ValueError(f"--placement {placement}: give --nodes and --ppn, or a name that says them "
                         f"(<nodes>N<ppn>P, e.g. 1N2P or 2N1P-ib)")
    return int(match.group(1)), int(match.group(2))


def to_dataset(measurements: list[Measurement], library: str, placement: str, nodes: int, ppn: int,
               name: str, suite: str) -> xr.Dataset:
    """The measurements of one library row and one placement as a dataset in the campaign schema
    (see the module's docstring)."""
    from ..collect import build_dataset

    if not measurements:
        raise ValueError("nothing to import")
    nprocs = nodes * ppn
    for m in measurements:
        if m.nprocs is not None and m.nprocs != nprocs:
            raise ImportFileError(m.path, f"{m.benchmark} ran on {m.nprocs} processes, but placement {placement} "
                                          f"has {nprocs} ({nodes} nodes x {ppn} per node); name the one it ran on")
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
                      "recorded (see commbench.importers)",
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
    args = {"window_buffers": "shared", "window": m.window} if kernel_of(m.kernel) in WINDOWED_KERNELS else {}
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

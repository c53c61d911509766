"""Raw launch files -> one xarray Dataset per campaign, with its provenance."""

from __future__ import annotations

import filecmp
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from datetime import datetime, timezone

import numpy as np
import xarray as xr

from . import __version__, conventions, netem
from . import dataset  # noqa: F401  (registers ds.commbench on the datasets built here)
from .campaign import Campaign, kernel_of
from .guards import WINDOWED_KERNELS
from .provenance import cpu_model, git_commit, os_description, source_hash
from .raw import LaunchResult, RawFileError, read_raw
from .samples import POINT_DIMS, STAT_COORDS, PointStatistics, point_statistics, start_variable

RUN_DIMS = ("library", "placement", "kernel", "launch")


def read_all(paths, on_error: str = "raise", log=sys.stderr) -> tuple[list[LaunchResult], list[RawFileError]]:
    """Reads every raw file; with on_error="record", refused files are returned instead of raised."""
    results, refused = [], []
    for path in paths:
        try:
            results.append(read_raw(path))
        except RawFileError as exc:
            if on_error == "raise":
                raise
            print(f"refused: {exc}", file=log)
            refused.append(exc)
    return results, refused


def _index(values: list) -> dict:
    return {value: i for i, value in enumerate(values)}


class _MemorySamples:
    """Samples kept in memory (interactive runs, tests): any order in, RAGGED_ORDER out; a point
    given twice keeps its last samples."""

    def __init__(self):
        self.points: dict[tuple, np.ndarray] = {}

    def add(self, key: tuple, samples: np.ndarray) -> None:
        self.points[key] = samples

    def array(self) -> np.ndarray:
        return np.concatenate([self.points[k] for k in sorted(self.points)]) if self.points else np.empty(0)


class _FileSamples:
    """Samples appended to a binary file (float64) as they are read, so that collecting holds one
    launch's samples at a time; they must come in RAGGED_ORDER, as a campaign's raw files do."""

    def __init__(self, path):
        self.path, self.last, self.count = Path(path), None, 0
        self.file = open(self.path, "wb")

    def add(self, key: tuple, samples: np.ndarray) -> None:
        if self.last is not None and key <= self.last:
            raise ValueError(f"samples of point {key} came after {self.last}: raw files must be collected "
                             f"in the campaign's order")
        self.last = key
        np.asarray(samples, dtype=np.float64).tofile(self.file)
        self.count += len(samples)

    def array(self) -> np.ndarray:
        self.file.close()
        return np.memmap(self.path, dtype=np.float64, mode="r", shape=(self.count,)) if self.count else np.empty(0)


def stream_raw(paths, refused: list, log=sys.stderr):
    """The raw files read one at a time (for build_dataset, which keeps only statistics), refused
    ones appended to `refused`; a light copy of each result (its launch record, no points) is
    kept in the returned list once the generator is exhausted, for failures()."""
    seen: list[LaunchResult] = []

    def results():
        for path in paths:
            try:
                result = read_raw(path)
            except RawFileError as error:
                print(f"refused: {error}", file=log)
                refused.append(error)
                continue
            yield result
            seen.append(LaunchResult(path=result.path, launch=result.launch))
    return results(), seen


def build_dataset(campaign: Campaign, results: Iterable[LaunchResult], libraries: dict[str, dict],
                  builds: dict[str, dict], refused: list[RawFileError] = (), samples_file=None) -> xr.Dataset:
    """The campaign dataset: every sample of every launch as a ragged array (commbench.samples), with
    per-point statistics and the launches' records over dense axes.

    `results` may be a generator: each is read once and only its statistics are kept; the samples go
    to memory, or to `samples_file` (then `time` is a memory map of it, and the results must come in
    the campaign's order). `libraries` and `builds` map an MPI installation name to its library.json
    and build.json records. Cells of failed or refused launches keep their status and no samples.
    """
    lib_names, placements, kernels = campaign.libraries, campaign.placements, campaign.kernels
    launches = list(range(campaign.launches))
    li, pi, ki = _index(lib_names), _index(placements), _index(kernels)
    sink = _FileSamples(samples_file) if samples_file else _MemorySamples()
    run_shape = (len(lib_names), len(placements), len(kernels), len(launches))
    status = np.full(run_shape, "missing", dtype=object)
    for p_name in placements:
        for k_name in kernels:
            if not campaign.runs_on(k_name, p_name):
                status[:, pi[p_name], ki[k_name], :] = "skipped"
    resolution = np.full(run_shape, np.nan)
    overhead = np.full(run_shape, np.nan)
    started = np.full(run_shape, "", dtype=object)
    hosts = np.full(run_shape, "", dtype=object)
    binding = np.full(run_shape, "", dtype=object)
    reason = np.full(run_shape, "", dtype=object)
    kernel_info = np.full(run_shape, "", dtype=object)
    version = {name: "" for name in lib_names}
    metric = {name: "" for name in kernels}
    window_buffers = {name: "" for name in kernels}   # windowed kernels: shared | distinct, as run
    all_hosts: set[str] = set()
    measured_on: dict[str, tuple[str, bool, str]] = {}   # placement -> (transport, emulated, emulation) as run
    batches = []   # per ok launch: (cell, sizes, per-point records, statistics); the size axis comes last

    for result in results:
        meta = result.launch
        try:
            cell = (li[meta["library"]], pi[meta["placement"]], ki[meta["kernel"]], meta["launch"])
        except KeyError:
            continue  # a raw file left over from an earlier version of the campaign
        if not 0 <= cell[3] < len(launches):
            continue
        status[cell] = meta["status"]
        started[cell] = meta.get("started", "")
        if result.status != "ok":
            reason[cell] = meta.get("reason", "")
            continue
        if "transport" in meta:
            measured_on[meta["placement"]] = (meta["transport"], bool(meta["emulated"]), meta.get("emulation", ""))
        run = result.run
        resolution[cell] = run["timer_resolution_s"]
        overhead[cell] = run["harness_overhead_s"]
        hosts[cell] = ",".join(run["hosts"])
        all_hosts.update(run["hosts"])
        binding[cell] = " ".join(run.get("cpu_binding", []))
        kernel_info[cell] = json.dumps(run.get("kernel_info", {}), sort_keys=True)
        version[meta["library"]] = version[meta["library"]] or run["library_version"].strip()
        metric[meta["kernel"]] = run.get("metric", "")
        if kernel_of(meta["kernel"]) in WINDOWED_KERNELS:
            window_buffers[meta["kernel"]] = run.get("args", {}).get("window_buffers", "distinct")  # older harness
        points = sorted(enumerate(result.points), key=lambda item: item[1].size)   # RAGGED_ORDER: by size
        for _, point in points:
            sink.add(cell + (point.size,), point.samples)
        records = np.array([(order, p.settled, p.rse, p.iters_per_sample,
                             np.nan if p.errors is None else p.errors, p.subtracted_s) for order, p in points],
                           dtype=float).reshape(-1, 6)
        batches.append((cell, np.array([p.size for _, p in points], dtype=np.int64), records,
                        point_statistics([p.samples for _, p in points])))

    sizes = sorted({int(size) for _, point_sizes, _, _ in batches for size in point_sizes})
    si = _index(sizes)
    point_shape = (len(lib_names), len(placements), len(kernels), len(sizes), len(launches))
    settled = np.zeros(point_shape, dtype=bool)
    rse = np.full(point_shape, np.nan)
    iters = np.zeros(point_shape, dtype=np.int64)
    errors = np.full(point_shape, np.nan)
    position = np.full(point_shape, -1, dtype=np.int64)
    subtracted = np.full(point_shape, np.nan)
    stats = PointStatistics(point_shape)
    for cell, point_sizes, records, computed in batches:
        n = len(point_sizes)
        at = (np.full(n, cell[0]), np.full(n, cell[1]), np.full(n, cell[2]),
              np.array([si[int(size)] for size in point_sizes], dtype=np.int64), np.full(n, cell[3]))
        position[at], settled[at], rse[at] = records[:, 0], records[:, 1].astype(bool), records[:, 2]
        iters[at], errors[at], subtracted[at] = records[:, 3], records[:, 4], records[:, 5]
        stats.put_computed(np.stack(at, axis=1), computed)
    for error in refused:
        # A refused file still names its cell when its launch record can be read.
        try:
            meta = json.loads(open(error.path).readline())
            cell = (li[meta["library"]], pi[meta["placement"]], ki[meta["kernel"]], meta["launch"])
            status[cell], reason[cell] = "refused", str(error)
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            pass

    placement_specs = [campaign.placement(name) for name in placements]
    # (transport, emulated, emulation) per placement: what its launches recorded, else what one host
    # does (its emulation unknown until a launch ran).
    measured_on = {name: ("tcp" if spec["nodes"] > 1 else "shm", spec["nodes"] > 1, "")
                   for name, spec in zip(placements, placement_specs)} | measured_on
    mpi = [campaign.mpi_of(name) for name in lib_names]
    coords = {
        "library": lib_names,
        "placement": placements,
        "kernel": kernels,
        "size": ("size", np.array(sizes, dtype=np.int64), {"units": "bytes"}),
        "launch": launches,
        **STAT_COORDS,
        "nodes": ("placement", [p["nodes"] for p in placement_specs]),
        "ppn": ("placement", [p["ppn"] for p in placement_specs]),
        "nprocs": ("placement", [p["nodes"] * p["ppn"] for p in placement_specs]),
        # On one host, ranks of different nodes talk over TCP on loopback; on a cluster, as the launches say.
        "transport": ("placement", [measured_on[name][0] for name in placements]),
        "emulated": ("placement", [measured_on[name][1] for name in placements]),
        "emulation": ("placement", [measured_on[name][2] for name in placements],
                      {"long_name": "how nodes were emulated on one host: namespaces (virtual nodes) or loopback"}),
        "switch_rate": ("placement", [netem.rate_bits_per_s(p["switch"]["rate"]) if "switch" in p else np.nan
                                      for p in placement_specs], {"units": "bit/s", "long_name": "emulated switch rate"}),
        "network_rate": ("placement", [netem.rate_bits_per_s(p["network"]["rate"]) if "network" in p else np.nan
                                       for p in placement_specs], {"units": "bit/s", "long_name": "emulated link rate"}),
        "mtu": ("placement", [p["network"]["mtu"] if "network" in p else 0 for p in placement_specs],
                {"units": "bytes", "long_name": "emulated link MTU (0: not emulated)"}),
        "library_version": ("library", [version[name] or "unknown" for name in lib_names]),
        "mpi": ("library", mpi),
        "family": ("library", [libraries.get(m, {}).get("family", "unknown") for m in mpi]),
        "compiler": ("library", [builds.get(m, {}).get("compiler", "unknown") for m in mpi]),
        # Whether the library could be used at all: ok, env_failed or build_failed, and why.
        "library_status": ("library", [_library_status(libraries.get(m), builds.get(m)) for m in mpi]),
        "library_reason": ("library", [_library_failure(libraries.get(m), builds.get(m)).get("reason", "")
                                       for m in mpi]),
        "library_log_tail": ("library", [_library_failure(libraries.get(m), builds.get(m)).get("log_tail", "")
                                         for m in mpi]),
        "launcher": ("library", [libraries.get(m, {}).get("launcher", "unknown") for m in mpi],
                     {"long_name": "how mpiexec took its options: hydra (MPICH), orte (Open MPI 4), prrte (5.x)"}),
        "build_warnings": ("library", [builds.get(m, {}).get("warning_count", 0) for m in mpi],
                           {"long_name": "compiler warnings in the kernel build (build provenance lists them)"}),
        "unsupported_kernels": ("library", [json.dumps(builds.get(m, {}).get("unsupported", {}), sort_keys=True)
                                            for m in mpi], {"long_name": "kernels this library's build left "
                                                                         "out, and why (JSON)"}),
        "library_env": ("library", [json.dumps(campaign.library_env(name), sort_keys=True) for name in lib_names]),
        "metric": ("kernel", [metric[name] for name in kernels]),
        "window_buffers": ("kernel", [window_buffers[name] for name in kernels],
                           {"long_name": "windowed kernels: shared (one buffer per window, as osu_bw) or "
                                         "distinct (a buffer per message); empty for the others"}),
    }
    data_vars = {
        "time": ("sample", sink.array(), {"units": "s", "long_name": "time per sample (see the kernel's metric); "
                                                                  "a ragged array, see sample_count"}),
        **stats.variables(),
        **start_variable(stats.values["sample_count"]),
        "settled": (POINT_DIMS, settled, {"long_name": "relative standard error reached its target"}),
        "rse": (POINT_DIMS, rse, {"long_name": "relative standard error of the mean"}),
        "iters_per_sample": (POINT_DIMS, iters, {"long_name": "iterations timed together in one sample"}),
        "errors": (POINT_DIMS, errors, {"long_name": "integrity errors (NaN: not checked)"}),
        "subtracted_s": (POINT_DIMS, subtracted, {"units": "s", "long_name": "overhead subtracted from every "
                                                   "sample (raw = time + subtracted_s); NaN: none"}),
        "position": (POINT_DIMS, position, {"long_name": "when the size was measured in its launch "
                                                         "(0: first; -1: not measured); sizes are shuffled per launch"}),
        "status": (RUN_DIMS, status.astype(str), {"long_name": "ok, failed, timeout, refused (raw file damaged), "
                                                                "env_failed, build_failed, unsupported, missing, or "
                                                                "skipped (not asked for)"}),
        "reason": (RUN_DIMS, reason.astype(str), {"long_name": "why a launch gave no data (empty when ok)"}),
        "timer_resolution_s": (RUN_DIMS, resolution, {"units": "s"}),
        "harness_overhead_s": (RUN_DIMS, overhead, {"units": "s"}),
        "started": (RUN_DIMS, started.astype(str)),
        "hosts": (RUN_DIMS, hosts.astype(str)),
        "cpu_binding": (RUN_DIMS, binding.astype(str), {"long_name": "CPUs each rank may run on"}),
        "kernel_info": (RUN_DIMS, kernel_info.astype(str), {"long_name": "what the kernel recorded of its "
                                                                         "set-up (JSON), e.g. MPI-IO hints"}),
    }
    flags = sorted({b["cflags"] for b in builds.values() if "cflags" in b})
    attrs = {
        "campaign": campaign.name,
        "campaign_file": campaign.source,
        "campaign_config": json.dumps(campaign.config, sort_keys=True),
        "config_hash": campaign.config_hash,
        "kernel_source_hash": source_hash(),
        "commbench_version": __version__,
        "git_commit": git_commit(),
        "compilers": json.dumps({m: builds[m].get("compiler_command", "") for m in sorted(builds)}),
        "build_warnings": json.dumps({m: builds[m].get("warnings", []) for m in sorted(builds)
                                      if builds[m].get("warnings")}),
        "compiler_flags": " | ".join(flags),
        "hosts": ",".join(sorted(all_hosts)),
        "cpu_model": cpu_model(),
        "os": os_description(),
        "timer_resolution_s": float(np.nanmin(resolution)) if np.isfinite(resolution).any() else np.nan,
        "first_launch": min((s for s in started.ravel() if s), default=""),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "refused_files": json.dumps([str(e) for e in refused]),
    }
    return conventions.describe(xr.Dataset(data_vars, coords=coords, attrs=attrs),
                                description=campaign.config.get("description", ""))


def _library_failure(library: dict | None, build: dict | None) -> dict:
    """The failed environment's or build's record (status, reason, log_tail), else {}."""
    for record in (library, build):
        if record and record.get("status", "ok") != "ok":
            return record
    return {}


def _library_status(library: dict | None, build: dict | None) -> str:
    return _library_failure(library, build).get("status", "ok" if library and build else "missing")


def failures(results: list[LaunchResult], refused: list[RawFileError] = (), campaign: Campaign | None = None,
             libraries: dict[str, dict] | None = None, builds: dict[str, dict] | None = None) -> list[dict]:
    """One entry per library row whose environment or build failed (reason and log tail), and one
    per other launch that gave no data: failed, timed-out or unsupported launches with their exit
    code, reason and console tail, and refused raw files with the file, line and why."""
    entries = []
    failed_rows = set()
    for row in (campaign.libraries if campaign else []):
        mpi = campaign.mpi_of(row)
        failure = _library_failure((libraries or {}).get(mpi), (builds or {}).get(mpi))
        if failure:
            failed_rows.add(row)
            entries.append({"status": failure["status"], "library": row, "mpi": mpi,
                            "reason": failure.get("reason", ""), "log_tail": failure.get("log_tail", "")})
    for result in results:
        meta = result.launch
        if result.status == "ok" or (meta.get("library") in failed_rows and result.status in ("env_failed",
                                                                                            "build_failed")):
            continue
        entries.append({key: meta.get(key) for key in (
            "status", "library", "placement", "kernel", "launch", "exit_code", "reason", "started",
            "duration_s", "timeout_s", "console_tail")} | {"raw": result.path})
    for error in refused:
        entry = {"status": "refused", "raw": error.path, "line": error.line, "reason": str(error)}
        try:
            with open(error.path, errors="replace") as raw:
                meta = json.loads(raw.readline())
            entry |= {key: meta[key] for key in ("library", "placement", "kernel", "launch")}
        except (OSError, ValueError, KeyError, TypeError):
            pass  # the launch record itself is damaged: the file's path still names the cell
        entries.append(entry)
    return entries


def write_failures(entries: list[dict], path) -> None:
    """The campaign's failure log, JSON Lines, rewritten whole by every collection (empty: none)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(entry, sort_keys=True) + "\n" for entry in entries))
    tmp.replace(path)


HISTORY = "history"          # results/<campaign>/history/<created>/: the datasets later collections replaced
UNREADABLE = "-unreadable"   # suffix of a history folder holding a file that was not a commbench dataset


def archive_previous(path, log=None) -> Path | None:
    """Keeps the dataset about to be replaced at `path`: moves it, and the failures.jsonl beside it,
    to history/<its creation time>/ in its folder (`commbench history` reads them as reruns). A file
    there that is not a readable commbench dataset is moved too, to history/<mtime>-unreadable/:
    whatever it is, nothing is lost. Returns the folder it went to, or None where there was no file."""
    path, log = Path(path), log or sys.stderr
    if not path.exists():
        return None
    created, problem = _creation_time(path)
    stamp = _filesystem_stamp(created) if created else \
        datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
    folder = _history_folder(path, stamp + (UNREADABLE if problem else ""))
    folder.mkdir(parents=True, exist_ok=True)
    for file in (path, path.parent / "failures.jsonl"):
        if file.exists():
            _move_into(file, folder)
    if problem:
        print(f"{path}: not a readable commbench dataset ({problem}); moved aside to {folder}, "
              "not read as a rerun", file=log)
    else:
        when = f"created {created}" if created else "no creation time: named by the file's"
        print(f"{path}: the previous dataset ({when}) is kept in {folder}", file=log)
    return folder


def _creation_time(path: Path) -> tuple[str | None, str | None]:
    """The dataset's `created` attribute (None if it has none: the file's time stands in) and, for a
    file that is not a readable commbench dataset, why not."""
    import netCDF4

    try:
        with netCDF4.Dataset(path) as nc:
            attrs = {name: nc.getncattr(name) for name in nc.ncattrs()}
    except (OSError, RuntimeError, ValueError) as error:
        return None, f"cannot be read as netCDF: {error}"
    if "commbench_version" not in attrs:
        return None, "no commbench_version attribute"
    created = str(attrs.get("created", ""))
    try:
        datetime.fromisoformat(created)
    except ValueError:
        return None, None
    return created, None


def _filesystem_stamp(created: str) -> str:
    """2026-11-24T16:39:19+00:00 -> 2026-11-24T163919Z (UTC; no colons, which some file systems refuse)."""
    moment = datetime.fromisoformat(created)
    moment = moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H%M%SZ")


def _history_folder(path: Path, stamp: str) -> Path:
    """history/<stamp>/, or the first of <stamp>-2, -3, ... whose dataset is not a different file
    (two collections in one second; or the same one kept twice, restored after a failed collection)."""
    history = path.parent / HISTORY
    for attempt in range(1, 1000):
        folder = history / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        kept = folder / path.name
        if not kept.exists() or filecmp.cmp(path, kept, shallow=False):
            return folder
    raise FileExistsError(f"{history}: no free folder for {stamp}")


def _move_into(file: Path, folder: Path) -> None:
    """Moves `file` into `folder`; a copy already there with the same bytes makes it a duplicate to
    drop, one with other bytes keeps both (the newcomer numbered)."""
    target = folder / file.name
    if target.exists() and filecmp.cmp(file, target, shallow=False):
        file.unlink()
        return
    number = 2
    while target.exists():
        target = folder / f"{file.stem}.{number}{file.suffix}"
        number += 1
    file.replace(target)


SAMPLES_CHUNK = 1 << 22   # samples copied into the file at a time (32 MiB)


def write_dataset(ds: xr.Dataset, path, keep_previous: bool = True, log=None) -> None:
    """netCDF4 with compression, written beside the target first so a reader never sees half a
    file. The ragged samples are copied in chunks, so a dataset whose samples are a memory map
    (collect's streaming) is written without holding them all in memory. A dataset already at
    `path` is kept in history/ (archive_previous) unless keep_previous is False."""
    import netCDF4

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    rest, encoding = conventions.encode(ds.drop_vars("time"), path)   # status as CF flags, started as CF time
    encoding |= {name: {"zlib": True, "complevel": 4} for name, var in rest.data_vars.items()
                 if var.dtype.kind == "f"}
    rest.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
    time = ds["time"]
    count = time.sizes["sample"]
    with netCDF4.Dataset(tmp, "a") as nc:
        nc.createDimension("sample", count or None)
        variable = nc.createVariable("time", "f8", ("sample",), zlib=True, complevel=1, shuffle=True,
                                     chunksizes=(min(max(count, 1), 1 << 20),))
        variable.setncatts(time.attrs)
        values = time.data            # a memory map stays one: only each chunk is read
        for start in range(0, count, SAMPLES_CHUNK):
            variable[start:start + SAMPLES_CHUNK] = np.asarray(values[start:start + SAMPLES_CHUNK], dtype=np.float64)
    if keep_previous:
        archive_previous(path, log=log)   # only now: a collection that fails to write keeps the old one in place
    tmp.replace(path)

"""Raw launch files -> one xarray Dataset per campaign, with its provenance."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from datetime import datetime, timezone

import numpy as np
import xarray as xr

from . import __version__, netem
from . import dataset  # noqa: F401  (registers ds.commbench on the datasets built here)
from .campaign import Campaign
from .provenance import cpu_model, git_commit, os_description, source_hash
from .raw import LaunchResult, RawFileError, read_raw

RUN_DIMS = ("library", "placement", "kernel", "launch")
POINT_DIMS = ("library", "placement", "kernel", "size", "launch")


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


def build_dataset(campaign: Campaign, results: list[LaunchResult], libraries: dict[str, dict],
                  builds: dict[str, dict], refused: list[RawFileError] = ()) -> xr.Dataset:
    """The campaign dataset: every sample of every launch, NaN where a run has no such sample.

    `libraries` and `builds` map an MPI installation name to its library.json and
    build.json records. Cells of failed or refused launches keep status and NaN times.
    """
    lib_names, placements, kernels = campaign.libraries, campaign.placements, campaign.kernels
    launches = list(range(campaign.launches))
    ok = [r for r in results if r.status == "ok"]
    sizes = sorted({p.size for r in ok for p in r.points})
    max_samples = max((len(p.samples) for r in ok for p in r.points), default=0)
    li, pi, ki, si = _index(lib_names), _index(placements), _index(kernels), _index(sizes)

    run_shape = (len(lib_names), len(placements), len(kernels), len(launches))
    point_shape = (len(lib_names), len(placements), len(kernels), len(sizes), len(launches))
    time = np.full(point_shape + (max_samples,), np.nan)
    settled = np.zeros(point_shape, dtype=bool)
    rse = np.full(point_shape, np.nan)
    iters = np.zeros(point_shape, dtype=np.int64)
    errors = np.full(point_shape, np.nan)
    position = np.full(point_shape, -1, dtype=np.int64)
    subtracted = np.full(point_shape, np.nan)
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
        run = result.run
        resolution[cell] = run["timer_resolution_s"]
        overhead[cell] = run["harness_overhead_s"]
        hosts[cell] = ",".join(run["hosts"])
        binding[cell] = " ".join(run.get("cpu_binding", []))
        kernel_info[cell] = json.dumps(run.get("kernel_info", {}), sort_keys=True)
        version[meta["library"]] = version[meta["library"]] or run["library_version"].strip()
        metric[meta["kernel"]] = run.get("metric", "")
        for order, point in enumerate(result.points):
            at = cell[:3] + (si[point.size], cell[3])
            position[at] = order
            subtracted[at] = point.subtracted_s
            time[at + (slice(0, len(point.samples)),)] = point.samples
            settled[at], rse[at], iters[at] = point.settled, point.rse, point.iters_per_sample
            errors[at] = np.nan if point.errors is None else point.errors
    for error in refused:
        # A refused file still names its cell when its launch record can be read.
        try:
            meta = json.loads(open(error.path).readline())
            cell = (li[meta["library"]], pi[meta["placement"]], ki[meta["kernel"]], meta["launch"])
            status[cell], reason[cell] = "refused", str(error)
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            pass

    placement_specs = [campaign.placement(name) for name in placements]
    # (transport, emulated) per placement: what its launches recorded, else what one host does.
    measured_on = {name: ("tcp" if spec["nodes"] > 1 else "shm", spec["nodes"] > 1)
                   for name, spec in zip(placements, placement_specs)}
    for result in results:
        meta = result.launch
        if result.status == "ok" and meta.get("placement") in measured_on and "transport" in meta:
            measured_on[meta["placement"]] = (meta["transport"], bool(meta["emulated"]))
    mpi = [campaign.mpi_of(name) for name in lib_names]
    coords = {
        "library": lib_names,
        "placement": placements,
        "kernel": kernels,
        "size": ("size", np.array(sizes, dtype=np.int64), {"units": "bytes"}),
        "launch": launches,
        "sample": np.arange(max_samples),
        "nodes": ("placement", [p["nodes"] for p in placement_specs]),
        "ppn": ("placement", [p["ppn"] for p in placement_specs]),
        "nprocs": ("placement", [p["nodes"] * p["ppn"] for p in placement_specs]),
        # On one host, ranks of different nodes talk over TCP on loopback; on a cluster, as the launches say.
        "transport": ("placement", [measured_on[name][0] for name in placements]),
        "emulated": ("placement", [measured_on[name][1] for name in placements]),
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
    }
    data_vars = {
        "time": (POINT_DIMS + ("sample",), time,
                 {"units": "s", "long_name": "time per sample (see the kernel's metric)"}),
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
    all_hosts = sorted({h for r in ok for h in r.run["hosts"]})
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
        "hosts": ",".join(all_hosts),
        "cpu_model": cpu_model(),
        "os": os_description(),
        "timer_resolution_s": float(np.nanmin(resolution)) if np.isfinite(resolution).any() else np.nan,
        "first_launch": min((s for s in started.ravel() if s), default=""),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "refused_files": json.dumps([str(e) for e in refused]),
    }
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


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


def write_dataset(ds: xr.Dataset, path) -> None:
    """netCDF4 with compression; written beside the target first so a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    encoding = {name: {"zlib": True, "complevel": 4} for name, var in ds.data_vars.items()
                if var.dtype.kind == "f"}
    ds.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
    tmp.replace(path)

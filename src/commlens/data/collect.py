"""Raw launch files -> one xarray Dataset per campaign, with its provenance."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr

from commlens.campaign import Campaign
from commlens.data.attributes import dataset_attributes
from commlens.data.failures import library_failure, library_status
from commlens.data.machine import Configurations, Machines, cvar_variables, topology_variables
from commlens.data.pairs import pair_medians, pair_variables
from commlens.data.kernels import description_of, is_windowed, kernel_coordinates, recorded_timing, TIMING_LONG_NAME
from commlens.data.sample_sinks import FileSamples, MemorySamples
from commlens.data.samples import (POINT_DIMS, RAGGED_TIME, STAT_COORDS, PointStatistics, point_statistics,
                                   start_variable)
from commlens.io import conventions
from commlens.io.archive import held_name
from commlens.io.atomic import free_bytes
from commlens.io.raw import LaunchResult, RawFileError, read_raw
from commlens.launch import netem, wire
from commlens.units import format_size

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


def collection_space(raw_files, dataset) -> str:
    """How much space a collection of `raw_files` into `dataset` needs, against what its disk has, in
    words: the previous dataset's size where there is one (held while it is replaced: commlens.io.archive),
    else at least the samples' (8 bytes each in the samples' scratch file, at least 16 characters each
    in a raw file: "1.23456789e-06, ")."""
    dataset = Path(dataset)
    previous = max((path.stat().st_size for path in (dataset, held_name(dataset)) if path.is_file()), default=0)
    samples = sum(os.path.getsize(path) for path in raw_files if os.path.exists(path)) // 2
    free = free_bytes(dataset.parent)
    have = "" if free is None else f", {format_size(free)} free"
    if previous:
        return f"it needs about {format_size(max(previous, samples))}, the previous dataset's size{have}"
    return f"it needs more than {format_size(samples)} for the samples alone{have}"


def build_dataset(campaign: Campaign, results: Iterable[LaunchResult], libraries: dict[str, dict],
                  builds: dict[str, dict], refused: Sequence[RawFileError] = (), samples_file=None) -> xr.Dataset:
    """The campaign dataset: every sample of every launch as a ragged array (commlens.data.samples), with
    per-point statistics and the launches' records over dense axes.

    `results` may be a generator: each is read once and only its statistics are kept; the samples go
    to memory, or to `samples_file` (then `time` is a memory map of it, and the results must come in
    the campaign's order). `libraries` and `builds` map an MPI installation name to its library.json
    and build.json records. Cells of failed or refused launches keep their status and no samples.
    """
    axes = _Axes(campaign)
    sink = FileSamples(samples_file) if samples_file else MemorySamples()
    runs = _RunRecords.blank(campaign, axes)
    batches = _read_launches(results, axes, runs, sink)
    sizes, points = _point_records(batches, axes)
    _mark_refused(refused, axes, runs)
    coords = _coordinates(campaign, axes, sizes, runs, libraries, builds)
    data_vars = _data_variables(sink, points, runs)
    pair_coords, pair_vars = pair_variables(runs.pair_medians, axes.kernels, sizes, axes.run_shape)
    coords, data_vars = coords | pair_coords, data_vars | pair_vars
    # What the library and the machine were (commlens.data.machine): cvars per row, topology per host.
    cvar_coords, cvar_vars = cvar_variables(axes.libraries, [campaign.mpi_of(name) for name in axes.libraries],
                                            runs.configurations, builds, RUN_DIMS)
    host_coords, host_vars = topology_variables(runs.machines)
    coords, data_vars = coords | cvar_coords | host_coords, data_vars | cvar_vars | host_vars
    attrs = dataset_attributes(campaign, builds, runs, refused)
    return conventions.describe(xr.Dataset(data_vars, coords=coords, attrs=attrs),
                                description=campaign.config.get("description", ""))


class _Axes:
    """The campaign's run axes (library, placement, kernel, launch), each label's index along its axis."""

    def __init__(self, campaign: Campaign):
        self.libraries, self.placements, self.kernels = campaign.libraries, campaign.placements, campaign.kernels
        self.launches = list(range(campaign.launches))
        self.li, self.pi, self.ki = _index(self.libraries), _index(self.placements), _index(self.kernels)
        self.run_shape = (len(self.libraries), len(self.placements), len(self.kernels), len(self.launches))

    def cell(self, meta: dict) -> tuple:
        """The run cell a launch record names; KeyError for a label the campaign does not have."""
        return (self.li[meta["library"]], self.pi[meta["placement"]], self.ki[meta["kernel"]], meta["launch"])


@dataclass
class _RunRecords:
    """What the launches recorded: per run cell (RUN_DIMS), and per library, kernel and placement."""

    status: np.ndarray
    resolution: np.ndarray
    overhead: np.ndarray
    started: np.ndarray
    hosts: np.ndarray
    binding: np.ndarray
    env: np.ndarray       # the variables commlens's launcher set (JSON), as each launch recorded them
    reason: np.ndarray
    kernel_info: np.ndarray
    round: np.ndarray            # the launch's place in the campaign's rounds, as it recorded it (-1: none)
    round_position: np.ndarray
    attempt: np.ndarray          # which attempt of the launch this is (1: the first; 0: none recorded)
    retried_after: np.ndarray    # the earlier attempts' status, reason and start (JSON; empty: none)
    version: dict[str, str]
    metric: dict[str, str]
    window_buffers: dict[str, str]   # windowed kernels: shared | distinct, as run
    timing: dict[str, str]           # how the harness timed the kernel, as its launch record says (JSON)
    description: dict[str, dict]     # the kernel's catalogue entry, as its launches recorded it
    all_hosts: set[str] = field(default_factory=set)
    # placement -> (transport, emulated, emulation) as run
    measured_on: dict[str, tuple[str, bool, str]] = field(default_factory=dict)
    link_shaper: dict[str, str] = field(default_factory=dict)   # placement -> netem | wire | tbf (launch.netem)
    switch_shaper: dict[str, str] = field(default_factory=dict)   # placement -> netem | tbf
    link_burst: dict[str, float] = field(default_factory=dict)   # placement -> seconds (launch.wire.BURST_S)
    link_priority: dict[str, list] = field(default_factory=dict)   # placement -> each launch's (launch.wire)
    # (run cell, size) -> (ranks, ranks) median pair times, of kernels that time pairs (commlens.data.pairs)
    pair_medians: dict = field(default_factory=dict)
    # each launch's control variables (commlens.data.machine), made for the campaign's run shape by blank()
    configurations: Configurations = field(default_factory=lambda: Configurations(()))
    machines: Machines = field(default_factory=Machines)   # each host's topology

    @classmethod
    def blank(cls, campaign: Campaign, axes: _Axes) -> _RunRecords:
        """Every cell missing, but those of kernels a placement does not run: skipped."""
        run_shape = axes.run_shape
        status = np.full(run_shape, "missing", dtype=object)
        for p_name in axes.placements:
            for k_name in axes.kernels:
                if not campaign.runs_on(k_name, p_name):
                    status[:, axes.pi[p_name], axes.ki[k_name], :] = "skipped"
        return cls(
            status=status,
            resolution=np.full(run_shape, np.nan),
            overhead=np.full(run_shape, np.nan),
            started=np.full(run_shape, "", dtype=object),
            hosts=np.full(run_shape, "", dtype=object),
            binding=np.full(run_shape, "", dtype=object),
            env=np.full(run_shape, "", dtype=object),
            reason=np.full(run_shape, "", dtype=object),
            kernel_info=np.full(run_shape, "", dtype=object),
            round=np.full(run_shape, -1, dtype=np.int64),
            round_position=np.full(run_shape, -1, dtype=np.int64),
            attempt=np.zeros(run_shape, dtype=np.int64),
            retried_after=np.full(run_shape, "", dtype=object),
            version={name: "" for name in axes.libraries},
            metric={name: "" for name in axes.kernels},
            window_buffers={name: "" for name in axes.kernels},
            timing={name: "" for name in axes.kernels},
            description={name: {} for name in axes.kernels},
            configurations=Configurations(run_shape),
        )


def _read_launches(results: Iterable[LaunchResult], axes: _Axes, runs: _RunRecords, sink) -> list:
    """Each launch's record into `runs` and its samples into `sink`; returns, per ok launch,
    (cell, sizes, per-point records, statistics), the size axis last."""
    batches = []
    for result in results:
        meta = result.launch
        try:
            cell = axes.cell(meta)
        except KeyError:
            continue  # a raw file left over from an earlier version of the campaign
        if not 0 <= cell[3] < len(axes.launches):
            continue
        runs.status[cell] = meta["status"]
        runs.started[cell] = meta.get("started", "")
        runs.round[cell], runs.round_position[cell] = meta.get("round", -1), meta.get("round_position", -1)
        runs.attempt[cell] = meta.get("attempt", 1)
        if meta.get("retried_after"):
            runs.retried_after[cell] = json.dumps(meta["retried_after"])
        if result.status != "ok":
            runs.reason[cell] = meta.get("reason", "")
            continue
        if "transport" in meta:
            runs.measured_on[meta["placement"]] = (meta["transport"], bool(meta["emulated"]),
                                                   meta.get("emulation", ""))
        if meta.get("link_shaper"):
            runs.link_shaper[meta["placement"]] = meta["link_shaper"]
        if meta.get("switch_shaper"):
            runs.switch_shaper[meta["placement"]] = meta["switch_shaper"]
        if meta.get("link_burst_s"):
            runs.link_burst[meta["placement"]] = float(meta["link_burst_s"])
        runs.link_priority.setdefault(meta["placement"], []).append(meta.get("link_priority", ""))
        run = result.run
        assert run is not None      # a launch that ended ok recorded its run
        runs.configurations.add(cell, result.mpi_t)
        runs.machines.add(run["hosts"], result.topology)
        runs.resolution[cell] = run["timer_resolution_s"]
        runs.overhead[cell] = run["harness_overhead_s"]
        runs.hosts[cell] = ",".join(run["hosts"])
        runs.all_hosts.update(run["hosts"])
        runs.binding[cell] = " ".join(run.get("cpu_binding", []))
        runs.env[cell] = json.dumps(meta["env"], sort_keys=True) if "env" in meta else ""
        runs.kernel_info[cell] = json.dumps(run.get("kernel_info", {}), sort_keys=True)
        runs.version[meta["library"]] = runs.version[meta["library"]] or run["library_version"].strip()
        runs.metric[meta["kernel"]] = run.get("metric", "")
        runs.description[meta["kernel"]] = run.get("description") or runs.description[meta["kernel"]]
        if is_windowed(meta["kernel"], run.get("description")):
            runs.window_buffers[meta["kernel"]] = run.get("args", {}).get("window_buffers", "distinct")  # older harness
        runs.timing[meta["kernel"]] = runs.timing[meta["kernel"]] or recorded_timing(run.get("args", {}))
        points = sorted(enumerate(result.points), key=lambda item: item[1].size)   # RAGGED_ORDER: by size
        for _, point in points:
            sink.add(cell + (point.size,), point.samples)
            if point.pair_times_s is not None:
                runs.pair_medians[cell, point.size] = pair_medians(point.pair_times_s)
        records = np.array([(order, p.settled, p.rse, p.iters_per_sample,
                             np.nan if p.errors is None else p.errors, p.subtracted_s,
                             np.nan if p.exit_skew_s is None else np.median(p.exit_skew_s),
                             np.nan if p.short_samples_dropped is None else p.short_samples_dropped)
                            for order, p in points],
                           dtype=float).reshape(-1, 8)
        batches.append((cell, np.array([p.size for _, p in points], dtype=np.int64), records,
                        point_statistics([p.samples for _, p in points])))
    return batches


@dataclass
class _PointRecords:
    """Per point (POINT_DIMS): how it was measured, and its statistics."""

    settled: np.ndarray
    rse: np.ndarray
    iters: np.ndarray
    errors: np.ndarray
    position: np.ndarray
    subtracted: np.ndarray
    exit_skew: np.ndarray
    short_dropped: np.ndarray
    stats: PointStatistics


def _point_records(batches: list, axes: _Axes) -> tuple[list[int], _PointRecords]:
    """The size axis (every size any launch measured) and the launches' per-point records over it."""
    sizes = sorted({int(size) for _, point_sizes, _, _ in batches for size in point_sizes})
    si = _index(sizes)
    point_shape = (len(axes.libraries), len(axes.placements), len(axes.kernels), len(sizes), len(axes.launches))
    settled = np.zeros(point_shape, dtype=bool)
    rse = np.full(point_shape, np.nan)
    iters = np.zeros(point_shape, dtype=np.int64)
    errors = np.full(point_shape, np.nan)
    position = np.full(point_shape, -1, dtype=np.int64)
    subtracted = np.full(point_shape, np.nan)
    exit_skew = np.full(point_shape, np.nan)
    short_dropped = np.full(point_shape, np.nan)
    stats = PointStatistics(point_shape)
    for cell, point_sizes, records, computed in batches:
        n = len(point_sizes)
        at = (np.full(n, cell[0]), np.full(n, cell[1]), np.full(n, cell[2]),
              np.array([si[int(size)] for size in point_sizes], dtype=np.int64), np.full(n, cell[3]))
        position[at], settled[at], rse[at] = records[:, 0], records[:, 1].astype(bool), records[:, 2]
        iters[at], errors[at] = records[:, 3], records[:, 4]
        subtracted[at], exit_skew[at] = records[:, 5], records[:, 6]
        short_dropped[at] = records[:, 7]
        stats.put_computed(np.stack(at, axis=1), computed)
    return sizes, _PointRecords(settled=settled, rse=rse, iters=iters, errors=errors, position=position,
                                subtracted=subtracted, exit_skew=exit_skew, short_dropped=short_dropped, stats=stats)


def _mark_refused(refused: Sequence[RawFileError], axes: _Axes, runs: _RunRecords) -> None:
    for error in refused:
        # A refused file still names its cell when its launch record can be read.
        try:
            meta = json.loads(open(error.path).readline())
            cell = axes.cell(meta)
            runs.status[cell], runs.reason[cell] = "refused", str(error)
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            pass


def _coordinates(campaign: Campaign, axes: _Axes, sizes: list[int], runs: _RunRecords,
                 libraries: dict[str, dict], builds: dict[str, dict]) -> dict:
    """The axes, and what describes each placement, library and kernel: from the campaign, its
    launches' records, and the libraries' environment and build records."""
    placement_specs = [campaign.placement(name) for name in axes.placements]
    # (transport, emulated, emulation) per placement: what its launches recorded, else what one host
    # does (its emulation unknown until a launch ran).
    measured_on = {name: ("tcp" if spec["nodes"] > 1 else "shm", spec["nodes"] > 1, "")
                   for name, spec in zip(axes.placements, placement_specs)} | runs.measured_on
    mpi = [campaign.mpi_of(name) for name in axes.libraries]
    return {
        "library": axes.libraries,
        "placement": axes.placements,
        "kernel": axes.kernels,
        "size": ("size", np.array(sizes, dtype=np.int64), {"units": "bytes"}),
        "launch": axes.launches,
        **STAT_COORDS,
        "nodes": ("placement", [p["nodes"] for p in placement_specs]),
        "ppn": ("placement", [p["ppn"] for p in placement_specs]),
        "nprocs": ("placement", [p["nodes"] * p["ppn"] for p in placement_specs]),
        # On one host, ranks of different nodes talk over TCP on loopback; on a cluster, as the launches say.
        "transport": ("placement", [measured_on[name][0] for name in axes.placements]),
        "emulated": ("placement", [measured_on[name][1] for name in axes.placements]),
        "emulation": ("placement", [measured_on[name][2] for name in axes.placements],
                      {"long_name": "how nodes were emulated on one host: namespaces (virtual nodes) or loopback"}),
        "switch_rate": ("placement", [netem.rate_bits_per_s(p["switch"]["rate"]) if "switch" in p else np.nan
                                      for p in placement_specs],
                        {"units": "bit/s", "long_name": "emulated switch rate"}),
        "network_rate": ("placement", [netem.rate_bits_per_s(p["network"]["rate"]) if "network" in p else np.nan
                                       for p in placement_specs],
                         {"units": "bit/s", "long_name": "emulated link rate"}),
        "mtu": ("placement", [p["network"]["mtu"] if "network" in p else 0 for p in placement_specs],
                {"units": "bytes", "long_name": "emulated link MTU (0: not emulated)"}),
        "link_delay": ("placement", [netem.delay_seconds(p["network"]["delay"]) if p.get("network", {}).get("delay")
                                     else 0.0 for p in placement_specs],
                       {"units": "s", "long_name": "emulated link delay"}),
        "link_loss": ("placement", [float(p.get("network", {}).get("loss", 0)) for p in placement_specs],
                      {"units": "percent", "long_name": "emulated link's packet loss"}),
        "faults": ("placement", [json.dumps(p.get("faults", []), sort_keys=True) for p in placement_specs],
                   {"long_name": "faults planted on virtual nodes' links: node, and its rate, delay or loss (JSON)"}),
        "topology": ("placement", [json.dumps(p["topology"], sort_keys=True) if "topology" in p else ""
                                   for p in placement_specs],
                     {"long_name": "virtual nodes on leaf switches: leaf_nodes per leaf, each leaf's uplink rate "
                                   "(JSON; empty: one switch)"}),
        "link_shaper": ("placement", [runs.link_shaper.get(name, "") for name in axes.placements],
                        {"long_name": "what made the emulated links: netem (every packet serialised at the rate), "
                                      "wire (a process per virtual node, every frame serialised) or tbf (a token "
                                      "bucket)"}),
        "link_burst": ("placement", [runs.link_burst.get(name, np.nan) for name in axes.placements],
                       {"units": "s", "long_name": "the most of an emulated link's time one frame carried (wire: "
                                                   "whole TCP segments, at least one; NaN: not recorded)"}),
        "link_priority": ("placement", [wire.placement_priority(runs.link_priority.get(p, []))
                                        for p in axes.placements],
                          {"long_name": "how wire link processes ran: real-time, or in how many launches not, "
                                        "and why"}),
        "switch_shaper": ("placement", [runs.switch_shaper.get(name, "") for name in axes.placements],
                          {"long_name": "what made the virtual nodes' shared switch: netem or tbf"}),
        "library_version": ("library", [runs.version[name] or "unknown" for name in axes.libraries]),
        "mpi": ("library", mpi),
        "family": ("library", [libraries.get(m, {}).get("family", "unknown") for m in mpi]),
        "compiler": ("library", [builds.get(m, {}).get("compiler", "unknown") for m in mpi]),
        # Whether the library could be used at all: ok, env_failed or build_failed, and why.
        "library_status": ("library", [library_status(libraries.get(m), builds.get(m)) for m in mpi]),
        "library_reason": ("library", [library_failure(libraries.get(m), builds.get(m)).get("reason", "")
                                       for m in mpi]),
        "library_log_tail": ("library", [library_failure(libraries.get(m), builds.get(m)).get("log_tail", "")
                                         for m in mpi]),
        "launcher": ("library", [libraries.get(m, {}).get("launcher", "unknown") for m in mpi],
                     {"long_name": "how mpiexec took its options: hydra (MPICH), orte (Open MPI 4), prrte (5.x)"}),
        "build_warnings": ("library", [builds.get(m, {}).get("warning_count", 0) for m in mpi],
                           {"long_name": "compiler warnings in the kernel build (build provenance lists them)"}),
        "unsupported_kernels": ("library", [json.dumps(builds.get(m, {}).get("unsupported", {}), sort_keys=True)
                                            for m in mpi], {"long_name": "kernels this library's build left "
                                                                         "out, and why (JSON)"}),
        "library_env": ("library", [json.dumps(campaign.library_env(name), sort_keys=True)
                                    for name in axes.libraries]),
        "metric": ("kernel", [runs.metric[name] for name in axes.kernels]),
        "window_buffers": ("kernel", [runs.window_buffers[name] for name in axes.kernels],
                           {"long_name": "windowed kernels: shared (one buffer per window, as osu_bw) or "
                                         "distinct (a buffer per message); empty for the others"}),
        "timing": ("kernel", [runs.timing[name] for name in axes.kernels], {"long_name": TIMING_LONG_NAME}),
        **kernel_coordinates(axes.kernels, [description_of(name, runs.description[name], builds)
                                            for name in axes.kernels]),
    }


RSE_LONG_NAME = ("relative standard error of the statistic the stopping rule measured: the median, the mean "
                 "where the timing coordinate records no rse_of")


def _data_variables(sink, points: _PointRecords, runs: _RunRecords) -> dict:
    """The ragged samples, the per-point statistics and records, and the per-launch records."""
    return {
        "time": ("sample", sink.array(), {"units": "s",
                                          "long_name": f"time per sample (see the kernel's metric); {RAGGED_TIME}"}),
        **points.stats.variables(),
        **start_variable(points.stats.values["sample_count"]),
        "settled": (POINT_DIMS, points.settled, {"long_name": "relative standard error reached its target"}),
        "rse": (POINT_DIMS, points.rse, {"long_name": RSE_LONG_NAME}),
        "iters_per_sample": (POINT_DIMS, points.iters, {"long_name": "iterations timed together in one sample"}),
        "errors": (POINT_DIMS, points.errors, {"long_name": "integrity errors (NaN: not checked)"}),
        "subtracted_s": (POINT_DIMS, points.subtracted,
                         {"units": "s", "long_name": "what the kernel timed beside every sample, to be "
                                                     "subtracted (samples are raw: corrected = time - "
                                                     "subtracted_s); NaN: none"}),
        "exit_skew_s": (POINT_DIMS, points.exit_skew,
                        {"units": "s", "long_name": "collectives timed in windows: how far apart the ranks "
                                                    "finished (last finish less first), the median over the "
                                                    "samples, each the median over its windows; NaN: not timed so"}),
        "short_samples_dropped": (POINT_DIMS, points.short_dropped,
                                  {"long_name": "samples taken and left out: shorter than half the calibrated "
                                                "length (every calibration batch was slowed), so the size's "
                                                "samples started again; NaN: not measured, or another "
                                                "suite's imported results"}),
        "position": (POINT_DIMS, points.position,
                     {"long_name": "when the size was measured in its launch "
                                   "(0: first; -1: not measured); sizes are shuffled per launch"}),
        "status": (RUN_DIMS, runs.status.astype(str),
                   {"long_name": "ok, failed, timeout, refused (raw file damaged), "
                                 "env_failed, build_failed, unsupported, missing, or "
                                 "skipped (not asked for)"}),
        "reason": (RUN_DIMS, runs.reason.astype(str), {"long_name": "why a launch gave no data (empty when ok)"}),
        "timer_resolution_s": (RUN_DIMS, runs.resolution, {"units": "s"}),
        "harness_overhead_s": (RUN_DIMS, runs.overhead, {"units": "s"}),
        "started": (RUN_DIMS, runs.started.astype(str)),
        "round": (RUN_DIMS, runs.round, {"units": "1", "long_name": "the round the launch ran in (round r runs "
                                                                   "every library, placement and kernel once); "
                                                                   "-1: not recorded"}),
        "round_position": (RUN_DIMS, runs.round_position,
                           {"units": "1", "long_name": "when the launch ran in its round (0: first; the order "
                                                       "drawn from round_seed); -1: not recorded"}),
        "attempt": (RUN_DIMS, runs.attempt, {"units": "1", "long_name": "which attempt of the launch gave this "
                                                                       "record (1: the first; more: measured again "
                                                                       "after a failure, `retries`); 0: none"}),
        "retried_after": (RUN_DIMS, runs.retried_after.astype(str),
                          {"long_name": "the launch's earlier, failed attempts: status, reason and start (JSON; "
                                        "empty: none)"}),
        "hosts": (RUN_DIMS, runs.hosts.astype(str)),
        "cpu_binding": (RUN_DIMS, runs.binding.astype(str), {"long_name": "CPUs each rank may run on"}),
        "launch_env": (RUN_DIMS, runs.env.astype(str), {"long_name": "environment variables commlens's launcher "
                                                                  "set for the launch (JSON; empty: not recorded)"}),
        "kernel_info": (RUN_DIMS, runs.kernel_info.astype(str),
                        {"long_name": "what the kernel recorded of its set-up (JSON), e.g. MPI-IO hints"}),
    }

"""The Methods section's sections, each stated from the dataset alone (`_Facts`): kernels and what
one sample is, the timer, the stopping rule, launches and their order, placements with binding and
emulation, buffers and cache, intervals and verdicts, machine and software."""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import xarray as xr

from commbench.data.kernels import kernel_options, recorded_bytes_factor, windowed_kernels
from commbench.io.conventions import timestamps
from commbench.report.methods.facts import (NOT_RECORDED, _count, _duration, _Facts, _grouped, _over_launches,
                                            _span)
from commbench.units import format_size

# The harness's own names of the timers a campaign's `timer` key chooses (kernels/harness/timer.c).
TIMER_NAMES = {"mpi_wtime": "MPI_Wtime", "clock_monotonic": "clock_gettime(CLOCK_MONOTONIC)"}
TRANSPORTS = {"shm": "shared memory", "tcp": "TCP over loopback", "network": "the network between hosts"}
# Options that shape only some kernels, stated for the kernels that read them (the catalogue's
# `options`): (campaign key, kernel option, words).
KERNEL_OPTIONS = (("messages", "messages", "{} messages each way"),
                  ("pieces", "pieces", "{} pieces"),
                  ("sync", "rma-sync", "{} synchronisation"),
                  ("halo", "halo", "{} halo swaps"),
                  ("proc_grid", "proc-grid", "process grid {}"),
                  ("io_sync", "io-sync", "fdatasync after every write: {}"),
                  ("drop_cache", "drop-cache", "cached pages dropped before reads: {}"))


class Section(NamedTuple):
    heading: str
    paragraphs: list[str]
    items: Sequence[str] = ()


def methods(ds: xr.Dataset) -> list[Section]:
    """The Methods section of `ds`'s report, as (heading, paragraphs, items) sections."""
    facts = _Facts(ds)
    return [_kernels(facts), _timer(facts), _stopping(facts), _launches(facts), _placements(facts),
            _buffers(facts), _statistics(facts), _environment(facts)]


def _harness_note(facts: _Facts) -> str:
    from commbench.launch.provenance import source_hash

    recorded = facts.attr("kernel_source_hash")
    if recorded is None:
        return ("The kernel sources the data were measured with are not recorded (no kernel source hash); what "
                "follows of the harness is the harness of this checkout.")
    if recorded == source_hash():
        return f"Harness: kernels/ with source hash {recorded[:12]}, as in this checkout."
    return (f"Harness: kernels/ with source hash {recorded[:12]}, not this checkout's ({source_hash()[:12]}); "
            "what follows of the harness is this checkout's and may differ from what measured the data.")


# ----------------------------------------------------------------------------- sections

def _kernels(facts: _Facts) -> Section:
    ds = facts.ds
    iterations = ds["iters_per_sample"].where(facts.measured) if "iters_per_sample" in ds else []
    warmup = {k: facts.option(k, "warmup") for k in facts.kernels}
    paragraphs = [
        _harness_note(facts),
        "One sample is the time rank 0 measured for a batch of iterations that all ranks started together "
        "after a barrier, divided by the iterations and by the units of the kernel's metric one iteration "
        "holds (the messages of a window, for example); a kernel that times itself (its metric says how) gives "
        "its own time per unit instead. The iterations per sample were calibrated per point, before sampling, "
        "until two batches in a row lasted at least the minimum sample time (see Timer). Iterations per "
        f"sample here: {_span(np.ravel(iterations), lambda v: f'{v:.0f}')}. "
        f"Warm-up iterations before each size: {_grouped(warmup)}.",
        "Each kernel's metric, as the harness recorded it (what one sample's time means), and the sizes "
        "measured (bytes; MiB = 2^20 B):",
    ]
    metrics = facts.coord("metric", "kernel")
    items = []
    for kernel in facts.kernels:
        sizes = ds["size"].values[facts.measured.sel(kernel=kernel).any(["library", "placement", "launch"]).values]
        measured = (f"{sizes.size} sizes, {format_size(sizes.min())} to {format_size(sizes.max())}" if sizes.size
                    else "no size measured")
        details = [measured] + _kernel_options(facts, kernel)
        items.append(f"{kernel}: {metrics.get(kernel) or NOT_RECORDED}. {'; '.join(details)}.")
    return Section("Kernels and what one sample is", paragraphs, items)


def _kernel_options(facts: _Facts, kernel: str) -> list[str]:
    found = []
    if "method" in kernel_options(facts.ds).get(kernel, ()):
        from commbench.report.analysis_table import ReportData
        from commbench.report.figures import collective_method

        found.append(f"method {collective_method(ReportData(facts.ds), kernel)}"
                     if facts.config.get("kernels", {}).get(kernel) else f"method {NOT_RECORDED}")
    reads = kernel_options(facts.ds).get(kernel, set())
    for option, kernel_option, words in KERNEL_OPTIONS:
        if kernel_option in reads:
            value = facts.option(kernel, option)
            found.append(words.format(NOT_RECORDED if value is None else
                                      "x".join(map(str, value)) if isinstance(value, list) else value))
    return found


def _timer(facts: _Facts) -> Section:
    timers = {k: facts.option(k, "timer") for k in facts.kernels}
    resolution = facts.attr("timer_resolution_s")
    per_launch = facts.per_run("timer_resolution_s")
    overhead = facts.per_run("harness_overhead_s")
    asked = {k: facts.option(k, "min_sample_time") for k in facts.kernels}
    paragraphs = [
        f"Timer: {_grouped(timers, lambda t: TIMER_NAMES.get(t, t))}. Its resolution (the smallest nonzero step "
        f"it showed, measured by every launch before sampling): {_duration(resolution)}"
        + _over_launches(per_launch, _duration(resolution)) + ".",
        f"Harness overhead (the median time of an empty timed region, measured by every launch): "
        f"{_span(overhead, _duration)}. The harness does not subtract it from the samples. "
        f"Minimum sample time asked for: {_grouped(asked, _duration)}; the harness raises it to 100 times the "
        "resolution and 100 times the overhead where those are larger. The sample length the calibration "
        f"aimed at, over the launches: {_span(_calibration_targets(facts, asked), _duration)}.",
    ]
    if "subtracted_s" in facts.ds:
        corrected = int(np.isfinite(facts.ds["subtracted_s"].where(facts.measured)).sum())
        if corrected:
            paragraphs.append(f"{corrected} points come from kernels that subtract their own set-up cost from "
                              "every sample (the amount is kept in `subtracted_s`).")
    return Section("Timer", paragraphs)


def _calibration_targets(facts: _Facts, asked: dict[str, float | None]) -> np.ndarray:
    """Per launch that gave data, the sample length its calibration aimed at (kernels/harness/main.c:
    the largest of the minimum sample time, 100 x the resolution and 100 x the overhead)."""
    ds = facts.ds
    if not {"timer_resolution_s", "harness_overhead_s", "status"} <= set(ds.variables):
        return np.array([])
    floor = xr.DataArray([np.nan if asked[k] is None else asked[k] for k in facts.kernels], dims="kernel",
                         coords={"kernel": ds["kernel"]})
    target = np.fmax(floor, np.fmax(100 * ds["timer_resolution_s"], 100 * ds["harness_overhead_s"]))
    return target.where(ds["status"] == "ok").values.ravel()


def _stopping(facts: _Facts) -> Section:
    precision = facts.config.get("precision")
    counts = facts.ds["sample_count"].values
    counts = counts[counts > 0]
    if precision:
        get = {key: precision.get(key) for key in ("rse", "min_samples", "max_samples", "max_point_time")}
        target = f"{get['rse']:g} ({get['rse']:.1%})" if get["rse"] is not None else NOT_RECORDED
        rule = (f"Each point (one size in one launch) was sampled until the relative standard error of its mean "
                f"(standard deviation / sqrt(n) / mean) was at most {target} with at least "
                f"{get['min_samples'] or NOT_RECORDED} samples, or until {get['max_samples'] or NOT_RECORDED} "
                f"samples, or {_duration(get['max_point_time'])} spent on the point, whichever came first.")
    else:
        rule = f"Stopping rule and its target: {NOT_RECORDED}."
    if "settled" in facts.ds and counts.size:
        settled = int(facts.ds["settled"].where(facts.measured, False).sum())
        rule += (f" {settled} of {counts.size} measured points reached the target; the others stopped at a cap "
                 "(their `settled` is false).")
    spread = (f"Samples per point: {_span(counts, lambda n: f'{n:.0f}')} (median {np.median(counts):g})."
              if counts.size else "No point was measured.")
    return Section("Stopping rule", [rule, spread])


def _launches(facts: _Facts) -> Section:
    ds, config = facts.ds, facts.config
    asked = config.get("launches")
    paragraphs = [f"Launches (separate mpiexec runs) of every library, placement and kernel: "
                  f"{NOT_RECORDED if asked is None else asked}; the dataset holds {ds.sizes['launch']} per cell."]
    if "status" in ds:
        statuses = Counter(s for s in ds["status"].values.ravel().tolist() if s != "skipped")
        others = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()) if status != "ok")
        paragraphs[0] += (f" {statuses.get('ok', 0)} of {sum(statuses.values())} launches gave data"
                          + (f" ({others})." if others else "."))
    timeout = config.get("timeout")
    paragraphs[0] += f" Time limit per launch: {_duration(timeout) if timeout is not None else NOT_RECORDED}."
    shuffle = config.get("shuffle")
    order = ("Sizes were measured in a random order, a different one in every launch (drawn from the launch "
             "number)" if shuffle else "Sizes were measured in schedule order" if shuffle is False
             else f"Order of sizes within a launch: {NOT_RECORDED}")
    shuffled = _launches_out_of_order(ds)
    if shuffled is not None:
        order += (f"; the recorded order (`position`) is not ascending size in {shuffled[0]} of {shuffled[1]} "
                  "launches")
    paragraphs.append(order + ".")
    started = facts.per_run("started")
    started = started if started.dtype.kind == "M" else timestamps(started)   # datetimes, or text not yet opened
    started = [f"{np.datetime_as_string(moment, unit='s')} UTC" for moment in np.sort(started[~np.isnat(started)])]
    paragraphs.append(f"First launch started {started[0]}, last {started[-1]}." if started else
                      f"First launch: {facts.text('first_launch')}; dataset collected: {facts.text('created')}.")
    return Section("Launches and order", paragraphs)


def _launches_out_of_order(ds: xr.Dataset) -> tuple[int, int] | None:
    """(launches whose sizes were not measured in ascending order, launches with two or more sizes)."""
    if "position" not in ds:
        return None
    position = ds["position"].transpose("library", "placement", "kernel", "launch", "size").values
    runs = position.reshape(-1, position.shape[-1])
    out_of_order = considered = 0
    for run in runs:
        measured = run[run >= 0]
        if measured.size >= 2:
            considered += 1
            out_of_order += bool((np.diff(measured) < 0).any())
    return out_of_order, considered


def _placements(facts: _Facts) -> Section:
    ds = facts.ds
    coords = {name: facts.coord(name, "placement") for name in
              ("nodes", "ppn", "nprocs", "transport", "emulated", "network_rate", "mtu")}
    items = []
    for placement in (str(p) for p in ds["placement"].values):
        get = {name: values.get(placement) for name, values in coords.items()}
        shape = (f"{get['nodes']} node(s) x {get['ppn']} ranks per node" if get["nodes"] is not None
                 else f"shape {NOT_RECORDED}")
        transport = TRANSPORTS.get(get["transport"], get["transport"] or NOT_RECORDED)
        parts = [shape, f"transport: {transport}"]
        if get["emulated"]:
            parts.append("more than one node emulated on one host")
        rate, mtu = get["network_rate"], get["mtu"]
        if rate is not None and np.isfinite(rate):
            parts.append(_link(rate, mtu))
        parts.append(f"hosts: {_distinct(facts, 'hosts', placement)}")
        parts.append(f"CPUs each rank could run on (rank by rank, as the launches recorded): "
                     f"{_distinct(facts, 'cpu_binding', placement, ' | ')}")
        items.append(f"{placement}: {'; '.join(parts)}.")
    emulated = [p for p, e in coords["emulated"].items() if e]
    paragraphs = [_emulation(facts, emulated)] if emulated else []
    paragraphs.append("Each placement, with the CPUs each rank was allowed to run on as every launch recorded "
                      "them (the affinity the launcher gave it: one CPU each where ranks were bound to cores):")
    return Section("Placements, binding and emulation", paragraphs, items)


def _link(rate_bits: float, mtu) -> str:
    from commbench.launch.netem import expected_goodput_bytes_per_s

    goodput = expected_goodput_bytes_per_s(f"{rate_bits:.0f}bit", int(mtu)) / 1e6 if mtu else None
    return (f"emulated link: loopback in a private network namespace with a tc tbf rate limit of "
            f"{rate_bits / 1e6:g} Mbit/s and MTU {int(mtu) if mtu else NOT_RECORDED} B"
            + (f" (bulk TCP payload at most {goodput:.4g} MB/s after IP and TCP headers)" if goodput else ""))


def _distinct(facts: _Facts, name: str, placement: str, separator: str = "") -> str:
    """The distinct values a per-launch record took in a placement's launches that gave data."""
    ds = facts.ds
    if name not in ds or "status" not in ds:
        return NOT_RECORDED
    ok = (ds["status"].sel(placement=placement) == "ok").values
    values = Counter(str(v) for v in ds[name].sel(placement=placement).values[ok] if str(v))
    if not values:
        return NOT_RECORDED
    show = (lambda v: separator.join(v.split())) if separator else str
    if len(values) == 1:
        return show(next(iter(values)))
    return ", ".join(f"{show(value)} ({n} launches)" for value, n in values.most_common())


def _emulation(facts: _Facts, placements: list[str]) -> str:
    from commbench.launch.families import FAMILIES, Unsupported

    how = []
    rows = zip(facts.coord("family", "library").values(), facts.coord("library_version", "library").values())
    for name, version_text in sorted({(str(f), str(v)) for f, v in rows}):
        family = FAMILIES.get(name)
        if family is None:
            continue
        library = {"family": name, "device": family.parse_device(version_text)}
        try:
            env = family.emulated_network_env(library, None)
        except Unsupported as refusal:
            how.append(f"{family.display_name} rows: {refusal}")
            continue
        how.append(f"{family.display_name} rows with " + ", ".join(f"{k}={v}" for k, v in env.items())
                   + (f" (device {library['device']})" if library["device"] else ""))
    stated = "; ".join(dict.fromkeys(how)) if how else f"library families {NOT_RECORDED}"
    return (f"Emulated placements ({', '.join(placements)}): on one host, ranks of different nodes were made to "
            f"take each library's network path over loopback by commbench's launcher: {stated}. A library row's "
            "own settings win over these; the exact variables of each launch are in its raw record, not in the "
            "dataset.")


def _buffers(facts: _Facts) -> Section:
    from commbench.report.analysis_table import ReportData

    cache = {k: facts.option(k, "cache") for k in facts.kernels}
    words = {"reuse": "reuse (every iteration uses the same buffers)",
             "rotate": "rotate (NetPIPE's no-cache mode: iterations walk through buffers of at least twice the "
                       "last-level cache)"}
    option = {name: {k: facts.option(k, name) for k in facts.kernels} for name in ("align", "datatype", "integrity")}
    paragraphs = [f"Cache mode: {_grouped(cache, lambda c: words.get(c, c))}.",
                  f"Buffer alignment (offset from a page boundary): {_grouped(option['align'], lambda a: f'{a} B')}. "
                  f"MPI datatype: {_grouped(option['datatype'])}. Every byte of every message checked (integrity): "
                  f"{_grouped(option['integrity'], lambda checked: 'yes' if checked else 'no')}."]
    windowed = [k for k in facts.kernels if k in windowed_kernels(facts.ds)]
    if windowed:
        sizes = {k: facts.option(k, "window") for k in windowed}
        windows = _grouped(sizes, lambda n: _count(n, "message"))
        paragraphs.append(f"Windowed kernels' window (messages in flight per iteration): {windows}."
                          + ReportData(facts.ds).window_note(windowed))
    return Section("Buffers and cache", paragraphs)


def _statistics(facts: _Facts) -> Section:
    from commbench.analysis.compare import ONE_LAUNCH_FACTOR, ONE_LAUNCH_FLOOR, compare
    from commbench.report.analysis_table import ReportData

    ds = facts.ds
    n_boot = inspect.signature(ReportData).parameters["n_boot"].default
    launches = ds.sizes["launch"]
    interval = (f"a 95% percentile bootstrap interval of the mean over launches (the launches' means "
                f"resampled {n_boot} times): how far another launch could move the result"
                if launches > 1 else
                "a 95% normal interval of the mean over the samples (mean -+ 1.96 sd / sqrt(n)); with one launch "
                "it cannot show how launches differ, often the larger variation")
    factors = _bandwidth_factors(facts)
    paragraphs = [
        "Curves show per point the median over launches of each launch's median (with one launch, its sample "
        f"median), shaded with {interval}. Bandwidth is the bytes a unit moves over that median, in MB/s "
        f"(1e6 B/s); the bytes are the size times {factors}.",
    ]
    rows = [str(v) for v in ds["library"].values]
    if len(rows) > 1 or facts.config.get("compare"):
        defaults = inspect.signature(compare).parameters
        confidence, min_effect = defaults["confidence"].default, defaults["min_effect"].default
        basis = (f"This dataset holds {launches} launches per cell (fewer where launches failed, see Launches "
                 "and order); each cell's `basis` says which test gave its verdict"
                 if launches > 1 else "This dataset holds one launch per cell, so every verdict follows that rule")
        paragraphs.append(
            "What changed (library rows against each other): per cell (kernel, placement, size) each launch "
            f"gives its {defaults['statistic'].default}; the ratio is candidate over baseline of their geometric "
            "means; with several launches on a side, Welch's t test on the logarithms of the launch values "
            "(launch = experimental unit) gives the p value and the ratio's interval (with one launch on one "
            "side, the other side's variance). p values are adjusted by "
            f"Benjamini-Hochberg over every cell of a comparison (false discovery rate {1 - confidence:g}); a "
            f"cell is regressed or improved where q <= {1 - confidence:g} and the change is at least "
            f"{min_effect:.0%}, unchanged where the whole interval lies within -+{min_effect:.0%}, inconclusive "
            "otherwise. With one launch on each side nothing measures launch-to-launch variation: the interval "
            "comes from the samples alone and a verdict needs "
            f"the change to exceed {ONE_LAUNCH_FACTOR:g} within-launch relative interquartile ranges and "
            f"{ONE_LAUNCH_FLOOR:.0%}. {basis}.")
    return Section("Intervals and verdicts", paragraphs)


def _bandwidth_factors(facts: _Facts) -> str:
    nprocs = facts.coord("nprocs", "placement")
    factors: dict[str, set] = {}
    measured = facts.measured.any(["library", "size", "launch"])
    for kernel in facts.kernels:
        for placement, ranks in nprocs.items():
            if bool(measured.sel(kernel=kernel, placement=placement)):
                factors.setdefault(kernel, set()).add(recorded_bytes_factor(facts.ds, kernel, ranks))
    scaled = {k: f for k, f in factors.items() if f != {1.0}}
    if not scaled:
        return "1 for every kernel here"
    listed = "; ".join(f"{k} {' or '.join(f'{f:g}' for f in sorted(v))}" for k, v in scaled.items())
    return f"the kernel's factor ({listed}; 1 for the others), as each metric says"


def _environment(facts: _Facts) -> Section:
    paragraphs = [
        f"Hosts: {facts.text('hosts')}. CPU: {facts.text('cpu_model')}. OS: {facts.text('os')}.",
        f"Kernel compiler flags: {facts.text('compiler_flags')}. commbench version: "
        f"{facts.text('commbench_version')}, git commit: {facts.text('git_commit')}. Campaign: "
        f"{facts.text('campaign')} (file: {facts.text('campaign_file')}, configuration hash: "
        f"{facts.text('config_hash')})"
        + ("; the whole configuration is printed at the end of the report" if facts.config else "")
        + f". Dataset collected: {facts.text('created')}.",
        "Library rows (version as the library reports it, family, launcher, compiler, the row's own settings):",
    ]
    coords = {name: facts.coord(name, "library") for name in
              ("library_version", "family", "launcher", "compiler", "library_env")}
    items = []
    for row in (str(v) for v in facts.ds["library"].values):
        version = _first_line(coords["library_version"].get(row))
        settings = coords["library_env"].get(row)
        settings = ", ".join(f"{k}={v}" for k, v in json.loads(settings).items()) if settings else None
        recorded = {name: coords[name].get(row) or NOT_RECORDED for name in ("family", "launcher", "compiler")}
        items.append(f"{row}: {version}; family {recorded['family']}; launcher {recorded['launcher']}; compiler "
                     f"{recorded['compiler']}; settings: "
                     f"{settings or ('none' if 'library_env' in facts.ds.coords else NOT_RECORDED)}.")
    return Section("Machine and software", paragraphs, items)


def _first_line(version) -> str:
    """'MPICH Version: 5.0.2' of the string MPI_Get_library_version gives, spaces collapsed."""
    lines = str(version or "").strip().splitlines()
    return " ".join(lines[0].split()) if lines and lines[0].strip() and version != "unknown" else NOT_RECORDED

"""The Methods section's sections, each stated from the dataset alone (`Facts`): kernels and what
one sample is, the timer, the stopping rule, launches and their order, placements with binding and
emulation, buffers and cache, intervals and verdicts, machine and software."""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple, cast

import numpy as np
import xarray as xr

from commlens.data.kernels import kernel_options, recorded_bytes_factor, stopping_statistics, windowed_kernels
from commlens.data.origins import imported_libraries
from commlens.io.conventions import timestamps
from commlens.report.methods.clocks import clock_sync_words
from commlens.report.methods.computation import standing_cost_words
from commlens.report.methods.facts import (NOT_RECORDED, count_of, duration_words, Facts, grouped, over_launches,
                                            value_span)
from commlens.report.methods.imported import imported_paragraphs
from commlens.report.methods.left_out import samples_left_out_words
from commlens.report.methods.placements import placements_section
from commlens.report.methods.rounds import rounds_paragraph, until_decided_paragraph
from commlens.units import format_size

# The harness's own names of the timers a campaign's `timer` key chooses (kernels/harness/timer.c).
TIMER_NAMES = {"mpi_wtime": "MPI_Wtime", "clock_monotonic": "clock_gettime(CLOCK_MONOTONIC)"}
# Options that shape only some kernels, stated for the kernels that read them (the catalogue's
# `options`): (campaign key, kernel option, words).
KERNEL_OPTIONS = (("messages", "messages", "{} messages each way"),
                  ("pieces", "pieces", "{} pieces"),
                  ("partitions", "partitions", "{} partitions, a thread each"),
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
    facts = Facts(ds)
    imported, curves = imported_paragraphs(facts)
    return [_kernels(facts), _timer(facts), _stopping(facts), _launches(facts), _placements(facts),
            _buffers(facts), _statistics(facts), _environment(facts)] \
        + ([Section("Imported rows", imported, curves)] if imported else [])


def _harness_note(facts: Facts) -> str:
    from commlens.launch.provenance import source_hash

    recorded = facts.attr("kernel_source_hash")
    if recorded is None:
        return ("The kernel sources the data were measured with are not recorded (no kernel source hash); what "
                "follows of the harness is the harness of this checkout.")
    if recorded == source_hash():
        return f"Harness: kernels/ with source hash {recorded[:12]}, as in this checkout."
    return (f"Harness: kernels/ with source hash {recorded[:12]}, not this checkout's ({source_hash()[:12]}); "
            "what follows of the harness is this checkout's and may differ from what measured the data.")


# ----------------------------------------------------------------------------- sections

def _kernels(facts: Facts) -> Section:
    ds = facts.ds
    iterations = ds["iters_per_sample"].where(facts.measured).values if "iters_per_sample" in ds else np.array([])
    paragraphs = [
        _harness_note(facts),
        "One sample is the time rank 0 measured for a batch of iterations that all ranks started together "
        "after a barrier, divided by the iterations and by the units of the kernel's metric one iteration "
        "holds (the messages of a window, for example); a kernel that times itself (its metric says how) gives "
        "its own time per unit instead. The iterations per sample were calibrated per point, before sampling, "
        "until two batches in a row lasted at least the minimum sample time (see Timer). Iterations per "
        f"sample here: {value_span(np.ravel(iterations), lambda v: f'{v:.0f}')} (the warm-up before each size: "
        "see Timing mode, as the launches recorded it).",
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


def _kernel_options(facts: Facts, kernel: str) -> list[str]:
    found = []
    if "method" in kernel_options(facts.ds).get(kernel, ()):
        from commlens.report.analysis_table import ReportData
        from commlens.report.figures import collective_method

        method = collective_method(ReportData(facts.ds), kernel) if facts.config.get("kernels", {}).get(kernel) \
            else NOT_RECORDED
        found.append(f"method {method}" + (f" ({clock_sync_words(facts, kernel)})" if method == "window" else ""))
    reads = kernel_options(facts.ds).get(kernel, set())
    for option, kernel_option, words in KERNEL_OPTIONS:
        if kernel_option in reads:
            value = facts.option(kernel, option)
            found.append(words.format(NOT_RECORDED if value is None else
                                      "x".join(map(str, value)) if isinstance(value, list) else value))
    return found


def _timer(facts: Facts) -> Section:
    timers = {k: facts.option(k, "timer") for k in facts.kernels}
    resolution = facts.attr("timer_resolution_s")
    per_launch = facts.per_run("timer_resolution_s")
    overhead = facts.per_run("harness_overhead_s")
    asked = {k: facts.option(k, "min_sample_time") for k in facts.kernels}
    paragraphs = [
        f"Timer: {grouped(timers, lambda t: TIMER_NAMES.get(t, t))}. Its resolution (the smallest nonzero step "
        f"it showed, measured by every launch before sampling): {duration_words(resolution)}"
        + over_launches(per_launch, duration_words(resolution)) + ".",
        f"Harness overhead (the median time of an empty timed region, measured by every launch): "
        f"{value_span(overhead, duration_words)}. The harness does not subtract it from the samples. "
        f"Minimum sample time asked for: {grouped(asked, duration_words)}; the harness raises it to 100 times the "
        "resolution and 100 times the overhead where those are larger. The sample length the calibration "
        f"aimed at, over the launches: {value_span(_calibration_targets(facts, asked), duration_words)}.",
    ]
    if "subtracted_s" in facts.ds:
        corrected = int(np.isfinite(facts.ds["subtracted_s"].where(facts.measured)).sum())
        if corrected:
            paragraphs.append(f"{corrected} points come from kernels that also time, beside every sample, what "
                              "is to be subtracted from it (an empty call; for overlap, the computation alone) "
                              "or compared with it (for availability, the computation before MPI started): "
                              "the samples are raw, the amount is kept in `subtracted_s`.")
    if words := standing_cost_words(facts):
        paragraphs.append(words)
    return Section("Timer", paragraphs)


def _calibration_targets(facts: Facts, asked: dict[str, float | None]) -> np.ndarray:
    """Per launch that gave data, the sample length its calibration aimed at (kernels/harness/main.c:
    the largest of the minimum sample time, 100 x the resolution and 100 x the overhead)."""
    ds = facts.ds
    if not {"timer_resolution_s", "harness_overhead_s", "status"} <= set(ds.variables):
        return np.array([])
    floor = xr.DataArray([np.nan if asked[k] is None else asked[k] for k in facts.kernels], dims="kernel",
                         coords={"kernel": ds["kernel"]})
    target = cast(xr.DataArray, np.fmax(floor, np.fmax(100 * ds["timer_resolution_s"],   # a DataArray's fmax
                                                       100 * ds["harness_overhead_s"])))
    return target.where(ds["status"] == "ok").values.ravel()


def _stopping(facts: Facts) -> Section:
    precision = facts.config.get("precision")
    # The rule is commlens's; imported rows (commlens.report.methods.imported) were taken by another suite.
    ours = facts.ds.drop_sel(library=imported_libraries(facts.ds))
    counts = ours["sample_count"].values
    counts = counts[counts > 0]
    if precision:
        get = {key: precision.get(key) for key in ("rse", "min_samples", "max_samples", "max_point_time")}
        target = f"{get['rse']:g} ({get['rse']:.1%})" if get["rse"] is not None else NOT_RECORDED
        rule = (f"Each point (one size in one launch) was sampled until the relative standard error of its "
                f"{_stopping_statistic(facts)} was at most {target} with at least "
                f"{get['min_samples'] or NOT_RECORDED} samples, or until {get['max_samples'] or NOT_RECORDED} "
                f"samples, or {duration_words(get['max_point_time'])} spent on the point, whichever came first.")
    else:
        rule = f"Stopping rule and its target: {NOT_RECORDED}."
    if "settled" in ours and counts.size:
        settled = int(ours["settled"].where(ours["sample_count"] > 0, False).sum())
        rule += (f" {settled} of {counts.size} measured points reached the target; the others stopped at a cap "
                 "(their `settled` is false).")
    rule += samples_left_out_words(ours, counts.size)
    spread = (f"Samples per point: {value_span(counts, lambda n: f'{n:.0f}')} (median {np.median(counts):g})."
              if counts.size else "No point was measured.")
    return Section("Stopping rule", [_timing(facts), rule, spread])


# The statistic a launch's stopping rule measured the precision of (data.kernels.stopping_statistics).
RSE_OF = {
    "median": "median (the larger of two standard errors: from the order statistics' interval of a median, "
              "which holds for any shape of noise, and, from five batches on, from the spread of the medians of "
              "runs of about sqrt(n) samples in the order taken, which holds where successive samples are alike)",
    "mean": "mean (standard deviation / sqrt(n) / mean)",
}


def _stopping_statistic(facts: Facts) -> str:
    """What the stopping rule's relative standard error was of, for every kernel alike or kernel by kernel,
    as the launches recorded it."""
    of = stopping_statistics(facts.ds)
    if not of:
        return NOT_RECORDED
    if len(set(of.values())) == 1:
        return RSE_OF.get(next(iter(of.values())), next(iter(of.values())))
    return "; ".join(f"{kernel}: {RSE_OF.get(value, value)}" for kernel, value in of.items())


# What OSU Micro-Benchmarks 7.4 does, to set the recorded timing beside it (osu_util.h, osu_latency.c).
OSU_TIMING = ("OSU's osu_latency times one loop of 10,000 iterations (1,000 above 8 KiB) after 100 (10) "
              "warm-up iterations and reports that loop's mean")


def _timing(facts: Facts) -> str:
    """How each kernel was timed, as its launches recorded it (the `timing` kernel coordinate)."""
    recorded = facts.coord("timing", "kernel")
    timings = {kernel: json.loads(recorded[kernel]) if recorded.get(kernel) else None for kernel in facts.kernels}
    if all(timing is None for timing in timings.values()):
        return f"Timing mode: {NOT_RECORDED} (the launches predate its record)."
    text = f"Timing mode: {grouped(timings, _describe_timing)}."
    modes = {timing["timing"] for timing in timings.values() if timing}
    overhead = facts.per_run("harness_overhead_s")
    timer_cost = (f" (an empty timed region took {value_span(overhead, duration_words)} here, as each launch measured)"
                  if overhead.size else "")
    if "precision" in modes:
        text += (f" {OSU_TIMING}, every iteration between two timer calls whose cost it includes{timer_cost}; the "
                 "precision timing instead repeats timed batches until the stopping rule below is met, keeps each "
                 "batch's time per iteration as a sample (the timer's cost spread over the batch), and reports "
                 "the median of the samples, which a slow outlier moves less than the mean.")
    if "osu" in modes:
        text += (" With the osu timing every timed iteration is its own sample (two timer calls around it, as OSU "
                 f"does), so a point's mean is OSU's number, the timer's cost included{timer_cost}.")
    return text


def _describe_timing(timing: dict) -> str:
    """'osu: 10000 iterations after 1000 warm-up, above 8 KiB 100 after 10' or 'precision: ...'."""
    if timing["timing"] == "osu":
        small = f"{timing['iterations']} iterations after {timing['warmup']} warm-up"
        large = timing.get("large_above")
        if large is None or (timing["iterations_large"], timing["warmup_large"]) == (timing["iterations"],
                                                                                     timing["warmup"]):
            return f"osu ({small} at every size)"
        return (f"osu ({small} up to {format_size(large)}, {timing['iterations_large']} after "
                f"{timing['warmup_large']} above)")
    iterations = timing.get("iterations") or 0
    counted = (f"{iterations} timed iterations per size in batches" if iterations
               else "as many calibrated batches as the stopping rule takes")
    return f"precision ({timing.get('warmup', 0)} warm-up iterations, then {counted})"


def _launches(facts: Facts) -> Section:
    ds, config = facts.ds, facts.config
    asked = config.get("launches")
    asked_text = (NOT_RECORDED if asked is None else
                  f"until decided ({asked['min']} to {asked['max']} rounds)" if isinstance(asked, dict) else asked)
    paragraphs = [f"Launches (separate mpiexec runs) of every library, placement and kernel: {asked_text}; the "
                  f"dataset holds {ds.sizes['launch']} per cell."]
    if "status" in ds:
        statuses = Counter(s for s in ds["status"].values.ravel().tolist() if s != "skipped")
        others = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()) if status != "ok")
        paragraphs[0] += (f" {statuses.get('ok', 0)} of {sum(statuses.values())} launches gave data"
                          + (f" ({others})." if others else "."))
    timeout = config.get("timeout")
    paragraphs[0] += f" Time limit per launch: {duration_words(timeout) if timeout is not None else NOT_RECORDED}."
    retried = _retried_launches(ds)
    if retried:
        listed = "; ".join(retried[:RETRIES_LISTED]) + (f"; and {len(retried) - RETRIES_LISTED} more (the dataset's "
                                                          f"`retried_after`)" if len(retried) > RETRIES_LISTED else "")
        paragraphs[0] += (f" Measured again after a failed attempt (`retries`: {config.get('retries', NOT_RECORDED)}), "
                          f"the record kept being the last attempt's: {listed}.")
    shuffle = config.get("shuffle")
    order = ("Sizes were measured in a random order, a different one in every launch (drawn from the launch "
             "number)" if shuffle else "Sizes were measured in schedule order" if shuffle is False
             else f"Order of sizes within a launch: {NOT_RECORDED}")
    shuffled = _launches_out_of_order(ds)
    if shuffled is not None and shuffled[1]:
        order += (f"; the recorded order (`position`) is not ascending size in {shuffled[0]} of {shuffled[1]} "
                  "launches")
    paragraphs.append(order + ".")
    paragraphs.append(rounds_paragraph(ds))
    if isinstance(asked, dict):
        paragraphs.append(until_decided_paragraph(ds, asked))
    moments = facts.per_run("started")
    moments = moments if moments.dtype.kind == "M" else timestamps(moments)   # datetimes, or text not yet opened
    started = [f"{np.datetime_as_string(moment, unit='s')} UTC" for moment in np.sort(moments[~np.isnat(moments)])]
    paragraphs.append(f"First launch started {started[0]}, last {started[-1]}." if started else
                      f"First launch: {facts.text('first_launch')}; dataset collected: {facts.text('created')}.")
    return Section("Launches and order", paragraphs)


RETRIES_LISTED = 10   # retried launches named in Methods; the rest are counted


def _retried_launches(ds: xr.Dataset) -> list[str]:
    """Each launch measured again after a failure, as recorded: which, the attempt kept, and why the
    earlier ones gave nothing."""
    if "retried_after" not in ds:
        return []
    found = []
    after = ds["retried_after"].transpose("library", "placement", "kernel", "launch")
    for index, text in np.ndenumerate(after.values):
        if isinstance(text, str) and text.startswith("["):    # rows merged from elsewhere hold none ("nan")
            cell = "/".join(str(after[dim].values[i]) for dim, i in zip(after.dims, index))
            earlier = ", ".join(f"{entry['status']}: {entry['reason']}" for entry in json.loads(text))
            attempt = int(ds["attempt"].transpose(*after.dims).values[index])
            found.append(f"{cell}, attempt {attempt}, after {earlier}")
    return found


def _launches_out_of_order(ds: xr.Dataset) -> tuple[int, int] | None:
    """(launches whose sizes were not measured in ascending order, launches with two or more sizes)."""
    if "position" not in ds:
        return None
    position = ds["position"].transpose("library", "placement", "kernel", "launch", "size").values
    runs: np.ndarray | list[np.ndarray] = position.reshape(-1, position.shape[-1]) if position.size else []
    out_of_order = considered = 0
    for run in runs:
        measured = run[run >= 0]
        if measured.size >= 2:
            considered += 1
            out_of_order += bool((np.diff(measured) < 0).any())
    return out_of_order, considered


def _placements(facts: Facts) -> Section:
    paragraphs, items = placements_section(facts)
    return Section("Placements, binding and emulation", paragraphs, items)


def _buffers(facts: Facts) -> Section:
    from commlens.report.analysis_table import ReportData

    cache = {k: facts.option(k, "cache") for k in facts.kernels}
    words = {"reuse": "reuse (every iteration uses the same buffers)",
             "rotate": "rotate (NetPIPE's no-cache mode: iterations walk through buffers of at least twice the "
                       "last-level cache)"}
    option = {name: {k: facts.option(k, name) for k in facts.kernels} for name in ("align", "datatype", "integrity")}
    paragraphs = [f"Cache mode: {grouped(cache, lambda c: words.get(c, c))}.",
                  f"Buffer alignment (offset from a page boundary): {grouped(option['align'], lambda a: f'{a} B')}. "
                  f"MPI datatype: {grouped(option['datatype'])}. Every byte of every message checked (integrity): "
                  f"{grouped(option['integrity'], lambda checked: 'yes' if checked else 'no')}."]
    windowed = [k for k in facts.kernels if k in windowed_kernels(facts.ds)]
    if windowed:
        sizes = {k: facts.option(k, "window") for k in windowed}
        windows = grouped(sizes, lambda n: count_of(n, "message"))
        paragraphs.append(f"Windowed kernels' window (messages in flight per iteration): {windows}."
                          + ReportData(facts.ds).window_note(windowed))
    return Section("Buffers and cache", paragraphs)


def _statistics(facts: Facts) -> Section:
    from commlens.analysis.compare import ONE_LAUNCH_FACTOR, ONE_LAUNCH_FLOOR, compare

    ds = facts.ds
    launches = ds.sizes["launch"]
    per_point = facts.measured.sum("launch").values
    per_point = per_point[per_point > 0]
    factors = _bandwidth_factors(facts)
    paragraphs = [
        "Nothing is pooled across launches, whose sample counts the stopping rule makes very different: every "
        "statistic is computed per launch, and a point's median, mean, P50, P90 and P99 are each the median over "
        "its launches of every launch's own value (its minimum the smallest of them). Curves draw that median, "
        "shaded with the 95% interval of the same median. "
        + (f"Launches per point here: {value_span(per_point, lambda n: f'{n:.0f}')}. " if per_point.size
           else "No point was measured. ")
        + f"{_band(per_point)} Bandwidth is the bytes a unit moves "
        f"over that median, in MB/s (1e6 B/s), its interval from the median's; the bytes are the size times "
        f"{factors}.",
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
            "means; with several launches on a side, a t test on the logarithms of the launch values "
            "(launch = experimental unit; paired by round where both rows ran in rounds, unpaired otherwise, "
            "the launch variance moderated across neighbouring sizes as limma's moderated t) gives the p value "
            "and the ratio's interval (with one launch on one side, the other side's variance). "
            "p values are adjusted by "
            f"Benjamini-Hochberg over the launch-level cells of a comparison (false discovery rate "
            f"{1 - confidence:g}), and every interval shown is at the false coverage-rate level of Benjamini and "
            f"Yekutieli (1 - R x {1 - confidence:g} / m, R of the m cells selected): it excludes 1 exactly where a "
            "change is called, and the verdict is read off it against a margin of "
            f"{min_effect:.0%} either way (as ratios: {1 + min_effect:g} and 1/{1 + min_effect:g}): regressed or "
            "improved where the whole interval lies beyond the margin, slower or faster where it lies above or "
            "below 1 but not beyond it, unchanged where it lies inside the margin and holds 1, inconclusive "
            "otherwise. With one launch on each side nothing measures launch-to-launch variation: those cells "
            "stay out of the adjustment, their interval comes from the samples alone (said: within one launch) "
            f"and a verdict needs the change to exceed {ONE_LAUNCH_FACTOR:g} within-launch relative interquartile "
            f"ranges and {ONE_LAUNCH_FLOOR:.0%}. {basis}.")
    return Section("Intervals and verdicts", paragraphs)


def _band(per_point: np.ndarray) -> str:
    """What the band around a curve is, for the launch counts its points have."""
    one = ("With one launch the band is that launch's distribution-free interval of its median (order "
           "statistics n/2 -+ 1.96 sqrt(n)/2); it cannot show how launches differ, often the larger variation.")
    several = ("With several launches the launch is the unit: the band is the median -+ t(L-1) sqrt(pi/2) sd / "
               "sqrt(L) on the logarithms of the L launches' medians (sqrt(pi/2): a median's standard error over "
               "a mean's, from three launches on), and never narrower than a typical launch's own interval of its "
               "median; the line lies inside it by construction.")
    if not per_point.size:
        return ""
    return " ".join(([one] if (per_point == 1).any() else []) + ([several] if (per_point > 1).any() else []))


def _bandwidth_factors(facts: Facts) -> str:
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


def _environment(facts: Facts) -> Section:
    paragraphs = [
        f"Hosts: {facts.text('hosts')}. CPU: {facts.text('cpu_model')}. OS: {facts.text('os')}.",
        f"Kernel compiler flags: {facts.text('compiler_flags')}. commlens version: "
        f"{facts.text('commlens_version')}, git commit: {facts.text('git_commit')}. Campaign: "
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

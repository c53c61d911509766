"""A campaign's progress, as a user watching it wants it: after each launch, one line with how many
launches are done, how many are left and about how long the rest of the campaign takes: the
launches left, estimated from the launches already measured, then collecting the dataset and
drawing the report, estimated from how long they took here before.

The raw files are the record: a launch is done once its raw file is written, whether in this run of
the workflow or an earlier one, and its launch record says how long it took. Each launch job works
its line out from them alone, so jobs that finish together (`--cores 2`, a cluster) need no shared
state: a launch counts the raw files written no later than its own, which numbers launches that end
at once 1, 2, 3 rather than twice the same.

Collect and the report are half of a small campaign's time. Their durations are kept per machine in
commlens's cache (STAGE_LOG: `commlens run` times collect, `commlens report` times itself), each
with its size: the raw files' bytes for collect, the curves for the report. An estimate is
STAGE_MODELS' time for that size, scaled by how much slower or faster the last runs here took than
the model said (the median ratio): the fixed start-up cost of a notebook kernel and the per-curve
cost of its figures move together with the machine's speed.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, median

from commlens.io.raw import read_launch_record
from commlens.locations import cache_dir
from commlens.units import format_duration

Run = tuple[str, str, str, int]   # (library, placement, kernel, launch)

# What a launch still to run is estimated from, most alike first: launches of the same row,
# placement and kernel; of the placement and kernel; of the kernel; any launch.
LIKENESS = (lambda run: run[:3], lambda run: run[1:3], lambda run: run[2:3], lambda run: ())

# Seconds = fixed + per unit x units, before a stage has been timed on this machine. Measured on a
# 2-core host (idle / shared with other work): collect 0.6 / 2.2 s for 8 kB of raw files and 2.6 s
# (shared) for the quick campaign's 17 MB; the report 10.5 s for one curve and 17 s for four (idle).
# A launch (the job: its library's start and the raw file included) 2.5 s for the quick campaign's 23 sizes.
STAGE_MODELS = {"collect": (1.0, 5e-8), "report": (8.5, 2.2), "launch": (1.5, 0.04)}
STAGE_UNITS = {"collect": "raw bytes", "report": "curves", "launch": "sizes"}
STAGE_LOG = "stage-durations.jsonl"
# An MPI library's kernels built (its wheel installed from the pip cache first): about a minute on 2 cores.
BUILD_S = 60.0
# The timings an estimate is scaled by: the latest ones, so that a machine's new speed shows soon.
RECENT_STAGES = 20
# The log keeps its latest lines only: past this many, it is cut to half.
KEPT_STAGES = 400


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    left_s: float          # estimated seconds the launches not done yet take, one after another
    after_s: float = 0.0   # estimated seconds collect and the report take once they have run

    @property
    def left(self) -> int:
        return self.total - self.done


def raw_file_beside(this: Path, run: Run) -> Path:
    """Another launch's raw file, found from this launch's in the layout of workflow/rules/run.smk
    (raw/<library>/<placement>/<kernel>/launch<n>.jsonl), wherever the results directory is."""
    library, placement, kernel, launch = run
    return Path(this).parents[3] / library / placement / kernel / f"launch{launch}.jsonl"


def launch_duration_s(path: Path) -> float | None:
    """How long a launch took, from its raw file's launch record, the time it waited for the machine
    included (a busy host's wait is part of what the campaign takes): 0 for one never started (its
    library could not run it), None when the file cannot be read."""
    record = read_launch_record(path)
    if record is None:
        return None
    duration, waited = record.get("duration_s", 0.0), record.get("waited_for_machine_s", 0.0)
    if not isinstance(duration, (int, float)):
        return None
    return float(duration) + (float(waited) if isinstance(waited, (int, float)) else 0.0)


def plan_summary(to_run: list[Run], launches: int, to_build: list[str], sizes: dict[str, int],
                 curves: int) -> list[str]:
    """What a run of the campaign would do, in two lines: the launches it would (re)run of its `launches`, the
    libraries it would install or build, and about how long that takes by this machine's recorded stage
    durations (the models above before any). `sizes`: kernel -> sizes a launch of it measures; `curves`: the
    curves the report draws."""
    launches_s = sum(stage_estimate_s("launch", sizes.get(run[2], 1)) for run in to_run)
    after_s = stage_estimate_s("collect", 0) + stage_estimate_s("report", curves)
    recorded = len(stage_records("launch"))
    basis = (f"from {recorded} launches timed on this machine" if recorded
             else "from a 2-core host's timings: none recorded here yet")
    builds = (f"{len(to_build)} libraries to install or build ({', '.join(to_build)})" if to_build
              else "no library to build")
    return [f"{len(to_run)} of {launches} launches to run; {builds}",
            f"about {format_duration(launches_s + after_s + BUILD_S * len(to_build))}: launches "
            f"{format_duration(launches_s)} ({basis}), collect and report {format_duration(after_s)}"
            + (f", about {format_duration(BUILD_S)} a library to build" if to_build else "")
            + "; a busy host takes longer (launches run to their time caps and wait for the machine)"]


def campaign_progress(runs: Iterable[Run], finished: Path, not_yet: Iterable[Run] = ()) -> Progress:
    """Where the campaign stands once the launch whose raw file is `finished` has written it. `not_yet`:
    launches that cannot have ended before it (those after it in the campaign's rounds, which wait for
    it); a raw file of one of them is left from an earlier run of the workflow and is about to be redone
    (a rebuilt kernel, changed settings), so it does not count as done."""
    runs = list(runs)
    not_yet = set(not_yet)
    mine = (os.stat(finished).st_mtime_ns, str(finished))
    measured: dict[Run, float | None] = {}
    raw_bytes = []
    for run in runs:
        if run in not_yet:
            continue
        path = raw_file_beside(finished, run)
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            continue
        if (stat.st_mtime_ns, str(path)) <= mine:
            measured[run] = launch_duration_s(path)
            raw_bytes.append(stat.st_size)
    # Each launch not run yet takes the mean duration of the measured launches most like it.
    means = [_group_means(measured, key) for key in LIKENESS]
    left_s = sum(next((group[key(run)] for key, group in zip(LIKENESS, means) if key(run) in group), 0.0)
                 for run in runs if run not in measured)
    # The launches left write raw files as large as those written so far, on average.
    after_s = (stage_estimate_s("collect", fmean(raw_bytes) * len(runs) if raw_bytes else 0)
               + stage_estimate_s("report", len({run[:3] for run in runs})))
    return Progress(done=len(measured), total=len(runs), left_s=left_s, after_s=after_s)


def _group_means(durations: dict[Run, float | None], key) -> dict[tuple, float]:
    groups: dict[tuple, list[float]] = {}
    for run, duration in durations.items():
        if duration is not None:
            groups.setdefault(key(run), []).append(duration)
    return {group: fmean(values) for group, values in groups.items()}


def progress_line(progress: Progress, run: Run, record: dict) -> str:
    """'[12/40 launches] mpich-5.0.2 1N2P pingpong.send launch 2: 14 s; 28 left, about 6 min', the
    time left being the launches left, collect and the report; at the last launch '0 left, about
    20 s' (collect and the report), or 'none left' when nothing is estimated to follow."""
    library, placement, kernel, launch = run
    outcome = "" if record.get("status") == "ok" else f" {record.get('status')}"
    took = format_duration(float(record.get("duration_s", 0.0)))
    rest_s = progress.left_s + progress.after_s
    left = "none left" if progress.left == 0 and rest_s <= 0 else (
        f"{progress.left} left, about {format_duration(rest_s)}")
    return (f"[{progress.done}/{progress.total} launches] {library} {placement} {kernel} "
            f"launch {launch}{outcome}: {took}; {left}")


# What progress_line prints: how `commlens run` picks the campaign's progress out of Snakemake's output.
PROGRESS_LINE = re.compile(r"^\[\d+/\d+ launches\] ")
# A launch's lines that `commlens run` shows as they come: one waiting for the machine (locks.machine's
# message), and one that could not be recorded (workflow/scripts/run_launch.py: its lock refused, a full
# disk), which Snakemake's own error message that follows does not name.
WAITING_LINE = re.compile(r"^\S.*: waiting for the machine: ")
NOT_RECORDED_LINE = re.compile(r"^launch \S+ not recorded: ")


# ----------------------------------------------------------------------------- collect and the report

def _stage_log(path=None) -> Path:
    return Path(path) if path else cache_dir() / STAGE_LOG


def record_stage(stage: str, units: float, seconds: float, path=None) -> None:
    """Keeps how long `stage` (collect, report, launch) took for `units` (STAGE_UNITS) on this machine; a
    cache that cannot be written only costs the estimates their calibration."""
    if stage not in STAGE_MODELS:
        raise ValueError(f"stage {stage!r}: allowed values: {', '.join(STAGE_MODELS)}")
    log = _stage_log(path)
    line = json.dumps({"stage": stage, "units": float(units), "seconds": round(float(seconds), 3),
                       "at": round(time.time())}) + "\n"
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as out:      # one short append: whole, whoever else writes at once
            out.write(line)
        if log.stat().st_size > KEPT_STAGES * len(line):
            lines = log.read_text().splitlines(keepends=True)
            if len(lines) > KEPT_STAGES:
                cut = log.with_name(f"{log.name}.{os.getpid()}")
                cut.write_text("".join(lines[-KEPT_STAGES // 2:]))
                os.replace(cut, log)
    except OSError:
        pass


def stage_records(stage: str, path=None) -> list[dict]:
    """The kept timings of `stage`, oldest first (unreadable lines skipped)."""
    try:
        lines = _stage_log(path).read_text().splitlines()
    except OSError:
        return []
    records = []
    for line in lines:
        try:
            record = json.loads(line)
            if record["stage"] == stage and float(record["seconds"]) > 0 and float(record["units"]) >= 0:
                records.append(record)
        except (ValueError, KeyError, TypeError):
            continue
    return records


def stage_estimate_s(stage: str, units: float, path=None) -> float:
    """How long `stage` will take for `units`: the model's time scaled by the median ratio of the
    recent timings here to what the model said for them (see the module's docstring)."""
    fixed, per_unit = STAGE_MODELS[stage]
    model = lambda n: fixed + per_unit * float(n)  # noqa: E731
    ratios = [float(r["seconds"]) / model(r["units"]) for r in stage_records(stage, path)[-RECENT_STAGES:]]
    return model(units) * (median(ratios) if ratios else 1.0)

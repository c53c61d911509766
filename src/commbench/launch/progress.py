"""A campaign's progress, as a user watching it wants it: after each launch, one line with how many
launches are done, how many are left and about how long those will take, estimated from the
launches already measured.

The raw files are the record: a launch is done once its raw file is written, whether in this run of
the workflow or an earlier one, and its launch record says how long it took. Each launch job works
its line out from them alone, so jobs that finish together (`--cores 2`, a cluster) need no shared
state: a launch counts the raw files written no later than its own, which numbers launches that end
at once 1, 2, 3 rather than twice the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from commbench.units import format_duration

from commbench.io.raw import read_launch_record

Run = tuple[str, str, str, int]   # (library, placement, kernel, launch)

# What a launch still to run is estimated from, most alike first: launches of the same row,
# placement and kernel; of the placement and kernel; of the kernel; any launch.
LIKENESS = (lambda run: run[:3], lambda run: run[1:3], lambda run: run[2:3], lambda run: ())


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    left_s: float   # estimated seconds the launches not done yet take, one after another

    @property
    def left(self) -> int:
        return self.total - self.done


def raw_file_beside(this: Path, run: Run) -> Path:
    """Another launch's raw file, found from this launch's in the layout of workflow/rules/run.smk
    (raw/<library>/<placement>/<kernel>/launch<n>.jsonl), wherever the results directory is."""
    library, placement, kernel, launch = run
    return Path(this).parents[3] / library / placement / kernel / f"launch{launch}.jsonl"


def launch_duration_s(path: Path) -> float | None:
    """How long a launch took, from its raw file's launch record: 0 for one never started (its
    library could not run it), None when the file cannot be read."""
    record = read_launch_record(path)
    if record is None:
        return None
    duration = record.get("duration_s", 0.0)
    return float(duration) if isinstance(duration, (int, float)) else None


def campaign_progress(runs: Iterable[Run], finished: Path) -> Progress:
    """Where the campaign stands once the launch whose raw file is `finished` has written it."""
    runs = list(runs)
    mine = (os.stat(finished).st_mtime_ns, str(finished))
    measured: dict[Run, float | None] = {}
    for run in runs:
        path = raw_file_beside(finished, run)
        try:
            written = (os.stat(path).st_mtime_ns, str(path))
        except FileNotFoundError:
            continue
        if written <= mine:
            measured[run] = launch_duration_s(path)
    # Each launch not run yet takes the mean duration of the measured launches most like it.
    means = [_group_means(measured, key) for key in LIKENESS]
    left_s = sum(next((group[key(run)] for key, group in zip(LIKENESS, means) if key(run) in group), 0.0)
                 for run in runs if run not in measured)
    return Progress(done=len(measured), total=len(runs), left_s=left_s)


def _group_means(durations: dict[Run, float | None], key) -> dict[tuple, float]:
    groups: dict[tuple, list[float]] = {}
    for run, duration in durations.items():
        if duration is not None:
            groups.setdefault(key(run), []).append(duration)
    return {group: fmean(values) for group, values in groups.items()}


def progress_line(progress: Progress, run: Run, record: dict) -> str:
    """'[12/40 launches] mpich-5.0.2 1N2P pingpong.send launch 2: 14 s; about 6 min left'."""
    library, placement, kernel, launch = run
    outcome = "" if record.get("status") == "ok" else f" {record.get('status')}"
    took = format_duration(float(record.get("duration_s", 0.0)))
    left = "none left" if progress.left == 0 else (
        f"{progress.left} left, about {format_duration(progress.left_s)}")
    return (f"[{progress.done}/{progress.total} launches] {library} {placement} {kernel} "
            f"launch {launch}{outcome}: {took}; {left}")

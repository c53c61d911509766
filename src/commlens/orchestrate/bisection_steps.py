"""A bisection: which release of one MPI family between a baseline and a candidate first brought a
change (`commlens bisect`; a campaign's `bisect:` entries, commlens.orchestrate.campaign_bisections).

The baseline and candidate name installation specs (envs/mpi/<name>.yaml, found as a campaign finds
them: the working directory's envs/mpi/, then the repository's). The releases between them are the specs
of the same family present there, ordered by version (commlens.launch.libraries.family_releases). Each
step is a small campaign run through the workflow (as `commlens run` runs one, in its own results
folder; the builds are shared): one release against the baseline on the watched cells, compared with
commlens's compare, paired by round. The first step measures the candidate, to confirm the change;
each later step measures the release nearest the middle of the range still open beside the baseline
and the candidate, and holds it to the candidate's change measured in that same step, so that load
which slows a whole step does not pass for the change or hide it (commlens.analysis.bisection says what
counts as having the change). An undecided step is measured again with twice the launches, its first
launches kept, up to the request's max_launches. A release that cannot be built or launched, or whose
step cannot tell, is reported and stepped over. Rerunning the same bisection resumes it: a finished
step's dataset is reused. What it found is a BisectionRecord, kept in the bisection's folder.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

import pandas as pd
import xarray as xr
import yaml

from commlens.analysis.bisection import (BISECTION_FILE, CHANGED, DIRECTIONS, FAILED, UNDECIDED, BisectionRecord,
                                          BisectionStep, Conclusion, RecordedConclusion, StepCell, WatchedCell,
                                          cell_outcome, conclude, next_release, release_outcome, write_bisection)
from commlens.analysis.compare import within
from commlens.analysis.configuration import default_difference, difference_lines, row_defaults, settings_where_changed
from commlens.campaign import load_campaign
from commlens.campaign.placements import shape_from_placement_name
from commlens.data.opening import open_campaign
from commlens.launch.families import FAMILIES
from commlens.launch.libraries import family_releases
from commlens.orchestrate.workflow_run import ShowRun, exit_status, run_workflow
from commlens.units import format_duration

# Each step measures few cells, so it can afford a tight precision; a launch still ends in minutes.
STEP_PRECISION = {"rse": 0.02, "min_samples": 10, "max_samples": 2000, "max_point_time": 2}
STEP_TIMEOUT_S = 120


@dataclass(frozen=True)
class BisectionRequest:
    """A bisection to run: from `baseline` to `candidate` (installation spec names), watching `cells`,
    `launches` a side per step, an undecided step measured again with twice as many up to `max_launches`;
    compare's `min_effect` and `confidence`; `directory` the workflow's working directory (the steps'
    results/, the shared build/, bisect/), `snakemake_args` passed on to Snakemake for every step."""

    baseline: str
    candidate: str
    cells: tuple[WatchedCell, ...]
    launches: int
    max_launches: int
    min_effect: float
    confidence: float
    directory: Path = Path(".")
    snakemake_args: tuple[str, ...] = ()


def bisection_folder(directory: Path, baseline: str, candidate: str) -> Path:
    """Where a bisection keeps its steps' campaign files and its record (bisect.json), under the working
    directory."""
    return Path(directory) / "bisect" / f"{baseline}-to-{candidate}"


def run_bisection(request: BisectionRequest, progress: TextIO | None = None,
                  show_run: ShowRun = exit_status) -> BisectionRecord:
    """Runs the bisection, its progress (`[bisect] ...` lines, and the steps' workflows) to `progress`
    (standard output by default), each step's finished run to `show_run`; what it found, also written to
    the bisection's folder."""
    progress = progress or sys.stdout
    directory = request.directory.resolve()
    cells = list(request.cells)
    releases, left_out = family_releases(request.baseline, request.candidate, directory)
    folder = bisection_folder(directory, request.baseline, request.candidate)
    folder.mkdir(parents=True, exist_ok=True)
    say = lambda line: print(f"[bisect] {line}", file=progress, flush=True)  # noqa: E731
    family = releases[0]["family"]
    say(f"{FAMILIES[family].display_name} {releases[0]['version']} -> {releases[-1]['version']}: "
        f"{len(releases) - 2} release(s) between ({', '.join(r['name'] for r in releases[1:-1]) or 'none'})"
        + (f"; left out: {'; '.join(left_out)}" if left_out else ""))
    say(f"watching {', '.join(c.describe() for c in cells)}; steps in {folder}")
    outcomes: list[str | None] = [None] * len(releases)
    steps: list[BisectionStep] = []
    reference: dict[tuple, StepCell] = {}
    while (index := next_release(outcomes)) is not None:
        release = releases[index]
        say(f"step {len(steps) + 1}: {release['name']} against {request.baseline}"
            + (f", beside {request.candidate}" if index < len(releases) - 1 else ""))
        started = time.monotonic()
        rows = [releases[0], release] + ([releases[-1]] if release is not releases[-1] else [])
        launches = request.launches
        while True:
            with contextlib.redirect_stdout(progress):
                step = run_step(request, directory, folder, rows, cells, launches, show_run)
            step = replace(step, step=len(steps) + 1, wall_s=round(time.monotonic() - started, 1))
            if index == len(releases) - 1:
                step, reference = confirm(step)
                if reference:
                    cells = [c for c in cells if c.key in reference]
            else:
                step = judge(step, reference)
            more = more_launches(launches, request.max_launches)
            if step.outcome != UNDECIDED or more is None:
                break
            # The launches so far are kept (the step's campaign only grows): the next look adds rounds.
            say(f"step {step.step}: {release['name']}: undecided at {launches} launches a side; "
                f"measuring again with {more}")
            launches = more
        outcomes[index] = step.outcome
        steps.append(step)
        say(f"step {step.step}: {release['name']}: {step.outcome}"
            + (f" ({step.reason})" if step.reason else "") + f", {format_duration(step.wall_s)}")
    conclusion = conclude(outcomes)
    names = [r["name"] for r in releases]
    named = RecordedConclusion.naming(conclusion, names)
    settings = release_settings(steps, named.last_without, named.first, cells)
    for line in settings:
        say(line)
    record = BisectionRecord(
        baseline=request.baseline, candidate=request.candidate, family=family, releases=tuple(names),
        left_out=tuple(left_out), cells=tuple(c.describe() for c in cells), min_effect=request.min_effect,
        confidence=request.confidence, launches=request.launches, max_launches=request.max_launches,
        steps=tuple(steps), conclusion=named, summary=summarise(conclusion, names, steps[0]),
        settings=settings)
    write_bisection(folder / BISECTION_FILE, record)
    return record


def release_settings(steps: list[BisectionStep], last_without: str, first: str | None,
                     cells: list[WatchedCell]) -> tuple[str, ...]:
    """What differs in how the two releases a bisection ends between are set by default (each build's own
    description, as its step's dataset holds it), and whether a size-valued default moved across a watched
    size: sentences for the record; none where it ends on no release."""
    if first is None:
        return ()
    found: dict[str, tuple[dict, dict]] = {}
    for step in reversed(steps):
        if not step.dataset or len(found) == 2:
            continue
        ds = open_campaign(step.dataset)
        for name in (last_without, first):
            if name not in found and name in ds["library"].values:
                defaults = row_defaults(ds, name)
                if defaults[0]:
                    found[name] = defaults
    missing = [name for name in (last_without, first) if name not in found]
    if missing:
        return (f"Control variables: {', '.join(missing)} recorded none, so what its defaults changed is not known",)
    (old, _), (new, descriptions) = found[last_without], found[first]
    table = default_difference(old, new, {**found[last_without][1], **descriptions})
    if table.empty:
        return (f"Control variables: {last_without} and {first} default to the same value of every one",)
    watched = pd.DataFrame([{"kernel": c.kernel, "placement": c.placement, "size_from": c.size, "size_to": c.size}
                            for c in cells])
    return (f"Control variables whose defaults differ between {last_without} and {first} ({len(table)}): "
            + "; ".join(difference_lines(table, 8)), *settings_where_changed(table, watched))


def more_launches(launches: int, budget: int) -> int | None:
    """The launches a side an undecided step is measured again with: twice as many, at most `budget`; None
    once the budget is spent."""
    return min(2 * launches, budget) if launches < budget else None


def step_campaign(rows: list[dict], cells: list[WatchedCell], launches: int) -> dict:
    """The campaign of one step: the watched cells only, for `rows` (the baseline, the release and,
    after the first step, the candidate), `launches` of each in rounds: the rounds pair the rows."""
    placements = []
    for name in dict.fromkeys(c.placement for c in cells):
        shape = shape_from_placement_name(name)
        if shape is None:
            raise ValueError(f"placement {name!r}: bisect reads a placement's shape from its name "
                             "(<nodes>N<ppn>P, e.g. 1N2P)")
        placements.append({"name": name, "nodes": shape[0], "ppn": shape[1]})
    kernels: dict[str, set[int]] = {}
    for cell in cells:
        kernels.setdefault(cell.kernel, set()).add(cell.size)
    baseline, release = rows[0], rows[1]
    return {"campaign": f"bisect-{release['name']}-vs-{baseline['name']}",
            "description": f"bisect step: {release['name']} against {baseline['name']}",
            "libraries": {row["name"]: {"mpi": row["name"]} for row in rows},
            "placements": placements,
            "kernels": {k: {"sizes": {"list": sorted(sizes)}} for k, sizes in kernels.items()},
            "launches": launches, "precision": dict(STEP_PRECISION), "timeout": STEP_TIMEOUT_S}


def run_step(request: BisectionRequest, directory: Path, folder: Path, rows: list[dict], cells: list[WatchedCell],
             launches: int, show_run: ShowRun = exit_status) -> BisectionStep:
    """Runs one step's campaign through the workflow and reads its comparisons: the release (rows[1]),
    its outcome (failed, with the reason, where it gave no comparison; else None, to be judged) and one
    entry per cell; where the candidate is measured too (rows[2]), each cell's `reference_ratio` is its
    ratio to the baseline in this step, so that the release is held to a change measured beside it."""
    baseline, release = rows[0], rows[1]
    campaign = step_campaign(rows, cells, launches)
    path = folder / f"{campaign['campaign']}.yaml"
    path.write_text(yaml.safe_dump(campaign, sort_keys=False))
    step = BisectionStep(step=0, release=release["name"], version=release["version"], campaign=str(path),
                         launches=launches, cells=())
    target = Path("results") / campaign["campaign"] / f"{campaign['campaign']}.nc"   # the dataset, not the report
    # The target first: a --config among the user's arguments takes every word after it.
    run = run_workflow(str(path), load_campaign(path),
                       ["--directory", str(directory), str(target), *request.snakemake_args])
    dataset = directory / target
    if show_run(run) == 130:
        raise KeyboardInterrupt
    if not dataset.exists():
        # A library that cannot be built or launched is recorded in the dataset; no dataset is the
        # workflow's own failure, which no release is to blame for.
        raise ValueError(f"step {release['name']}: the workflow made no dataset (its output: "
                         f"{dataset.parent / 'logs' / 'snakemake.log'})")
    ds = open_campaign(dataset)
    step = replace(step, dataset=str(dataset))
    for row in rows:
        status = str(ds["library_status"].sel(library=row["name"]).values)
        if status != "ok":
            reason = f"{status}: {ds['library_reason'].sel(library=row['name']).values}"
            if row is not release:
                raise ValueError(f"{row['name']} cannot be used ({reason}); a bisection measures every release "
                                 "against the baseline, beside the candidate")
            return replace(step, outcome=FAILED, reason=reason)
    result = _compared(request, ds, baseline, release)
    reference = _compared(request, ds, baseline, rows[2]) if len(rows) > 2 else None
    measured = []
    for cell in cells:
        entry = StepCell(cell.kernel, cell.placement, cell.size, **_cell(result, release, cell))
        if reference is not None:
            candidate = _cell(reference, rows[2], cell)
            entry = replace(entry, reference_verdict=candidate["verdict"], reference_ratio=candidate["ratio"])
        measured.append(entry)
    step = replace(step, method=result.attrs.get("method", ""), cells=tuple(measured))
    if all(c.verdict == "missing" for c in step.cells):
        statuses = sorted({str(s) for s in ds["status"].sel(library=release["name"]).values.ravel()} - {"ok"})
        return replace(step, outcome=FAILED, reason=f"no data from its launches ({', '.join(statuses)})")
    return step


def _compared(request: BisectionRequest, ds: xr.Dataset, baseline: dict, row: dict) -> xr.Dataset:
    """The release's row against the baseline's in the step's dataset, paired by round: the two ran
    launch by launch in the same rounds, so load that slows a round slows both."""
    rows = ds.sel(library=[baseline["name"], row["name"]])
    return within(rows, baseline["name"], row["name"], dim="library", min_effect=request.min_effect,
                  confidence=request.confidence).expand_dims(library=[row["name"]])


def _cell(result: xr.Dataset, row: dict, cell: WatchedCell) -> dict:
    values = result.sel(library=row["name"], kernel=cell.kernel, placement=cell.placement, size=cell.size)
    return {"verdict": str(values["verdict"].values),
            **{name: _float(values[name]) for name in ("ratio", "ratio_low", "ratio_high", "q_value")}}


def confirm(step: BisectionStep) -> tuple[BisectionStep, dict[tuple, StepCell]]:
    """The candidate's step: the cells compare called changed become the reference (their ratio is the
    change a release is held to); the step's outcome is changed where any was. The step judged, and the
    reference by cell."""
    reference = {c.key: c for c in step.cells if c.verdict in DIRECTIONS}
    cells = tuple(replace(c, outcome=CHANGED if c.key in reference else UNDECIDED) for c in step.cells)
    step = replace(step, cells=cells)
    if step.outcome != FAILED:
        step = replace(step, outcome=CHANGED if reference else UNDECIDED,
                       reason=None if reference else "compare called no watched cell changed against the baseline")
    return step, reference


def judge(step: BisectionStep, reference: dict[tuple, StepCell]) -> BisectionStep:
    """A later step's outcome: each cell held to the candidate's change measured in the same step
    (load that slows the whole step moves both); a cell where the candidate no longer shows its change
    against the baseline cannot be judged."""
    if step.outcome == FAILED:
        return step
    cells, outcomes = [], []
    for cell in step.cells:
        if cell.reference_verdict != reference[cell.key].verdict or cell.reference_ratio is None:
            outcome = UNDECIDED
        elif cell.ratio_low is None or cell.ratio_high is None:
            # A bound compare left NaN (read as None): no finite interval, which cell_outcome calls undecided.
            outcome = UNDECIDED
        else:
            outcome = cell_outcome(cell.verdict, cell.ratio_low, cell.ratio_high, cell.reference_ratio)
        cells.append(replace(cell, outcome=outcome))
        outcomes.append(outcome)
    return replace(step, cells=tuple(cells), outcome=release_outcome(outcomes))


def summarise(conclusion: Conclusion, releases: list[str], candidate_step: BisectionStep) -> str:
    """The answer in a sentence: `releases` names the releases searched, in order."""
    if candidate_step.outcome == FAILED:
        return f"{releases[-1]} could not be measured ({candidate_step.reason}): nothing to bisect"
    if not conclusion.confirmed:
        return f"{releases[-1]} shows no change against {releases[0]} in the watched cells: nothing to bisect"
    without = releases[conclusion.last_without]
    if conclusion.first is not None:
        return f"the change first appears in {releases[conclusion.first]} (not in {without})"
    names = ", ".join(releases[i] for i in conclusion.suspects)
    return f"the change appears after {without}, in one of {names} (the others could not be built or decided)"


def _float(value: xr.DataArray) -> float | None:
    number = float(value.values)
    return number if number == number else None

"""`commlens bisect BASELINE CANDIDATE`: which release of one MPI family first brought a change.

BASELINE and CANDIDATE name installation specs (envs/mpi/<name>.yaml, found as a campaign finds them:
the working directory's envs/mpi/, then the repository's). The releases between them are the specs of
the same family present there, ordered by version. Each step is a small campaign run through the
workflow (as `commlens run` runs one, in its own results folder; the builds are shared): one release
against the baseline on the watched cells, compared with commlens's compare. The first step measures
the candidate, to confirm the change; each later step measures the release nearest the middle of the
range still open beside the baseline and the candidate, and holds it to the candidate's change measured
in that same step, so that load which slows a whole step does not pass for the change or hide it
(commlens.analysis.bisection says what counts as having the change). A release that cannot be built or launched, or whose step cannot tell, is reported and
stepped over. Rerunning the same bisect resumes it: a finished step's dataset is reused.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import sys
import time
from argparse import Namespace
from dataclasses import asdict
from pathlib import Path

import yaml

from commlens.analysis.bisection import (CHANGED, DIRECTIONS, FAILED, UNDECIDED, cell_outcome, conclude,
                                          next_release, release_outcome)
from commlens.campaign.placements import shape_from_placement_name
from commlens.launch.families import FAMILIES, version_tuple
from commlens.launch.libraries import LibrarySpecError, load_spec
from commlens.locations import ROOT
from commlens.units import format_duration, format_number, format_size, parse_size

# Each step measures few cells, so it can afford a tight precision; a launch still ends in minutes.
STEP_PRECISION = {"rse": 0.02, "min_samples": 10, "max_samples": 2000, "max_point_time": 2}
STEP_TIMEOUT_S = 120
_PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*(\d+(?:\.\d+)*)\s*$")
_MODULE = re.compile(r"^([A-Za-z0-9_.-]+)/(\d+(?:\.\d+)*)$")


def bisection_folder(directory: Path, baseline: str, candidate: str) -> Path:
    """Where a bisection keeps its steps and its record (bisect.json), under the working directory."""
    return Path(directory) / "bisect" / f"{baseline}-to-{candidate}"


def bisect(args) -> int:
    directory = Path(args.directory).resolve()
    cells = watched_cells(args)
    releases, left_out = family_releases(args.baseline, args.candidate, directory)
    folder = bisection_folder(directory, args.baseline, args.candidate)
    folder.mkdir(parents=True, exist_ok=True)
    # With --json the standard output is the JSON alone: the steps' progress goes to the error stream.
    progress = sys.stderr if args.json else sys.stdout
    say = lambda line: print(f"[bisect] {line}", file=progress, flush=True)  # noqa: E731
    family = releases[0]["family"]
    say(f"{FAMILIES[family].display_name} {releases[0]['version']} -> {releases[-1]['version']}: "
        f"{len(releases) - 2} release(s) between ({', '.join(r['name'] for r in releases[1:-1]) or 'none'})"
        + (f"; left out: {'; '.join(left_out)}" if left_out else ""))
    say(f"watching {', '.join(describe_cell(c) for c in cells)}; steps in {folder}")
    outcomes: list[str | None] = [None] * len(releases)
    steps: list[dict] = []
    reference: dict[tuple, dict] = {}
    while (index := next_release(outcomes)) is not None:
        release = releases[index]
        say(f"step {len(steps) + 1}: {release['name']} against {args.baseline}"
            + (f", beside {args.candidate}" if index < len(releases) - 1 else ""))
        started = time.monotonic()
        rows = [releases[0], release] + ([releases[-1]] if release is not releases[-1] else [])
        launches = args.launches
        while True:
            with contextlib.redirect_stdout(progress):
                step = run_step(args, directory, folder, rows, cells, launches)
            step.update(step=len(steps) + 1, wall_s=round(time.monotonic() - started, 1))
            if index == len(releases) - 1:
                reference = confirm(step)
                if reference:
                    cells = [c for c in cells if _key(c) in reference]
            else:
                judge(step, reference)
            more = more_launches(launches, args.max_launches)
            if step["outcome"] != UNDECIDED or more is None:
                break
            # The launches so far are kept (the step's campaign only grows): the next look adds rounds.
            say(f"step {step['step']}: {release['name']}: undecided at {launches} launches a side; "
                f"measuring again with {more}")
            launches = more
        outcomes[index] = step["outcome"]
        steps.append(step)
        say(f"step {step['step']}: {release['name']}: {step['outcome']}"
            + (f" ({step['reason']})" if step.get("reason") else "") + f", {format_duration(step['wall_s'])}")
    conclusion = conclude(outcomes)
    record = {"baseline": args.baseline, "candidate": args.candidate, "family": family,
              "releases": [r["name"] for r in releases], "left_out": left_out,
              "cells": [describe_cell(c) for c in cells], "min_effect": args.min_effect,
              "confidence": args.confidence, "launches": args.launches,
              "max_launches": args.max_launches, "steps": steps,
              "conclusion": {**asdict(conclusion), "first": _name(releases, conclusion.first),
                             "suspects": [releases[i]["name"] for i in conclusion.suspects],
                             "last_without": releases[conclusion.last_without]["name"]},
              "summary": summarise(conclusion, releases, steps[0])}
    (folder / "bisect.json").write_text(json.dumps(record, indent=1) + "\n")
    if args.json:
        print(json.dumps(record, indent=1))
    else:
        print_table(record)
    return 0 if conclusion.confirmed else 1


# ----------------------------------------------------------------------------- what to watch, what to run

def watched_cells(args) -> list[dict]:
    """(kernel, placement, size) cells from --kernel/--placement/--sizes, or from --cells: a table that
    `commlens compare --output` wrote (each changed range watched at its first and last size)."""
    if args.cells:
        if args.kernel or args.sizes:
            raise ValueError("give the cells to watch either as --cells TABLE or as --kernel/--placement/--sizes")
        import pandas as pd

        path = Path(args.cells)
        table = pd.read_json(path, orient="records") if path.suffix == ".json" else pd.read_csv(path)
        missing = [c for c in ("kernel", "placement", "size_from", "size_to") if c not in table.columns]
        if missing:
            raise ValueError(f"{path}: no column {', '.join(missing)}; --cells takes the table commlens compare "
                             "--output writes")
        found = {(row["kernel"], row["placement"], int(size)) for _, row in table.iterrows()
                 for size in (row["size_from"], row["size_to"])}
        if not found:
            raise ValueError(f"{path}: no changed range to watch")
        return [{"kernel": k, "placement": p, "size": s} for k, p, s in sorted(found)]
    if not (args.kernel and args.placement and args.sizes):
        raise ValueError("give the cells to watch: --kernel, --placement and --sizes (or --cells TABLE)")
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    return [{"kernel": args.kernel, "placement": p, "size": s} for p in args.placement for s in sizes]


def describe_cell(cell: dict) -> str:
    return f"{cell['kernel']} {cell['placement']} {format_size(cell['size'])}"


def _key(cell: dict) -> tuple:
    return cell["kernel"], cell["placement"], cell["size"]


def spec_release(path: Path) -> tuple[str | None, str | None]:
    """(family, version) an installation spec says without installing it: `family:` or the pip
    requirement's or module's name, and the version pinned (name==X), the module's (name/X) or the
    file's name (<family>-X); None for what it does not say."""
    spec = load_spec(path)
    name = version = None
    if "pip" in spec and (pin := _PIN.match(spec["pip"])):
        name, version = pin.groups()
    elif "module" in spec and (module := _MODULE.match(spec["module"])):
        name, version = module.groups()
    family = spec.get("family") or (name.lower() if name and name.lower() in FAMILIES else None)
    if version is None and family and (stem := re.fullmatch(rf"{re.escape(family)}-(\d+(?:\.\d+)*)", path.stem)):
        version = stem.group(1)
    return family, version


def family_releases(baseline: str, candidate: str, directory: Path) -> tuple[list[dict], list[str]]:
    """The baseline, the releases of its family between it and the candidate, and the candidate, in
    that order (by version); and a line per spec of the family left out, with why."""
    folders = [directory / "envs" / "mpi", ROOT / "envs" / "mpi"]
    specs: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            specs.setdefault(path.stem, path)
    ends = []
    for role, name in (("baseline", baseline), ("candidate", candidate)):
        if name not in specs:
            raise LibrarySpecError(f"{role} {name}: no spec envs/mpi/{name}.yaml in "
                                   f"{' or '.join(str(f) for f in folders)}")
        family, version = spec_release(specs[name])
        if family is None or version is None:
            raise LibrarySpecError(f"{specs[name]}: its family and version cannot be read from the spec (a pip "
                                   "pin name==X, a module name/X, or family: and a file named <family>-X)")
        ends.append({"name": name, "family": family, "version": version, "spec": str(specs[name])})
    if ends[0]["family"] != ends[1]["family"]:
        raise ValueError(f"{baseline} is {ends[0]['family']} and {candidate} is {ends[1]['family']}: a bisection "
                         "runs over the releases of one family")
    low, high = sorted(version_tuple(e["version"]) for e in ends)
    if low == high:
        raise ValueError(f"{baseline} and {candidate} are the same release ({ends[0]['version']})")
    between, left_out, seen = [], [], {version_tuple(e["version"]) for e in ends}
    for name, path in specs.items():
        if name in (baseline, candidate):
            continue
        try:
            family, version = spec_release(path)
        except LibrarySpecError as error:
            left_out.append(str(error))
            continue
        if family != ends[0]["family"]:
            continue
        if version is None:
            left_out.append(f"{name}: no version in its spec")
        elif low < version_tuple(version) < high:
            if version_tuple(version) in seen:
                left_out.append(f"{name}: another spec is release {version} too")
                continue
            seen.add(version_tuple(version))
            between.append({"name": name, "family": family, "version": version, "spec": str(path)})
    newer_first = version_tuple(ends[0]["version"]) > version_tuple(ends[1]["version"])
    between.sort(key=lambda r: version_tuple(r["version"]), reverse=newer_first)
    return [ends[0], *between, ends[1]], left_out


def more_launches(launches: int, budget: int) -> int | None:
    """The launches a side an undecided step is measured again with: twice as many, at most `budget`; None
    once the budget is spent."""
    return min(2 * launches, budget) if launches < budget else None


def step_campaign(args, rows: list[dict], cells: list[dict], launches: int) -> dict:
    """The campaign of one step: the watched cells only, for `rows` (the baseline, the release and,
    after the first step, the candidate), `launches` of each in rounds: the rounds pair the rows."""
    placements = []
    for name in dict.fromkeys(c["placement"] for c in cells):
        shape = shape_from_placement_name(name)
        if shape is None:
            raise ValueError(f"placement {name!r}: bisect reads a placement's shape from its name "
                             "(<nodes>N<ppn>P, e.g. 1N2P)")
        placements.append({"name": name, "nodes": shape[0], "ppn": shape[1]})
    kernels = {}
    for cell in cells:
        kernels.setdefault(cell["kernel"], set()).add(cell["size"])
    baseline, release = rows[0], rows[1]
    return {"campaign": f"bisect-{release['name']}-vs-{baseline['name']}",
            "description": f"bisect step: {release['name']} against {baseline['name']}",
            "libraries": {row["name"]: {"mpi": row["name"]} for row in rows},
            "placements": placements,
            "kernels": {k: {"sizes": {"list": sorted(sizes)}} for k, sizes in kernels.items()},
            "launches": launches, "precision": dict(STEP_PRECISION), "timeout": STEP_TIMEOUT_S}


def run_step(args, directory: Path, folder: Path, rows: list[dict], cells: list[dict], launches: int) -> dict:
    """Runs one step's campaign through the workflow and reads its comparisons: a dict with the
    release (rows[1]), its outcome (failed, with the reason, where it gave no comparison) and one entry
    per cell; where the candidate is measured too (rows[2]), each cell's `reference_ratio` is its
    ratio to the baseline in this step, so that the release is held to a change measured beside it."""
    from commlens.cli.datasets import open_dataset
    from commlens.cli.run import run_campaign

    baseline, release = rows[0], rows[1]
    campaign = step_campaign(args, rows, cells, launches)
    path = folder / f"{campaign['campaign']}.yaml"
    path.write_text(yaml.safe_dump(campaign, sort_keys=False))
    step = {"release": release["name"], "version": release["version"], "campaign": str(path),
            "launches": launches, "cells": []}
    target = Path("results") / campaign["campaign"] / f"{campaign['campaign']}.nc"   # the dataset, not the report
    # The target first: a --config among the user's arguments takes every word after it.
    code = run_campaign(Namespace(campaign=str(path), snakemake_args=[
        "--directory", str(directory), str(target), *shlex.split(args.snakemake)]))
    dataset = directory / target
    if code == 130:
        raise KeyboardInterrupt
    if not dataset.exists():
        # A library that cannot be built or launched is recorded in the dataset; no dataset is the
        # workflow's own failure, which no release is to blame for.
        raise ValueError(f"step {release['name']}: the workflow made no dataset (its output: "
                         f"{dataset.parent / 'logs' / 'snakemake.log'})")
    _, ds = open_dataset(dataset)
    step["dataset"] = str(dataset)
    for row in rows:
        status = str(ds["library_status"].sel(library=row["name"]).values)
        if status != "ok":
            reason = f"{status}: {ds['library_reason'].sel(library=row['name']).values}"
            if row is not release:
                raise ValueError(f"{row['name']} cannot be used ({reason}); a bisection measures every release "
                                 "against the baseline, beside the candidate")
            return {**step, "outcome": FAILED, "reason": reason}
    result = _compared(args, ds, baseline, release)
    reference = _compared(args, ds, baseline, rows[2]) if len(rows) > 2 else None
    step["method"] = result.attrs.get("method", "")
    for cell in cells:
        entry = {**cell, **_cell(result, release, cell)}
        if reference is not None:
            measured = _cell(reference, rows[2], cell)
            entry.update(reference_verdict=measured["verdict"], reference_ratio=measured["ratio"])
        step["cells"].append(entry)
    if all(c["verdict"] == "missing" for c in step["cells"]):
        launches = sorted({str(s) for s in ds["status"].sel(library=release["name"]).values.ravel()} - {"ok"})
        return {**step, "outcome": FAILED, "reason": f"no data from its launches ({', '.join(launches)})"}
    return step


def _compared(args, ds, baseline: dict, row: dict):
    """The release's row against the baseline's in the step's dataset, paired by round: the two ran
    launch by launch in the same rounds, so load that slows a round slows both."""
    from commlens.analysis.compare import within

    rows = ds.sel(library=[baseline["name"], row["name"]])
    return within(rows, baseline["name"], row["name"], dim="library", min_effect=args.min_effect,
                  confidence=args.confidence).expand_dims(library=[row["name"]])


def _cell(result, row: dict, cell: dict) -> dict:
    values = result.sel(library=row["name"], kernel=cell["kernel"], placement=cell["placement"], size=cell["size"])
    return {"verdict": str(values["verdict"].values),
            **{name: _float(values[name]) for name in ("ratio", "ratio_low", "ratio_high", "q_value")}}


def confirm(step: dict) -> dict[tuple, dict]:
    """The candidate's step: the cells compare called changed become the reference (their ratio is the
    change a release is held to); the step's outcome is changed where any was."""
    reference = {_key(c): c for c in step["cells"] if c["verdict"] in DIRECTIONS}
    for cell in step["cells"]:
        cell["outcome"] = CHANGED if _key(cell) in reference else UNDECIDED
    if step.get("outcome") != FAILED:
        step["outcome"] = CHANGED if reference else UNDECIDED
        if not reference:
            step["reason"] = "compare called no watched cell changed against the baseline"
    return reference


def judge(step: dict, reference: dict[tuple, dict]) -> None:
    """A later step's outcome: each cell held to the candidate's change measured in the same step
    (load that slows the whole step moves both); a cell where the candidate no longer shows its change
    against the baseline cannot be judged."""
    if step.get("outcome") == FAILED:
        return
    for cell in step["cells"]:
        if cell.get("reference_verdict") != reference[_key(cell)]["verdict"] or cell.get("reference_ratio") is None:
            cell["outcome"] = UNDECIDED
            continue
        cell["outcome"] = cell_outcome(cell["verdict"], cell["ratio_low"], cell["ratio_high"],
                                       cell["reference_ratio"])
    step["outcome"] = release_outcome([c["outcome"] for c in step["cells"]])


def _float(value) -> float | None:
    number = float(value.values)
    return number if number == number else None


def _name(releases: list[dict], index: int | None) -> str | None:
    return None if index is None else releases[index]["name"]


# ----------------------------------------------------------------------------- the answer

def summarise(conclusion, releases: list[dict], candidate_step: dict) -> str:
    if candidate_step["outcome"] == FAILED:
        return f"{releases[-1]['name']} could not be measured ({candidate_step['reason']}): nothing to bisect"
    if not conclusion.confirmed:
        return (f"{releases[-1]['name']} shows no change against {releases[0]['name']} in the watched cells: "
                "nothing to bisect")
    without = releases[conclusion.last_without]["name"]
    if conclusion.first is not None:
        return f"the change first appears in {releases[conclusion.first]['name']} (not in {without})"
    names = ", ".join(releases[i]["name"] for i in conclusion.suspects)
    return f"the change appears after {without}, in one of {names} (the others could not be built or decided)"


def print_table(record: dict) -> None:
    many = len(record["cells"]) > 1
    print(f"bisect {record['baseline']} -> {record['candidate']}: {record['launches']} launches a side per step, "
          f"an undecided step measured again with twice as many up to {record['max_launches']}; rows compared "
          f"paired by round; changes below {record['min_effect']:.0%} not reported, {record['confidence']:.0%} "
          "intervals")
    if not many:
        print(f"cell: {record['cells'][0] if record['cells'] else 'none left to watch'}")
    print(f"ratio: the release's time / the baseline's; candidate's: {record['candidate']}'s / the baseline's in "
          "the same step (the change the release is held to)")
    header = ["step", "release", "launches", *(["cell"] if many else []), "verdict", "ratio", "interval",
              "candidate's", "outcome", "wall"]
    rows = []
    for step in record["steps"]:
        for i, cell in enumerate(step["cells"] or [{}]):
            first = i == 0
            rows.append([str(step["step"]) if first else "", step["release"] if first else "",
                         str(step.get("launches", record["launches"])) if first else "",
                         *([describe_cell(cell) if cell else ""] if many else []),
                         cell.get("verdict", ""), _number(cell.get("ratio")),
                         f"[{_number(cell.get('ratio_low'))}, {_number(cell.get('ratio_high'))}]" if cell else "",
                         _number(cell.get("reference_ratio")),
                         (cell.get("outcome", step["outcome"]) if many else step["outcome"]) if cell
                         else f"{step['outcome']}: {step.get('reason', '')}",
                         format_duration(step["wall_s"]) if first else ""])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip())
    print(record["summary"])


def _number(value) -> str:
    return "" if value is None else format_number(value, 3)

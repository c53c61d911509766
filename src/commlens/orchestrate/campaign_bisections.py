"""A campaign's `bisect:` entries: after its launches, `commlens run` runs a bisection for each
(commlens.orchestrate.bisection_steps: each step a small campaign of its own in results/bisect-.../, the
builds shared) and keeps what each found in results/<campaign>/bisections.json, which the collection
puts in the dataset and the report prints under the comparison whose candidate row runs the
bisection's candidate.

A bisection that cannot run (a spec missing, a step's workflow failing) is kept with its error and
the campaign goes on: the dataset and report are made all the same, and say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from commlens.analysis.bisection import (BISECTIONS_FILE, Bisection, FailedBisection, WatchedCell, table_lines,
                                          write_bisections)
from commlens.campaign import Campaign
from commlens.orchestrate.bisection_steps import BisectionRequest, run_bisection
from commlens.orchestrate.workflow_run import ShowRun, exit_status
from commlens.units import parse_size

# How a campaign's bisections compare each step: compare's defaults (commlens bisect's too).
MIN_EFFECT, CONFIDENCE = 0.05, 0.95


def run_bisections(campaign: Campaign, workdir: Path, snakemake_args: Sequence[str], max_launches: int,
                   show_run: ShowRun = exit_status) -> list[Bisection]:
    """Runs every `bisect:` entry of the campaign in the workflow's working directory `workdir`, its steps
    with the campaign's Snakemake arguments (but its working directory) and growing up to `max_launches`
    a side (or the entry's launches, where more); their records, also written to BISECTIONS_FILE."""
    records: list[Bisection] = []
    for entry in campaign.config["bisect"]:
        request = BisectionRequest(
            baseline=entry["baseline"], candidate=entry["candidate"],
            cells=tuple(WatchedCell(entry["kernel"], entry["placement"], parse_size(str(size)))
                        for size in entry["sizes"]),
            launches=entry["launches"], max_launches=max(entry["launches"], max_launches), min_effect=MIN_EFFECT,
            confidence=CONFIDENCE, directory=workdir, snakemake_args=tuple(_step_arguments(snakemake_args)))
        print(f"[bisect] {entry['baseline']} -> {entry['candidate']}, watching {entry['kernel']} "
              f"{entry['placement']} {', '.join(map(str, entry['sizes']))}", flush=True)
        try:
            record = run_bisection(request, show_run=show_run)
            print("\n".join(table_lines(record)))
            records.append(record)
        except KeyboardInterrupt:
            raise
        except Exception as error:       # noqa: BLE001 (recorded and reported; the campaign goes on)
            print(f"[bisect] {entry['baseline']} -> {entry['candidate']} failed: {error}", flush=True)
            records.append(FailedBisection(entry["baseline"], entry["candidate"], str(error)))
    results = workdir / "results" / campaign.name
    results.mkdir(parents=True, exist_ok=True)
    write_bisections(results / BISECTIONS_FILE, records)
    return records


def _step_arguments(snakemake_args: Sequence[str]) -> list[str]:
    """The campaign's Snakemake arguments a bisection's steps take too: all but the working directory,
    which the steps are given themselves."""
    kept, skip = [], False
    for arg in snakemake_args:
        if skip:
            skip = False
        elif arg in ("--directory", "-d"):
            skip = True
        elif not arg.startswith("--directory="):
            kept.append(arg)
    return kept

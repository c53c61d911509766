"""A campaign's `bisect:` entries: after its launches, `commlens run` runs `commlens bisect` for each
(commlens.cli.bisect: each step a small campaign of its own in results/bisect-.../, the builds shared)
and keeps what each found in results/<campaign>/bisections.json, which the collection puts in the
dataset and the report prints under the comparison whose candidate row runs the bisection's candidate.

A bisection that cannot run (a spec missing, a step's workflow failing) is kept with its error and
the campaign goes on: the dataset and report are made all the same, and say so.
"""

from __future__ import annotations

import json
import shlex
from argparse import Namespace
from pathlib import Path

from commlens.campaign import Campaign
from commlens.cli.parser import STEP_MAX_LAUNCHES
from commlens.io.atomic import write_text

# Where a campaign keeps what its bisections found (results/<campaign>/<this>).
BISECTIONS_FILE = "bisections.json"


def run_bisections(campaign: Campaign, workdir: Path, snakemake_args: list[str]) -> list[dict]:
    """Runs every `bisect:` entry of the campaign; their records, also written to BISECTIONS_FILE."""
    from commlens.cli.bisect import bisect, bisection_folder

    records = []
    for entry in campaign.config["bisect"]:
        args = Namespace(baseline=entry["baseline"], candidate=entry["candidate"], kernel=entry["kernel"],
                         placement=[entry["placement"]], sizes=",".join(str(s) for s in entry["sizes"]),
                         cells=None, launches=entry["launches"],
                         max_launches=max(entry["launches"], STEP_MAX_LAUNCHES), min_effect=0.05, confidence=0.95,
                         directory=str(workdir), json=False, snakemake=shlex.join(_step_arguments(snakemake_args)))
        folder = bisection_folder(workdir.resolve(), entry["baseline"], entry["candidate"])
        print(f"[bisect] {entry['baseline']} -> {entry['candidate']}, watching {entry['kernel']} "
              f"{entry['placement']} {', '.join(map(str, entry['sizes']))}", flush=True)
        try:
            bisect(args)
            records.append(json.loads((folder / "bisect.json").read_text()))
        except KeyboardInterrupt:
            raise
        except Exception as error:       # noqa: BLE001 (recorded and reported; the campaign goes on)
            print(f"[bisect] {entry['baseline']} -> {entry['candidate']} failed: {error}", flush=True)
            records.append({"baseline": entry["baseline"], "candidate": entry["candidate"], "error": str(error)})
    results = workdir / "results" / campaign.name
    results.mkdir(parents=True, exist_ok=True)
    write_text(results / BISECTIONS_FILE, json.dumps(records, indent=1) + "\n")
    return records


def _step_arguments(snakemake_args: list[str]) -> list[str]:
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

"""`commlens run CAMPAIGN [SNAKEMAKE_ARG...]`: the campaign's workflow, as `make campaign` runs it
(commlens.orchestrate.campaign_run: Snakemake under supervision, its progress on the console, launches
until decided, bisections), then what the run came to: why it stopped, or the campaign's summary and
its failed bisections.
"""

from __future__ import annotations

import sys

from commlens.analysis.bisection import FailedBisection
from commlens.cli.datasets import open_dataset
from commlens.cli.parser import STEP_MAX_LAUNCHES
from commlens.cli.summary import summary
from commlens.orchestrate import campaign_run
from commlens.orchestrate.until_decided import RoundsSetByLooks
from commlens.orchestrate.workflow_run import CampaignRun


def run_campaign(args) -> int:
    try:
        run = campaign_run.run_campaign(args.campaign, args.snakemake_args, STEP_MAX_LAUNCHES, show_run)
    except RoundsSetByLooks as refused:
        sys.exit(f"commlens run: {refused}")
    return show_run(run)


def show_run(run: CampaignRun) -> int:
    """What a finished run of a campaign (or of a bisection's step) came to, as `commlens run` says it;
    its exit status."""
    if run.log is None:       # a dry run, or one of Snakemake's reports: its output was the point
        return run.code
    if run.interrupted:
        print("commlens run: stopped; finished launches are kept, and running it again resumes", file=sys.stderr)
        return 130
    if run.code != 0:
        print(f"commlens run: Snakemake stopped with status {run.code} (the errors above; all of its output: "
              f"{run.log})", file=sys.stderr)
        return run.code
    if run.dataset is None:      # targets that stop short of the dataset
        return 0
    path, ds = open_dataset(run.dataset)
    code = summary(ds, path, check=True)
    failed = [record for record in run.bisections if isinstance(record, FailedBisection)]
    if failed:
        print(f"commlens run: {len(failed)} of the campaign's bisections failed (above; their errors are in the "
              f"report too)", file=sys.stderr)
    return code or int(bool(failed))

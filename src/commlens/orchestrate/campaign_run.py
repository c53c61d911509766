"""A campaign run whole, as `commlens run` runs it: its workflow (commlens.orchestrate.workflow_run) and,
where the campaign asks for them, its launches round by round until decided
(commlens.orchestrate.until_decided) and its bisections (commlens.orchestrate.campaign_bisections) before
its dataset and report are made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from commlens.analysis.bisection import Bisection
from commlens.campaign import load_campaign
from commlens.orchestrate.campaign_bisections import run_bisections
from commlens.orchestrate.until_decided import LAUNCHES_TARGET, refuse_when_asked_for_rounds, run_until_decided
from commlens.orchestrate.workflow_run import (CampaignRun, ShowRun, Workflow, exit_status, option_value,
                                               run_workflow)


def run_campaign(campaign_file: str, snakemake_args: Sequence[str], step_max_launches: int,
                 show_run: ShowRun = exit_status) -> CampaignRun:
    """Runs the campaign of `campaign_file` with Snakemake's `snakemake_args`; its bisections' steps grow
    up to `step_max_launches` a side, and each step's run is shown by `show_run`. Raises CampaignError
    for a broken campaign file before Snakemake starts, CampaignBusy where the campaign is being run
    already, RoundsSetByLooks where the arguments set the rounds of a campaign whose looks choose them."""
    campaign = load_campaign(campaign_file)
    if campaign.until_decided is None and not campaign.config.get("bisect"):
        return run_workflow(campaign_file, campaign, snakemake_args)
    bisections: list[Bisection] = []

    def in_steps(workflow: Workflow, workdir: Path) -> tuple[int, bool]:
        """The launches (round by round, for launches until decided), then the campaign's bisections, then
        its dataset and report; (exit status, interrupted) of the step that ended it."""
        if campaign.until_decided is not None:
            refuse_when_asked_for_rounds(snakemake_args)
            build_dir = option_value(snakemake_args, "build_dir")
            code, interrupted = run_until_decided(campaign, workdir, workflow,
                                                  build_dir=workdir / build_dir if build_dir else None)
        else:
            code, interrupted = workflow([LAUNCHES_TARGET])
        if code != 0 or interrupted:
            return code, interrupted
        if campaign.config.get("bisect"):
            bisections.extend(run_bisections(campaign, workdir, snakemake_args, step_max_launches, show_run))
        return workflow([])

    return replace(run_workflow(campaign_file, campaign, snakemake_args, in_steps), bisections=tuple(bisections))

# Snakemake script: one launch; a failed, hung or impossible launch is recorded, never raised.
import contextlib
import json
import sys
import time
from pathlib import Path

from commlens.campaign import campaign_from_config
from commlens.io.atomic import WriteError
from commlens.launch.locks import LockError
from commlens.launch.placement import Placement
from commlens.io.raw import read_raw
from commlens.launch.run import run_launch
from commlens.launch.progress import campaign_progress, progress_line, record_stage
from commlens.launch.supervision import stop_when_told

# Snakemake stops jobs with SIGTERM; a Snakemake killed with SIGKILL tells them nothing. Either way the
# launch ends all its processes on the way out instead of running on beside a rerun.
stop_when_told()
settings = json.loads(snakemake.params.settings)
w = snakemake.wildcards
# The campaign as the workflow has it (validated there, with any --config overrides and its round_seed).
campaign = campaign_from_config(snakemake.config, "the workflow's config")
run = (w.library, w.placement, w.kernel, int(w.launch))
started = time.monotonic()
with open(snakemake.log[0], "w", buffering=1) as log:   # line by line: a full disk fails a line, not the close
    try:
        record = run_launch(
            installation=json.loads(Path(snakemake.input.library).read_text()),
            build=json.loads(Path(snakemake.input.build).read_text()),
            kernel=w.kernel, kernel_args=settings["kernel_args"], placement=Placement(**settings["placement"]),
            library=w.library, launch=int(w.launch), output=snakemake.output.raw,
            timeout_s=settings["timeout"], library_env=settings["library_env"], log=log,
            scratch=settings["scratch"], settings=settings, turn=campaign.turn(*run),
            # Read before the job, whose raw file Snakemake has deleted since (rules/common.smk: launch_attempt).
            attempt=json.loads(snakemake.params.attempt) if snakemake.params.attempt else None,
        )
    except (WriteError, LockError) as error:
        # No raw file: the next run of the workflow redoes the launch.
        message = f"launch {w.library}/{w.placement}/{w.kernel}/{w.launch} not recorded: {error}"
        with contextlib.suppress(OSError):
            print(message, file=log)
        sys.exit(message)
if record["status"] != "ok":
    print(f"launch {w.library}/{w.placement}/{w.kernel}/{w.launch} {record['status']}: "
          f"{record.get('reason', '')}; see {snakemake.log[0]}")
else:
    # For the next campaigns' estimates (commlens.launch.progress): what a launch of so many sizes took here,
    # the library's start, the machine's wait and the raw file's writing included.
    record_stage("launch", len(read_raw(snakemake.output.raw).points), time.monotonic() - started)
# What is left of the campaign; the launches after this one in the rounds wait for it, so any raw file of
# theirs is a stale one about to be redone.
order = campaign.in_rounds()
later = order[order.index(run) + 1:]
print(progress_line(campaign_progress(campaign.runs(), Path(snakemake.output.raw), not_yet=later), run, record),
      flush=True)

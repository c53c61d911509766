# Snakemake script: one launch; a failed, hung or impossible launch is recorded, never raised.
import json
import signal
import sys
from pathlib import Path

from commbench.campaign import campaign_from_config
from commbench.launch.placement import Placement
from commbench.launch.run import run_launch
from commbench.launch.progress import campaign_progress, progress_line

# Snakemake stops jobs with SIGTERM: end the launch's processes on the way out, not leave them running.
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
settings = json.loads(snakemake.params.settings)
w = snakemake.wildcards
with open(snakemake.log[0], "w") as log:
    record = run_launch(
        installation=json.loads(Path(snakemake.input.library).read_text()),
        build=json.loads(Path(snakemake.input.build).read_text()),
        kernel=w.kernel, kernel_args=settings["kernel_args"], placement=Placement(**settings["placement"]),
        library=w.library, launch=int(w.launch), output=snakemake.output.raw,
        timeout_s=settings["timeout"], library_env=settings["library_env"], log=log,
        scratch=settings["scratch"], settings=settings,
    )
if record["status"] != "ok":
    print(f"launch {w.library}/{w.placement}/{w.kernel}/{w.launch} {record['status']}: "
          f"{record.get('reason', '')}; see {snakemake.log[0]}")
# The campaign as the workflow has it (validated there, with any --config overrides): what is left.
campaign = campaign_from_config(snakemake.config, "the workflow's config")
run = (w.library, w.placement, w.kernel, int(w.launch))
print(progress_line(campaign_progress(campaign.runs(), Path(snakemake.output.raw)), run, record), flush=True)

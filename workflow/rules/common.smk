# Validation and input functions shared by every rule.
import json
from pathlib import Path

from commbench.campaign import CampaignError, load_campaign
from commbench.provenance import KERNELS_DIR

# The campaign file is re-read by commbench so that errors name the file and key.
if len(workflow.configfiles) > 1:
    raise WorkflowError("give one campaign file (--configfile), not several")
CAMPAIGN_FILE = str(workflow.configfiles[0]) if workflow.configfiles else "config/campaigns/quick.yaml"
try:
    CAMPAIGN = load_campaign(CAMPAIGN_FILE)
except CampaignError as error:
    raise WorkflowError(str(error)) from None

# MPI environments and kernel builds depend only on the library, not on the
# campaign, so every campaign shares them. `--config build_dir=...` moves them.
BUILD = Path(config.get("build_dir", "build"))
RESULTS = Path("results") / CAMPAIGN.name
DATASET = RESULTS / f"{CAMPAIGN.name}.nc"
KERNEL_SOURCES = sorted(str(p) for p in KERNELS_DIR.rglob("*") if p.is_file())

NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]*"


wildcard_constraints:
    mpi=NAME,
    library=NAME,
    placement=NAME,
    kernel=r"[a-z][a-z0-9_.]*(@[A-Za-z0-9._+-]+)?",
    launch=r"\d+",


def library_record(mpi):
    return BUILD / "envs" / mpi / "library.json"


def kernel_binary(mpi):
    return BUILD / "kernels" / mpi / "commbench-kernels"


def build_record(mpi):
    return BUILD / "kernels" / mpi / "build.json"


def raw_file(library, placement, kernel, launch):
    return RESULTS / "raw" / library / placement / kernel / f"launch{launch}.jsonl"


def launch_settings(wildcards):
    """Everything about one launch that, when changed, must rerun it (a Snakemake param)."""
    return json.dumps(
        {
            "placement": CAMPAIGN.placement(wildcards.placement),
            "kernel_args": CAMPAIGN.kernel_args(wildcards.kernel, int(wildcards.launch)),
            "library_env": CAMPAIGN.library_env(wildcards.library),
            "mpi": CAMPAIGN.mpi_of(wildcards.library),
            "timeout": CAMPAIGN.config["timeout"],
            "scratch": CAMPAIGN.config["scratch"],
        },
        sort_keys=True,
    )

# Validation and input functions shared by every rule.
import json
from pathlib import Path

import yaml
from snakemake.utils import update_config

from commbench.launch.build import retry_token, strict_installations
from commbench.campaign import WORKFLOW_OPTIONS, CampaignError, campaign_from_config, describe_overrides, read_overrides
from commbench.io.raw import read_launch_record
from commbench.launch.catalogue import CatalogueError
from commbench.launch.preflight import check_campaign
from commbench.launch.provenance import KERNELS_DIR

DEFAULT_CAMPAIGN = REPOSITORY / "config" / "campaigns" / "quick.yaml"

# The campaign is Snakemake's config: the --configfile with the --config overrides merged in, or the
# config a using workflow gives this one as a module (`module commbench: ... config: ...`); without
# either, the default campaign. commbench validates it so that errors name the file, the overrides and
# the key. Scripts read the same config (snakemake.config), so it is completed here, in place.
AS_MODULE = not workflow.modifier.is_main_snakefile()
if not AS_MODULE and len(workflow.configfiles) > 1:
    raise WorkflowError("give one campaign file (--configfile), not several")
if (not AS_MODULE and not workflow.configfiles) or not set(config) - set(WORKFLOW_OPTIONS):
    _campaign = yaml.safe_load(DEFAULT_CAMPAIGN.read_text())
    update_config(_campaign, config)
    config.clear()
    config.update(_campaign)
    CAMPAIGN_SOURCE = str(DEFAULT_CAMPAIGN)
elif AS_MODULE:
    CAMPAIGN_SOURCE = f"the config of module {workflow.modifier.namespace}"
else:
    CAMPAIGN_SOURCE = str(workflow.configfiles[0])
# Nested values come from Snakemake's parser as strings: read again as the file would give them.
_overrides = {} if AS_MODULE else read_overrides(
    {key: value for key, value in workflow.config_settings.config.items() if key not in WORKFLOW_OPTIONS})
if _overrides:
    update_config(config, _overrides)
    CAMPAIGN_SOURCE += " with " + describe_overrides(_overrides)
# The kernel sources every library is built from (`--config kernels_dir=...`: a site's own copy).
KERNELS = Path(config.get("kernels_dir", KERNELS_DIR)).resolve()
try:
    CAMPAIGN = campaign_from_config(config, CAMPAIGN_SOURCE)
    # Before any job: kernels the catalogue does not know, options the harness refuses and, only where
    # launches run on this host (a cluster's nodes are not the login node), a size no launch could
    # allocate or I/O the scratch disk cannot hold.
    if not workflow.remote_exec:
        check_campaign(CAMPAIGN, kernels_dir=KERNELS, resources=workflow.local_exec
                       and str(config.get("resource_checks", True)).lower() != "false")
except CampaignError as error:
    raise WorkflowError(str(error)) from None
except CatalogueError as error:
    raise WorkflowError(f"{CAMPAIGN_SOURCE}: the kernel catalogue cannot be read: {error}") from None

# MPI environments and kernel builds depend only on the library, not on the
# campaign, so every campaign shares them. `--config build_dir=...` moves them.
BUILD = Path(config.get("build_dir", "build"))
# The project's own check (the tests): kernel warnings are errors and every kernel family required,
# for every library (strict_build=true) or the named installations (strict_build=mpich-5.0.2,...).
STRICT_BUILD = strict_installations(config.get("strict_build", False), CAMPAIGN.mpi_names)

RESULTS = Path("results") / CAMPAIGN.name
DATASET = RESULTS / f"{CAMPAIGN.name}.nc"
KERNEL_SOURCES = sorted(str(p) for p in KERNELS.rglob("*") if p.is_file())

NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]*"


wildcard_constraints:
    mpi=NAME,
    library=NAME,
    placement=NAME,
    kernel=r"[a-z][a-z0-9_.]*(@[A-Za-z0-9._+-]+)?",
    launch=r"\d+",


def mpi_spec(mpi):
    """envs/mpi/<mpi>.yaml of the working directory (a site's own specs beside a campaign), else the
    repository's, so that a workflow using this one as a module finds the specs that come with it."""
    local = Path("envs") / "mpi" / f"{mpi}.yaml"
    shipped = REPOSITORY / local
    return str(shipped if not local.exists() and shipped.exists() else local)


def library_record(mpi):
    return BUILD / "envs" / mpi / "library.json"


def build_record(mpi):
    return BUILD / "kernels" / mpi / "build.json"


def raw_file(library, placement, kernel, launch):
    return RESULTS / "raw" / library / placement / kernel / f"launch{launch}.jsonl"


def launch_settings(wildcards):
    """Everything about one launch that, when changed, must rerun it (a Snakemake param)."""
    return json.dumps(
        CAMPAIGN.launch_settings(wildcards.library, wildcards.placement, wildcards.kernel, int(wildcards.launch)),
        sort_keys=True,
    )


def _launches_overwritten():
    """Finished launches whose raw file records other settings than this campaign file asks for:
    running it would replace their results. Failed launches hold no data and may be redone."""
    changed = []
    for run in CAMPAIGN.runs():
        path = raw_file(*run)
        record = read_launch_record(path)
        if record is None or record.get("status") != "ok" or "settings" not in record:
            continue
        differences = CAMPAIGN.changed_settings(*run, recorded=record["settings"])
        if differences:
            changed.append((path, differences))
    return changed


# Results are never silently replaced by a differently configured campaign of the same name.
if not workflow.remote_exec and str(config.get("overwrite", False)).lower() not in ("true", "1", "yes"):
    _overwritten = _launches_overwritten()
    if _overwritten:
        _examples = "\n".join(f"  {path}: {'; '.join(diff)}" for path, diff in _overwritten[:5])
        raise WorkflowError(
            f"{CAMPAIGN_SOURCE}: {RESULTS} holds {len(_overwritten)} finished launches measured with other "
            f"settings of campaign {CAMPAIGN.name!r}; running this file would overwrite them, e.g.\n"
            f"{_examples}\n"
            f"To keep them, give the changed campaign a new name (campaign: {CAMPAIGN.name}-2): its results "
            f"go to results/{CAMPAIGN.name}-2/. To replace them, rerun with --config overwrite=true."
        )

# Validation and input functions shared by every rule.
import json
import sys
from pathlib import Path

import yaml
from snakemake.utils import update_config

from commlens.launch.build import retry_token, strict_installations
from commlens.campaign import (WORKFLOW_OPTIONS, Campaign, CampaignError, campaign_from_config, describe_overrides,
                                read_overrides)
from commlens.campaign.rounds import (DECISIONS_FILE, SEED_FILE, draw_seed, recorded_decisions, recorded_seed,
                                      rounds_outside, seed_record)
from commlens.io.atomic import write_text
from commlens.io.archive import dataset_outputs, give_back, hold
from commlens.io.collected import from_the_future, out_of_date, recollection_param
from commlens.io.raw import read_launch_record
from commlens.launch.catalogue import CatalogueError
from commlens.launch.preflight import check_campaign, check_partition, mpi_spec_path
from commlens.launch.provenance import KERNELS_DIR
from commlens.launch.run import next_attempt
from commlens.lean_imports import import_jsonschema

# Snakemake imports jsonschema (through nbformat, to read each script rule's language) while it builds the
# DAG; imported here first, it comes without the IRI grammar that costs every run of the workflow seconds.
import_jsonschema()

DEFAULT_CAMPAIGN = REPOSITORY / "config" / "campaigns" / "quick.yaml"

# The campaign is Snakemake's config: the --configfile with the --config overrides merged in, or the
# config a using workflow gives this one as a module (`module commlens: ... config: ...`); without
# either, the default campaign. commlens validates it so that errors name the file, the overrides and
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
try:
    _overrides = {} if AS_MODULE else read_overrides(
        {key: value for key, value in workflow.config_settings.config.items() if key not in WORKFLOW_OPTIONS})
except CampaignError as error:     # before update_config copies what YAML aliases stand for
    raise WorkflowError(f"{CAMPAIGN_SOURCE} with {error}") from None
if _overrides:
    update_config(config, _overrides)
    CAMPAIGN_SOURCE += " with " + describe_overrides(_overrides)
# The kernel sources every library is built from (`--config kernels_dir=...`: a site's own copy).
KERNELS = Path(config.get("kernels_dir", KERNELS_DIR)).resolve()


def slurm_resources(settings):
    """The slurm_* resources a launch gets: run_launch's own (--set-resources; the Slurm profile's
    slurm_extra) over everyone's (--default-resources slurm_partition=...). Only the Slurm executor
    reads them, and they are how this file knows where launches run: Snakemake names its executor
    (workflow.local_exec) only after reading the workflow."""
    found = {}
    for resources in (settings.default_resources or {}, settings.overwrite_resources.get("run_launch", {})):
        for name in resources:
            value = getattr(resources.get(name), "raw", resources.get(name))
            if name.startswith("slurm_") and value:
                found[name] = str(value)
    return found


try:
    CAMPAIGN = campaign_from_config(config, CAMPAIGN_SOURCE)
    # Before any job: spec files that are missing or unusable, kernels the catalogue does not know, options
    # the harness refuses and, only where launches run on this host (a cluster's nodes are not the login
    # node), more ranks or nodes than it can run, a size no launch could allocate or I/O the scratch disk
    # cannot hold; under Slurm, placements its partition cannot hold.
    _RESOURCE_CHECKS = str(config.get("resource_checks", True)).lower() != "false"
    _SLURM = slurm_resources(workflow.resource_settings)
    if not workflow.remote_exec:
        check_campaign(CAMPAIGN, kernels_dir=KERNELS, repository=REPOSITORY,
                       resources=workflow.local_exec and not _SLURM and _RESOURCE_CHECKS)
        if _SLURM and _RESOURCE_CHECKS:
            check_partition(CAMPAIGN, _SLURM.get("slurm_partition"))
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


def _round_seed() -> int:
    """The seed of the order launches run in (commlens.campaign.rounds): the campaign's round_seed,
    else the one its results folder recorded when it first ran (a resumed campaign keeps its order),
    else one drawn now. This run's seed is recorded there before any job, where a cluster's jobs,
    which parse this file again, read it."""
    try:
        recorded = recorded_seed(RESULTS)
    except ValueError as error:
        raise WorkflowError(f"{CAMPAIGN_SOURCE}: {error}") from None
    seed = CAMPAIGN.round_seed if CAMPAIGN.round_seed is not None else recorded
    if workflow.remote_exec:
        if seed is None:
            raise WorkflowError(f"{RESULTS / SEED_FILE} is missing: the workflow records it before any job")
        return seed
    if seed is None:
        seed = draw_seed()
    if seed != recorded:
        try:
            RESULTS.mkdir(parents=True, exist_ok=True)
            write_text(RESULTS / SEED_FILE, seed_record(seed))
        except OSError as error:
            raise WorkflowError(f"{CAMPAIGN_SOURCE}: the campaign's round_seed cannot be recorded: {error}") from None
    return seed


def _rounds_decided() -> int:
    """With launches until decided, how many rounds run: --config rounds=N, else what commlens run
    recorded after its last look (results/<campaign>/decisions.json), else launches.min."""
    until = CAMPAIGN.until_decided
    if "rounds" in config:
        return config["rounds"]
    try:
        recorded = recorded_decisions(RESULTS)
    except ValueError as error:
        raise WorkflowError(f"{CAMPAIGN_SOURCE}: {error}") from None
    rounds = until["min"] if recorded is None else recorded["rounds"]
    if outside := rounds_outside(until, rounds):
        raise WorkflowError(f"{CAMPAIGN_SOURCE}: {RESULTS / DECISIONS_FILE} records rounds: {outside}; remove it "
                            f"to start again from {until['min']} rounds")
    return rounds


# The seed (and, with launches until decided, the rounds) join the config in place, as the scripts read
# it (snakemake.config).
config["round_seed"] = _round_seed()
if CAMPAIGN.until_decided is not None:
    config["rounds"] = _rounds_decided()
CAMPAIGN = Campaign(name=CAMPAIGN.name, source=CAMPAIGN.source, config={**CAMPAIGN.config,
                                                                       **{key: config[key] for key in
                                                                          ("round_seed", "rounds") if key in config}})
# Each launch waits for the one before it in the design (its `previous` input, workflow/rules/run.smk).
_IN_ROUNDS = CAMPAIGN.in_rounds()
PREVIOUS_LAUNCH = dict(zip(_IN_ROUNDS[1:], _IN_ROUNDS[:-1]))
KERNEL_SOURCES = sorted(str(p) for p in KERNELS.rglob("*") if p.is_file())

NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]*"


wildcard_constraints:
    mpi=NAME,
    library=NAME,
    placement=NAME,
    kernel=r"[a-z][a-z0-9_.]*(@[A-Za-z0-9._+-]+)?",
    launch=r"\d+",


def mpi_spec(mpi):
    """envs/mpi/<mpi>.yaml of the working directory, else the repository's (checked before any job)."""
    return str(mpi_spec_path(mpi, REPOSITORY))


def library_record(mpi):
    return BUILD / "envs" / mpi / "library.json"


def build_record(mpi):
    return BUILD / "kernels" / mpi / "build.json"


def raw_file(library, placement, kernel, launch):
    return RESULTS / "raw" / library / placement / kernel / f"launch{launch}.jsonl"


# Every launch's raw file, in the campaign's order: what collect reads and the `launches` target makes.
RAW_FILES = [raw_file(*run) for run in CAMPAIGN.runs()]
# Each launch's attempt, read here, before any job: Snakemake deletes a launch's raw file before it runs
# the launch, and the job reads its params again then.
ATTEMPTS = {run: next_attempt(raw_file(*run), CAMPAIGN.config["retries"]) for run in CAMPAIGN.runs()}


def previous_launch(wildcards):
    """The raw file of the launch before this one in the design; none for the campaign's first. A launch
    measured again after a failure (launch_attempt) runs out of its turn: it waits for no other, and the
    launches after it are not redone for it (ancient: its time is not compared with theirs). Every
    failed launch is so measured again in the same run of the workflow: Snakemake does not look at the
    params of a job that waits for one it reruns, so a retried launch waits for none."""
    run = (wildcards.library, wildcards.placement, wildcards.kernel, int(wildcards.launch))
    if run not in PREVIOUS_LAUNCH or ATTEMPTS[run]["attempt"] > 1:
        return []
    previous = PREVIOUS_LAUNCH[run]
    return [ancient(raw_file(*previous)) if ATTEMPTS[previous]["attempt"] > 1 else raw_file(*previous)]


def launch_attempt(wildcards):
    """Which attempt of the launch a run makes (commlens.launch.run.next_attempt), as a param: empty for a
    first attempt; for a launch that failed or timed out with retries left, a value its raw file does not
    record yet, so that Snakemake measures it again; after the last retry, the value it records."""
    attempt = ATTEMPTS[(wildcards.library, wildcards.placement, wildcards.kernel, int(wildcards.launch))]
    return json.dumps(attempt, sort_keys=True) if attempt["attempt"] > 1 else ""


def decisions_record(wildcards):
    """Launches until decided: the looks commlens run recorded (none where the workflow ran alone)."""
    path = RESULTS / DECISIONS_FILE
    return [path] if CAMPAIGN.until_decided is not None and path.exists() else []


def bisections_record(wildcards):
    """The bisections commlens run ran for the campaign's bisect: entries (none where it ran alone)."""
    if not CAMPAIGN.config.get("bisect"):
        return []
    # Here, not with the imports above: commlens.analysis brings xarray (half a second), which only a
    # campaign with bisections should cost the workflow.
    from commlens.analysis.bisection import BISECTIONS_FILE

    path = RESULTS / BISECTIONS_FILE
    return [path] if path.exists() else []


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


def _dataset_out_of_date() -> str:
    """collect's param that collects again a dataset that does not hold what its raw files hold now
    (commlens.io.collected): one put back by hand, or by a tool that gives it a fresh modification
    time, whatever the times say."""
    param = recollection_param(DATASET, RAW_FILES) if DATASET.exists() else ""
    if param and not workflow.remote_exec and (why := out_of_date(DATASET, RAW_FILES)):
        print(f"{DATASET} is out of date: {why}; it is collected again", file=sys.stderr)
    return param


# The outputs a run replaces: Snakemake deletes them before their job runs and when it fails, so each
# gets a second name first, and when the workflow ends those not replaced get their names back
# (commlens.io.archive): the previous dataset and report stay until their replacements are whole.
REPORT_HTML, REPORT_NOTEBOOK_RUN, FIGURES = RESULTS / "report.html", RESULTS / "report.ipynb", RESULTS / "figures"
REPLACED = (*dataset_outputs(DATASET), REPORT_HTML, REPORT_NOTEBOOK_RUN, FIGURES)
if not workflow.remote_exec:
    give_back(*REPLACED)       # what a run killed outright left held
    for _line in from_the_future(RAW_FILES):
        print(_line, file=sys.stderr)

# Worked out here, before any job: Snakemake deletes the dataset before collect runs, and a job reads its
# params again then (a cluster job parses the workflow before it deletes anything, so it gets the same).
DATASET_OUT_OF_DATE = _dataset_out_of_date()

if not workflow.remote_exec:
    hold(*REPLACED)

"""Shared fixtures: a workspace with both MPI libraries built through the real workflow."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from slurm_cluster import local_slurm  # noqa: F401  (the real Slurm of virtual nodes of the `slurm` tests)
from machine_share import (  # noqa: F401  (hooks: how tests run side by side, and which run alone)
    pytest_collection_modifyitems, pytest_configure_node, pytest_runtest_protocol, pytest_unconfigure,
    pytest_xdist_make_scheduler)
from worker_gc import pytest_configure, pytest_runtest_logfinish  # noqa: F401  (collection in the main thread)

REPO = Path(__file__).resolve().parents[1]
SNAKEFILE = REPO / "workflow" / "Snakefile"
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
LIBRARIES = ("mpich-5.0.2", "openmpi-5.0.11")

# Settings for launches that check that something runs, not how fast: Open MPI 5 loads its ofi BTL,
# which finds no libfabric provider on a machine without a fabric and then sleeps 1 s while closing
# (in MPI_Init, under mca_btl_base_select): one second of every launch's 1.2 s here. Without it Open MPI
# uses the BTLs it would use anyway (self, sm, tcp); the setting is recorded in each launch.
QUICK_START = {"mpich-5.0.2": {}, "openmpi-5.0.11": {"OMPI_MCA_btl": "^ofi"}}


def interruptible() -> None:
    """preexec_fn of a workflow a test stops with Ctrl-C (SIGINT): SIGINT at its default, as a terminal
    starts it. A shell starts background jobs with SIGINT ignored (CI run as `bash .ci/run &`, say),
    children inherit that, and Python then never raises KeyboardInterrupt: Snakemake would not stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def workflow_command(workdir: Path, *args: str) -> list[str]:
    """The commbench workflow run in `workdir` as `make campaign` runs it from the repository, with
    the project's own strict kernel build against the newest libraries (warnings are errors; users'
    builds, and older libraries' whose headers trip compiler false positives, are not). Every test
    run of the workflow uses it: a run with other build settings would rebuild and rerun everything."""
    args = list(args)
    strict = "strict_build=" + ",".join(LIBRARIES)
    if "--config" in args:
        args.insert(args.index("--config") + 1, strict)
    else:
        args += ["--config", strict]
    return [str(SNAKEMAKE), "-s", str(SNAKEFILE), "--directory", str(workdir), *args]


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs the workflow (workflow_command) and waits for it; raises with its output if it failed."""
    cmd = workflow_command(workdir, *args)
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return proc


def write_campaign(directory: Path, text: str, name: str = "c.yaml") -> Path:
    """A campaign file from an indented YAML string."""
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


SMALL_CAMPAIGN = """\
campaign: {name}
libraries:
  mpich-5.0.2: {{mpi: mpich-5.0.2}}
placements: [{{name: 1N2P, nodes: 1, ppn: 2}}]
kernels:
  pingpong.send: {{sizes: {{list: [8, 1Ki]}}}}
launches: {launches}
precision: {{rse: 0.2, min_samples: 3, max_samples: 30, max_point_time: {max_point_time}}}
timeout: {timeout}
"""


def small_campaign(name: str, *, launches: int = 1, timeout: int = 60, max_point_time: float = 0.5) -> str:
    """The smallest real campaign, as YAML text: MPICH on one node, pingpong.send at 8 B and 1 KiB, loose
    precision. Tests that need a campaign to run, stop or refuse start from it."""
    return SMALL_CAMPAIGN.format(name=name, launches=launches, timeout=timeout, max_point_time=max_point_time)


def campaign_error(directory: Path, text: str) -> str:
    """The message a campaign file is refused with, as `commbench validate` checks it (the schema, then
    its kernels against the catalogue); it must begin with the file's path."""
    from commbench.campaign import CampaignError, load_campaign
    from commbench.launch.preflight import check_kernels

    path = write_campaign(directory, text)
    with pytest.raises(CampaignError) as info:
        check_kernels(load_campaign(path))
    message = str(info.value)
    assert message.startswith(str(path)), message
    return message


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    """A directory laid out like the repository, with the MPI specs of the default campaign.

    Its build/ holds the environments and kernel builds of both libraries once `built`
    has run; tests that launch MPI share them.
    """
    root = tmp_path_factory.mktemp("workspace")
    shutil.copytree(REPO / "envs" / "mpi", root / "envs" / "mpi")
    shutil.copytree(REPO / "config", root / "config")
    return root


@pytest.fixture(scope="session")
def built(workspace) -> dict[str, Path]:
    """Both libraries' environments and commbench-kernels binaries, made by the workflow's rules."""
    # The target first: --configfile takes every word after it.
    snakemake(workspace, "builds", "--configfile", str(workspace / "config" / "campaigns" / "quick.yaml"))
    return {name: workspace / "build" / "kernels" / name / "commbench-kernels" for name in LIBRARIES}


def launch(workspace: Path, library: str, placement, kernel_args: list[str], tmp_path: Path,
           library_env: dict | None = None, timeout_s: float = 180, scratch=None):
    """One launch through commbench's own launcher (binding, transports, emulated network),
    read back through the raw-file reader, as a campaign would."""
    import json as _json

    from commbench.launch.run import run_launch
    from commbench.io.raw import read_raw

    installation = _json.loads((workspace / "build" / "envs" / library / "library.json").read_text())
    build = _json.loads((workspace / "build" / "kernels" / library / "build.json").read_text())
    output = tmp_path / f"{library}-{placement.name}-{kernel_args[0]}.jsonl"
    with open(tmp_path / "console.log", "a") as log:
        run_launch(installation=installation, build=build, kernel=kernel_args[0], kernel_args=kernel_args,
                   placement=placement, library=library, launch=0, output=output, timeout_s=timeout_s,
                   library_env=library_env, log=log, scratch=scratch)
    return read_raw(output)


TINY_CAMPAIGN = textwrap.dedent("""
    campaign: tiny
    libraries:
      mpich-5.0.2:    {mpi: mpich-5.0.2}
      openmpi-5.0.11: {mpi: openmpi-5.0.11}
    placements:
      - {name: 1N2P, nodes: 1, ppn: 2}
      - {name: 2N1P, nodes: 2, ppn: 1}
    kernels:
      pingpong.send: {sizes: {list: [1, 8, 1Ki, 64Ki, 1Mi]}}
    launches: 2
    precision: {rse: 0.05, min_samples: 5, max_samples: 200, max_point_time: 1}
    timeout: 120
""")


@pytest.fixture(scope="session")
def tiny_campaign(workspace, built):
    """The tiny campaign (2 libraries x 2 placements, pingpong.send at 5 sizes, 2 launches) run
    once through the whole workflow, report included: (campaign file, snakemake's output)."""
    campaign = workspace / "config" / "campaigns" / "tiny.yaml"
    campaign.write_text(TINY_CAMPAIGN)
    return campaign, snakemake(workspace, "--configfile", str(campaign))

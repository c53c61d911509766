"""Shared fixtures: a workspace with both MPI libraries built through the real workflow."""

import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from slurm_cluster import local_slurm  # noqa: F401  (the real Slurm of virtual nodes of the `slurm` tests)
from machine_share import (  # noqa: F401  (hooks: how tests run side by side, and which run alone)
    pytest_collection_modifyitems, pytest_configure_node, pytest_runtest_makereport, pytest_runtest_protocol,
    pytest_unconfigure, pytest_xdist_make_scheduler, run_folder)
from worker_gc import pytest_configure, pytest_runtest_logfinish  # noqa: F401  (collection in the main thread)

REPO = Path(__file__).resolve().parents[1]
SNAKEFILE = REPO / "workflow" / "Snakefile"
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
LIBRARIES = ("mpich-5.0.2", "openmpi-5.0.11")
BUILT = "built"                          # in the shared workspace, once its builds are made
TINY_OUTPUT = "tiny-workflow-output.json"  # in the shared workspace: the tiny campaign's run

# Open MPI 5 loads its ofi BTL, which finds no libfabric provider on a machine without a fabric and
# then sleeps 1 s while closing (in MPI_Init, under mca_btl_base_select): one second of every launch's
# 1.2 s here. Without it Open MPI uses the BTLs it would use anyway (self, sm, tcp), so what a launch
# measures is the same, only sooner; the setting is recorded in each launch. Not for a placement emulated
# on this host's loopback, whose own BTL list (self,tcp) it would replace.
QUICK_START = {"mpich-5.0.2": {}, "openmpi-5.0.11": {"OMPI_MCA_btl": "^ofi"}}


def interruptible() -> None:
    """preexec_fn of a workflow a test stops with Ctrl-C (SIGINT): SIGINT at its default, as a terminal
    starts it. A shell starts background jobs with SIGINT ignored (CI run as `bash .ci/run &`, say),
    children inherit that, and Python then never raises KeyboardInterrupt: Snakemake would not stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def workflow_command(workdir: Path, *args: str) -> list[str]:
    """The commlens workflow run in `workdir` as `make campaign` runs it from the repository, with
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
    """The message a campaign file is refused with, as `commlens validate` checks it (the schema, then
    its kernels against the catalogue); it must begin with the file's path."""
    from commlens.campaign import CampaignError, load_campaign
    from commlens.launch.preflight import check_kernels

    path = write_campaign(directory, text)
    with pytest.raises(CampaignError) as info:
        check_kernels(load_campaign(path))
    message = str(info.value)
    assert message.startswith(str(path)), message
    return message


def _lay_out(root: Path) -> Path:
    """A directory laid out like the repository, with the MPI specs and campaigns (mtimes kept, so that the
    workflow finds builds made from them in another such directory up to date)."""
    shutil.copytree(REPO / "envs" / "mpi", root / "envs" / "mpi")
    shutil.copytree(REPO / "config", root / "config")
    return root


@contextlib.contextmanager
def _shared_workspace(config):
    """The run's own workspace, held: where the builds and the tiny campaign are made once for every
    worker (a flock(2), which the kernel drops if its worker dies). The first worker to need one makes
    it, the others wait for it and copy it into their own workspace (made in each, the builds took
    25-30 s and the tiny campaign about 60 s of each worker's time)."""
    folder = run_folder(config)
    with open(folder / "shared-workspace.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        root = folder / "workspace"
        if not root.exists():
            _lay_out(Path(tempfile.mkdtemp(prefix="workspace.", dir=folder))).rename(root)
        yield root


# Records that name their own workspace's files: a launch runs what they name.
REPOINTED = {"library.json", "build.json", "activate.sh"}


def _repoint(record: Path, shared: Path, workspace: Path) -> None:
    """A copied record made to name the worker's workspace instead of the shared one, as if made there
    (its launches' command lines then name the worker's workspace, which the leftover checks look for),
    its time kept (the workflow compares it with what was made from it)."""
    stat = record.stat()
    record.write_text(record.read_text().replace(str(shared), str(workspace)))
    os.utime(record, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _adopt(shared: Path, workspace: Path, *paths: str) -> None:
    """Copies `paths` of the shared workspace into a worker's, with the workflow's records of what is in
    them, so that the workflow there finds them up to date. A virtual environment is linked, not copied
    (the same files under the worker's path)."""
    for path in paths:
        source, venvs = shared / path, []

        def leave_venvs(folder, names, source=source, venvs=venvs):
            venvs.extend(Path(folder, name).relative_to(source) for name in names if name == "venv")
            return ["venv"]

        if source.is_dir():
            shutil.copytree(source, workspace / path, symlinks=True, dirs_exist_ok=True, ignore=leave_venvs)
        else:
            (workspace / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, workspace / path)
        for venv in venvs:
            (workspace / path / venv).symlink_to(source / venv)
        for folder, _, names in os.walk(workspace / path):    # not into the linked environments
            for name in set(names) & REPOINTED:
                _repoint(Path(folder, name), shared, workspace)
    # Snakemake's record of an output: .snakemake/metadata/<its path, urlsafe base64, split in parts of
    # which all but the last begin with @>.
    metadata = shared / ".snakemake" / "metadata"
    for record in metadata.rglob("*"):
        if record.is_file():
            name = "".join(part.removeprefix("@") for part in record.relative_to(metadata).parts)
            output = base64.urlsafe_b64decode(name).decode()
            if any(output == path or output.startswith(path.rstrip("/") + "/") for path in paths):
                copy = workspace / ".snakemake" / "metadata" / record.relative_to(metadata)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(record, copy)
                _repoint(copy, shared, workspace)     # a rule's params may name a file (the campaign's)


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    """A directory laid out like the repository, with the MPI specs of the default campaign.

    Its build/ holds the environments and kernel builds of both libraries once `built`
    has run; tests that launch MPI share them.
    """
    return _lay_out(tmp_path_factory.mktemp("workspace"))


@pytest.fixture(scope="session")
def built(workspace, request) -> dict[str, Path]:
    """Both libraries' environments and commlens-kernels binaries, made by the workflow's rules (once
    for the run, in the shared workspace)."""
    with _shared_workspace(request.config) as shared:
        if not (shared / BUILT).exists():
            # The target first: --configfile takes every word after it.
            snakemake(shared, "builds", "--configfile", str(shared / "config" / "campaigns" / "quick.yaml"))
            (shared / BUILT).touch()
        _adopt(shared, workspace, "build")
    return {name: workspace / "build" / "kernels" / name / "commlens-kernels" for name in LIBRARIES}


def launch(workspace: Path, library: str, placement, kernel_args: list[str], tmp_path: Path,
           library_env: dict | None = None, timeout_s: float = 180, scratch=None):
    """One launch through commlens's own launcher (binding, transports, emulated network),
    read back through the raw-file reader, as a campaign would."""
    from commlens.launch.run import run_launch
    from commlens.io.raw import read_raw

    installation = json.loads((workspace / "build" / "envs" / library / "library.json").read_text())
    build = json.loads((workspace / "build" / "kernels" / library / "build.json").read_text())
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
def tiny_campaign(workspace, built, request):
    """The tiny campaign (2 libraries x 2 placements, pingpong.send at 5 sizes, 2 launches) run
    once for the run through the whole workflow, report included: (campaign file, snakemake's output)."""
    with _shared_workspace(request.config) as shared:
        output = shared / TINY_OUTPUT
        if not output.exists():
            (shared / "config" / "campaigns" / "tiny.yaml").write_text(TINY_CAMPAIGN)
            run = snakemake(shared, "--configfile", str(shared / "config" / "campaigns" / "tiny.yaml"))
            output.write_text(json.dumps({"args": run.args, "returncode": run.returncode,
                                          "stdout": run.stdout, "stderr": run.stderr}))
        _adopt(shared, workspace, "config/campaigns/tiny.yaml", "results/tiny")
    run = subprocess.CompletedProcess(**json.loads(output.read_text()))
    return workspace / "config" / "campaigns" / "tiny.yaml", run


@pytest.fixture(scope="module")
def tiny(workspace, tiny_campaign) -> Path:
    """The tiny campaign's results folder (tiny.nc, report.html, raw/...)."""
    return workspace / "results" / "tiny"

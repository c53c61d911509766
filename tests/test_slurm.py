"""workflow/profiles/slurm end to end: a tiny campaign through a real Slurm controller and nodes on
this host (virtual nodes, tests/slurm_cluster.py), whose dataset must have the shape of the same
campaign run without Slurm, its two-node placement a real two-node allocation; the network kernels
time the pairs of their allocations' nodes; and a workflow stopped during an allocation leaves no job,
step or process behind."""

import os
import re
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from commlens.analysis.network import node_pair_times
from commlens.launch import vnodes
from commlens import open_campaign
from commlens.campaign import Campaign, load_campaign
from commlens.campaign.rounds import recorded_seed

from conftest import REPO, interruptible, snakemake, workflow_command
from test_rounds import assert_ran_as_designed

pytestmark = [pytest.mark.slurm, pytest.mark.mpi]

PROFILE = REPO / "workflow" / "profiles" / "slurm"
LIBRARIES = ("mpich-5.0.2", "openmpi-5.0.11")
PROFILE_MEM_MB = 8000   # what the profile asks for a launch


def campaign(name: str) -> str:
    return textwrap.dedent(f"""
        campaign: {name}
        libraries:
          mpich-5.0.2:    {{mpi: mpich-5.0.2}}
          openmpi-5.0.11: {{mpi: openmpi-5.0.11}}
        placements:
          - {{name: 1N2P, nodes: 1, ppn: 2}}
          - {{name: 2N1P, nodes: 2, ppn: 1}}
        kernels:
          pingpong.send: {{sizes: {{list: [8, 1Ki, 64Ki]}}}}
        launches: 1
        precision: {{rse: 0.05, min_samples: 5, max_samples: 200, max_point_time: 1}}
        timeout: 120
    """)


def node_memory_mb(cluster) -> int:
    out = subprocess.run(["scontrol", "show", "node", cluster.whole_host_node], env=cluster.env,
                         capture_output=True, text=True, check=True).stdout
    return int(re.search(r"RealMemory=(\d+)", out).group(1))


def profile_run(workspace, cluster, campaign_file, target) -> list[str]:
    """The workflow through the Slurm profile on the test cluster, as a user runs it."""
    args = [*workflow_command(workspace, "--profile", str(PROFILE), target),
            "--configfile", str(campaign_file),
            "--default-resources", f"slurm_partition={cluster.partition}",
            # Seconds, not the profile's tens of seconds, between status checks of short jobs.
            "--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "1",
            "--slurm-keep-successful-logs"]
    if node_memory_mb(cluster) < PROFILE_MEM_MB:
        # A smaller test machine: the same request with the memory it has (the flag replaces the
        # profile's whole set-resources, so --exclusive is given again).
        args += ["--set-resources", f"run_launch:mem_mb={node_memory_mb(cluster) // 2}",
                 "run_launch:slurm_extra='--exclusive'"]
    return args


def schema(ds) -> dict:
    """Everything about a dataset's layout, none of its measurements."""
    return {
        # How long these axes are is what was measured: the samples a point took, the hosts the launches ran
        # on (Slurm's nodes or this host's virtual ones), the library's control variables and those that
        # differed between its launches (Open MPI opens other components on other hosts).
        "dims": dict(ds.sizes) | {axis: None for axis in ("sample", "host", "cvar", "cvar_varying")},
        "coords": {name: (ds[name].dims, ds[name].dtype.kind) for name in ds.coords},
        "data_vars": {name: (ds[name].dims, ds[name].dtype.kind) for name in ds.data_vars},
        "labels": {dim: list(ds[dim].values) for dim in ("library", "placement", "kernel", "size", "launch")},
    }


def test_campaign_through_slurm_has_the_local_schema(workspace, built, local_slurm):
    files = {}
    for name in ("onslurm", "onhost"):
        files[name] = workspace / "config" / "campaigns" / f"{name}.yaml"
        files[name].write_text(campaign(name))

    snakemake(workspace, "results/onhost/onhost.nc", "--configfile", str(files["onhost"]))

    # The campaign in two runs, as one stopped after its first two launches and run again: the first
    # runs the design's first two launches (a dry run draws and records the seed that orders them), the
    # second resumes, in the recorded design, without redoing them.
    results = workspace / "results" / "onslurm"
    snakemake(workspace, "results/onslurm/onslurm.nc", "--configfile", str(files["onslurm"]), "--dry-run")
    campaign_design = load_campaign(files["onslurm"])
    design = Campaign(campaign_design.name, campaign_design.source,
                      {**campaign_design.config, "round_seed": recorded_seed(results)}).in_rounds()
    second = "results/onslurm/raw/{}/{}/{}/launch{}.jsonl".format(*design[1])
    output = ""
    for target in (second, "results/onslurm/onslurm.nc"):
        run = subprocess.run(profile_run(workspace, local_slurm, files["onslurm"], target), cwd=workspace,
                             capture_output=True, text=True, env={**local_slurm.env, "PYTHONUNBUFFERED": "1"},
                             timeout=600)
        output += run.stdout + run.stderr
        assert run.returncode == 0, output[-8000:]
        if target == second:
            finished = {path: path.read_bytes() for path in (results / "raw").rglob("launch*.jsonl")}
            assert len(finished) == 2, (finished, output[-4000:])
    assert all(path.read_bytes() == content for path, content in finished.items())

    # Through Slurm: the launches and the collection were jobs of these runs, and they completed.
    run_ids = re.findall(r"SLURM run ID: (\S+)", output)
    # (Snakemake numbers its jobs afresh in each run: the Slurm job ids are what identify them.)
    submitted = re.findall(r"Job \d+ has been submitted with SLURM jobid (\d+)", output)
    assert len(run_ids) == 2 and len(submitted) == 5, output[-4000:]   # four launches and collect; builds are local
    jobs = {job["JobId"]: job for job in local_slurm.finished_jobs() if job.get("Name") in run_ids}
    assert sorted(jobs) == sorted(submitted), (jobs, submitted)
    assert all(job["JobState"] == "COMPLETED" and job["Partition"] == local_slurm.partition
               for job in jobs.values()), jobs
    launch_logs = sorted((workspace / ".snakemake" / "slurm_logs" / "rule_run_launch").rglob("*.log"))
    assert len(launch_logs) == 4, launch_logs
    # Shaped like the placement: 1N2P one node and two ranks, 2N1P two nodes of one rank each.
    shapes = sorted((jobs[log.stem]["NodeCnt"], jobs[log.stem]["ProcCnt"]) for log in launch_logs)
    assert shapes == [("1", "2")] * 2 + [("2", "2")] * 2, shapes
    # Environments and builds stayed on this host.
    assert not (workspace / ".snakemake" / "slurm_logs" / "rule_mpi_environment").exists()
    assert not (workspace / ".snakemake" / "slurm_logs" / "rule_build_kernels").exists()
    # The campaign's design holds under Slurm: each launch's job started once the one before it in the
    # order of the recorded round_seed had ended (its turn, a local rule, waits for it).
    assert_ran_as_designed(workspace / "results" / "onslurm", load_campaign(files["onslurm"]))

    on_slurm = open_campaign(workspace / "results" / "onslurm" / "onslurm.nc")
    on_host = open_campaign(workspace / "results" / "onhost" / "onhost.nc")
    assert schema(on_slurm) == schema(on_host)
    assert (on_host["status"] == "ok").all()
    # Open MPI's mpiexec (PRRTE) takes its slots from SLURM_NODELIST and SLURM_TASKS_PER_NODE,
    # which the executor's job step drops: the launcher restores them from the allocation.
    assert (on_slurm["status"] == "ok").all(), on_slurm["status"].values
    assert on_slurm["sample_count"].min() >= 5
    assert (on_slurm["time"].values > 0).all() and np.isfinite(on_slurm["time"].values).all()
    assert os.environ.get("SLURM_CONF") == str(local_slurm.conf)
    # Each launch ran on its allocated nodes, one hostname a node: the on-node placement on the node
    # with every CPU, the two-node placement on two distinct nodes, a rank on each.
    for library in LIBRARIES:
        on_node = on_slurm["hosts"].sel(library=library, placement="1N2P").values.ravel()
        assert all(hosts == f"{local_slurm.whole_host_node},{local_slurm.whole_host_node}" for hosts in on_node)
        for hosts in on_slurm["hosts"].sel(library=library, placement="2N1P").values.ravel():
            first, second = hosts.split(",")
            assert first != second and {first, second} <= set(local_slurm.nodes), hosts
    assert not on_slurm["emulated"].any() and list(on_slurm["transport"].values) == ["shm", "network"]
    assert list(on_slurm["emulation"].values) == ["", ""]
    assert list(on_host["emulation"].values) == ["", "namespaces"]


LONG_CAMPAIGN = textwrap.dedent("""
    campaign: stopped
    libraries:
      mpich-5.0.2: {mpi: mpich-5.0.2}
    placements:
      - {name: 2N1P, nodes: 2, ppn: 1}
    kernels:
      pingpong.send: {sizes: {list: [4Mi]}}
    launches: 1
    precision: {rse: 0.00001, min_samples: 100000, max_samples: 100000, max_point_time: 250}
    timeout: 280
""")

ACTIVE_STATES = "PENDING,CONFIGURING,RUNNING,COMPLETING,SUSPENDED"


def kernels_on(cluster) -> list[int]:
    """Ranks running on the Slurm cluster's nodes."""
    return [pid for pid in vnodes.processes_on(cluster.name) if _argv0(pid).endswith("/commlens-kernels")]


def _argv0(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def _described(pid: int) -> str:
    """A process as a failure message needs it: parent, state, what it waits in, its whole command line."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        return f"{pid} (parent {fields[1]}, state {fields[0]}, in {wchan or '-'}): {command[:600]}"
    except OSError:
        return f"{pid} (gone)"


def test_a_workflow_stopped_during_an_allocation_leaves_nothing_behind(workspace, built, local_slurm):
    """Ctrl-C while a two-node launch runs: Snakemake cancels the job, Slurm ends its steps, and the
    launch takes its ranks along; no job, step, rank or virtual node of the launch is left."""
    campaign_file = workspace / "config" / "campaigns" / "stopped.yaml"
    # Scratch in the workspace, not /tmp: the launch stopped here leaves its (empty) scratch directory, as
    # a launch killed outright does (its clean-up does not run to its end); the launch's rerun would
    # remove it (test_reliability's resume test).
    campaign_file.write_text(LONG_CAMPAIGN + f"scratch: {workspace / 'stopped-scratch'}\n")
    before = vnodes.existing_clusters()
    workflow = subprocess.Popen(profile_run(workspace, local_slurm, campaign_file, "results/stopped/stopped.nc"),
                                cwd=workspace, env={**local_slurm.env, "PYTHONUNBUFFERED": "1"},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)
    try:
        deadline = time.monotonic() + 300
        while len(kernels_on(local_slurm.cluster)) < 2 and time.monotonic() < deadline and workflow.poll() is None:
            time.sleep(0.5)
        assert len(kernels_on(local_slurm.cluster)) == 2, "the two-node launch never ran"
        running = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i %D %N"], env=local_slurm.env,
                                 capture_output=True, text=True).stdout.split()
        assert running[1] == "2", running          # a real two-node allocation
        workflow.send_signal(signal.SIGINT)
        output = workflow.communicate(timeout=180)[0]
    finally:
        if workflow.poll() is None:
            workflow.kill()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        active = subprocess.run(["squeue", "-h", "-t", ACTIVE_STATES], env=local_slurm.env, capture_output=True,
                                text=True).stdout.strip()
        steps = subprocess.run(["squeue", "-h", "-s"], env=local_slurm.env, capture_output=True,
                               text=True).stdout.strip()
        left = [_described(pid) for pid in vnodes.processes_on(local_slurm.cluster.name)
                if not _argv0(pid).endswith("slurmd")]
        if not (active or steps or left):
            break
        time.sleep(1)
    assert not active and not steps, (active, steps, output[-3000:])
    assert not left, "\n".join(left) + "\n" + output[-3000:]
    # No virtual nodes of a launch are left: every cluster made since is gone or still has its owner.
    assert not [name for name in vnodes.existing_clusters() - before if vnodes.owner_of(name) is None]


NETWORK_CAMPAIGN = textwrap.dedent("""
    campaign: fabric
    libraries:
      mpich-5.0.2: {mpi: mpich-5.0.2}
    placements:
      - {name: 3N1P, nodes: 3, ppn: 1}
      - {name: 2N1P, nodes: 2, ppn: 1}
    kernels:
      allpairs.isolated: {sizes: {list: [8Ki]}, placements: [3N1P]}
      fan.in: {sizes: {list: [8Ki]}, placements: [3N1P]}
      bisection: {sizes: {list: [8Ki]}, placements: [2N1P]}    # a perfect matching: an even number of ranks
    launches: 1
    precision: {rse: 0.1, min_samples: 3, max_samples: 20, max_point_time: 0.5}
    timeout: 120
""")


def test_the_network_kernels_time_the_pairs_of_their_allocations_nodes(workspace, built, local_slurm):
    """The network kernels through Slurm, one job each (about 12 s here, Snakemake starting again inside
    it): allpairs.isolated and fan.in on three nodes, a rank on each; bisection on two. The dataset's pair
    times are those pairs of the allocation's hosts that each kernel times (every ordered pair; every
    other rank into rank 0; the matching's two ranks both ways), as the matrices and findings read them."""
    campaign_file = workspace / "config" / "campaigns" / "fabric.yaml"
    campaign_file.write_text(NETWORK_CAMPAIGN)
    run = subprocess.run(profile_run(workspace, local_slurm, campaign_file, "results/fabric/fabric.nc"),
                         cwd=workspace, capture_output=True, text=True,
                         env={**local_slurm.env, "PYTHONUNBUFFERED": "1"}, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-8000:]
    ds = open_campaign(workspace / "results" / "fabric" / "fabric.nc")
    asked = ds["status"].values[ds["status"].values != "skipped"]    # each kernel on its one placement
    assert list(asked) == ["ok"] * 3, ds.commlens.failed_runs()

    def hosts_and_timed(placement: str, kernel: str):
        hosts = str(ds["hosts"].sel(library="mpich-5.0.2", placement=placement, kernel=kernel, launch=0).values)
        pairs = ds["pair_time"].sel(library="mpich-5.0.2", placement=placement, pair_kernel=kernel, size=8192,
                                    launch=0).values
        ranks = len(hosts.split(","))
        assert np.isnan(pairs[ranks:, :]).all() and np.isnan(pairs[:, ranks:]).all(), (kernel, pairs)
        pairs = pairs[:ranks, :ranks]
        assert (pairs[np.isfinite(pairs)] > 0).all(), (kernel, pairs)
        return hosts.split(","), np.isfinite(pairs)

    hosts, timed = hosts_and_timed("3N1P", "allpairs.isolated")
    assert sorted(hosts) == sorted(local_slurm.nodes), hosts        # one rank on each node of the allocation
    others = ~np.eye(3, dtype=bool)
    assert (timed == others).all(), timed
    times, nodes = node_pair_times(ds, "mpich-5.0.2", "3N1P", "allpairs.isolated", 8192)
    assert nodes == hosts and np.isfinite(times[others]).all()

    hosts, timed = hosts_and_timed("3N1P", "fan.in")
    assert sorted(hosts) == sorted(local_slurm.nodes), hosts
    into_rank_0 = np.zeros((3, 3), dtype=bool)
    into_rank_0[1:, 0] = True
    assert (timed == into_rank_0).all(), timed

    hosts, timed = hosts_and_timed("2N1P", "bisection")
    assert len(set(hosts)) == 2 and set(hosts) <= set(local_slurm.nodes), hosts
    assert (timed == ~np.eye(2, dtype=bool)).all(), timed
